"""Command line: python -m ds_torch export FILE.py:FACTORY [options]

FACTORY() returns (model, loss_fn, example_batch[, optimizer]) or a dict
with those keys; the step is `loss_fn(model(*batch[:-1]), batch[-1])`.
Writes the ds module and one .npy per parameter and buffer, and prints the
ds-run command that trains it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .export import export_training_step
from .mlir_text import ExportError


def load_factory(spec: str) -> Callable[[], Any]:
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ExportError("expected FILE.py:FACTORY, got '%s'" % spec)
    if not os.path.isfile(path):
        raise ExportError("no such file: %s" % path)
    module_spec = importlib.util.spec_from_file_location(
        os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    module_spec.loader.exec_module(module)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ExportError("%s defines no function '%s'" % (path, name))
    return factory


def unpack(setup: Any) -> tuple[torch.nn.Module, Callable[..., torch.Tensor],
                              Sequence[torch.Tensor], torch.optim.Optimizer | None]:
    if isinstance(setup, dict):
        missing = [k for k in ("model", "loss_fn", "example_batch") if k not in setup]
        if missing:
            raise ExportError("the factory's dict lacks %s" % ", ".join(missing))
        return setup["model"], setup["loss_fn"], setup["example_batch"], \
            setup.get("optimizer")
    if isinstance(setup, (tuple, list)) and len(setup) in (3, 4):
        return tuple(setup) + (None,) * (4 - len(setup))
    raise ExportError("the factory must return (model, loss_fn, example_batch"
                      "[, optimizer]) or a dict with those keys")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ds_torch",
                                 description="PyTorch models into ds-mlir")
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="export a training step as a ds module")
    ex.add_argument("factory", help="FILE.py:FACTORY")
    ex.add_argument("-o", "--output", default=None,
                    help="the .mlir to write (default: FACTORY.mlir)")
    ex.add_argument("--params", default=None,
                    help="directory for the initial values (default: OUTPUT minus "
                         ".mlir, plus -init)")
    ex.add_argument("--joint", action="store_true",
                    help="import PyTorch's backward instead of using ds-autodiff")
    ex.add_argument("--input-names", default=None,
                    help="comma-separated names of the batch tensors")
    ex.add_argument("--func", default="step", help="name of the step function")
    args = ap.parse_args(argv)
    try:
        factory = load_factory(args.factory)
        model, loss_fn, batch, optimizer = unpack(factory())
        output = args.output or args.factory.rpartition(":")[2] + ".mlir"
        params = args.params or os.path.splitext(output)[0] + "-init"
        names = args.input_names.split(",") if args.input_names else None
        step = export_training_step(model, loss_fn, batch, optimizer,
                                    input_names=names, joint=args.joint,
                                    func_name=args.func)
        step.save(output, params)
    except ExportError as e:
        print("ds_torch: %s" % e, file=sys.stderr)
        return 1
    print("ds_torch: exported %s: %d parameters, %d state tensors, inputs %s, %s level"
          % (type(model).__name__, len(step.params), len(step.states),
             ", ".join(step.inputs), step.level))
    print("ds_torch: wrote %s and %s/ (%d .npy files)"
          % (output, params, len(step.initial_values)))
    print("ds_torch: train it with: ds-run %s --params %s --data %s"
          % (output, params, " --data ".join("%s=FILE.npy" % n for n in step.inputs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

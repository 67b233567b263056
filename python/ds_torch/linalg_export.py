"""Export a PyTorch model + loss as torch-mlir linalg-on-tensors text for
`ds-opt --ds-import-linalg`.

`export_linalg(model, loss_fn, example_batch)` wraps the model functionally,
so that everything a training step needs is a function argument:

    step(params..., buffers..., batch...) -> (loss, new_buffers...)

- parameters in `model.named_parameters()` order (tied weights appear
  once, under their first name), then the floating-point buffers
  (BatchNorm running statistics), then the batch tensors;
- the wrapper clones the buffers and runs the model on the clones, so the
  in-place running-statistics updates of BatchNorm in training mode become
  explicit results after the loss;
- `num_batches_tracked` (an integer counter that BatchNorm with a fixed
  momentum never reads) is dropped: it is a local zero inside the wrapper,
  its increment is dead code and disappears in torch-mlir's lowering.

The batch is `(inputs..., target)`: the loss is
`loss_fn(model(*inputs), target)`.

The module goes through `torch_mlir.fx.export_and_import(...,
output_type="linalg-on-tensors", func_name="step")` and is printed in
generic form with every elements attribute written out (no
`dense_resource` blobs, nothing elided). torch-mlir's wheel carries its own
MLIR: this module never loads ds-mlir's bindings, the IR travels as text.

The second result, `import_options`, is the option string of
`--ds-import-linalg="..."` that attaches the training-step contract:
`args=` (one role per argument, positional), `results=` (the loss, then one
`update:<buffer>` per buffer) and `func=step`.

Command line:

    python -m ds_torch.linalg_export mlp out.mlir  [--dtype f64]

for the models of test/Integration/Torch/parity_models.py (with that
directory on sys.path or given by --models), or call `write_linalg`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence

import torch

__all__ = ["export_linalg", "write_linalg"]

# Large enough that no parameter-sized constant is elided.
_LARGE_ELEMENTS_LIMIT = 1 << 40


def _input_names(n: int) -> list[str]:
    """Default names of the batch tensors: x (or x0, x1, ...) and labels."""
    if n == 1:
        return ["labels"]
    if n == 2:
        return ["x", "labels"]
    return ["x%d" % i for i in range(n - 1)] + ["labels"]


class _Step(torch.nn.Module):
    """The functional training-step forward: arguments in, (loss, new
    buffers...) out. The model is held outside the module tree so that
    torch.export does not see (and freeze) its parameters."""

    def __init__(self, model, loss_fn, param_names, buffer_names, int_buffers):
        super().__init__()
        self.__dict__["_model"] = model
        self._loss_fn = loss_fn
        self._params = param_names
        self._buffers_ = buffer_names
        self._int_buffers = int_buffers

    def forward(self, *args):
        np_, nb = len(self._params), len(self._buffers_)
        tensors = dict(zip(self._params, args[:np_]))
        new_buffers = [b.clone() for b in args[np_:np_ + nb]]
        tensors.update(zip(self._buffers_, new_buffers))
        # Dropped counters: a local value whose update nobody reads.
        for name, (shape, dtype) in self._int_buffers.items():
            tensors[name] = torch.zeros(shape, dtype=dtype)
        batch = args[np_ + nb:]
        out = torch.func.functional_call(self._model, tensors,
                                         tuple(batch[:-1]), strict=False)
        loss = self._loss_fn(out, batch[-1])
        return (loss, *new_buffers)


def export_linalg(model: torch.nn.Module, loss_fn: Callable[..., torch.Tensor],
                  example_batch: Sequence[torch.Tensor], dtype: torch.dtype | None = None,
                  input_names: Sequence[str] | None = None) -> tuple[str, str]:
    """Returns `(mlir_text, import_options)` for the training step of
    `model` under `loss_fn` on batches shaped like `example_batch`.

    `dtype` (e.g. torch.float64) converts the model's floating-point
    parameters and buffers and the floating-point batch tensors first (on a
    copy; `model` is not changed). `input_names` names the batch tensors
    (default: x..., labels).
    """
    import torch_mlir.fx

    model = copy.deepcopy(model)
    if dtype is not None:
        model = model.to(dtype)
    model.train()
    batch = tuple(example_batch)
    if dtype is not None:
        batch = tuple(t.to(dtype) if t.is_floating_point() else t for t in batch)
    names = list(input_names) if input_names else _input_names(len(batch))
    if len(names) != len(batch):
        raise ValueError("%d input names for %d batch tensors" %
                         (len(names), len(batch)))

    params = [(n, p.detach()) for n, p in model.named_parameters()]
    buffers, int_buffers = [], {}
    for n, b in model.named_buffers():
        if b.is_floating_point():
            buffers.append((n, b.detach()))
        else:
            int_buffers[n] = (tuple(b.shape), b.dtype)

    step = _Step(model, loss_fn, [n for n, _ in params],
                 [n for n, _ in buffers], int_buffers)
    args = [t.clone() for _, t in params] + [t.clone() for _, t in buffers] + list(batch)
    module = torch_mlir.fx.export_and_import(
        step, *args, output_type="linalg-on-tensors", func_name="step")
    text = module.operation.get_asm(print_generic_op_form=True,
                                    large_elements_limit=_LARGE_ELEMENTS_LIMIT)

    roles = (["param:" + n for n, _ in params] +
             ["state:" + n for n, _ in buffers] +
             ["input:" + n for n in names])
    results = ["loss"] + ["update:" + n for n, _ in buffers]
    options = "func=step args=%s results=%s" % (",".join(roles), ",".join(results))
    return text, options


def write_linalg(path: str | os.PathLike[str], model: torch.nn.Module,
                 loss_fn: Callable[..., torch.Tensor],
                 example_batch: Sequence[torch.Tensor], dtype: torch.dtype | None = None,
                 input_names: Sequence[str] | None = None) -> str:
    """Writes the module of `export_linalg` to `path`; returns the import
    options."""
    text, options = export_linalg(model, loss_fn, example_batch, dtype,
                                  input_names)
    with open(path, "w") as f:
        f.write(text)
    return options


def _main(argv: Sequence[str] | None = None) -> None:
    import argparse
    import os
    import sys

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a model of parity_models.MODELS")
    ap.add_argument("output", help="the .mlir file to write")
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    ap.add_argument("--models", help="directory of parity_models.py",
                    default=os.path.join(os.path.dirname(__file__), "..", "..",
                                         "test", "Integration", "Torch"))
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(a.models))
    import parity_models

    dtype = torch.float64 if a.dtype == "f64" else torch.float32
    factory, loss_fn, make_batch = parity_models.MODELS[a.model]
    torch.manual_seed(0)
    model = factory()
    batch = make_batch(torch.Generator().manual_seed(0), dtype)
    names = ["tokens", "labels"] if a.model == "gpt" else None
    print(write_linalg(a.output, model, loss_fn, batch, dtype, names))


if __name__ == "__main__":
    _main()

"""The torch-mlir way in: linalg-on-tensors from torch-mlir, raised into ds
by `ds-opt --ds-import-linalg`, as an ExportedStep like
export_training_step's.

torch-mlir's wheel carries its own MLIR, so the linalg module travels as
text to a ds-opt process; nothing of ds-mlir is loaded here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence

import torch

from .export import ExportedStep
from .linalg_export import export_linalg
from .mlir_text import ExportError
from .optim import optimizer_attributes


def find_ds_opt(ds_opt: str | None = None) -> str:
    """`ds_opt`, else $DS_OPT, else ds-opt on PATH."""
    path = ds_opt or os.environ.get("DS_OPT") or shutil.which("ds-opt")
    if not path:
        raise ExportError("ds-opt not found: pass ds_opt=, set DS_OPT or put "
                          "ds-opt on PATH")
    return path


def _add_optim(text: str, attrs: Mapping[str, str]) -> str:
    """Adds `ds.optim` to each parameter's argument attributes of the raised
    module (printed by ds-opt: `ds.param = "<name>"` appears once per
    parameter, inside its argument's attribute dictionary)."""
    for name, attr in attrs.items():
        pattern = 'ds.param = "%s"' % name.replace("\\", "\\\\").replace('"', '\\"')
        if text.count(pattern) != 1:
            raise ExportError("internal: parameter '%s' not found once in the "
                              "raised module" % name)
        text = text.replace(pattern, pattern + ", ds.optim = " + attr)
    return text


def import_via_torch_mlir(model: torch.nn.Module,
                          loss_fn: Callable[..., torch.Tensor],
                          example_batch: Sequence[torch.Tensor],
                          optimizer: torch.optim.Optimizer | None = None, *,
                          input_names: Sequence[str] | None = None,
                          ds_opt: str | None = None,
                          keep_linalg: str | os.PathLike[str] | None = None
                          ) -> ExportedStep:
    """Exports the step of `model` with torch-mlir (linalg-on-tensors),
    raises it with `ds-opt --ds-import-linalg` and returns an ExportedStep.

    Same conventions as export_training_step: `loss_fn(model(*batch[:-1]),
    batch[-1])`; `optimizer` gives per-parameter `ds.optim`. BatchNorm's
    running statistics are state; its `num_batches_tracked` counter is not
    carried (BatchNorm with a momentum never reads it). `keep_linalg`
    names a file to keep torch-mlir's module in. The raised fraction
    ds-opt reports is in `step.import_report`.
    """
    batch = tuple(example_batch)
    if input_names is None:
        input_names = (["input"] if len(batch) == 2 else
                       ["input%d" % i for i in range(len(batch) - 1)]) + ["target"]
    named_params = list(model.named_parameters())
    optim_attrs = optimizer_attributes(optimizer, named_params)
    if optim_attrs is not None and len(optim_attrs) != len(named_params):
        raise ExportError("the torch-mlir path trains every parameter; the "
                          "optimizer must hold all of them")
    try:
        text, options = export_linalg(model, loss_fn, batch, input_names=input_names)
    except ExportError:
        raise
    except Exception as e:
        raise ExportError("torch-mlir could not export %s: %s: %s"
                          % (type(model).__name__, type(e).__name__, e)) from e
    with tempfile.TemporaryDirectory() as work:
        linalg = keep_linalg or os.path.join(work, "linalg.mlir")
        with open(linalg, "w") as f:
            f.write(text)
        r = subprocess.run([find_ds_opt(ds_opt), "--allow-unregistered-dialect",
                            "--ds-import-linalg=" + options, linalg],
                           capture_output=True, text=True)
    if r.returncode:
        raise ExportError("ds-opt --ds-import-linalg failed:\n" + r.stderr.strip())
    raised = r.stdout
    if optim_attrs:
        raised = _add_optim(raised, optim_attrs)
    report = re.search(r"remark: (ds-import-linalg: raised [^\n]*)", r.stderr)
    states = [n for n, b in model.named_buffers() if b.is_floating_point()]
    values = {n: p.detach().numpy().copy() for n, p in named_params}
    values.update({n: b.detach().numpy().copy() for n, b in model.named_buffers()
                   if n in states})
    step = ExportedStep(raised, values, [n for n, _ in named_params], states,
                        list(input_names), "forward")
    step.import_report = report.group(1) if report else None
    return step

"""ds_torch: PyTorch models into ds-mlir.

    step = ds_torch.export_training_step(model, loss_fn, (x, y), optimizer)
    step.save("model.mlir", "init/")      # then: ds-run model.mlir --params init/

`export_training_step` traces the forward and loss with make_fx at the aten
level and maps them to ds ops (see aten_rules.py and
docs/TorchOpCoverage.md); the backward comes from ds-autodiff (or, with
`joint=True`, from PyTorch). `linalg_export.export_linalg` is the other way
in: torch-mlir's linalg-on-tensors, raised by `ds-opt --ds-import-linalg`.
"""

from .export import ExportedStep, export_training_step, save_arrays
from .mlir_text import ExportError

__all__ = ["ExportError", "ExportedStep", "export_training_step", "save_arrays"]

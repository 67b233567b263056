"""ds_torch: PyTorch models into ds-mlir.

    step = ds_torch.export_training_step(model, loss_fn, (x, y), optimizer)
    step.save("model.mlir", "init/")      # then: ds-run model.mlir --params init/

`export_training_step` traces the forward and loss with make_fx at the aten
level and maps them to ds ops (see aten_rules.py and
docs/TorchOpCoverage.md); the backward comes from ds-autodiff (or, with
`joint=True`, from PyTorch). `linalg_export.export_linalg` is the other way
in: torch-mlir's linalg-on-tensors, raised by `ds-opt --ds-import-linalg`.
`load_quantized` is the way back out: the int8 model of
`ds-run --export-quantized` as torch.ao reference quantized modules.
"""

from .export import ExportedStep, export_training_step, save_arrays
from .mlir_text import ExportError
from .quantized import QuantizedExportError, load_quantized

__all__ = ["ExportError", "ExportedStep", "QuantizedExportError",
           "export_training_step", "load_quantized", "save_arrays"]

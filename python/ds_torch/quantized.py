"""Load the int8 model `ds-run --export-quantized DIR` writes as a torch.ao
quantized model.

    model = MyModel()                                  # the float architecture
    qmodel = ds_torch.load_quantized(model, "int8/")   # torch.ao modules

DIR/quantized.json names every quantized layer by its module name with the
attribute names of torch.ao's reference quantized modules (`weight_scale`,
`weight_zero_point`, `weight_axis`, `weight_qscheme`, `weight_dtype`,
`weight_quant_min` / `weight_quant_max`; `input_scale`, `input_zero_point`
for the activation the layer reads) and lists the other parameters, kept in
f32, and the other forward state (batch-norm running statistics) as
buffers. Each quantized `nn.Linear` becomes

    nn.Sequential(FixedQParamsFakeQuantize(input grid),   # torch.ao
                  torch.ao.nn.quantized.reference.Linear)

whose weight is the exported int8 indices dequantized with the exported
scales (the reference module re-quantizes it to the same indices), which
is what torch.ao's `convert_to_reference_fx` produces and what its
backends lower to int8 kernels. The result computes what ds-run's integer
inference computes, in f32, for the layers ds-run ran as integer GEMMs.
Layers its integer graph left fake-quantized in f32 (convolutions, FP8 and
per-group weights: quantized.json's `left_in_f32`) are loaded as plain
float layers, and load_quantized warns that it does so.
"""

import json
import os
import warnings

import numpy as np
import torch
import torch.nn as nn

__all__ = ["load_quantized", "QuantizedExportError"]


class QuantizedExportError(ValueError):
    """The export directory does not fit the model (or is not an export)."""


_DTYPES = {"qint8": torch.qint8, "quint8": torch.quint8}


def _load(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        raise QuantizedExportError("%s: missing (listed in quantized.json)" % path)
    return np.load(path)


def _input_quantizer(entry, where):
    """torch.ao's fixed-qparams fake quantizer of the layer's input."""
    from torch.ao.quantization.fake_quantize import FixedQParamsFakeQuantize
    from torch.ao.quantization.observer import FixedQParamsObserver

    if "input_scale" not in entry:
        return None
    if entry.get("input_qscheme", "per_tensor_affine") not in (
            "per_tensor_affine", "per_tensor_symmetric"):
        raise QuantizedExportError("%s: input qscheme %r is not per tensor"
                                   % (where, entry["input_qscheme"]))
    observer = FixedQParamsObserver.with_args(
        scale=float(entry["input_scale"]),
        zero_point=int(entry["input_zero_point"]),
        dtype=_DTYPES[entry["input_dtype"]],
        quant_min=int(entry["input_quant_min"]),
        quant_max=int(entry["input_quant_max"]))
    fq = FixedQParamsFakeQuantize(observer=observer)
    fq.disable_observer()
    return fq


def _reference_layer(module, entry, directory, where):
    """The torch.ao reference quantized module of one layer."""
    import torch.ao.nn.quantized.reference as ref
    # Registers torch.ops.quantized_decomposed, which the reference modules'
    # decomposed weight quantization calls.
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    indices = torch.from_numpy(_load(directory, entry["weight"]).astype(np.int64))
    scale = torch.from_numpy(_load(directory, entry["weight_scale"]).astype(np.float32))
    zero_point = torch.from_numpy(_load(directory, entry["weight_zero_point"]))
    if tuple(indices.shape) != tuple(module.weight.shape):
        raise QuantizedExportError("%s: exported weight has shape %s, the model's %s"
                                   % (where, tuple(indices.shape),
                                      tuple(module.weight.shape)))
    per_channel = "weight_axis" in entry
    axis = int(entry.get("weight_axis", 0))
    if per_channel:
        view = [1] * indices.dim()
        view[axis] = -1
        w = (indices - zero_point.reshape(view)).float() * scale.reshape(view)
    else:
        w = (indices - zero_point).float() * scale
    # torch.ao's reference modules take symmetric grids as affine ones with
    # zero points 0 (what convert_to_reference_fx gives them).
    qparams = {
        "qscheme": torch.per_channel_affine if per_channel else torch.per_tensor_affine,
        "dtype": _DTYPES[entry["weight_dtype"]],
        "scale": scale if per_channel else float(scale),
        "zero_point": zero_point if per_channel else int(zero_point),
        "axis": axis,
        "quant_min": int(entry["weight_quant_min"]),
        "quant_max": int(entry["weight_quant_max"]),
        # The decomposed path honours quant_min / quant_max (int4 grids,
        # 7-bit ranges); the other clamps to the dtype's full range.
        "is_decomposed": True,
    }
    with torch.no_grad():
        module.weight.copy_(w)
    if isinstance(module, nn.Linear):
        return ref.Linear.from_float(module, qparams)
    raise QuantizedExportError("%s: quantized layer is a %s; ds-run's integer "
                               "layers are linear (nn.Linear)"
                               % (where, type(module).__name__))


def load_quantized(model: nn.Module, directory: str | os.PathLike) -> nn.Module:
    """Returns `model` (modified in place) with the export's parameters and
    every quantized layer replaced by torch.ao's reference quantized module
    behind a fixed-qparams quantizer of its input. Raises
    QuantizedExportError when the directory does not fit the model."""
    index_path = os.path.join(directory, "quantized.json")
    if not os.path.exists(index_path):
        raise QuantizedExportError("%s: not an export of ds-run --export-quantized "
                                   "(no quantized.json)" % directory)
    with open(index_path) as f:
        index = json.load(f)
    if index.get("format") != "ds-mlir quantized model" or index.get("version") != 1:
        raise QuantizedExportError("%s: unknown format %r version %r"
                                   % (index_path, index.get("format"),
                                      index.get("version")))
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    with torch.no_grad():
        for name, file in index.get("buffers", {}).items():
            if name not in buffers:
                raise QuantizedExportError("%s: buffer %r is not in the model"
                                           % (index_path, name))
            buffers[name].copy_(torch.from_numpy(_load(directory, file)))
        for name, file in index["parameters"].items():
            if name not in params:
                raise QuantizedExportError("%s: parameter %r is not in the model"
                                           % (index_path, name))
            value = torch.from_numpy(_load(directory, file))
            if tuple(value.shape) != tuple(params[name].shape):
                raise QuantizedExportError(
                    "%s: parameter %r has shape %s, the model's %s"
                    % (index_path, name, tuple(value.shape),
                       tuple(params[name].shape)))
            params[name].copy_(value)
    for layer, entry in index["layers"].items():
        where = "%s: layer %r" % (index_path, layer)
        try:
            module = model.get_submodule(layer)
        except AttributeError:
            raise QuantizedExportError("%s is not in the model" % where) from None
        if "weight" not in entry:
            raise QuantizedExportError("%s has no quantized weight" % where)
        replaced = _reference_layer(module, entry, directory, where)
        quantizer = _input_quantizer(entry, where)
        new = nn.Sequential(quantizer, replaced) if quantizer is not None else replaced
        parent_name, _, child = layer.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, new)
    left = index.get("left_in_f32", [])
    if left:
        warnings.warn("%s: %d layer(s) were fake-quantized in f32 by ds-run, not "
                      "integer; they load as float layers without their "
                      "quantizers: %s" % (index_path, len(left), "; ".join(left)),
                      stacklevel=2)
    return model

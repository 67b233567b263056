"""torch.optim optimizers as per-parameter `ds.optim` attributes.

The optimizer is not traced: tracing its step would bake the step count in
as a constant. Its `param_groups` carry everything ds-insert-optimizer
needs, per parameter, and the update itself is ds-insert-optimizer's
(torch.optim's formulas in torch's order of operations).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from .mlir_text import ExportError, float_literal, string


def _number(v: float | torch.Tensor) -> float:
    if isinstance(v, torch.Tensor):
        v = v.item()
    return float(v)


def _group_entries(optimizer: torch.optim.Optimizer,
                   group: Mapping[str, Any]) -> dict[str, Any]:
    name = type(optimizer).__name__
    for flag in ("amsgrad", "maximize"):
        if group.get(flag):
            raise ExportError("torch.optim.%s with %s=True is not supported by "
                              "ds-insert-optimizer" % (name, flag))
    if isinstance(optimizer, torch.optim.SGD):
        entries = {"kind": "sgd", "lr": group["lr"],
                   "momentum": group.get("momentum", 0.0),
                   "dampening": group.get("dampening", 0.0),
                   "weight_decay": group.get("weight_decay", 0.0),
                   "nesterov": bool(group.get("nesterov", False))}
    elif isinstance(optimizer, (torch.optim.AdamW, torch.optim.Adam)):
        decoupled = isinstance(optimizer, torch.optim.AdamW) or \
            group.get("decoupled_weight_decay", False)
        beta1, beta2 = group["betas"]
        entries = {"kind": "adamw" if decoupled else "adam", "lr": group["lr"],
                   "beta1": beta1, "beta2": beta2, "eps": group["eps"],
                   "weight_decay": group.get("weight_decay", 0.0)}
    else:
        raise ExportError("torch.optim.%s is not supported: ds-insert-optimizer "
                          "implements SGD (with momentum, nesterov), Adam and AdamW"
                          % name)
    return entries


def optimizer_attributes(optimizer: torch.optim.Optimizer | None,
                         named_params: Iterable[tuple[str, torch.Tensor]]
                         ) -> dict[str, str] | None:
    """{parameter name: `ds.optim` attribute text} for every parameter the
    optimizer updates. Parameters it does not hold are not trained."""
    if optimizer is None:
        return None
    by_id = {id(p): n for n, p in named_params}
    attrs = {}
    for group in optimizer.param_groups:
        entries = _group_entries(optimizer, group)
        parts = []
        for key, value in entries.items():
            if key == "kind":
                parts.append("kind = %s" % string(value))
            elif key == "nesterov":
                parts.append("nesterov = %s" % ("true" if value else "false"))
            else:
                parts.append("%s = %s : f64" % (key, float_literal(_number(value),
                                                                   torch.float64)))
        text = "{" + ", ".join(parts) + "}"
        for p in group["params"]:
            name = by_id.get(id(p))
            if name is None:
                raise ExportError("the optimizer holds a tensor that is not a "
                                  "parameter of the model")
            attrs[name] = text
    return attrs

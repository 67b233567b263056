"""Writing MLIR text for the ds dialect: types, literals, locations, and a
function body builder.

The front end emits text rather than linking MLIR's Python bindings: the
text is the interchange format ds-opt and ds-run read, and it keeps this
package free of any particular MLIR build (torch-mlir's wheel carries its
own, which must never meet Debian's in one process).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence

import torch

# (file, line, source code): where an op came from; the code may be "".
Location = tuple[str, int, str]
# A Python scalar as a tensor element.
Scalar = bool | int | float

_DTYPES = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "ui8",
    torch.bool: "i1",
}


class ExportError(Exception):
    """A model the front end cannot export; the message says what and where."""


def element_type(dtype: torch.dtype) -> str:
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ExportError("dtype %s has no ds element type" % dtype) from None


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def tensor_type(shape: Iterable[int], dtype: torch.dtype) -> str:
    dims = "".join("%dx" % d for d in shape)
    return "tensor<%s%s>" % (dims, element_type(dtype))


def string(s: str) -> str:
    """An MLIR string literal."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.append("".join("\\%02X" % b for b in ch.encode("utf-8")))
    return '"' + "".join(out) + '"'


def float_literal(value: float, dtype: torch.dtype) -> str:
    """`value` as an MLIR float literal of `dtype`, exactly: finite values as
    the shortest decimal that round-trips the value rounded to `dtype`,
    inf/NaN by their bit pattern."""
    value = float(value)
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        value = float(torch.tensor(value, dtype=torch.float64).to(dtype).double())
    if math.isfinite(value):
        text = repr(value)
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + ("e" + exponent if exponent else "")
    if dtype == torch.float64:
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]
    if dtype == torch.float32:
        return "0x%08X" % struct.unpack("<I", struct.pack("<f", value))[0]
    bits = torch.tensor([value], dtype=dtype).view(torch.int16).item() & 0xFFFF
    return "0x%04X" % bits


def scalar_literal(value: Scalar, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "true" if value else "false"
    if is_float(dtype):
        return float_literal(value, dtype)
    return str(int(value))


def dense_literal(t: torch.Tensor) -> str:
    """A `dense<...>` literal holding tensor `t` exactly."""
    t = t.detach().cpu()
    if t.numel() > 0 and bool((t == t.reshape(-1)[0]).all()) and (
            not is_float(t.dtype) or not bool(torch.isnan(t).any())):
        return "dense<%s>" % scalar_literal(t.reshape(-1)[0].item(), t.dtype)

    def nest(x: torch.Tensor) -> str:
        if x.dim() == 0:
            return scalar_literal(x.item(), t.dtype)
        return "[" + ", ".join(nest(r) for r in x) + "]"
    return "dense<%s>" % nest(t)


def location(loc: Location | None) -> str:
    """`loc` is (file, line, ...) or None. Python's stack traces give no
    column, so the column is 1."""
    if loc is None:
        return "loc(unknown)"
    return "loc(%s:%d:1)" % (string(loc[0]), loc[1])


def attr_dict(attrs: Mapping[str, str] | None) -> str:
    if not attrs:
        return ""
    return " {" + ", ".join("%s = %s" % kv for kv in attrs.items()) + "}"


def i64_array(values: Iterable[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


class Value:
    """An SSA value of the function being built."""

    def __init__(self, name: str, shape: Iterable[int], dtype: torch.dtype) -> None:
        self.name, self.shape, self.dtype = name, tuple(shape), dtype

    @property
    def type(self) -> str:
        return tensor_type(self.shape, self.dtype)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return "%s : %s" % (self.name, self.type)


class FunctionBuilder:
    """Accumulates the body of one function. Every op carries the location
    and the discardable attributes (`ds.module`) current when it is built."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0
        self.loc: Location | None = None
        self.op_attrs: dict[str, str] = {}
        self._constants: dict[tuple, Value] = {}

    def fresh(self, shape: Iterable[int], dtype: torch.dtype) -> Value:
        self.counter += 1
        return Value("%%v%d" % self.counter, shape, dtype)

    def op(self, text: str, result_shapes: Sequence[Iterable[int]],
           result_dtypes: Sequence[torch.dtype], attrs: Mapping[str, str] | None = None,
           trailer: str = "") -> list[Value]:
        """Emits `results = <text> {attrs} : <trailer>`; `text` is the op name
        and operands (and inline properties), `trailer` the type signature."""
        results = [self.fresh(s, d) for s, d in zip(result_shapes, result_dtypes)]
        all_attrs = dict(self.op_attrs)
        all_attrs.update(attrs or {})
        lhs = ", ".join(r.name for r in results)
        self.lines.append("    %s = %s%s : %s %s" % (
            lhs, text, attr_dict(all_attrs), trailer, location(self.loc)))
        return results

    def constant(self, tensor: torch.Tensor) -> Value:
        """An `arith.constant` holding `tensor`; splats are shared."""
        key = None
        if tensor.numel() == 1:
            key = (tuple(tensor.shape), tensor.dtype,
                   scalar_literal(tensor.reshape(-1)[0].item(), tensor.dtype))
            if key in self._constants:
                return self._constants[key]
        v = self.fresh(tensor.shape, tensor.dtype)
        self.lines.append("    %s = arith.constant %s : %s %s" % (
            v.name, dense_literal(tensor), v.type, location(self.loc)))
        if key is not None:
            self._constants[key] = v
        return v

    def scalar(self, value: Scalar, dtype: torch.dtype) -> Value:
        return self.constant(torch.tensor(value, dtype=dtype))

"""Typed builders for ds ops on top of FunctionBuilder.

Each function takes `Value`s, computes the result type the way the ds
verifier does, and emits the op in its custom assembly form. The aten
rules (aten_rules.py) are written against these, never against raw text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from .mlir_text import (ExportError, FunctionBuilder, Value, element_type, float_literal,
                        i64_array, location)


def _broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    if len(a) == 0:
        return tuple(b)
    if len(b) == 0:
        return tuple(a)
    if len(a) != len(b):
        raise ExportError("internal: ds broadcast needs equal ranks, got %s and %s"
                          % (a, b))
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ExportError("shapes %s and %s do not broadcast" % (a, b))
        out.append(y if x == 1 else x)
    return tuple(out)


class DS:
    def __init__(self, fb: FunctionBuilder) -> None:
        self.fb = fb

    # -- shapes ------------------------------------------------------------
    def reshape(self, x: Value, shape: Iterable[int]) -> Value:
        shape = tuple(shape)
        if shape == x.shape:
            return x
        (r,) = self.fb.op("ds.reshape %s" % x.name, [shape], [x.dtype],
                          trailer="%s -> %s" % (x.type, Value("", shape, x.dtype).type))
        return r

    def transpose(self, x: Value, perm: Iterable[int]) -> Value:
        perm = [int(p) for p in perm]
        if perm == list(range(x.rank)):
            return x
        shape = tuple(x.shape[p] for p in perm)
        (r,) = self.fb.op("ds.transpose %s %s" % (x.name, i64_array(perm)),
                          [shape], [x.dtype],
                          trailer="%s -> %s" % (x.type, Value("", shape, x.dtype).type))
        return r

    def broadcast(self, x: Value, shape: Iterable[int], dims: Iterable[int]) -> Value:
        shape = tuple(shape)
        if shape == x.shape:
            return x
        (r,) = self.fb.op("ds.broadcast %s dims = %s" % (x.name, i64_array(dims)),
                          [shape], [x.dtype],
                          trailer="%s -> %s" % (x.type, Value("", shape, x.dtype).type))
        return r

    def expand(self, x: Value, shape: Iterable[int]) -> Value:
        """numpy-style broadcast of `x` to `shape` (leading dims new)."""
        shape = tuple(shape)
        lead = len(shape) - x.rank
        return self.broadcast(x, shape, list(range(lead, len(shape))))

    def slice(self, x: Value, offsets: Sequence[int], shape: Iterable[int],
              strides: Sequence[int] | None = None) -> Value:
        shape = tuple(shape)
        if shape == x.shape and not any(offsets):
            return x
        text = "ds.slice %s offsets %s" % (x.name, i64_array(offsets))
        if strides and any(s != 1 for s in strides):
            text += " strides %s" % i64_array(strides)
        (r,) = self.fb.op(text, [shape], [x.dtype],
                          trailer="%s -> %s" % (x.type, Value("", shape, x.dtype).type))
        return r

    def concat(self, xs: Sequence[Value], axis: int) -> Value:
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        (r,) = self.fb.op("ds.concat %s axis = %d" % (", ".join(x.name for x in xs), axis),
                          [shape], [xs[0].dtype],
                          trailer="%s -> %s" % (", ".join(x.type for x in xs),
                                                Value("", shape, xs[0].dtype).type))
        return r

    def cast(self, x: Value, dtype: torch.dtype) -> Value:
        if x.dtype == dtype:
            return x
        (r,) = self.fb.op("ds.cast %s" % x.name, [x.shape], [dtype],
                          trailer="%s -> %s" % (x.type, Value("", x.shape, dtype).type))
        return r

    # -- elementwise -------------------------------------------------------
    def align(self, a: Value, b: Value) -> tuple[Value, Value]:
        """Gives `a` and `b` equal ranks (numpy alignment) unless one is a
        scalar, which ds broadcasts as it is."""
        if a.rank == b.rank or a.rank == 0 or b.rank == 0:
            return a, b
        if a.rank < b.rank:
            return self.reshape(a, (1,) * (b.rank - a.rank) + a.shape), b
        return a, self.reshape(b, (1,) * (a.rank - b.rank) + b.shape)

    def binary(self, name: str, a: Value, b: Value) -> Value:
        a, b = self.align(a, b)
        shape = _broadcast_shapes(a.shape, b.shape)
        (r,) = self.fb.op("ds.%s %s, %s" % (name, a.name, b.name), [shape], [a.dtype],
                          trailer="%s, %s -> %s" % (a.type, b.type,
                                                    Value("", shape, a.dtype).type))
        return r

    def compare(self, pred: str, a: Value, b: Value) -> Value:
        a, b = self.align(a, b)
        shape = _broadcast_shapes(a.shape, b.shape)
        (r,) = self.fb.op("ds.compare %s, %s, %s" % (pred, a.name, b.name), [shape],
                          [torch.bool],
                          trailer="%s, %s -> %s" % (a.type, b.type,
                                                    Value("", shape, torch.bool).type))
        return r

    def select(self, cond: Value, t: Value, f: Value) -> Value:
        rank = max(cond.rank, t.rank, f.rank)

        def lift(v: Value) -> Value:
            if v.rank in (0, rank):
                return v
            return self.reshape(v, (1,) * (rank - v.rank) + v.shape)
        cond, t, f = lift(cond), lift(t), lift(f)
        shape = _broadcast_shapes(_broadcast_shapes(cond.shape, t.shape), f.shape)
        (r,) = self.fb.op("ds.select %s, %s, %s" % (cond.name, t.name, f.name), [shape],
                          [t.dtype],
                          trailer="%s, %s, %s -> %s" % (cond.type, t.type, f.type,
                                                        Value("", shape, t.dtype).type))
        return r

    def elementwise(self, body: Sequence[str], xs: Sequence[Value]) -> Value:
        """A `linalg.generic` applying scalar ops to `xs` (broadcast to one
        shape first, all of one float dtype) for an elementwise op ds has no
        op for; ds-autodiff differentiates it from this body. `body` lines
        use %in0, %in1, ... and `{t}` for the element type, and define %v."""
        shape = tuple(torch.broadcast_shapes(*[x.shape for x in xs]))
        xs = [self.expand(x, shape) for x in xs]
        dtype = xs[0].dtype
        t = element_type(dtype)
        fb = self.fb
        out = Value("", shape, dtype)
        empty = fb.fresh(shape, dtype)
        result = fb.fresh(shape, dtype)
        dims = ", ".join("d%d" % i for i in range(len(shape)))
        ident = "affine_map<(%s) -> (%s)>" % (dims, dims)
        attrs = {"indexing_maps": "[%s]" % ", ".join([ident] * (len(xs) + 1)),
                 "iterator_types": "[%s]" % ", ".join(['"parallel"']
                                                     * len(shape))}
        attrs.update(fb.op_attrs)
        loc = location(fb.loc)
        args = ", ".join("%%in%d: %s" % (k, t) for k in range(len(xs)))
        fb.lines.append("    %s = tensor.empty() : %s %s" % (empty.name, out.type, loc))
        fb.lines.append("    %s = linalg.generic {%s} ins(%s : %s) outs(%s : %s) {" % (
            result.name, ", ".join("%s = %s" % kv for kv in attrs.items()),
            ", ".join(x.name for x in xs), ", ".join(x.type for x in xs),
            empty.name, out.type))
        fb.lines.append("    ^bb0(%s, %%out: %s):" % (args, t))
        fb.lines += ["      " + line.format(t=t) for line in body]
        fb.lines.append("      linalg.yield %%v : %s" % t)
        fb.lines.append("    } -> %s %s" % (out.type, loc))
        return result

    def unary(self, name: str, x: Value, props: str = "") -> Value:
        (r,) = self.fb.op("ds.%s %s%s" % (name, x.name, props), [x.shape], [x.dtype],
                          trailer=x.type)
        return r

    # -- reductions --------------------------------------------------------
    def reduce(self, name: str, x: Value, dims: Iterable[int],
               keep_dims: bool = False) -> Value:
        dims = sorted(set(d % x.rank for d in dims)) if x.rank else []
        if not dims:
            return x
        shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape)) if keep_dims \
            else tuple(s for i, s in enumerate(x.shape) if i not in dims)
        (r,) = self.fb.op("ds.%s %s %s%s" % (name, x.name, i64_array(dims),
                                             " keep_dims" if keep_dims else ""),
                          [shape], [x.dtype],
                          trailer="%s -> %s" % (x.type, Value("", shape, x.dtype).type))
        return r

    # -- linear algebra and nn ---------------------------------------------
    def matmul(self, a: Value, b: Value, ta: bool = False, tb: bool = False) -> Value:
        m = a.shape[-1] if ta else a.shape[-2]
        n = b.shape[-2] if tb else b.shape[-1]
        shape = tuple(a.shape[:-2]) + (m, n)
        flags = (" transpose_lhs" if ta else "") + (" transpose_rhs" if tb else "")
        (r,) = self.fb.op("ds.matmul %s, %s%s" % (a.name, b.name, flags), [shape],
                          [a.dtype],
                          trailer="%s, %s -> %s" % (a.type, b.type,
                                                    Value("", shape, a.dtype).type))
        return r

    def softmax(self, name: str, x: Value, axis: int) -> Value:
        return self.unary(name, x, " axis = %d" % (axis % x.rank))

    def layer_norm(self, x: Value, w: Value, b: Value, eps: float) -> Value:
        (r,) = self.fb.op("ds.layer_norm %s, %s, %s eps = %s" % (
            x.name, w.name, b.name, float_literal(eps, torch.float64)),
            [x.shape], [x.dtype], trailer="%s, %s, %s" % (x.type, w.type, b.type))
        return r

    def batch_norm(self, x: Value, w: Value, b: Value, mean: Value, var: Value,
                   momentum: float, eps: float) -> list[Value]:
        c = (x.shape[1],)
        return self.fb.op("ds.batch_norm %s, %s, %s, %s, %s momentum = %s eps = %s" % (
            x.name, w.name, b.name, mean.name, var.name,
            float_literal(momentum, torch.float64), float_literal(eps, torch.float64)),
            [x.shape, c, c], [x.dtype] * 3, trailer="%s, %s" % (x.type, w.type))

    def embedding(self, table: Value, idx: Value) -> Value:
        shape = idx.shape + (table.shape[1],)
        (r,) = self.fb.op("ds.embedding %s, %s" % (table.name, idx.name), [shape],
                          [table.dtype],
                          trailer="%s, %s -> %s" % (table.type, idx.type,
                                                    Value("", shape, table.dtype).type))
        return r

    def conv2d(self, x: Value, w: Value, b: Value | None, shape: Iterable[int],
               strides: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
               groups: int) -> Value:
        operands = [x, w] + ([b] if b is not None else [])
        text = "ds.conv2d %s strides = %s padding = %s dilation = %s groups = %d" % (
            ", ".join(v.name for v in operands), i64_array(strides), i64_array(padding),
            i64_array(dilation), groups)
        (r,) = self.fb.op(text, [shape], [x.dtype],
                          trailer="%s -> %s" % (", ".join(v.type for v in operands),
                                                Value("", shape, x.dtype).type))
        return r

    def pool2d(self, name: str, x: Value, shape: Iterable[int], kernel: Sequence[int],
               strides: Sequence[int], padding: Sequence[int]) -> Value:
        text = "ds.%s %s kernel = %s strides = %s padding = %s" % (
            name, x.name, i64_array(kernel), i64_array(strides), i64_array(padding))
        (r,) = self.fb.op(text, [shape], [x.dtype],
                          trailer="%s -> %s" % (x.type, Value("", shape, x.dtype).type))
        return r

    def loss(self, name: str, a: Value, b: Value) -> Value:
        shape = ()
        if name == "mse_loss":
            trailer = "%s -> %s" % (a.type, Value("", shape, a.dtype).type)
        else:
            trailer = "%s, %s -> %s" % (a.type, b.type, Value("", shape, a.dtype).type)
        (r,) = self.fb.op("ds.%s %s, %s" % (name, a.name, b.name), [shape], [a.dtype],
                          trailer=trailer)
        return r

    def causal_mask(self, x: Value) -> Value:
        return self.unary("causal_mask", x)

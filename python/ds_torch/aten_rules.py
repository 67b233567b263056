"""How each aten op of a traced graph becomes ds ops.

A rule is a function `rule(cx, node, *args, **kwargs)` registered for one or
more aten overloads; its arguments are the node's arguments with graph
values replaced by what the converter holds for them (`Value`s, `Const`s,
tuples, Python scalars). It returns what the node produces. The table
`RULES` is also the source of docs/TorchOpCoverage.md (see
`coverage_table`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch._ops import OpOverload

from .mlir_text import ExportError, Value, float_literal

aten = torch.ops.aten

# rule(cx, node, *args, **kwargs) -> what the node produces.
Rule = Callable[..., Any]

RULES: dict[OpOverload, Rule] = {}
NOTES: dict[OpOverload, str] = {}


def rule(*overloads: OpOverload, note: str = "") -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for ov in overloads:
            RULES[ov] = fn
            NOTES[ov] = note
        return fn
    return register


class Const:
    """A tensor computed at export time (it depends on no input); becomes an
    `arith.constant` only where a ds op needs it."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.tensor.dtype


class Transposed:
    """A rank-2 transpose not yet emitted: a matmul folds it into its
    transpose flag; any other use materialises it."""

    def __init__(self, source: Value) -> None:
        self.source = source
        self.shape = (source.shape[1], source.shape[0])
        self.dtype = source.dtype


def _ints(v):
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v]


def _pair(v):
    v = _ints(v)
    return v * 2 if len(v) == 1 else v


def _result_meta(node, i=None):
    val = node.meta.get("val")
    if i is not None:
        val = val[i]
    return tuple(val.shape), val.dtype


# ---------------------------------------------------------------------------
# Views and copies
# ---------------------------------------------------------------------------

@rule(aten.t.default, aten.t_copy.default, aten.numpy_T.default,
      note="a transpose feeding a matmul becomes its transpose flag")
def _t(cx, node, x):
    if isinstance(x, Const):
        return Const(x.tensor.t())
    x = cx.value(x)
    if x.rank < 2:
        return x
    return Transposed(x)


@rule(aten.transpose.int, aten.transpose_copy.int)
def _transpose(cx, node, x, d0, d1):
    if isinstance(x, Const):
        return Const(x.tensor.transpose(d0, d1))
    x = cx.value(x)
    d0, d1 = d0 % x.rank, d1 % x.rank
    if x.rank == 2 and d0 != d1:
        return Transposed(x)
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return cx.ds.transpose(x, perm)


@rule(aten.permute.default, aten.permute_copy.default)
def _permute(cx, node, x, perm):
    x = cx.value(x)
    return cx.ds.transpose(x, [p % x.rank for p in perm])


@rule(aten.view.default, aten.view_copy.default, aten._unsafe_view.default,
      aten.reshape.default, aten._reshape_alias.default,
      aten._reshape_alias_copy.default, aten.squeeze.default, aten.squeeze.dim,
      aten.squeeze.dims, aten.squeeze_copy.default, aten.squeeze_copy.dim,
      aten.squeeze_copy.dims, aten.unsqueeze.default,
      aten.unsqueeze_copy.default, aten.flatten.using_ints,
      aten.unflatten.int, note="ds.reshape")
def _view(cx, node, x, *args, **kwargs):
    shape, _ = _result_meta(node)
    return cx.ds.reshape(cx.value(x), shape)


@rule(aten.expand.default, aten.expand_copy.default, note="ds.broadcast")
def _expand(cx, node, x, *args, **kwargs):
    shape, _ = _result_meta(node)
    return cx.ds.expand(cx.value(x), shape)


@rule(aten.alias.default, aten.alias_copy.default, aten.clone.default,
      aten.contiguous.default, aten.detach.default, aten.detach_copy.default,
      aten.lift_fresh_copy.default, aten.lift_fresh.default,
      note="the identity")
def _identity(cx, node, x, *args, **kwargs):
    return x


@rule(aten._to_copy.default, aten.to.dtype,
      note="ds.cast (dtype changes only)")
def _to_copy(cx, node, x, *args, **kwargs):
    _, dtype = _result_meta(node)
    if isinstance(x, Const):
        return Const(x.tensor.to(dtype))
    return cx.ds.cast(cx.value(x), dtype)


@rule(aten.slice.Tensor, aten.slice_copy.Tensor, note="ds.slice")
def _slice(cx, node, x, dim=0, start=None, end=None, step=1):
    x = cx.value(x)
    dim %= x.rank
    size = x.shape[dim]
    start, end, step = slice(start, end, step).indices(size)
    shape, _ = _result_meta(node)
    offsets = [0] * x.rank
    offsets[dim] = start
    strides = [1] * x.rank
    strides[dim] = step
    return cx.ds.slice(x, offsets, shape, strides)


@rule(aten.select.int, aten.select_copy.int, note="ds.slice + ds.reshape")
def _select(cx, node, x, dim, index):
    x = cx.value(x)
    dim %= x.rank
    index %= x.shape[dim]
    offsets = [0] * x.rank
    offsets[dim] = index
    box = list(x.shape)
    box[dim] = 1
    shape, _ = _result_meta(node)
    return cx.ds.reshape(cx.ds.slice(x, offsets, box), shape)


@rule(aten.split_with_sizes.default, aten.split_with_sizes_copy.default,
      aten.split.Tensor, aten.split_copy.Tensor,
      note="one ds.slice per piece (fused QKV projections)")
def _split(cx, node, x, sizes, dim=0):
    x = cx.value(x)
    dim %= x.rank
    outs, offset = [], 0
    for i in range(len(node.meta["val"])):
        shape, _ = _result_meta(node, i)
        offsets = [0] * x.rank
        offsets[dim] = offset
        outs.append(cx.ds.slice(x, offsets, shape))
        offset += shape[dim]
    return tuple(outs)


@rule(aten.cat.default, note="ds.concat")
def _cat(cx, node, xs, dim=0):
    shape, dtype = _result_meta(node)
    vals = [cx.value(x, dtype) for x in xs]
    vals = [v for v in vals if v.shape[dim % len(shape)] != 0] if len(shape) else vals
    return cx.ds.concat(vals, dim % len(shape))


@rule(aten.stack.default, note="ds.reshape + ds.concat")
def _stack(cx, node, xs, dim=0):
    shape, dtype = _result_meta(node)
    dim %= len(shape)
    vals = []
    for x in xs:
        v = cx.value(x, dtype)
        vals.append(cx.ds.reshape(v, v.shape[:dim] + (1,) + v.shape[dim:]))
    return cx.ds.concat(vals, dim)


# ---------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------

def _matmul(cx, a, b):
    ta = tb = False
    if isinstance(a, Transposed):
        a, ta = a.source, True
    if isinstance(b, Transposed):
        b, tb = b.source, True
    return cx.ds.matmul(cx.value(a), cx.value(b), ta, tb)


@rule(aten.mm.default, aten.bmm.default, note="ds.matmul")
def _mm(cx, node, a, b):
    return _matmul(cx, a, b)


@rule(aten.addmm.default, aten.baddbmm.default,
      note="ds.matmul + ds.add (beta, alpha as multipliers)")
def _addmm(cx, node, bias, a, b, beta=1, alpha=1):
    y = _matmul(cx, a, b)
    if alpha != 1:
        y = cx.ds.binary("mul", y, cx.scalar(alpha, y.dtype))
    bias = cx.value(bias, y.dtype)
    if beta != 1:
        bias = cx.ds.binary("mul", bias, cx.scalar(beta, y.dtype))
    return cx.ds.binary("add", y, bias)


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------

def _binary_operands(cx, node, a, b):
    _, dtype = _result_meta(node)
    compute = dtype
    return cx.value(a, compute), cx.value(b, compute)


def _binary(name, swap=False):
    def convert(cx, node, a, b, alpha=1, **kwargs):
        if kwargs.get("rounding_mode") is not None:
            raise cx.unsupported(node, "div with rounding_mode=%r" % kwargs["rounding_mode"])
        if swap:
            a, b = b, a
        x, y = _binary_operands(cx, node, a, b)
        if alpha != 1:
            y = cx.ds.binary("mul", y, cx.scalar(alpha, y.dtype))
        return cx.ds.binary(name, x, y)
    return convert


for _name, _ovs in {
        "add": (aten.add.Tensor, aten.add.Scalar),
        "sub": (aten.sub.Tensor, aten.sub.Scalar),
        "mul": (aten.mul.Tensor, aten.mul.Scalar),
        "div": (aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode),
        "maximum": (aten.maximum.default,),
        "minimum": (aten.minimum.default,)}.items():
    rule(*_ovs, note="ds." + _name)(_binary(_name))
rule(aten.rsub.Scalar, aten.rsub.Tensor, note="ds.sub, operands swapped")(
    _binary("sub", swap=True))


def _unary(name):
    def convert(cx, node, x, *args, **kwargs):
        _, dtype = _result_meta(node)
        return cx.ds.unary(name, cx.value(x, dtype))
    return convert


for _name, _ovs in {
        "relu": (aten.relu.default,), "tanh": (aten.tanh.default,),
        "sigmoid": (aten.sigmoid.default,), "silu": (aten.silu.default,),
        "exp": (aten.exp.default,), "log": (aten.log.default,),
        "sqrt": (aten.sqrt.default,), "rsqrt": (aten.rsqrt.default,),
        "neg": (aten.neg.default,), "abs": (aten.abs.default,)}.items():
    rule(*_ovs, note="ds." + _name)(_unary(_name))


@rule(aten.gelu.default, note="ds.gelu (none and tanh)")
def _gelu(cx, node, x, approximate="none"):
    props = " approximate = tanh" if approximate == "tanh" else ""
    return cx.ds.unary("gelu", cx.value(x), props)


@rule(aten.reciprocal.default, note="1 / x")
def _reciprocal(cx, node, x):
    x = cx.value(x)
    return cx.ds.binary("div", cx.scalar(1.0, x.dtype), x)


@rule(aten.pow.Tensor_Scalar, note="0.5, 1, 2, 3, -0.5, -1 as ds ops; others a linalg.generic "
      "of math.fpowi / math.powf")
def _pow(cx, node, x, e):
    x = cx.value(x)
    ds = cx.ds
    if e == 2:
        return ds.binary("mul", x, x)
    if e == 3:
        return ds.binary("mul", ds.binary("mul", x, x), x)
    if e == 1:
        return x
    if e == 0.5:
        return ds.unary("sqrt", x)
    if e == -0.5:
        return ds.unary("rsqrt", x)
    if e == -1:
        return ds.binary("div", cx.scalar(1.0, x.dtype), x)
    if isinstance(e, int) or float(e).is_integer():
        return ds.elementwise(["%%n = arith.constant %d : i32" % int(e),
                               "%v = math.fpowi %in0, %n : {t}, i32"], [x])
    lit = float_literal(float(e), x.dtype)
    return ds.elementwise(["%%e = arith.constant %s : {t}" % lit.replace("{", "{{"),
                           "%v = math.powf %in0, %e : {t}"], [x])


@rule(aten.pow.Tensor_Tensor, note="linalg.generic of math.powf")
def _pow_tensor(cx, node, x, e):
    x, e = _binary_operands(cx, node, x, e)
    return cx.ds.elementwise(["%v = math.powf %in0, %in1 : {t}"], [x, e])


def _scalar_body(body):
    def convert(cx, node, x, *args, **kwargs):
        _, dtype = _result_meta(node)
        return cx.ds.elementwise(body, [cx.value(x, dtype)])
    return convert


# Elementwise ops ds has no op for: a linalg.generic of the scalar op, which
# ds-autodiff differentiates from its body (torch.round rounds half to even).
_SIGN = ["%z = arith.constant 0.0 : {t}", "%o = arith.constant 1.0 : {t}",
         "%m = arith.constant -1.0 : {t}", "%p = arith.cmpf ogt, %in0, %z : {t}",
         "%n = arith.cmpf olt, %in0, %z : {t}", "%s = arith.select %n, %m, %z : {t}",
         "%v = arith.select %p, %o, %s : {t}"]
for _ovs, _body, _note in [
        ((aten.sin.default,), ["%v = math.sin %in0 : {t}"], "math.sin"),
        ((aten.cos.default,), ["%v = math.cos %in0 : {t}"], "math.cos"),
        ((aten.tan.default,), ["%v = math.tan %in0 : {t}"], "math.tan"),
        ((aten.sinh.default,), ["%v = math.sinh %in0 : {t}"], "math.sinh"),
        ((aten.cosh.default,), ["%v = math.cosh %in0 : {t}"], "math.cosh"),
        ((aten.asin.default,), ["%v = math.asin %in0 : {t}"], "math.asin"),
        ((aten.acos.default,), ["%v = math.acos %in0 : {t}"], "math.acos"),
        ((aten.atan.default,), ["%v = math.atan %in0 : {t}"], "math.atan"),
        ((aten.erf.default,), ["%v = math.erf %in0 : {t}"], "math.erf"),
        ((aten.erfc.default,), ["%v = math.erfc %in0 : {t}"], "math.erfc"),
        ((aten.exp2.default,), ["%v = math.exp2 %in0 : {t}"], "math.exp2"),
        ((aten.expm1.default,), ["%v = math.expm1 %in0 : {t}"], "math.expm1"),
        ((aten.log1p.default,), ["%v = math.log1p %in0 : {t}"], "math.log1p"),
        ((aten.log2.default,), ["%v = math.log2 %in0 : {t}"], "math.log2"),
        ((aten.log10.default,), ["%v = math.log10 %in0 : {t}"], "math.log10"),
        ((aten.floor.default,), ["%v = math.floor %in0 : {t}"], "math.floor"),
        ((aten.ceil.default,), ["%v = math.ceil %in0 : {t}"], "math.ceil"),
        ((aten.round.default,), ["%v = math.roundeven %in0 : {t}"], "math.roundeven"),
        ((aten.trunc.default,), ["%v = math.trunc %in0 : {t}"], "math.trunc"),
        ((aten.sign.default, aten.sgn.default), _SIGN, "selects of -1, 0, 1")]:
    rule(*_ovs, note="linalg.generic of " + _note)(_scalar_body(_body))


@rule(aten.clamp_min.default, note="ds.maximum with a scalar")
def _clamp_min(cx, node, x, lo):
    x = cx.value(x)
    return cx.ds.binary("maximum", x, cx.scalar(lo, x.dtype))


@rule(aten.clamp_max.default, note="ds.minimum with a scalar")
def _clamp_max(cx, node, x, hi):
    x = cx.value(x)
    return cx.ds.binary("minimum", x, cx.scalar(hi, x.dtype))


@rule(aten.clamp.default, note="ds.maximum / ds.minimum")
def _clamp(cx, node, x, lo=None, hi=None):
    x = cx.value(x)
    if lo is not None:
        x = cx.ds.binary("maximum", x, cx.scalar(lo, x.dtype))
    if hi is not None:
        x = cx.ds.binary("minimum", x, cx.scalar(hi, x.dtype))
    return x


_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
for _p in _PREDICATES:
    def _make(pred):
        def convert(cx, node, a, b):
            dt = torch.promote_types(cx.dtype_of(a), cx.dtype_of(b))
            return cx.ds.compare(pred, cx.value(a, dt), cx.value(b, dt))
        return convert
    _op = getattr(aten, _p)
    rule(_op.Tensor, _op.Scalar, note="ds.compare")(_make(_PREDICATES[_p]))


@rule(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther,
      aten.where.Scalar, note="ds.select")
def _where(cx, node, cond, a, b):
    _, dtype = _result_meta(node)
    return cx.ds.select(cx.value(cond), cx.value(a, dtype), cx.value(b, dtype))


@rule(aten.masked_fill.Scalar, aten.masked_fill.Tensor,
      note="ds.causal_mask when the mask is the causal one, else ds.select")
def _masked_fill(cx, node, x, mask, fill):
    x = cx.value(x)
    if isinstance(fill, (int, float)) and math.isinf(fill) and fill < 0 and \
            isinstance(mask, Const) and _is_causal_mask(mask.tensor, x.shape):
        return cx.ds.causal_mask(x)
    return cx.ds.select(cx.value(mask), cx.value(fill, x.dtype), x)


def _is_causal_mask(mask, shape):
    """Whether `mask` (broadcast to `shape`) is True exactly above the
    diagonal aligned to the last query, ds.causal_mask's pattern."""
    if mask.dim() < 2 or len(shape) < 2 or mask.dtype != torch.bool:
        return False
    t, s = shape[-2], shape[-1]
    if tuple(mask.shape[-2:]) != (t, s) or any(d != 1 for d in mask.shape[:-2]):
        return False
    causal = torch.ones(t, s, dtype=torch.bool).triu(s - t + 1)
    return bool((mask.reshape(t, s) == causal).all())


# ---------------------------------------------------------------------------
# Reductions, softmax, norms
# ---------------------------------------------------------------------------

def _reduce(name):
    def convert(cx, node, x, dims=None, keepdim=False, **kwargs):
        x = cx.value(x)
        _, dtype = _result_meta(node)
        x = cx.value(x, dtype)
        if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
            dims = list(range(x.rank))
        return cx.ds.reduce(name, x, _ints(dims), keepdim)
    return convert


rule(aten.sum.dim_IntList, aten.sum.default, note="ds.reduce_sum")(_reduce("reduce_sum"))
rule(aten.mean.dim, aten.mean.default, note="ds.reduce_mean")(_reduce("reduce_mean"))
rule(aten.amax.default, note="ds.reduce_max")(_reduce("reduce_max"))


@rule(aten._softmax.default, aten.softmax.int, note="ds.softmax")
def _softmax(cx, node, x, dim, *args):
    return cx.ds.softmax("softmax", cx.value(x), dim)


@rule(aten._log_softmax.default, aten.log_softmax.int, note="ds.log_softmax")
def _log_softmax(cx, node, x, dim, *args):
    return cx.ds.softmax("log_softmax", cx.value(x), dim)


@rule(aten.native_layer_norm.default,
      note="ds.layer_norm; mean and rstd from ds reductions when used")
def _layer_norm(cx, node, x, normalized_shape, w, b, eps):
    x = cx.value(x)
    nshape = tuple(normalized_shape)
    w = cx.value(w) if w is not None else cx.constant(torch.ones(nshape, dtype=x.dtype))
    b = cx.value(b) if b is not None else cx.constant(torch.zeros(nshape, dtype=x.dtype))
    y = cx.ds.layer_norm(x, w, b, eps)

    def stats():
        ds = cx.ds
        dims = list(range(x.rank - len(nshape), x.rank))
        mean = ds.reduce("reduce_mean", x, dims, keep_dims=True)
        centered = ds.binary("sub", x, mean)
        var = ds.reduce("reduce_mean", ds.binary("mul", centered, centered), dims,
                        keep_dims=True)
        rstd = ds.unary("rsqrt", ds.binary("add", var, cx.scalar(eps, x.dtype)))
        return mean, rstd
    return Lazy(y, stats)


class Lazy:
    """A multi-result node whose first result is built and whose others are
    built on first use (the statistics of a normalisation)."""

    def __init__(self, first: Value, rest: Callable[[], tuple[Any, ...]]) -> None:
        self.first, self._rest, self._built = first, rest, None

    def __getitem__(self, i: int) -> Any:
        if i == 0:
            return self.first
        if self._built is None:
            self._built = self._rest()
        return self._built[i - 1]


@rule(aten.native_batch_norm.default, aten._native_batch_norm_legit_functional.default,
      aten._native_batch_norm_legit.default,
      aten._native_batch_norm_legit_no_training.default,
      note="ds.batch_norm in training mode (running statistics become state "
           "updates); inference mode as elementwise ds ops")
def _batch_norm(cx, node, x, w, b, mean, var, *args):
    target = node.target
    if target == aten._native_batch_norm_legit_no_training.default:
        training, (momentum, eps) = False, args
    else:
        training, momentum, eps = args
    x = cx.value(x)
    c = (x.shape[1],)
    w = cx.value(w) if w is not None else cx.constant(torch.ones(c, dtype=x.dtype))
    b = cx.value(b) if b is not None else cx.constant(torch.zeros(c, dtype=x.dtype))
    if mean is None or var is None:
        raise cx.unsupported(node, "batch norm without running statistics "
                                   "(track_running_stats=False)")
    mean_v, var_v = cx.value(mean), cx.value(var)
    ds = cx.ds
    if not training:
        shape = (1, x.shape[1]) + (1,) * (x.rank - 2)
        scale = ds.binary("mul", ds.reshape(w, shape), ds.unary(
            "rsqrt", ds.binary("add", ds.reshape(var_v, shape), cx.scalar(eps, x.dtype))))
        y = ds.binary("add", ds.binary("mul", ds.binary("sub", x, ds.reshape(mean_v, shape)),
                                       scale), ds.reshape(b, shape))
        return (y, cx.constant(torch.zeros(0, dtype=x.dtype)),
                cx.constant(torch.zeros(0, dtype=x.dtype)))
    y, new_mean, new_var = ds.batch_norm(x, w, b, mean_v, var_v, momentum, eps)
    # native_batch_norm updates its running statistics in place, which the
    # trace does not show: they become the updates of their state.
    cx.record_inplace_update(mean, new_mean)
    cx.record_inplace_update(var, new_var)

    def stats():
        dims = [0] + list(range(2, x.rank))
        m = ds.reduce("reduce_mean", x, dims, keep_dims=True)
        centered = ds.binary("sub", x, m)
        v = ds.reduce("reduce_mean", ds.binary("mul", centered, centered), dims,
                      keep_dims=True)
        rstd = ds.unary("rsqrt", ds.binary("add", v, cx.scalar(eps, x.dtype)))
        return (ds.reshape(m, c), ds.reshape(rstd, c), new_mean, new_var)
    return Lazy(y, stats)


# ---------------------------------------------------------------------------
# Transformer and CNN pieces
# ---------------------------------------------------------------------------

@rule(aten.embedding.default, note="ds.embedding (padding_idx only for the forward)")
def _embedding(cx, node, table, idx, padding_idx=-1, scale_grad=False, sparse=False):
    if scale_grad or sparse:
        raise cx.unsupported(node, "embedding with scale_grad_by_freq or sparse")
    return cx.ds.embedding(cx.value(table), cx.value(idx))


@rule(aten._scaled_dot_product_flash_attention_for_cpu.default,
      aten._scaled_dot_product_flash_attention.default,
      aten._scaled_dot_product_efficient_attention.default,
      aten.scaled_dot_product_attention.default,
      note="ds.matmul, scale, ds.causal_mask / mask, ds.softmax, ds.matmul")
def _sdpa(cx, node, q, k, v, *args, **kwargs):
    target = node.target
    names = {
        aten._scaled_dot_product_flash_attention_for_cpu.default:
            ["dropout_p", "is_causal", "attn_mask", "scale"],
        aten._scaled_dot_product_flash_attention.default:
            ["dropout_p", "is_causal", "return_debug_mask", "scale"],
        aten._scaled_dot_product_efficient_attention.default:
            ["attn_mask", "compute_log_sumexp", "dropout_p", "is_causal", "scale"],
        aten.scaled_dot_product_attention.default:
            ["attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"],
    }[target]
    opts = dict(zip(names, args))
    opts.update(kwargs)
    if opts.get("dropout_p", 0.0):
        raise cx.unsupported(node, "attention dropout (dropout_p > 0)")
    ds = cx.ds
    q, k, v = cx.value(q), cx.value(k), cx.value(v)
    if q.rank != k.rank or q.rank < 3 or q.shape[:-2] != k.shape[:-2]:
        raise cx.unsupported(node, "attention with broadcast batch dimensions")
    scale = opts.get("scale")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = ds.binary("mul", ds.matmul(q, k, False, True), cx.scalar(scale, q.dtype))
    mask = opts.get("attn_mask")
    if mask is not None:
        if cx.dtype_of(mask) == torch.bool:
            s = ds.select(cx.value(mask), s, cx.scalar(float("-inf"), q.dtype))
        else:
            s = ds.binary("add", s, cx.value(mask, q.dtype))
    if opts.get("is_causal"):
        s = ds.causal_mask(s)
    p = ds.softmax("softmax", s, -1)
    out = ds.matmul(p, v)
    if target == aten.scaled_dot_product_attention.default:
        return out
    return Lazy(out, lambda: _no_extra(cx, node, "the attention's auxiliary results", 8))


class Opaque:
    """An auxiliary result (pooling indices, attention log-sum-exp) that
    only a backward rule consumes, without reading it; any other use is an
    error."""

    def __init__(self, node: torch.fx.Node, what: str) -> None:
        self.node, self.what = node, what


def _no_extra(cx, node, what, count=1):
    return tuple(Opaque(node, what) for _ in range(count))


@rule(aten.convolution.default, note="ds.conv2d (2-D, not transposed)")
def _convolution(cx, node, x, w, b, stride, padding, dilation, transposed,
                 output_padding, groups):
    x, w = cx.value(x), cx.value(w)
    if transposed or x.rank != 4:
        raise cx.unsupported(node, "transposed or non-2-D convolution")
    shape, _ = _result_meta(node)
    b = cx.value(b) if b is not None else None
    return cx.ds.conv2d(x, w, b, shape, _pair(stride), _pair(padding), _pair(dilation),
                        groups)


@rule(aten.max_pool2d_with_indices.default,
      note="ds.max_pool2d (no dilation, no ceil_mode; the indices only for "
           "the forward)")
def _max_pool(cx, node, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    if any(d != 1 for d in _pair(dilation)) or ceil_mode:
        raise cx.unsupported(node, "max pooling with dilation or ceil_mode")
    x = cx.value(x)
    kernel = _pair(kernel)
    stride = _pair(stride) if stride else kernel
    shape, _ = _result_meta(node, 0)
    y = cx.ds.pool2d("max_pool2d", x, shape, kernel, stride, _pair(padding))
    return Lazy(y, lambda: _no_extra(cx, node, "max-pooling indices"))


@rule(aten.avg_pool2d.default, note="ds.avg_pool2d (count_include_pad only)")
def _avg_pool(cx, node, x, kernel, stride=(), padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    if ceil_mode or not count_include_pad or divisor_override:
        raise cx.unsupported(node, "avg pooling with ceil_mode, "
                                   "count_include_pad=False or a divisor")
    x = cx.value(x)
    kernel = _pair(kernel)
    stride = _pair(stride) if stride else kernel
    shape, _ = _result_meta(node)
    return cx.ds.pool2d("avg_pool2d", x, shape, kernel, stride, _pair(padding))


# ---------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------

@rule(aten.nll_loss_forward.default,
      note="ds.cross_entropy after a log_softmax over classes; else a one-hot "
           "contraction (weight=None, reduction mean or sum)")
def _nll_loss(cx, node, logp, target, weight=None, reduction=1, ignore_index=-100):
    if weight is not None:
        raise cx.unsupported(node, "nll_loss/cross_entropy with class weights")
    if reduction not in (1, 2):
        raise cx.unsupported(node, "nll_loss/cross_entropy with reduction='none'")
    source = cx.producer_of(node.args[0])
    logp_v = cx.value(logp)
    target_v = cx.value(target)
    if logp_v.rank != 2:
        raise cx.unsupported(node, "nll_loss over a rank-%d input" % logp_v.rank)
    n, classes = logp_v.shape
    if reduction == 1 and source is not None and \
            source.target == aten._log_softmax.default and \
            source.args[1] % 2 == 1 and len(source.users) == 1:
        loss = cx.ds.loss("cross_entropy", cx.value(cx.env[source.args[0]]), target_v)
    else:
        ds = cx.ds
        iota = cx.constant(torch.arange(classes, dtype=target_v.dtype).reshape(1, classes))
        onehot = ds.compare("eq", ds.reshape(target_v, (n, 1)), iota)
        picked = ds.select(onehot, logp_v, cx.scalar(0.0, logp_v.dtype))
        loss = ds.unary("neg", ds.reduce("reduce_sum", picked, [0, 1]))
        if reduction == 1:
            loss = ds.binary("div", loss, cx.scalar(float(n), loss.dtype))
    return Lazy(loss, lambda: (cx.scalar(float(n), loss.dtype),))


@rule(aten.mse_loss.default, note="ds.mse_loss (reduction mean)")
def _mse(cx, node, a, b, reduction=1):
    if reduction != 1:
        raise cx.unsupported(node, "mse_loss with reduction other than 'mean'")
    return cx.ds.loss("mse_loss", cx.value(a), cx.value(b))


# ---------------------------------------------------------------------------
# Mutation (functionalised): the new value of a buffer
# ---------------------------------------------------------------------------

@rule(aten.copy_.default, note="the update of a buffer (state)")
def _copy_(cx, node, dst, src):
    cx.record_copy(node.args[0], src)
    return src


@rule(aten.native_dropout.default, aten.dropout.default, aten.bernoulli.p,
      aten.rand.default, aten.randn.default, aten.rand_like.default,
      aten.randn_like.default, note="not supported: random ops (use p=0 "
                                     "or model.eval() for dropout)")
def _random(cx, node, *args, **kwargs):
    if node.target in (aten.native_dropout.default, aten.dropout.default) and \
            len(args) > 1 and (args[1] == 0 or args[2] is False):
        x = args[0]
        return (x, None) if node.target == aten.native_dropout.default else x
    raise cx.unsupported(node, "random op %s (dropout in training mode); ds.dropout "
                               "needs an explicit RNG state the front end does not "
                               "create yet" % node.target)


def coverage_table() -> list[tuple[str, str]]:
    """(overload name, note) for every mapped aten overload, sorted."""
    return sorted((str(ov), NOTES[ov]) for ov in RULES)

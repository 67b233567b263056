"""Rules for the aten backward ops of PyTorch's joint graph
(`export_training_step(joint=True)`).

Each backward op becomes the ds backward kernel that computes the same
thing (ds.gelu_grad, ds.conv2d_grad_*, ds.max_pool2d_grad,
ds.embedding_grad) or a composition of ds ops written after the formula
the op documents. Importing this module registers them in RULES.
"""

import math

import torch

from .aten_rules import _pair, _result_meta, rule
from .mlir_text import Value, i64_array

aten = torch.ops.aten



@rule(aten.ones_like.default, aten.zeros_like.default, aten.full_like.default,
      note="a constant of the operand's shape (the backward seed)")
def _like(cx, node, x, *args, **kwargs):
    shape, dtype = _result_meta(node)
    if node.target == aten.full_like.default:
        value = args[0]
    else:
        value = 1.0 if node.target == aten.ones_like.default else 0.0
    return cx.constant(torch.full(shape, value, dtype=dtype))


@rule(aten.threshold_backward.default, note="ds.select(x > threshold, dy, 0)")
def _threshold_backward(cx, node, g, x, threshold):
    ds = cx.ds
    g, x = cx.value(g), cx.value(x)
    keep = ds.compare("gt", x, cx.scalar(threshold, x.dtype))
    return ds.select(keep, g, cx.scalar(0.0, g.dtype))


@rule(aten.gelu_backward.default, note="ds.gelu_grad")
def _gelu_backward(cx, node, g, x, approximate="none"):
    g, x = cx.value(g), cx.value(x)
    props = " approximate = tanh" if approximate == "tanh" else ""
    (r,) = cx.fb.op("ds.gelu_grad %s, %s%s" % (x.name, g.name, props), [x.shape],
                    [x.dtype], trailer=x.type)
    return r


@rule(aten.silu_backward.default, note="dy * s * (1 + x * (1 - s)), s = sigmoid(x)")
def _silu_backward(cx, node, g, x):
    ds = cx.ds
    g, x = cx.value(g), cx.value(x)
    s = ds.unary("sigmoid", x)
    one = cx.scalar(1.0, x.dtype)
    inner = ds.binary("add", one, ds.binary("mul", x, ds.binary("sub", one, s)))
    return ds.binary("mul", g, ds.binary("mul", s, inner))


@rule(aten.mse_loss_backward.default,
      note="dy * 2 (x - target), / N for the mean reduction")
def _mse_loss_backward(cx, node, g, x, target, reduction):
    ds = cx.ds
    g, x, target = cx.value(g), cx.value(x), cx.value(target)
    numel = 1
    for d in x.shape:
        numel *= d
    # torch's Reduction enum: 0 none, 1 mean, 2 sum.
    norm = 2.0 / numel if reduction == 1 else 2.0
    diff = ds.binary("mul", ds.binary("sub", x, target), cx.scalar(norm, x.dtype))
    return ds.binary("mul", diff, g)


@rule(aten._softmax_backward_data.default,
      note="y * (dy - sum(dy * y)) along the axis")
def _softmax_backward(cx, node, g, y, dim, dtype):
    ds = cx.ds
    g, y = cx.value(g), cx.value(y)
    s = ds.reduce("reduce_sum", ds.binary("mul", g, y), [dim], keep_dims=True)
    return ds.binary("mul", y, ds.binary("sub", g, s))


@rule(aten._log_softmax_backward_data.default,
      note="dy - exp(y) * sum(dy) along the axis")
def _log_softmax_backward(cx, node, g, y, dim, dtype):
    ds = cx.ds
    g, y = cx.value(g), cx.value(y)
    s = ds.reduce("reduce_sum", g, [dim], keep_dims=True)
    return ds.binary("sub", g, ds.binary("mul", ds.unary("exp", y), s))


@rule(aten.nll_loss_backward.default,
      note="-onehot(target) * dy / N (weight=None)")
def _nll_loss_backward(cx, node, g, logp, target, weight, reduction, ignore_index,
                       total_weight):
    if weight is not None:
        raise cx.unsupported(node, "nll_loss with class weights")
    ds = cx.ds
    g, logp, target = cx.value(g), cx.value(logp), cx.value(target)
    n, classes = logp.shape
    iota = cx.constant(torch.arange(classes, dtype=target.dtype).reshape(1, classes))
    onehot = ds.compare("eq", ds.reshape(target, (n, 1)), iota)
    scale = ds.unary("neg", g)
    if reduction == 1:
        scale = ds.binary("div", scale, cx.scalar(float(n), g.dtype))
    return ds.select(onehot, scale, cx.scalar(0.0, g.dtype))


def _norm_backward(cx, g, x, mean, rstd, w, dims, mask):
    """dx, dw, db of y = (x - mean) * rstd * w + b, reduced over `dims`
    (mean, rstd broadcast over them)."""
    ds = cx.ds
    xhat = ds.binary("mul", ds.binary("sub", x, mean), rstd)
    gw = ds.binary("mul", g, w) if w is not None else g
    mg = ds.reduce("reduce_mean", gw, dims, keep_dims=True)
    mgx = ds.reduce("reduce_mean", ds.binary("mul", gw, xhat), dims, keep_dims=True)
    dx = ds.binary("mul", rstd, ds.binary("sub", ds.binary("sub", gw, mg),
                                          ds.binary("mul", xhat, mgx)))
    return dx, xhat


@rule(aten.native_layer_norm_backward.default,
      note="the layer-norm gradient formula of ds.layer_norm")
def _layer_norm_backward(cx, node, g, x, normalized_shape, mean, rstd, w, b, mask):
    ds = cx.ds
    g, x, mean, rstd = cx.value(g), cx.value(x), cx.value(mean), cx.value(rstd)
    k = len(normalized_shape)
    dims = list(range(x.rank - k, x.rank))
    lead = list(range(x.rank - k))
    wv = cx.value(w) if w is not None else None
    wb = ds.reshape(wv, (1,) * (x.rank - k) + wv.shape) if wv is not None else None
    dx, xhat = _norm_backward(cx, g, x, mean, rstd, wb, dims, mask)
    dw = ds.reduce("reduce_sum", ds.binary("mul", g, xhat), lead) if w is not None else None
    db = ds.reduce("reduce_sum", g, lead) if b is not None else None
    return (dx, dw, db)


@rule(aten.native_batch_norm_backward.default,
      note="the batch-norm gradient formula of ds.batch_norm (training mode)")
def _batch_norm_backward(cx, node, g, x, w, running_mean, running_var, save_mean,
                         save_invstd, train, eps, mask):
    if not train:
        raise cx.unsupported(node, "batch-norm backward in inference mode")
    ds = cx.ds
    g, x = cx.value(g), cx.value(x)
    shape = (1, x.shape[1]) + (1,) * (x.rank - 2)
    mean = ds.reshape(cx.value(save_mean), shape)
    rstd = ds.reshape(cx.value(save_invstd), shape)
    dims = [0] + list(range(2, x.rank))
    wv = ds.reshape(cx.value(w), shape) if w is not None else None
    dx, xhat = _norm_backward(cx, g, x, mean, rstd, wv, dims, mask)
    dw = ds.reduce("reduce_sum", ds.binary("mul", g, xhat), dims)
    db = ds.reduce("reduce_sum", g, dims)
    return (dx, dw, db)


@rule(aten.convolution_backward.default,
      note="ds.conv2d_grad_input, ds.conv2d_grad_weight, ds.reduce_sum")
def _convolution_backward(cx, node, g, x, w, bias_sizes, stride, padding, dilation,
                          transposed, output_padding, groups, mask):
    if transposed:
        raise cx.unsupported(node, "transposed convolution")
    g, x, w = cx.value(g), cx.value(x), cx.value(w)
    props = " strides = %s padding = %s dilation = %s groups = %d" % (
        i64_array(_pair(stride)), i64_array(_pair(padding)), i64_array(_pair(dilation)),
        groups)
    outs = []
    if mask[0]:
        (dx,) = cx.fb.op("ds.conv2d_grad_input %s, %s%s" % (g.name, w.name, props),
                         [x.shape], [x.dtype],
                         trailer="%s, %s -> %s" % (g.type, w.type, x.type))
        outs.append(dx)
    else:
        outs.append(None)
    if mask[1]:
        (dw,) = cx.fb.op("ds.conv2d_grad_weight %s, %s%s" % (g.name, x.name, props),
                         [w.shape], [w.dtype],
                         trailer="%s, %s -> %s" % (g.type, x.type, w.type))
        outs.append(dw)
    else:
        outs.append(None)
    outs.append(cx.ds.reduce("reduce_sum", g, [0, 2, 3]) if mask[2] else None)
    return tuple(outs)


@rule(aten.max_pool2d_with_indices_backward.default, note="ds.max_pool2d_grad")
def _max_pool_backward(cx, node, g, x, kernel, stride, padding, dilation, ceil_mode,
                       indices):
    if any(d != 1 for d in _pair(dilation)) or ceil_mode:
        raise cx.unsupported(node, "max pooling with dilation or ceil_mode")
    g, x = cx.value(g), cx.value(x)
    kernel = _pair(kernel)
    stride = _pair(stride) if stride else kernel
    (dx,) = cx.fb.op("ds.max_pool2d_grad %s, %s kernel = %s strides = %s padding = %s" % (
        x.name, g.name, i64_array(kernel), i64_array(stride), i64_array(_pair(padding))),
        [x.shape], [x.dtype], trailer="%s, %s" % (x.type, g.type))
    return dx


@rule(aten.avg_pool2d_backward.default, note="ds.avg_pool2d_grad")
def _avg_pool_backward(cx, node, g, x, kernel, stride, padding, ceil_mode,
                       count_include_pad, divisor_override):
    if ceil_mode or not count_include_pad or divisor_override:
        raise cx.unsupported(node, "avg pooling with ceil_mode, count_include_pad=False "
                                   "or a divisor")
    g, x = cx.value(g), cx.value(x)
    kernel = _pair(kernel)
    stride = _pair(stride) if stride else kernel
    (dx,) = cx.fb.op("ds.avg_pool2d_grad %s, %s kernel = %s strides = %s padding = %s" % (
        x.name, g.name, i64_array(kernel), i64_array(stride), i64_array(_pair(padding))),
        [x.shape], [x.dtype], trailer="%s, %s" % (x.type, g.type))
    return dx


@rule(aten.embedding_dense_backward.default, note="ds.embedding_grad")
def _embedding_backward(cx, node, g, indices, num_weights, padding_idx, scale_grad):
    if scale_grad:
        raise cx.unsupported(node, "embedding with scale_grad_by_freq")
    if padding_idx is not None and padding_idx >= 0:
        raise cx.unsupported(node, "embedding backward with padding_idx")
    g, indices = cx.value(g), cx.value(indices)
    shape = (num_weights, g.shape[-1])
    (r,) = cx.fb.op("ds.embedding_grad %s, %s" % (g.name, indices.name), [shape],
                    [g.dtype], trailer="%s, %s -> %s" % (
                        g.type, indices.type, Value("", shape, g.dtype).type))
    return r


@rule(aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
      note="recomputes the probabilities; dq, dk, dv by the softmax rule")
def _sdpa_backward(cx, node, g, q, k, v, out, lse, *args, **kwargs):
    opts = dict(zip(["dropout_p", "is_causal", "attn_mask", "scale"], args))
    opts.update(kwargs)
    if opts.get("dropout_p", 0.0):
        raise cx.unsupported(node, "attention dropout")
    ds = cx.ds
    g, q, k, v = cx.value(g), cx.value(q), cx.value(k), cx.value(v)
    scale = opts.get("scale")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    s = ds.binary("mul", ds.matmul(q, k, False, True), cx.scalar(scale, q.dtype))
    mask = opts.get("attn_mask")
    if mask is not None:
        s = ds.binary("add", s, cx.value(mask, q.dtype))
    if opts.get("is_causal"):
        s = ds.causal_mask(s)
    p = ds.softmax("softmax", s, -1)
    dv = ds.matmul(p, g, True, False)
    dp = ds.matmul(g, v, False, True)
    dsm = ds.binary("mul", p, ds.binary("sub", dp, ds.reduce(
        "reduce_sum", ds.binary("mul", dp, p), [-1], keep_dims=True)))
    dsm = ds.binary("mul", dsm, cx.scalar(scale, q.dtype))
    dq = ds.matmul(dsm, k)
    dk = ds.matmul(dsm, q, True, False)
    return (dq, dk, dv)


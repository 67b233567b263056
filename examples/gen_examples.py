#!/usr/bin/env python3
"""Writes the example forward graphs (MLP, GPT-style block, CNN) in ds.

The checked-in examples/*.mlir are this script's output at its default
sizes; benchmarks and demos call it with other sizes, e.g.

    gen_examples.py gpt --d-model 256 --heads 4 --seq 128 --batch 16 -o gpt.mlir

Each graph is a forward pass and its loss, marked as a training step: the
parameters are `ds.param` arguments initialised as PyTorch initialises the
corresponding modules, the batch tensors are `ds.input` arguments, and
state (batch-norm running statistics, the dropout RNG) is `ds.state` with
an update result. `ds-autodiff` and `ds-insert-optimizer` turn it into a
complete training step.
"""

import argparse
import math
import sys


def tensor(shape, dtype="f32"):
    dims = "x".join(str(d) for d in shape)
    return f"tensor<{dims}x{dtype}>" if shape else f"tensor<{dtype}>"


class Graph:
    """Accumulates the arguments, body and results of one step function."""

    def __init__(self, name, dtype="f32"):
        self.name = name
        self.dtype = dtype
        self.args = []  # (ssa, type, attrs)
        self.body = []
        self.results = []  # (ssa, type, attrs)
        self.counter = 0

    def t(self, shape, dtype=None):
        return tensor(shape, dtype or self.dtype)

    def fresh(self, hint):
        self.counter += 1
        return f"%{hint}{self.counter}"

    def param(self, name, shape, init):
        ssa = "%" + name.replace(".", "_")
        self.args.append((ssa, self.t(shape),
                          f'ds.param = "{name}", ds.init = {init}'))
        return ssa

    def linear_param(self, prefix, out_f, in_f, bias=True):
        """nn.Linear: weight [out, in] and bias [out], both U(-1/sqrt(in), .)."""
        bound = 1.0 / math.sqrt(in_f)
        w = self.param(f"{prefix}.weight", [out_f, in_f],
                       f"#ds.init<uniform, {bound:.8g}>")
        b = self.param(f"{prefix}.bias", [out_f],
                       f"#ds.init<uniform, {bound:.8g}>") if bias else None
        return w, b

    def input(self, name, shape, dtype=None):
        ssa = "%" + name
        self.args.append((ssa, self.t(shape, dtype), f'ds.input = "{name}"'))
        return ssa

    def state(self, kind, shape, init, dtype=None):
        ssa = "%" + kind.replace(".", "_")
        self.args.append((ssa, self.t(shape, dtype),
                          f'ds.state = #ds.state<"{kind}">, ds.init = {init}'))
        return ssa, len(self.args) - 1

    def op(self, text, hint="v"):
        ssa = self.fresh(hint)
        self.body.append(f"  {ssa} = {text}")
        return ssa

    def ops(self, text, n, hint="v"):
        names = [self.fresh(hint) for _ in range(n)]
        self.body.append(f"  {', '.join(names)} = {text}")
        return names

    def comment(self, text):
        self.body.append(f"  // {text}")

    def result(self, ssa, type_, attrs):
        self.results.append((ssa, type_, attrs))

    # Composite pieces -------------------------------------------------------

    def linear(self, x, x_shape, w, b, out_f):
        """x @ w^T + b for x of any rank >= 2 (PyTorch nn.Linear)."""
        out_shape = x_shape[:-1] + [out_f]
        w_shape = [out_f, x_shape[-1]]
        y = self.op(f"ds.matmul {x}, {w} transpose_rhs : {self.t(x_shape)}, "
                    f"{self.t(w_shape)} -> {self.t(out_shape)}")
        if b is None:
            return y, out_shape
        b_shape = [1] * (len(out_shape) - 1) + [out_f]
        br = self.op(f"ds.reshape {b} : {self.t([out_f])} -> {self.t(b_shape)}")
        y = self.op(f"ds.add {y}, {br} : {self.t(out_shape)}, {self.t(b_shape)}"
                    f" -> {self.t(out_shape)}")
        return y, out_shape

    def emit(self, header):
        lines = [f"// {line}" if line else "//" for line in header]
        lines.append(f"func.func @{self.name}(")
        lines.append(",\n".join(f"    {s}: {t} {{{a}}}" for s, t, a in self.args))
        res = ", ".join(f"{t} {{{a}}}" for _, t, a in self.results)
        lines[-1] += f")\n    -> ({res})\n    attributes {{ds.train_step}} {{"
        lines.extend(self.body)
        vals = ", ".join(s for s, _, _ in self.results)
        types = ", ".join(t for _, t, _ in self.results)
        lines.append(f"  return {vals} : {types}")
        lines.append("}")
        return "\n".join(lines) + "\n"


def mlp(a):
    g = Graph("mlp_step", a.dtype)
    n, d, h, c = a.batch, a.features, a.hidden, a.classes
    w1, b1 = g.linear_param("fc1", h, d)
    w2, b2 = g.linear_param("fc2", c, h)
    rng, rng_idx = g.state("rng", [2], "#ds.init<zeros>", "i64")
    x = g.input("x", [n, d])
    y = g.input("labels", [n], "i64")
    g.comment("fc1 -> relu -> dropout -> fc2 -> cross-entropy")
    hdn, hs = g.linear(x, [n, d], w1, b1, h)
    hdn = g.op(f"ds.relu {hdn} : {g.t(hs)}")
    hdn, rng1 = g.ops(f"ds.dropout {hdn}, {rng} p = {a.dropout} : {g.t(hs)}, "
                      f"{tensor([2], 'i64')}", 2)
    logits, ls = g.linear(hdn, hs, w2, b2, c)
    loss = g.op(f"ds.cross_entropy {logits}, {y} : {g.t(ls)}, "
                f"{tensor([n], 'i64')} -> {g.t([])}", "loss")
    g.result(loss, g.t([]), "ds.loss")
    g.result(rng1, tensor([2], "i64"), f"ds.update = {rng_idx} : i64")
    return g.emit([
        f"A two-layer MLP classifier: {d} features, {h} hidden units (ReLU,",
        f"dropout p = {a.dropout}), {c} classes, batch {n}.",
        "Generated by examples/gen_examples.py; regenerate, do not edit."])


def gpt(a):
    g = Graph("gpt_step", a.dtype)
    b, t, d, nh, v = a.batch, a.seq, a.d_model, a.heads, a.vocab
    dh, f = d // nh, a.ffn_mult * a.d_model
    if d % nh:
        sys.exit("gen_examples.py: --d-model must be divisible by --heads")
    wte = g.param("wte.weight", [v, d], "#ds.init<normal, 0.02>")
    wpe = g.param("wpe.weight", [t, d], "#ds.init<normal, 0.02>")
    # One block keeps the historical names (ln1, attn.*, mlp.*); with
    # --layers N the blocks are layers.<i>.* as in Hugging Face's GPT-2.
    n_layers = a.layers or 1
    prefixes = [f"layers.{i}." if a.layers else "" for i in range(n_layers)]

    def ln_param(name):
        return (g.param(f"{name}.weight", [d], "#ds.init<ones>"),
                g.param(f"{name}.bias", [d], "#ds.init<zeros>"))

    blocks, ln = [], {}
    for pre in prefixes:
        norms = {"ln1": ln_param(f"{pre}ln1"), "ln2": ln_param(f"{pre}ln2")}
        if not a.layers:  # the historical argument order
            ln["ln_f"] = ln_param("ln_f")
        blocks.append({
            **norms,
            "proj": {name: g.linear_param(f"{pre}attn.{name}", d, d)
                     for name in ("q_proj", "k_proj", "v_proj", "out_proj")},
            "fc1": g.linear_param(f"{pre}mlp.fc1", f, d),
            "fc2": g.linear_param(f"{pre}mlp.fc2", d, f)})
    if a.layers:
        ln["ln_f"] = ln_param("ln_f")
    head_w, _ = g.linear_param("lm_head", v, d, bias=False)
    tok = g.input("tokens", [b, t], "i64")
    tgt = g.input("targets", [b, t], "i64")

    x_s, h_s = [b, t, d], [b, nh, t, dh]
    g.comment("token + position embedding")
    x = g.op(f"ds.embedding {wte}, {tok} : {g.t([v, d])}, "
             f"{tensor([b, t], 'i64')} -> {g.t(x_s)}", "x")
    pos = g.op(f"ds.reshape {wpe} : {g.t([t, d])} -> {g.t([1, t, d])}")
    x = g.op(f"ds.add {x}, {pos} : {g.t(x_s)}, {g.t([1, t, d])} -> {g.t(x_s)}", "x")

    def layer_norm(x, params):
        w, bias = params
        return g.op(f"ds.layer_norm {x}, {w}, {bias} : {g.t(x_s)}, {g.t([d])}, "
                    f"{g.t([d])}", "ln")

    def heads(y):
        y = g.op(f"ds.reshape {y} : {g.t(x_s)} -> {g.t([b, t, nh, dh])}")
        return g.op(f"ds.transpose {y} [0, 2, 1, 3] : {g.t([b, t, nh, dh])} -> "
                    f"{g.t(h_s)}")

    for blk in blocks:
        g.comment("causal multi-head self-attention")
        h = layer_norm(x, blk["ln1"])
        q, _ = g.linear(h, x_s, *blk["proj"]["q_proj"], d)
        k, _ = g.linear(h, x_s, *blk["proj"]["k_proj"], d)
        vv, _ = g.linear(h, x_s, *blk["proj"]["v_proj"], d)
        q, k, vv = heads(q), heads(k), heads(vv)
        s_s = [b, nh, t, t]
        s = g.op(f"ds.matmul {q}, {k} transpose_rhs : {g.t(h_s)}, {g.t(h_s)} -> "
                 f"{g.t(s_s)}", "scores")
        scale = g.op(f"arith.constant dense<{1.0 / math.sqrt(dh):.8e}> : {g.t([])}")
        s = g.op(f"ds.mul {s}, {scale} : {g.t(s_s)}, {g.t([])} -> {g.t(s_s)}", "scores")
        s = g.op(f"ds.causal_mask {s} : {g.t(s_s)}", "scores")
        p = g.op(f"ds.softmax {s} axis = 3 : {g.t(s_s)}", "probs")
        o = g.op(f"ds.matmul {p}, {vv} : {g.t(s_s)}, {g.t(h_s)} -> {g.t(h_s)}")
        o = g.op(f"ds.transpose {o} [0, 2, 1, 3] : {g.t(h_s)} -> {g.t([b, t, nh, dh])}")
        o = g.op(f"ds.reshape {o} : {g.t([b, t, nh, dh])} -> {g.t(x_s)}")
        o, _ = g.linear(o, x_s, *blk["proj"]["out_proj"], d)
        x = g.op(f"ds.add {x}, {o} : {g.t(x_s)}, {g.t(x_s)} -> {g.t(x_s)}", "x")

        g.comment("GELU MLP")
        h = layer_norm(x, blk["ln2"])
        u, u_s = g.linear(h, x_s, *blk["fc1"], f)
        u = g.op(f"ds.gelu {u} approximate = tanh : {g.t(u_s)}")
        u, _ = g.linear(u, u_s, *blk["fc2"], d)
        x = g.op(f"ds.add {x}, {u} : {g.t(x_s)}, {g.t(x_s)} -> {g.t(x_s)}", "x")

    g.comment("final norm, language-model head and next-token cross-entropy")
    h = layer_norm(x, ln["ln_f"])
    logits, l_s = g.linear(h, x_s, head_w, None, v)
    flat = g.op(f"ds.reshape {logits} : {g.t(l_s)} -> {g.t([b * t, v])}")
    labels = g.op(f"ds.reshape {tgt} : {tensor([b, t], 'i64')} -> "
                  f"{tensor([b * t], 'i64')}")
    loss = g.op(f"ds.cross_entropy {flat}, {labels} : {g.t([b * t, v])}, "
                f"{tensor([b * t], 'i64')} -> {g.t([])}", "loss")
    g.result(loss, g.t([]), "ds.loss")
    return g.emit([
        (f"A GPT-style decoder of {n_layers} blocks: " if a.layers else
         "A GPT-style decoder block: ") + f"vocabulary {v}, context {t}, d_model {d},",
        f"{nh} heads, GELU MLP of width {f}, pre-LayerNorm, batch {b}.",
        "Generated by examples/gen_examples.py; regenerate, do not edit."])


def cnn(a):
    g = Graph("cnn_step", a.dtype)
    n, c0, hw, k = a.batch, a.channels, a.image, a.classes
    c1, c2 = a.width, 2 * a.width

    def conv_param(name, cout, cin):
        bound = 1.0 / math.sqrt(cin * 9)
        return (g.param(f"{name}.weight", [cout, cin, 3, 3],
                        f"#ds.init<uniform, {bound:.8g}>"),
                g.param(f"{name}.bias", [cout], f"#ds.init<uniform, {bound:.8g}>"))

    conv1, conv2 = conv_param("conv1", c1, c0), conv_param("conv2", c2, c1)
    bn = {}
    for name, ch in (("bn1", c1), ("bn2", c2)):
        bn[name] = (g.param(f"{name}.weight", [ch], "#ds.init<ones>"),
                    g.param(f"{name}.bias", [ch], "#ds.init<zeros>"))
    flat = c2 * (hw // 4) * (hw // 4)
    fc = g.linear_param("fc", k, flat)
    stats = {}
    for name, ch in (("bn1", c1), ("bn2", c2)):
        stats[name] = (g.state(f"{name}.running_mean", [ch], "#ds.init<zeros>"),
                       g.state(f"{name}.running_var", [ch], "#ds.init<ones>"))
    x = g.input("images", [n, c0, hw, hw])
    y = g.input("labels", [n], "i64")

    def block(x, cin, cout, size, conv, name, pool):
        in_s, out_s = [n, cin, size, size], [n, cout, size, size]
        w, bias = conv
        y = g.op(f"ds.conv2d {x}, {w}, {bias} padding = [1, 1] : {g.t(in_s)}, "
                 f"{g.t([cout, cin, 3, 3])}, {g.t([cout])} -> {g.t(out_s)}", "conv")
        (rm, rm_i), (rv, rv_i) = stats[name]
        y, m1, v1 = g.ops(f"ds.batch_norm {y}, {bn[name][0]}, {bn[name][1]}, "
                          f"{rm}, {rv} : {g.t(out_s)}, {g.t([cout])}", 3, "bn")
        g.result(m1, g.t([cout]), f"ds.update = {rm_i} : i64")
        g.result(v1, g.t([cout]), f"ds.update = {rv_i} : i64")
        y = g.op(f"ds.relu {y} : {g.t(out_s)}")
        half = [n, cout, size // 2, size // 2]
        return g.op(f"ds.{pool} {y} kernel = [2, 2] : {g.t(out_s)} -> "
                    f"{g.t(half)}", "pool")

    g.comment("conv -> batch norm -> relu -> pool, twice; then a linear head")
    h = block(x, c0, c1, hw, conv1, "bn1", "max_pool2d")
    h = block(h, c1, c2, hw // 2, conv2, "bn2", "avg_pool2d")
    h = g.op(f"ds.reshape {h} : {g.t([n, c2, hw // 4, hw // 4])} -> "
             f"{g.t([n, flat])}")
    logits, ls = g.linear(h, [n, flat], *fc, k)
    loss = g.op(f"ds.cross_entropy {logits}, {y} : {g.t(ls)}, "
                f"{tensor([n], 'i64')} -> {g.t([])}", "loss")
    g.results.insert(0, (loss, g.t([]), "ds.loss"))
    return g.emit([
        f"A small CNN classifier on {c0}x{hw}x{hw} images: two conv3x3 + batch norm",
        f"+ ReLU + 2x2 pooling blocks ({c1} and {c2} channels), a linear head",
        f"over {k} classes, batch {n}. Batch-norm running statistics are state.",
        "Generated by examples/gen_examples.py; regenerate, do not edit."])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=["mlp", "gpt", "cnn"])
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--dtype", default="f32", help="element type (f32, f64)")
    ap.add_argument("--batch", type=int)
    # MLP
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--dropout", type=float, default=0.1)
    # GPT
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn-mult", type=int, default=4)
    ap.add_argument("--layers", type=int,
                    help="decoder blocks, named layers.<i>.* (default: one "
                    "block with unprefixed names)")
    # CNN
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--image", type=int, default=8)
    ap.add_argument("--width", type=int, default=8)
    a = ap.parse_args()
    if a.batch is None:
        a.batch = {"mlp": 32, "gpt": 8, "cnn": 16}[a.model]
    text = {"mlp": mlp, "gpt": gpt, "cnn": cnn}[a.model](a)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks every op's vector-Jacobian product against central finite
differences, in f64, by running compiled code.

For each case a forward + loss step is written in ds (the op under test on
odd, non-square shapes, with broadcasting and fan-out where they apply), its
loss being sum(out * W) for a fixed random W so that every output element
gets a distinct cotangent. `ds-opt --ds-autodiff` adds the backward;
`ds-run --as-is` runs it once to get the gradients g, and runs the forward
at p + h v and p - h v for a random direction v. The check is

    | g . v - (L(p + h v) - L(p - h v)) / 2h |  <=  rtol * scale

done for two directions per case. Usage: check_gradients.py GROUP (see
CASES) with DS_OPT and DS_RUN in the environment.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

DS_OPT = os.environ.get("DS_OPT", "ds-opt")
DS_RUN = os.environ.get("DS_RUN", "ds-run")
H = 1e-6
RTOL = 2e-6


def t(shape, dtype="f64"):
    return "tensor<%s>" % "x".join([str(d) for d in shape] + [dtype]) \
        if shape else "tensor<%s>" % dtype


class Case:
    """params: name -> (shape, kind); inputs: name -> (shape, dtype, values);
    body: ds text using %name, ending in a value %out of shape out_shape."""

    def __init__(self, name, params, body, out_shape, inputs=None,
                 positive=(), state=None, extra_results=None):
        self.name = name
        self.params = params
        self.inputs = inputs or {}
        self.body = body
        self.out_shape = out_shape
        self.positive = set(positive)
        self.state = state or {}  # name -> (shape, dtype, init, kind)
        self.extra_results = extra_results or []  # (value, type, attr)

    def module(self):
        args = []
        for n, shape in self.params.items():
            args.append('%%%s: %s {ds.param = "%s", ds.init = #ds.init<file>}'
                        % (n, t(shape), n))
        for n, (shape, dtype, init, kind) in self.state.items():
            args.append('%%%s: %s {ds.state = #ds.state<"%s">, ds.init = %s}'
                        % (n, t(shape, dtype), kind, init))
        # Every fed tensor shares the batch size 1 of `wout`: inputs get a
        # leading unit dimension that the body reshapes away.
        prologue = []
        for n, (shape, dtype, _) in self.inputs.items():
            args.append('%%%s_fed: %s {ds.input = "%s"}'
                        % (n, t([1] + shape, dtype), n))
            prologue.append("  %%%s = ds.reshape %%%s_fed : %s -> %s"
                            % (n, n, t([1] + shape, dtype), t(shape, dtype)))
        args.append('%%wout: %s {ds.input = "wout"}' % t([1] + self.out_shape))
        results = ["tensor<f64> {ds.loss}"] + [r[1] for r in self.extra_results]
        o = t(self.out_shape)
        w = t([1] + self.out_shape)
        r = len(self.out_shape)
        flat = t([1] + self.out_shape)
        lines = [
            "func.func @step(%s)" % ", ".join(args),
            "    -> (%s) attributes {ds.train_step} {" % ", ".join(results),
        ] + prologue + [
            self.body,
            "  %%o1 = ds.reshape %%out : %s -> %s" % (o, flat),
            "  %%prod = ds.mul %%o1, %%wout : %s, %s -> %s" % (flat, w, flat),
            "  %%loss = ds.reduce_sum %%prod [%s] : %s -> tensor<f64>"
            % (", ".join(str(i) for i in range(r + 1)), flat),
            "  return %s : %s" % (
                ", ".join(["%loss"] + [e[0] for e in self.extra_results]),
                ", ".join(["tensor<f64>"] + [e[1].split(" {")[0]
                                             for e in self.extra_results])),
            "}",
        ]
        return "\n".join(lines) + "\n"


def unary(op, positive=False, attrs=""):
    return Case(op + attrs.replace(" ", "_").replace("=", ""), {"p": [3, 5]},
                "  %%out = ds.%s %%p %s: %s" % (op, attrs + " " if attrs else "",
                                               t([3, 5])),
                [3, 5], positive=["p"] if positive else [])


def binary(op, ls, rs):
    out = [max(a, b) for a, b in zip(ls, rs)] if ls and rs else (ls or rs)
    return Case("%s_%s_%s" % (op, "x".join(map(str, ls)) or "s",
                              "x".join(map(str, rs)) or "s"),
                {"a": ls, "b": rs},
                "  %%out = ds.%s %%a, %%b : %s, %s -> %s"
                % (op, t(ls), t(rs), t(out)), out,
                positive=["b"] if op == "div" else [])


def matmul(ls, rs, out, flags=""):
    return Case("matmul_%s_%s%s" % ("x".join(map(str, ls)), "x".join(map(str, rs)),
                                    flags.replace(" ", "_")),
                {"a": ls, "b": rs},
                "  %%out = ds.matmul %%a, %%b %s: %s, %s -> %s"
                % (flags + " " if flags else "", t(ls), t(rs), t(out)), out)


def generic(name, params, ins, body, out_shape, positive=(), outs=None,
            post=""):
    """An elementwise linalg.generic that ds-autodiff differentiates from
    its scalar body. ins: (value, shape, affine map) per input; body: the
    scalar ops on %a0, %a1, ..., ending in `linalg.yield`; outs: (shape,
    affine map) per result (default: one result of out_shape, identity);
    post: ds text turning the results %g#k into %out."""
    rank = len(out_shape)
    dims = ", ".join("d%d" % i for i in range(rank))
    outs = outs or [(out_shape, "(%s)" % dims)]
    maps = ", ".join("affine_map<(%s) -> %s>" % (dims, m)
                     for m in [i[2] for i in ins] + [o[1] for o in outs])
    args = ", ".join("%%a%d: f64" % k for k in range(len(ins))) + ", " + \
        ", ".join("%%o%d: f64" % k for k in range(len(outs)))
    text = ["  %%e%d = tensor.empty() : %s" % (k, t(o[0]))
            for k, o in enumerate(outs)]
    result = "%out" if not post else "%%g:%d" % len(outs)
    text.append(
        "  %s = linalg.generic {indexing_maps = [%s], iterator_types = [%s]}"
        " ins(%s : %s) outs(%s : %s) {\n  ^bb0(%s):\n%s\n  } -> (%s)" % (
            result, maps, ", ".join(['"parallel"'] * rank),
            ", ".join(i[0] for i in ins), ", ".join(t(i[1]) for i in ins),
            ", ".join("%%e%d" % k for k in range(len(outs))),
            ", ".join(t(o[0]) for o in outs), args, body,
            ", ".join(t(o[0]) for o in outs)))
    if post:
        text.append(post)
    return Case(name, params, "\n".join(text), out_shape, positive=positive)


CASES = {
    # Elementwise generics the import keeps (bodies without a ds op) and
    # ds-autodiff differentiates from their scalar body: every derivative
    # rule of ScalarDerivatives.cpp, broadcasting by a constant-0 map, by a
    # projection and from rank 0, several results and a permuted output.
    "generic": [
        generic("trig", {"p": [3, 5], "q": [3, 5]},
                [("%p", [3, 5], "(d0, d1)"), ("%q", [3, 5], "(d0, d1)")],
                "    %s = math.sin %a0 : f64\n    %c = math.cos %a1 : f64\n"
                "    %k = arith.constant 0.3 : f64\n    %m = arith.mulf %a0, %k : f64\n"
                "    %n = math.tan %m : f64\n    %sc = arith.mulf %s, %c : f64\n"
                "    %r = arith.addf %sc, %n : f64\n    linalg.yield %r : f64",
                [3, 5]),
        generic("erf_broadcast", {"p": [3, 5], "q": [1, 5], "r": [3]},
                [("%p", [3, 5], "(d0, d1)"), ("%q", [1, 5], "(0, d1)"),
                 ("%r", [3], "(d0)")],
                "    %m = arith.mulf %a0, %a1 : f64\n    %e = math.erf %m : f64\n"
                "    %c = math.erfc %a2 : f64\n    %d = arith.divf %e, %c : f64\n"
                "    linalg.yield %d : f64", [3, 5]),
        generic("hyperbolic_inverse", {"p": [3, 5], "q": [3, 5]},
                [("%p", [3, 5], "(d0, d1)"), ("%q", [3, 5], "(d0, d1)")],
                "    %k = arith.constant 0.9 : f64\n    %th = math.tanh %a0 : f64\n"
                "    %u = arith.mulf %th, %k : f64\n    %as = math.asin %u : f64\n"
                "    %ac = math.acos %u : f64\n    %sh = math.sinh %a1 : f64\n"
                "    %ch = math.cosh %a0 : f64\n    %at = math.atan %a1 : f64\n"
                "    %a2 = math.atan2 %a0, %a1 : f64\n    %s1 = arith.addf %as, %ac : f64\n"
                "    %s2 = arith.mulf %sh, %ch : f64\n    %s3 = arith.subf %at, %a2 : f64\n"
                "    %s4 = arith.mulf %s1, %s2 : f64\n    %s5 = arith.addf %s4, %s3 : f64\n"
                "    linalg.yield %s5 : f64", [3, 5]),
        generic("pow", {"p": [3, 5], "q": [3, 5]},
                [("%p", [3, 5], "(d0, d1)"), ("%q", [3, 5], "(d0, d1)")],
                "    %c3 = arith.constant 3 : i32\n    %c0 = arith.constant 0 : i32\n"
                "    %w = math.powf %a0, %a1 : f64\n    %i = math.fpowi %a1, %c3 : f64, i32\n"
                "    %z = math.fpowi %a1, %c0 : f64, i32\n    %f = math.fma %w, %i, %z : f64\n"
                "    linalg.yield %f : f64", [3, 5], positive=["p"]),
        generic("exp_log", {"p": [3, 5], "q": [3, 5]},
                [("%p", [3, 5], "(d0, d1)"), ("%q", [3, 5], "(d0, d1)")],
                "    %e2 = math.exp2 %a1 : f64\n    %em = math.expm1 %a1 : f64\n"
                "    %l2 = math.log2 %a0 : f64\n    %l10 = math.log10 %a0 : f64\n"
                "    %l1 = math.log1p %a0 : f64\n    %cb = math.cbrt %a0 : f64\n"
                "    %sq = math.sqrt %a0 : f64\n    %rs = math.rsqrt %a0 : f64\n"
                "    %ex = math.exp %a1 : f64\n    %lg = math.log %a0 : f64\n"
                "    %ab = math.absf %a1 : f64\n    %ng = arith.negf %ab : f64\n"
                "    %s1 = arith.addf %e2, %em : f64\n    %s2 = arith.mulf %l2, %l10 : f64\n"
                "    %s3 = arith.subf %l1, %cb : f64\n    %s4 = arith.divf %sq, %rs : f64\n"
                "    %s5 = arith.mulf %ex, %lg : f64\n    %t1 = arith.addf %s1, %s2 : f64\n"
                "    %t2 = arith.addf %s3, %s4 : f64\n    %t3 = arith.addf %s5, %ng : f64\n"
                "    %t4 = arith.addf %t1, %t2 : f64\n    %t5 = arith.addf %t4, %t3 : f64\n"
                "    linalg.yield %t5 : f64", [3, 5], positive=["p"]),
        generic("piecewise", {"p": [3, 5], "q": [3, 5]},
                [("%p", [3, 5], "(d0, d1)"), ("%q", [3, 5], "(d0, d1)")],
                "    %fl = math.floor %a0 : f64\n    %ce = math.ceil %a1 : f64\n"
                "    %ro = math.round %a0 : f64\n    %mx = arith.maximumf %a0, %a1 : f64\n"
                "    %mn = arith.minnumf %a0, %a1 : f64\n"
                "    %c = arith.cmpf ogt, %a0, %fl : f64\n    %sq = arith.mulf %a0, %a0 : f64\n"
                "    %se = arith.select %c, %sq, %a1 : f64\n    %s1 = arith.mulf %fl, %a1 : f64\n"
                "    %s2 = arith.addf %ce, %ro : f64\n    %s3 = arith.mulf %mx, %mn : f64\n"
                "    %t1 = arith.addf %s1, %s2 : f64\n    %t2 = arith.addf %s3, %se : f64\n"
                "    %t3 = arith.addf %t1, %t2 : f64\n    linalg.yield %t3 : f64", [3, 5]),
        generic("two_results_permuted", {"p": [3, 5], "q": [5]},
                [("%p", [3, 5], "(d0, d1)"), ("%q", [5], "(d1)")],
                "    %s = math.sin %a0 : f64\n    %m = arith.mulf %a0, %a1 : f64\n"
                "    %c = math.cos %m : f64\n    linalg.yield %s, %c : f64, f64",
                [3, 5], outs=[([3, 5], "(d0, d1)"), ([5, 3], "(d1, d0)")],
                post="  %%gt = ds.transpose %%g#1 [1, 0] : %s -> %s\n"
                     "  %%out = ds.mul %%g#0, %%gt : %s, %s -> %s"
                     % (t([5, 3]), t([3, 5]), t([3, 5]), t([3, 5]), t([3, 5]))),
        generic("rank0_input", {"p": [], "q": [3, 5]},
                [("%p", [], "()"), ("%q", [3, 5], "(d0, d1)")],
                "    %m = arith.mulf %a0, %a1 : f64\n    %s = math.sin %m : f64\n"
                "    linalg.yield %s : f64", [3, 5]),
    ],
    "linalg": [
        matmul([3, 5], [5, 7], [3, 7]),
        matmul([5, 3], [5, 7], [3, 7], "transpose_lhs"),
        matmul([3, 5], [7, 5], [3, 7], "transpose_rhs"),
        matmul([5, 3], [7, 5], [3, 7], "transpose_lhs transpose_rhs"),
        matmul([2, 3, 5], [2, 5, 4], [2, 3, 4]),
        matmul([2, 3, 5], [4, 5], [2, 3, 4], "transpose_rhs"),
        matmul([2, 5, 3], [5, 4], [2, 3, 4], "transpose_lhs"),
        binary("add", [3, 1], [1, 5]),
        binary("sub", [3, 5], []),
        binary("mul", [], [3, 5]),
        binary("div", [3, 5], [3, 1]),
        binary("maximum", [3, 5], [1, 5]),
        binary("minimum", [3, 5], [3, 5]),
        Case("broadcast", {"p": [1, 5]},
             "  %%out = ds.broadcast %%p dims = [1, 2] : %s -> %s"
             % (t([1, 5]), t([3, 4, 5])), [3, 4, 5]),
        Case("fan_out", {"p": [3, 5]},
             "  %%th = ds.tanh %%p : %s\n  %%out = ds.mul %%th, %%p : %s, %s -> %s"
             % (t([3, 5]), t([3, 5]), t([3, 5]), t([3, 5])), [3, 5]),
        Case("select", {"a": [3, 5], "b": [1, 5]},
             "  %%z = arith.constant dense<0.0> : tensor<f64>\n"
             "  %%c = ds.compare gt, %%a, %%z : %s, tensor<f64> -> %s\n"
             "  %%out = ds.select %%c, %%a, %%b : %s, %s, %s -> %s"
             % (t([3, 5]), t([3, 5], "i1"), t([3, 5], "i1"), t([3, 5]),
                t([1, 5]), t([3, 5])), [3, 5]),
    ],
    "unary": [
        unary("relu"), unary("gelu"), unary("gelu", attrs="approximate = tanh"),
        unary("silu"), unary("sigmoid"), unary("tanh"), unary("exp"),
        unary("log", True), unary("sqrt", True), unary("rsqrt", True),
        unary("neg"), unary("abs"),
    ],
    "norms": [
        Case("softmax", {"p": [3, 5, 4]},
             "  %%out = ds.softmax %%p axis = 1 : %s" % t([3, 5, 4]), [3, 5, 4]),
        Case("log_softmax", {"p": [3, 5, 4]},
             "  %%out = ds.log_softmax %%p axis = 2 : %s" % t([3, 5, 4]),
             [3, 5, 4]),
        Case("layer_norm", {"x": [2, 3, 6], "w": [6], "b": [6]},
             "  %%out = ds.layer_norm %%x, %%w, %%b : %s, %s, %s"
             % (t([2, 3, 6]), t([6]), t([6])), [2, 3, 6]),
        Case("layer_norm_2d", {"x": [2, 3, 5], "w": [3, 5], "b": [3, 5]},
             "  %%out = ds.layer_norm %%x, %%w, %%b eps = 1.0e-3 : %s, %s, %s"
             % (t([2, 3, 5]), t([3, 5]), t([3, 5])), [2, 3, 5]),
        Case("rms_norm", {"x": [2, 3, 6], "w": [6]},
             "  %%out = ds.rms_norm %%x, %%w : %s, %s" % (t([2, 3, 6]), t([6])),
             [2, 3, 6]),
        Case("batch_norm", {"x": [4, 3, 5, 5], "g": [3], "b": [3]},
             "  %%out, %%m1, %%v1 = ds.batch_norm %%x, %%g, %%b, %%rm, %%rv : %s, %s"
             % (t([4, 3, 5, 5]), t([3])), [4, 3, 5, 5],
             state={"rm": ([3], "f64", "#ds.init<zeros>", "rm"),
                    "rv": ([3], "f64", "#ds.init<ones>", "rv")}),
        Case("reduce_sum", {"p": [3, 5, 4]},
             "  %%out = ds.reduce_sum %%p [0, 2] : %s -> %s"
             % (t([3, 5, 4]), t([5])), [5]),
        Case("reduce_mean", {"p": [3, 5, 4]},
             "  %%out = ds.reduce_mean %%p [1] keep_dims : %s -> %s"
             % (t([3, 5, 4]), t([3, 1, 4])), [3, 1, 4]),
        Case("reduce_max", {"p": [3, 5, 4]},
             "  %%out = ds.reduce_max %%p [2] : %s -> %s"
             % (t([3, 5, 4]), t([3, 5])), [3, 5]),
    ],
    "shape": [
        Case("transpose", {"p": [2, 3, 5]},
             "  %%out = ds.transpose %%p [2, 0, 1] : %s -> %s"
             % (t([2, 3, 5]), t([5, 2, 3])), [5, 2, 3]),
        Case("reshape", {"p": [2, 3, 5]},
             "  %%out = ds.reshape %%p : %s -> %s" % (t([2, 3, 5]), t([6, 5])),
             [6, 5]),
        Case("slice", {"p": [5, 7]},
             "  %%out = ds.slice %%p offsets [1, 0] strides [2, 3] : %s -> %s"
             % (t([5, 7]), t([2, 3])), [2, 3]),
        Case("concat", {"a": [3, 2], "b": [3, 5]},
             "  %%out = ds.concat %%a, %%b, %%a axis = 1 : %s, %s, %s -> %s"
             % (t([3, 2]), t([3, 5]), t([3, 2]), t([3, 9])), [3, 9]),
        Case("insert_slice", {"a": [2, 3], "b": [5, 7]},
             "  %%out = ds.insert_slice %%a into %%b offsets [1, 1] strides [2, 2]"
             " : %s into %s" % (t([2, 3]), t([5, 7])), [5, 7]),
        Case("causal_softmax", {"p": [2, 4, 6]},
             "  %%m = ds.causal_mask %%p : %s\n  %%out = ds.softmax %%m axis = 2 : %s"
             % (t([2, 4, 6]), t([2, 4, 6])), [2, 4, 6]),
        Case("embedding", {"table": [7, 5]},
             "  %%out = ds.embedding %%table, %%idx : %s, %s -> %s"
             % (t([7, 5]), t([2, 3], "i64"), t([2, 3, 5])), [2, 3, 5],
             inputs={"idx": ([2, 3], "i64", [[0, 3, 3], [6, 1, 3]])}),
        Case("dropout", {"p": [3, 5]},
             "  %%out, %%r1 = ds.dropout %%p, %%rng p = 0.3 : %s, tensor<2xi64>"
             % t([3, 5]), [3, 5],
             state={"rng": ([2], "i64", "#ds.init<zeros>", "rng")}),
    ],
    "nn": [
        Case("conv2d", {"x": [2, 4, 7, 6], "w": [6, 2, 3, 3], "b": [6]},
             "  %%out = ds.conv2d %%x, %%w, %%b strides = [2, 1] padding = [1, 2] "
             "dilation = [1, 2] groups = 2 : %s, %s, %s -> %s"
             % (t([2, 4, 7, 6]), t([6, 2, 3, 3]), t([6]), t([2, 6, 4, 6])),
             [2, 6, 4, 6]),
        Case("conv2d_plain", {"x": [2, 3, 5, 5], "w": [4, 3, 3, 3]},
             "  %%out = ds.conv2d %%x, %%w : %s, %s -> %s"
             % (t([2, 3, 5, 5]), t([4, 3, 3, 3]), t([2, 4, 3, 3])), [2, 4, 3, 3]),
        Case("max_pool", {"x": [2, 3, 7, 6]},
             "  %%out = ds.max_pool2d %%x kernel = [3, 3] strides = [2, 2] "
             "padding = [1, 1] : %s -> %s" % (t([2, 3, 7, 6]), t([2, 3, 4, 3])),
             [2, 3, 4, 3]),
        Case("avg_pool", {"x": [2, 3, 7, 6]},
             "  %%out = ds.avg_pool2d %%x kernel = [3, 2] strides = [2, 1] "
             "padding = [1, 1] : %s -> %s" % (t([2, 3, 7, 6]), t([2, 3, 4, 7])),
             [2, 3, 4, 7]),
        Case("cross_entropy", {"logits": [5, 7]},
             "  %%out0 = ds.cross_entropy %%logits, %%lab : %s, %s -> tensor<f64>\n"
             "  %%out = ds.reshape %%out0 : tensor<f64> -> %s"
             % (t([5, 7]), t([5], "i64"), t([1])), [1],
             inputs={"lab": ([5], "i64", [0, 6, 3, 3, 1])}),
        Case("mse_loss", {"a": [3, 5], "b": [3, 5]},
             "  %%out0 = ds.mse_loss %%a, %%b : %s -> tensor<f64>\n"
             "  %%out = ds.reshape %%out0 : tensor<f64> -> %s"
             % (t([3, 5]), t([1])), [1]),
    ],
}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def check(case, work, rng):
    d = os.path.join(work, case.name)
    os.makedirs(d)
    fwd = os.path.join(d, "fwd.mlir")
    with open(fwd, "w") as f:
        f.write(case.module())
    grad = os.path.join(d, "grad.mlir")
    run([DS_OPT, fwd, "--ds-autodiff", "-o", grad])

    params = {}
    for n, shape in case.params.items():
        v = rng.standard_normal(shape)
        if n in case.positive:
            v = np.abs(v) + 0.5
        params[n] = v
    data = []
    for n, (shape, dtype, values) in case.inputs.items():
        path = os.path.join(d, n + ".npy")
        np.save(path, np.array(values, dtype=np.int64 if dtype == "i64"
                               else np.float64).reshape([1] + shape))
        data += ["--data", "%s=%s" % (n, path)]
    wpath = os.path.join(d, "wout.npy")
    np.save(wpath, rng.standard_normal([1] + case.out_shape))
    data += ["--data", "wout=%s" % wpath]

    def evaluate(module, p, tag):
        pdir = os.path.join(d, "params_" + tag)
        os.makedirs(pdir)
        for n, v in p.items():
            np.save(os.path.join(pdir, n + ".npy"), v)
        out = os.path.join(d, "out_" + tag)
        run([DS_RUN, module, "--as-is", "--steps", "1", "--quiet",
             "--params", pdir, "--save-results", out, "--seed", "7"] + data)
        res = {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}
        return res

    base = evaluate(grad, params, "base")
    worst = 0.0
    for k in range(2):
        v = {n: rng.standard_normal(p.shape) for n, p in params.items()}
        gv = sum(float(np.sum(base["grad." + n] * v[n])) for n in params)
        lp = evaluate(fwd, {n: params[n] + H * v[n] for n in params}, "p%d" % k)
        lm = evaluate(fwd, {n: params[n] - H * v[n] for n in params}, "m%d" % k)
        fd = (float(lp["loss"]) - float(lm["loss"])) / (2 * H)
        scale = max(abs(fd), abs(gv), 1.0)
        err = abs(gv - fd) / scale
        worst = max(worst, err)
        if err > RTOL:
            return False, "g.v = %.12g, finite difference = %.12g (rel err %.2e)" % (
                gv, fd, err)
    return True, "max rel err %.1e" % worst


def main():
    group = sys.argv[1]
    rng = np.random.default_rng(12345)
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for case in CASES[group]:
            try:
                ok, msg = check(case, work, rng)
            except RuntimeError as e:
                ok, msg = False, str(e)
            print("%-4s %-28s %s" % ("ok" if ok else "FAIL", case.name, msg))
            failures += not ok
    print("%d passed, %d failed" % (len(CASES[group]) - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

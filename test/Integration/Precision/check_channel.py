#!/usr/bin/env python3
"""The channel level of ds-assign-precision promotes exactly the channels
whose gradient variance exceeds the threshold, and runs them in FP32.

A linear layer (role ffn.up) and a 2-D convolution (role conv), each with
a rule for BF16 compute and gradients and a channel section (threshold 2x
the layer mean, momentum 0.9, high f32), run as gradient steps through
ds-run --as-is (parameters fixed), 1, 2 and 3 steps. The targets scale each output channel differently, so the weight
gradient's per-channel variance is known. Checked against NumPy with
ml_dtypes rounding:
- step 1 (no estimate yet): no channel promoted, output = all-BF16 GEMM;
  the estimate becomes r = var_c / mean(var) of the weight gradient;
- step 2: the promoted set is exactly {c : r_c > 2}; the output and the
  weight gradient equal the per-channel mixed reference (promoted channels
  with f32 weights and cotangents, the others BF16) and differ from the
  all-BF16 one on the promoted channels;
- step 3: the estimate is 0.9 v + 0.1 r (the running average).
The convolution's reference is PyTorch's conv2d (and its weight gradient)
in float64 on the same rounded operands.
Usage: check_channel.py with DS_RUN and DS_OPT set.
"""

import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np
import torch

DS_RUN = os.environ.get("DS_RUN", "ds-run")
DS_OPT = os.environ.get("DS_OPT", "ds-opt")
M, K, N = 32, 48, 16
B, C, HW, O = 4, 3, 6, 8
THRESHOLD, MOMENTUM = 2.0, 0.9

LINEAR = """
func.func @step(%x: tensor<{M}x{K}xf32> {{ds.input = "x"}},
                %t: tensor<{M}x{N}xf32> {{ds.input = "t"}},
                %w: tensor<{N}x{K}xf32> {{ds.param = "w", ds.init = #ds.init<file>}})
    -> (tensor<f32> {{ds.loss}}, tensor<{M}x{N}xf32> {{ds.metric = "y"}}) attributes {{ds.train_step}} {{
  %y = ds.matmul %x, %w transpose_rhs {{ds.role = "ffn.up"}} : tensor<{M}x{K}xf32>, tensor<{N}x{K}xf32> -> tensor<{M}x{N}xf32>
  %l = ds.mse_loss %y, %t : tensor<{M}x{N}xf32> -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<{M}x{N}xf32>
}}
""".format(M=M, K=K, N=N)

# The same layer on batched activations [2, M/2, K]: the weight gradient
# then contracts flattened rows.
LINEAR3 = LINEAR.replace("tensor<{M}x".format(M=M), "tensor<2x{H}x".format(H=M // 2))

CONV = """
func.func @step(%x: tensor<{B}x{C}x{HW}x{HW}xf32> {{ds.input = "x"}},
                %t: tensor<{B}x{O}x{HW}x{HW}xf32> {{ds.input = "t"}},
                %w: tensor<{O}x{C}x3x3xf32> {{ds.param = "w", ds.init = #ds.init<file>}})
    -> (tensor<f32> {{ds.loss}}, tensor<{B}x{O}x{HW}x{HW}xf32> {{ds.metric = "y"}}) attributes {{ds.train_step}} {{
  %y = ds.conv2d %x, %w padding = [1, 1] {{ds.role = "conv"}} : tensor<{B}x{C}x{HW}x{HW}xf32>, tensor<{O}x{C}x3x3xf32> -> tensor<{B}x{O}x{HW}x{HW}xf32>
  %l = ds.mse_loss %y, %t : tensor<{B}x{O}x{HW}x{HW}xf32> -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<{B}x{O}x{HW}x{HW}xf32>
}}
""".format(B=B, C=C, HW=HW, O=O)

POLICY = """
rules:
  - role: [ffn.up, conv]
    compute: bf16
    grad: bf16
channel:
  role: [ffn.up, conv]
  threshold: {t}
  momentum: {m}
  high: f32
""".format(t=THRESHOLD, m=MOMENTUM)


def bf16(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def ratio(g):
    """Per output channel (axis 0 of the weight): the gradient's variance
    over the fan-in, relative to the layer mean."""
    g = g.reshape(g.shape[0], -1)
    var = np.mean(g * g, axis=1) - np.mean(g, axis=1) ** 2
    return var / np.mean(var)


def linear(x, w):
    return x @ w.T


def linear_grad(x, dy, w_shape):
    return dy.reshape(-1, dy.shape[-1]).T @ x.reshape(-1, x.shape[-1])


def conv(x, w):
    return torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                      padding=1).numpy()


def conv_grad(x, dy, w_shape):
    return torch.nn.grad.conv2d_weight(torch.from_numpy(x), w_shape,
                                       torch.from_numpy(dy), padding=1).numpy()


def reference(layer, x, w, t, promoted):
    """Output and weight gradient with `promoted` channels in f32 and the
    others in BF16 (the input is BF16 for all: it is shared)."""
    forward, backward, out_axis = layer
    xb = bf16(x)
    cw = promoted.reshape((-1,) + (1,) * (w.ndim - 1))
    cy = np.expand_dims(promoted, [d for d in range(t.ndim) if d != out_axis % t.ndim])
    w_eff = np.where(cw, w.astype(np.float64), bf16(w))
    y = forward(xb, w_eff).astype(np.float32)
    dy = (y - t) * np.float32(2.0 / t.size)
    dy_eff = np.where(cy, dy.astype(np.float64), bf16(dy))
    return y, backward(xb, dy_eff, w.shape)


def check_layer(name, model, layer, x, w, t, check):
    label = {"linear": "ffn.up#0", "batched linear": "ffn.up#0", "conv": "conv#0"}[name]
    channels = w.shape[0]
    with tempfile.TemporaryDirectory() as work:
        for n, a in (("x", x), ("t", t)):
            np.save(os.path.join(work, n + ".npy"), a)
        params = os.path.join(work, "params")
        os.makedirs(params)
        np.save(os.path.join(params, "w.npy"), w)
        src, policy = os.path.join(work, "model.mlir"), os.path.join(work, "policy.yaml")
        grad_mlir = os.path.join(work, "grad.mlir")
        open(src, "w").write(model)
        open(policy, "w").write(POLICY)
        subprocess.run([DS_OPT, src, "--ds-autodiff",
                        "--ds-assign-precision=policy=" + policy, "-o", grad_mlir],
                       check=True)
        data = ["--data", "x=" + os.path.join(work, "x.npy"),
                "--data", "t=" + os.path.join(work, "t.npy")]

        def run(steps):
            out = os.path.join(work, "out%d" % steps)
            r = subprocess.run([DS_RUN, grad_mlir, "--as-is", "--steps", str(steps),
                                "--quiet", "--params", params, "--save-results", out]
                               + data, capture_output=True, text=True)
            if r.returncode:
                sys.exit("FAIL: ds-run failed:\n%s%s" % (r.stdout, r.stderr))
            load = lambda n: np.load(os.path.join(out, n + ".npy"))
            return (load("metric.y"), load("grad.w"),
                    load("metric.channel.high." + label) > 0.5,
                    load("update.channel.grad_var." + label))

        none = np.zeros(channels, bool)
        y1, g1, high1, v1 = run(1)
        y1_ref, g1_ref = reference(layer, x, w, t, none)
        check(not high1.any(), "%s step 1: no channel promoted before any estimate" % name)
        check(rel(y1, y1_ref) <= 1e-5,
              "%s step 1: output = all-BF16 reference (rel err %.1e)" % (name, rel(y1, y1_ref)))
        r1 = ratio(g1_ref)
        check(rel(v1, r1) <= 1e-4,
              "%s step 1: estimate = var/mean(var) of the weight gradient (rel err %.1e)"
              % (name, rel(v1, r1)))

        expected = r1 > THRESHOLD
        y2, g2, high2, v2 = run(2)
        print("     %s channel variance ratios: %s" % (name, np.array2string(r1, precision=2)))
        check(np.array_equal(high2, expected),
              "%s step 2: promoted channels %s (expected %s, threshold %g)"
              % (name, np.flatnonzero(high2).tolist(), np.flatnonzero(expected).tolist(),
                 THRESHOLD))
        check(0 < expected.sum() < channels, "%s step 2: the threshold splits the layer "
              "(%d of %d)" % (name, expected.sum(), channels))
        y2_ref, g2_ref = reference(layer, x, w, t, expected)
        y2_bf16, _ = reference(layer, x, w, t, none)
        for what, got, ref in (("output", y2, y2_ref), ("weight gradient", g2, g2_ref)):
            check(rel(got, ref) <= 1e-5,
                  "%s step 2: %s = mixed per-channel reference (rel err %.1e)"
                  % (name, what, rel(got, ref)))
        axis = layer[2]
        off = rel(np.compress(expected, y2, axis), np.compress(expected, y2_bf16, axis))
        same = rel(np.compress(~expected, y2, axis), np.compress(~expected, y2_bf16, axis))
        check(off > 1e-4 and same <= 1e-6,
              "%s step 2: promoted channels differ from BF16 by %.1e (> 1e-4), the "
              "others by %.1e (<= 1e-6)" % (name, off, same))

        _, _, _, v3 = run(3)
        v3_ref = MOMENTUM * v2 + (1 - MOMENTUM) * ratio(g2_ref)
        check(rel(v3, v3_ref) <= 1e-4,
              "%s step 3: estimate = %.1f v + %.1f r (rel err %.1e)"
              % (name, MOMENTUM, 1 - MOMENTUM, rel(v3, v3_ref)))


def check_module_level_conv(x, w, t, check):
    """Without a channel section the convolution still computes in BF16
    (operands and cotangent rounded, FP32 accumulation)."""
    with tempfile.TemporaryDirectory() as work:
        for n, a in (("x", x), ("t", t)):
            np.save(os.path.join(work, n + ".npy"), a)
        os.makedirs(os.path.join(work, "params"))
        np.save(os.path.join(work, "params", "w.npy"), w)
        src, policy = os.path.join(work, "model.mlir"), os.path.join(work, "policy.yaml")
        open(src, "w").write(CONV)
        open(policy, "w").write(POLICY.split("channel:")[0])
        grad_mlir = os.path.join(work, "grad.mlir")
        subprocess.run([DS_OPT, src, "--ds-autodiff",
                        "--ds-assign-precision=policy=" + policy, "-o", grad_mlir], check=True)
        out = os.path.join(work, "out")
        subprocess.run([DS_RUN, grad_mlir, "--as-is", "--steps", "1", "--quiet", "--params",
                        os.path.join(work, "params"), "--save-results", out,
                        "--data", "x=" + os.path.join(work, "x.npy"),
                        "--data", "t=" + os.path.join(work, "t.npy")], check=True)
        y, g = (np.load(os.path.join(out, n + ".npy")) for n in ("metric.y", "grad.w"))
        y_ref, g_ref = reference((conv, conv_grad, 1), x, w, t, np.zeros(w.shape[0], bool))
        y32 = conv(x.astype(np.float64), w.astype(np.float64))
        for what, got, ref in (("output", y, y_ref), ("weight gradient", g, g_ref)):
            check(rel(got, ref) <= 1e-5, "conv module level: %s = BF16 reference "
                  "(rel err %.1e)" % (what, rel(got, ref)))
        check(rel(y, y32) > 1e-4, "conv module level: differs from FP32 by %.1e"
              % rel(y, y32))


def main():
    failures = checks = 0

    def check(ok, text):
        nonlocal failures, checks
        checks += 1
        failures += not ok
        print(("ok   " if ok else "FAIL ") + text)

    rng = np.random.default_rng(11)
    # Channel c's residual, hence its gradient, scales with spread[c].
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = (rng.standard_normal((N, K)) * 0.2).astype(np.float32)
    spread = np.where(np.arange(N) % 5 == 2, 3.0, 1.0)
    t = (rng.standard_normal((M, N)) * spread).astype(np.float32)
    check_layer("linear", LINEAR, (linear, linear_grad, -1), x, w, t, check)
    check_layer("batched linear", LINEAR3, (linear, linear_grad, -1), x.reshape(2, M // 2, K),
                w, t.reshape(2, M // 2, N), check)

    x = rng.standard_normal((B, C, HW, HW)).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) * 0.3).astype(np.float32)
    spread = np.where(np.arange(O) % 4 == 1, 5.0, 1.0)[None, :, None, None]
    t = (rng.standard_normal((B, O, HW, HW)) * spread).astype(np.float32)
    check_layer("conv", CONV, (conv, conv_grad, 1), x, w, t, check)
    check_module_level_conv(x, w, t, check)
    print("%d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

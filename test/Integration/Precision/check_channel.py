#!/usr/bin/env python3
"""The channel level of ds-assign-precision promotes exactly the channels
whose gradient variance exceeds the threshold, and runs them in FP32.

A linear layer (role ffn.up, rule: BF16 compute and gradients) with a
channel section (threshold 2x the layer mean, momentum 0.9, high f32) runs
as a gradient step through ds-run --as-is (parameters fixed), 1, 2 and 3
steps. The targets scale each output channel differently, so the weight
gradient's per-channel variance is known. Checked against NumPy with
ml_dtypes rounding:
- step 1 (no estimate yet): no channel promoted, output = all-BF16 GEMM;
  the estimate becomes r = var_c / mean(var) of the weight gradient;
- step 2: the promoted set is exactly {c : r_c > 2}; the output and the
  weight gradient equal the per-channel mixed reference (promoted channels
  with f32 weights and cotangents, the others BF16) and differ from the
  all-BF16 one on the promoted channels;
- step 3: the estimate is 0.9 v + 0.1 r (the running average).
Usage: check_channel.py with DS_RUN and DS_OPT set.
"""

import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

DS_RUN = os.environ.get("DS_RUN", "ds-run")
DS_OPT = os.environ.get("DS_OPT", "ds-opt")
M, K, N = 32, 48, 16
THRESHOLD, MOMENTUM = 2.0, 0.9
LABEL = "ffn.up#0"

MODEL = """
func.func @step(%x: tensor<{M}x{K}xf32> {{ds.input = "x"}},
                %t: tensor<{M}x{N}xf32> {{ds.input = "t"}},
                %w: tensor<{N}x{K}xf32> {{ds.param = "up.weight", ds.init = #ds.init<file>}})
    -> (tensor<f32> {{ds.loss}}, tensor<{M}x{N}xf32> {{ds.metric = "y"}}) attributes {{ds.train_step}} {{
  %y = ds.matmul %x, %w transpose_rhs {{ds.role = "ffn.up"}} : tensor<{M}x{K}xf32>, tensor<{N}x{K}xf32> -> tensor<{M}x{N}xf32>
  %l = ds.mse_loss %y, %t : tensor<{M}x{N}xf32> -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<{M}x{N}xf32>
}}
""".format(M=M, K=K, N=N)

POLICY = """
rules:
  - role: ffn.up
    compute: bf16
    grad: bf16
channel:
  role: ffn.up
  threshold: {t}
  momentum: {m}
  high: f32
""".format(t=THRESHOLD, m=MOMENTUM)


def bf16(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def ratio(g):
    """Per output channel (row of the transposed weight): the gradient's
    variance over the fan-in, relative to the layer mean."""
    var = np.mean(g * g, axis=1) - np.mean(g, axis=1) ** 2
    return var / np.mean(var)


def reference(x, w, t, promoted):
    """Output and weight gradient with `promoted` channels in f32 and the
    others in BF16 (the input is BF16 for all: it is shared)."""
    xb = bf16(x)
    w_eff = np.where(promoted[:, None], w.astype(np.float64), bf16(w))
    y = (xb @ w_eff.T).astype(np.float32)
    dy = (y - t) * np.float32(2.0 / (M * N))
    dy_eff = np.where(promoted[None, :], dy.astype(np.float64), bf16(dy))
    return y, dy_eff.T @ xb


def main():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = (rng.standard_normal((N, K)) * 0.2).astype(np.float32)
    # Channel c's residual, hence its gradient, scales with spread[c].
    spread = np.where(np.arange(N) % 5 == 2, 3.0, 1.0)
    t = (rng.standard_normal((M, N)) * spread).astype(np.float32)
    failures = checks = 0

    def check(ok, text):
        nonlocal failures, checks
        checks += 1
        failures += not ok
        print(("ok   " if ok else "FAIL ") + text)

    with tempfile.TemporaryDirectory() as work:
        for name, a in (("x", x), ("t", t)):
            np.save(os.path.join(work, name + ".npy"), a)
        params = os.path.join(work, "params")
        os.makedirs(params)
        np.save(os.path.join(params, "up.weight.npy"), w)
        model = os.path.join(work, "model.mlir")
        policy = os.path.join(work, "policy.yaml")
        grad_mlir = os.path.join(work, "grad.mlir")
        open(model, "w").write(MODEL)
        open(policy, "w").write(POLICY)
        subprocess.run([DS_OPT, model, "--ds-autodiff",
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
            return (load("metric.y"), load("grad.up.weight"),
                    load("metric.channel.high." + LABEL) > 0.5,
                    load("update.channel.grad_var." + LABEL))

        none = np.zeros(N, bool)
        y1, g1, high1, v1 = run(1)
        y1_ref, g1_ref = reference(x, w, t, none)
        check(not high1.any(), "step 1: no channel promoted before any estimate")
        check(rel(y1, y1_ref) <= 1e-5,
              "step 1: output = all-BF16 reference (rel err %.1e)" % rel(y1, y1_ref))
        r1 = ratio(g1_ref)
        check(rel(v1, r1) <= 1e-4,
              "step 1: estimate = var/mean(var) of the weight gradient (rel err %.1e)"
              % rel(v1, r1))

        expected = r1 > THRESHOLD
        y2, g2, high2, v2 = run(2)
        print("     channel variance ratios: %s" % np.array2string(r1, precision=2))
        check(np.array_equal(high2, expected),
              "step 2: promoted channels %s (expected %s, threshold %g)"
              % (np.flatnonzero(high2).tolist(), np.flatnonzero(expected).tolist(),
                 THRESHOLD))
        check(0 < expected.sum() < N, "step 2: the threshold splits the layer (%d of %d)"
              % (expected.sum(), N))
        y2_ref, g2_ref = reference(x, w, t, expected)
        y2_bf16, _ = reference(x, w, t, none)
        for what, got, ref in (("output", y2, y2_ref), ("weight gradient", g2, g2_ref)):
            check(rel(got, ref) <= 1e-5,
                  "step 2: %s = mixed per-channel reference (rel err %.1e)"
                  % (what, rel(got, ref)))
        off = rel(y2[:, expected], y2_bf16[:, expected])
        same = rel(y2[:, ~expected], y2_bf16[:, ~expected])
        check(off > 1e-4 and same <= 1e-6,
              "step 2: promoted channels differ from BF16 by %.1e (> 1e-4), the "
              "others by %.1e (<= 1e-6)" % (off, same))

        _, _, _, v3 = run(3)
        v3_ref = MOMENTUM * v2 + (1 - MOMENTUM) * ratio(g2_ref)
        check(rel(v3, v3_ref) <= 1e-4,
              "step 3: estimate = %.1f v + %.1f r (rel err %.1e)"
              % (MOMENTUM, 1 - MOMENTUM, rel(v3, v3_ref)))
    print("%d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

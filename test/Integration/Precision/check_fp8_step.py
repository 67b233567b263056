#!/usr/bin/env python3
"""The FP8 casts of ds-assign-precision are really executed, exactly.

A linear layer tagged as a q projection runs through ds-autodiff and
ds-assign-precision (E4M3 forward, E5M2 gradients) with current and
delayed scaling, compiled and run by ds-run. Its output and its weight
gradient are compared with NumPy on operands rounded with ml_dtypes the way
the policy says (scale = 448 / amax, saturating casts, FP32 accumulation,
descale): they agree to summation order (1e-5 relative), while differing
from the FP32 products by the FP8 rounding error (> 1e-3).
Usage: check_fp8_step.py with DS_RUN and DS_OPT set.
"""

import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

DS_RUN = os.environ.get("DS_RUN", "ds-run")
DS_OPT = os.environ.get("DS_OPT", "ds-opt")
M, K, N = 16, 64, 32

MODEL = """
func.func @step(%x: tensor<{M}x{K}xf32> {{ds.input = "x"}},
                %t: tensor<{M}x{N}xf32> {{ds.input = "t"}},
                %w: tensor<{N}x{K}xf32> {{ds.param = "attn.q_proj.weight", ds.init = #ds.init<file>}})
    -> (tensor<f32> {{ds.loss}}, tensor<{M}x{N}xf32> {{ds.metric = "y"}}) attributes {{ds.train_step}} {{
  %y = ds.matmul %x, %w transpose_rhs {{ds.role = "attn.q"}} : tensor<{M}x{K}xf32>, tensor<{N}x{K}xf32> -> tensor<{M}x{N}xf32>
  %l = ds.mse_loss %y, %t : tensor<{M}x{N}xf32> -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<{M}x{N}xf32>
}}
""".format(M=M, K=K, N=N)

POLICY = """
rules:
  - role: attn.q
    compute: f8E4M3FN
    grad: f8E5M2
    scaling: {scaling}
fp8:
  amax-history-len: 4
"""


def quantize(x, dtype):
    """The policy's per-tensor FP8 round trip, in f32: scale = max / amax,
    saturating cast, as FP8 values and the scale."""
    fmax = float(ml_dtypes.finfo(dtype).max)
    amax = np.float32(np.max(np.abs(x)))
    scale = np.float32(fmax) / amax if amax > 0 else np.float32(1)
    scaled = np.clip(x * scale, -fmax, fmax).astype(np.float32)
    return scaled.astype(dtype).astype(np.float64), np.float64(scale)


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, K)).astype(np.float32)
    t = rng.standard_normal((M, N)).astype(np.float32)
    w = (rng.standard_normal((N, K)) * 0.1).astype(np.float32)
    failures = checks = 0
    with tempfile.TemporaryDirectory() as work:
        np.save(os.path.join(work, "x.npy"), x)
        np.save(os.path.join(work, "t.npy"), t)
        params = os.path.join(work, "params")
        os.makedirs(params)
        np.save(os.path.join(params, "attn.q_proj.weight.npy"), w)
        with open(os.path.join(work, "model.mlir"), "w") as f:
            f.write(MODEL)
        # Delayed scaling starts from an empty history (scale 1); current
        # scaling uses this step's amax.
        for scaling in ("current", "delayed"):
            policy = os.path.join(work, scaling + ".yaml")
            with open(policy, "w") as f:
                f.write(POLICY.format(scaling=scaling))
            grad_mlir = os.path.join(work, scaling + ".mlir")
            subprocess.run([DS_OPT, os.path.join(work, "model.mlir"), "--ds-autodiff",
                            "--ds-assign-precision=policy=" + policy, "-o", grad_mlir],
                           check=True)
            out = os.path.join(work, scaling + "-out")
            r = subprocess.run([DS_RUN, grad_mlir, "--as-is", "--steps", "1", "--quiet",
                                "--params", params,
                                "--data", "x=" + os.path.join(work, "x.npy"),
                                "--data", "t=" + os.path.join(work, "t.npy"),
                                "--eval-data", "x=" + os.path.join(work, "x.npy"),
                                "--eval-data", "t=" + os.path.join(work, "t.npy"),
                                "--save-results", out], capture_output=True, text=True)
            if r.returncode:
                print("FAIL %s: ds-run failed:\n%s%s" % (scaling, r.stdout, r.stderr))
                failures += 1
                continue
            y = np.load(os.path.join(out, "metric.y.npy"))
            gw = np.load(os.path.join(out, "grad.attn.q_proj.weight.npy"))
            e4, e5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
            if scaling == "current":
                qx, sx = quantize(x, e4)
                qw, sw = quantize(w, e4)
            else:  # scale 1 on the first step
                qx, sx = x.astype(e4).astype(np.float64), 1.0
                qw, sw = w.astype(e4).astype(np.float64), 1.0
            y_ref = (qx @ qw.T) / (sx * sw)
            # The cotangent as ds computes it: (y - t) * (2 / n), in f32.
            dy = (y - t) * np.float32(2.0 / (M * N))
            if scaling == "current":
                qg, sg = quantize(dy, e5)
            else:
                qg, sg = np.clip(dy, -57344, 57344).astype(e5).astype(np.float64), 1.0
            gw_ref = (qg.T @ qx) / (sg * sx)
            y32 = x.astype(np.float64) @ w.T.astype(np.float64)
            gw32 = dy.T.astype(np.float64) @ x.astype(np.float64)
            for what, got, ref, fp32 in (("output", y, y_ref, y32),
                                         ("weight gradient", gw, gw_ref, gw32)):
                checks += 1
                err, off = rel(got, ref), rel(got, fp32)
                ok = err <= 1e-5 and off > 1e-3
                failures += not ok
                print("%s %-7s %-15s vs FP8 reference %.1e (tol 1e-5), vs FP32 %.1e "
                      "(must exceed 1e-3)" % ("ok  " if ok else "FAIL", scaling, what,
                                              err, off))
    print("%d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

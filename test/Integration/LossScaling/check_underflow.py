#!/usr/bin/env python3
"""Loss scaling rescues FP16 gradients from underflow.

The model's prediction goes through ds.cast to f16 and back, so its
gradient (the cotangent of the prediction) is rounded to f16; the loss is
multiplied by 1e-6, so that cotangent (~1e-9) is far below f16's smallest
subnormal (6e-8). Compared with the FP32 gradients of the same model
without the casts: without loss scaling the gradients underflow to zero;
with ds-insert-loss-scaling (scale 2^16) they come within 1e-2 relative.
Usage: check_underflow.py with DS_OPT and DS_RUN set.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np

DS_OPT = os.environ.get("DS_OPT", "ds-opt")
DS_RUN = os.environ.get("DS_RUN", "ds-run")
B, D, O = 64, 16, 8


def model(f16):
    cast = """
  %h = ds.cast %q : tensor<{B}x{O}xf32> -> tensor<{B}x{O}xf16>
  %q2 = ds.cast %h : tensor<{B}x{O}xf16> -> tensor<{B}x{O}xf32>""" if f16 else """
  %q2 = ds.add %q, %zero : tensor<{B}x{O}xf32>, tensor<f32> -> tensor<{B}x{O}xf32>"""
    return ("""
func.func @step(%w: tensor<{O}x{D}xf32> {{ds.param = "fc.weight", ds.init = #ds.init<file>}},
                %x: tensor<{B}x{D}xf32> {{ds.input = "x"}},
                %y: tensor<{B}x{O}xf32> {{ds.input = "y"}})
    -> (tensor<f32> {{ds.loss}}) attributes {{ds.train_step}} {{
  %zero = arith.constant dense<0.0> : tensor<f32>
  %tiny = arith.constant dense<1.0e-06> : tensor<f32>
  %q = ds.matmul %x, %w transpose_rhs : tensor<{B}x{D}xf32>, tensor<{O}x{D}xf32> -> tensor<{B}x{O}xf32>""" + cast + """
  %l = ds.mse_loss %q2, %y : tensor<{B}x{O}xf32> -> tensor<f32>
  %s = ds.mul %l, %tiny : tensor<f32>, tensor<f32> -> tensor<f32>
  return %s : tensor<f32>
}}
""").format(B=B, D=D, O=O)


def gradient(work, name, f16, passes):
    src = os.path.join(work, name + ".mlir")
    with open(src, "w") as f:
        f.write(model(f16))
    grad_mlir = os.path.join(work, name + ".grad.mlir")
    subprocess.run([DS_OPT, src, "--ds-autodiff"] + passes + ["-o", grad_mlir],
                   check=True)
    out = os.path.join(work, name + ".out")
    r = subprocess.run([DS_RUN, grad_mlir, "--as-is", "--steps", "1", "--quiet",
                        "--params", work + "/params",
                        "--data", "x=" + work + "/x.npy",
                        "--data", "y=" + work + "/y.npy",
                        "--eval-data", "x=" + work + "/x.npy",
                        "--eval-data", "y=" + work + "/y.npy",
                        "--save-results", out], capture_output=True, text=True)
    if r.returncode:
        sys.exit("ds-run failed:\n" + r.stdout + r.stderr)
    return np.load(os.path.join(out, "grad.fc.weight.npy")).astype(np.float64)


def main():
    rng = np.random.default_rng(11)
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(work + "/params")
        np.save(work + "/params/fc.weight.npy",
                (0.3 * rng.standard_normal((O, D))).astype(np.float32))
        np.save(work + "/x.npy", rng.standard_normal((2 * B, D)).astype(np.float32))
        np.save(work + "/y.npy", rng.standard_normal((2 * B, O)).astype(np.float32))
        ref = gradient(work, "fp32", False, [])
        plain = gradient(work, "fp16", True, [])
        scaled = gradient(work, "fp16_scaled", True, ["--ds-insert-loss-scaling"])

    def rel(g):
        return float(np.linalg.norm(g - ref) / np.linalg.norm(ref))
    zero_frac = float(np.mean(plain == 0))
    print("FP32 gradient norm %.3e" % np.linalg.norm(ref))
    print("FP16 without scaling: rel err %.3e, %.0f%% of entries zero" %
          (rel(plain), 100 * zero_frac))
    print("FP16 with loss scaling (2^16): rel err %.3e, max elementwise rel "
          "err %.3e" % (rel(scaled), float(np.max(np.abs(scaled - ref) /
                                                  np.abs(ref)))))
    ok = rel(plain) > 0.5 and rel(scaled) < 1e-2
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

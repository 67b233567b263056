#!/usr/bin/env python3
"""A small training step with low-precision activations, ds-run vs PyTorch.

The forward casts its hidden activation to bf16 (GELU in bf16), then to
f8E4M3FN with `saturate` and to f8E5M2, each time back to f32, between two
f32 linear layers; ds-run adds autodiff and SGD and trains it for a few
steps. PyTorch eager trains the same model with the same `.to()` casts
(whose backward is the cast back, as ds.cast's) from the same initial
values on the same batches. The roundings make a model without them
differ by far more than the tolerance (checked), so agreement shows that
the compiled casts round like PyTorch's. Small differences remain from
f32 summation order in the GEMMs (oneDNN vs PyTorch), which can move a
value across a rounding boundary: losses must agree to 1e-4 relative and
the parameters' distance travelled to 1e-3 (measured: 2e-7).
Usage: check_training.py with DS_RUN set.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DS_RUN = os.environ.get("DS_RUN", "ds-run")
STEPS, B, D, H, O = 10, 16, 8, 32, 4
LR = 0.2

MODEL = """
func.func @step(%w1: tensor<{H}x{D}xf32> {{ds.param = "fc1.weight", ds.init = #ds.init<file>}},
                %w2: tensor<{O}x{H}xf32> {{ds.param = "fc2.weight", ds.init = #ds.init<file>}},
                %x: tensor<{B}x{D}xf32> {{ds.input = "x"}},
                %y: tensor<{B}x{O}xf32> {{ds.input = "y"}})
    -> (tensor<f32> {{ds.loss}}) attributes {{ds.train_step}} {{
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<{B}x{D}xf32>, tensor<{H}x{D}xf32> -> tensor<{B}x{H}xf32>
  %hb = ds.cast %h : tensor<{B}x{H}xf32> -> tensor<{B}x{H}xbf16>
  %gb = ds.gelu %hb : tensor<{B}x{H}xbf16>
  %g = ds.cast %gb : tensor<{B}x{H}xbf16> -> tensor<{B}x{H}xf32>
  %q = ds.cast %g saturate : tensor<{B}x{H}xf32> -> tensor<{B}x{H}xf8E4M3FN>
  %qf = ds.cast %q : tensor<{B}x{H}xf8E4M3FN> -> tensor<{B}x{H}xf32>
  %r = ds.cast %qf : tensor<{B}x{H}xf32> -> tensor<{B}x{H}xf8E5M2>
  %rf = ds.cast %r : tensor<{B}x{H}xf8E5M2> -> tensor<{B}x{H}xf32>
  %p = ds.matmul %rf, %w2 transpose_rhs : tensor<{B}x{H}xf32>, tensor<{O}x{H}xf32> -> tensor<{B}x{O}xf32>
  %l = ds.mse_loss %p, %y : tensor<{B}x{O}xf32> -> tensor<f32>
  return %l : tensor<f32>
}}
""".format(B=B, D=D, H=H, O=O)


def reference(w1, w2, xs, ys, rounding=True):
    w1 = torch.tensor(w1, requires_grad=True)
    w2 = torch.tensor(w2, requires_grad=True)
    opt = torch.optim.SGD([w1, w2], lr=LR)
    losses = []
    for s in range(STEPS):
        x = torch.tensor(xs[s * B:(s + 1) * B])
        y = torch.tensor(ys[s * B:(s + 1) * B])
        opt.zero_grad()
        h = x @ w1.T
        if rounding:
            g = torch.nn.functional.gelu(h.to(torch.bfloat16)).to(torch.float32)
            g = g.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(torch.float32)
            g = g.to(torch.float8_e5m2).to(torch.float32)
        else:
            g = torch.nn.functional.gelu(h)
        loss = torch.nn.functional.mse_loss(g @ w2.T, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {"fc1.weight": w1.detach().numpy(), "fc2.weight": w2.detach().numpy()}


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12)))


def main():
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((H, D)) * 0.7).astype(np.float32)
    w2 = (rng.standard_normal((O, H)) * 0.3).astype(np.float32)
    xs = rng.standard_normal((STEPS * B, D)).astype(np.float32)
    ys = rng.standard_normal((STEPS * B, O)).astype(np.float32)
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "model.mlir")
        with open(model, "w") as f:
            f.write(MODEL)
        params = os.path.join(work, "params")
        os.makedirs(params)
        np.save(os.path.join(params, "fc1.weight.npy"), w1)
        np.save(os.path.join(params, "fc2.weight.npy"), w2)
        for n, v in (("x", xs), ("y", ys)):
            np.save(os.path.join(work, n + ".npy"), v)
        report = os.path.join(work, "report.json")
        ckpt = os.path.join(work, "ckpt")
        cmd = [DS_RUN, model, "--steps", str(STEPS), "--quiet", "--params", params,
               "--optimizer", "sgd", "--lr", str(LR),
               "--data", f"x={work}/x.npy", "--data", f"y={work}/y.npy",
               "--eval-data", f"x={work}/x.npy", "--eval-data", f"y={work}/y.npy",
               "--report", report, "--checkpoint", ckpt]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print("ds-run failed:\n" + r.stdout + r.stderr)
            print("FAILED")
            return 1
        ds_losses = [s["loss"] for s in json.load(open(report))["steps"]]
        ds_params = {p: np.load(os.path.join(ckpt, p + ".npy")) for p in ("fc1.weight", "fc2.weight")}
    losses, ref_params = reference(w1, w2, xs, ys)
    plain, _ = reference(w1, w2, xs, ys, rounding=False)
    ok = True
    e_loss = rel(ds_losses, losses)
    e_plain = rel(plain, losses)
    print(f"losses: ds {ds_losses[0]:.6f} -> {ds_losses[-1]:.6f}, "
          f"torch {losses[0]:.6f} -> {losses[-1]:.6f}, rel err {e_loss:.1e} "
          f"(without the roundings: {e_plain:.1e})")
    ok &= e_loss <= 1e-4 and e_plain > 1e-2 and losses[-1] < losses[0]
    w0 = {"fc1.weight": w1, "fc2.weight": w2}
    for p, v in ref_params.items():
        moved = np.linalg.norm(v - w0[p])
        e = float(np.linalg.norm(ds_params[p] - v) / moved)
        print(f"{p}: distance travelled {moved:.3e}, ds vs torch {e:.1e} of it")
        ok &= e <= 1e-3
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

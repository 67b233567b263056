#!/usr/bin/env python3
"""ds-insert-fake-quant{learn-scales} (LSQ / LSQ+) against PyTorch.

One linear layer with an MSE loss is trained for 8 SGD steps by ds-run with
learned scales, and by a PyTorch loop written here from the LSQ papers and
torch's learnable fake-quantize kernels:

  - step sizes start at LSQ's 2 mean|x| / sqrt(qmax) of the first step's
    values (the weight per output channel, the activation per tensor), the
    activation zero point at torch.ao's affine formula for that scale;
  - forward and gradients through torch._fake_quantize_learnable_per_*_affine
    with LSQ's gradient factor 1 / sqrt(numel * qmax);
  - the parameters hold the change from the start and get plain SGD (no
    weight decay).

Checked after the last step: the weight, the learned scales and zero
point (start plus learned change), and those the last step used (the
`qat.*` state), within 1e-6 relative.
The inputs avoid rounding ties, where torch's two learnable kernels
disagree with each other (see fake-quant.test).

Usage: check_lsq.py with DS_RUN in the environment.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DS_RUN = os.environ.get("DS_RUN", "ds-run")
B, K, N, STEPS, LR = 16, 24, 8, 8, 0.05
AQMIN, AQMAX, WQMIN, WQMAX = 0, 127, -128, 127

MODULE = """
func.func @step(%w: tensor<{n}x{k}xf32> {{ds.param = "fc.weight", ds.init = #ds.init<file>}},
                %x: tensor<{b}x{k}xf32> {{ds.input = "x"}},
                %t: tensor<{b}x{n}xf32> {{ds.input = "t"}})
    -> (tensor<f32> {{ds.loss}}) attributes {{ds.train_step}} {{
  %y = ds.matmul %x, %w transpose_rhs : tensor<{b}x{k}xf32>, tensor<{n}x{k}xf32> -> tensor<{b}x{n}xf32>
  %d = ds.sub %y, %t : tensor<{b}x{n}xf32>, tensor<{b}x{n}xf32> -> tensor<{b}x{n}xf32>
  %q = ds.mul %d, %d : tensor<{b}x{n}xf32>, tensor<{b}x{n}xf32> -> tensor<{b}x{n}xf32>
  %l = ds.reduce_mean %q [0, 1] : tensor<{b}x{n}xf32> -> tensor<f32>
  return %l : tensor<f32>
}}
""".format(b=B, k=K, n=N)


def reference(w0, xs, ts):
    """LSQ / LSQ+ training in PyTorch: the final weight, the learned
    changes and the scales and zero point of the last step."""
    eps = torch.finfo(torch.float32).eps
    w = torch.tensor(w0, requires_grad=True)
    dsw = torch.zeros(N, requires_grad=True)
    dsx = torch.zeros((), requires_grad=True)
    dzx = torch.zeros((), requires_grad=True)
    x0 = torch.tensor(xs[0])
    sw0 = (2 * w.detach().abs().mean(1) / WQMAX ** 0.5).clamp(min=eps)
    sx0 = (2 * x0.abs().mean() / AQMAX ** 0.5).clamp(min=eps)
    zx0 = (AQMIN - torch.round(torch.clamp(x0.min(), max=0) / sx0)).clamp(AQMIN, AQMAX)
    for x, t in zip(xs, ts):
        x, t = torch.tensor(x), torch.tensor(t)
        sw = torch.clamp(sw0 + dsw, min=eps)
        sx = torch.clamp(sx0 + dsx, min=eps)
        zx = zx0 + dzx
        xq = torch._fake_quantize_learnable_per_tensor_affine(
            x, sx.reshape(1), zx.reshape(1), AQMIN, AQMAX,
            1.0 / (x.numel() * AQMAX) ** 0.5)
        wq = torch._fake_quantize_learnable_per_channel_affine(
            w, sw, torch.zeros(N), 0, WQMIN, WQMAX,
            1.0 / (w.numel() * WQMAX) ** 0.5)
        loss = ((xq @ wq.T - t) ** 2).mean()
        gw, gsw, gsx, gzx = torch.autograd.grad(loss, (w, dsw, dsx, dzx))
        last = (sw.detach().clone(), sx.detach().clone(),
                torch.clamp(torch.round(zx.detach()), AQMIN, AQMAX))
        with torch.no_grad():
            w -= LR * gw
            dsw -= LR * gsw
            dsx -= LR * gsx
            dzx -= LR * gzx
    # The learned values after the last update: start + learned change.
    return {"fc.weight": w.detach().numpy(),
            "weight scale (start + fc.weight_fake_quant.scale)":
                (sw0 + dsw).detach().numpy(),
            "input scale (start + fc.input_fake_quant.scale)":
                (sx0 + dsx).detach().numpy(),
            "input zero point (start + ...zero_point)": (zx0 + dzx).detach().numpy(),
            "qat.weight.scale@fc.weight": last[0].numpy(),
            "qat.input.scale@fc.weight": last[1].numpy(),
            "qat.input.zero_point@fc.weight": last[2].numpy()}


def no_ties(x, s):
    """Moves values off rounding ties x / s = k + 0.5 (by a quarter step)."""
    r = x / s - np.floor(x / s)
    return np.where(np.abs(r - 0.5) < 0.02, x + 0.25 * s, x).astype(np.float32)


def main():
    rng = np.random.default_rng(11)
    w0 = (rng.standard_normal((N, K)) * 0.3).astype(np.float32)
    xs = (rng.standard_normal((STEPS, B, K)) + 0.3).astype(np.float32)
    ts = rng.standard_normal((STEPS, B, N)).astype(np.float32)
    xs = no_ties(xs, 2 * np.abs(xs[0]).mean() / AQMAX ** 0.5)
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "step.mlir")
        with open(path, "w") as f:
            f.write(MODULE)
        params = os.path.join(work, "params")
        os.makedirs(params)
        np.save(os.path.join(params, "fc.weight.npy"), w0)
        # --params loads every parameter, the learned changes too (0).
        for name, shape in (("fc.weight_fake_quant.scale", (N,)),
                            ("fc.input_fake_quant.scale", ()),
                            ("fc.input_fake_quant.zero_point", ())):
            np.save(os.path.join(params, name + ".npy"), np.zeros(shape, np.float32))
        np.save(os.path.join(work, "x.npy"), xs.reshape(STEPS * B, K))
        np.save(os.path.join(work, "t.npy"), ts.reshape(STEPS * B, N))
        out = os.path.join(work, "out")
        r = subprocess.run(
            [DS_RUN, path, "--steps", str(STEPS), "--quiet", "--optimizer", "sgd",
             "--lr", str(LR), "--momentum", "0", "--weight-decay", "0",
             "--fake-quant=learn-scales", "--params", params,
             "--data", "x=" + os.path.join(work, "x.npy"),
             "--data", "t=" + os.path.join(work, "t.npy"),
             # Held-out files, so that no training row is held out.
             "--eval-data", "x=" + os.path.join(work, "x.npy"),
             "--eval-data", "t=" + os.path.join(work, "t.npy"),
             "--save-results", out], capture_output=True, text=True)
        if r.returncode:
            print("ds-run failed:\n" + r.stdout + r.stderr)
            return 1
        got = {f[len("update."):-4]: np.load(os.path.join(out, f))
               for f in os.listdir(out) if f.startswith("update.")}
        got["weight scale (start + fc.weight_fake_quant.scale)"] = (
            got["qat.weight.scale_init@fc.weight"] + got["fc.weight_fake_quant.scale"])
        got["input scale (start + fc.input_fake_quant.scale)"] = (
            got["qat.input.scale_init@fc.weight"] + got["fc.input_fake_quant.scale"])
        got["input zero point (start + ...zero_point)"] = (
            got["qat.input.zero_point_init@fc.weight"]
            + got["fc.input_fake_quant.zero_point"])
    exp = reference(w0, xs, ts)
    bad = 0
    for key, want in exp.items():
        have = got.get(key)
        if have is None:
            print("%-52s missing from ds-run's results" % key)
            bad += 1
            continue
        err = float(np.max(np.abs(have - want)) / max(np.max(np.abs(want)), 1e-6))
        ok = err <= 1e-6
        bad += not ok
        print("%-52s rel err %.1e  %s" % (key, err, "ok" if ok else "FAILED"))
        if not ok and os.environ.get("VERBOSE"):
            print("   ds-run", np.ravel(have)[:4], "torch", np.ravel(want)[:4])
    print("lsq: %d values, %d failed" % (len(exp), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

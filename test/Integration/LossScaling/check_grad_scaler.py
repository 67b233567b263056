#!/usr/bin/env python3
"""Checks ds-insert-loss-scaling's scaler against torch.amp.GradScaler.

A small f32 regression model is trained by ds-run (--loss-scaling
--inject-nonfinite: NaN poisoned into the prediction on chosen steps) and by
PyTorch eager with torch.amp.GradScaler("cpu") on the same batches, the same
steps poisoned. ds-run runs one step per invocation, resuming from its own
checkpoint, so the scaler state (scale, growth tracker) is read after every
step and compared with GradScaler's; the scale used and the skip decision of
every step come from the report. growth_interval = 3 so growth is covered.

The second part checks hysteresis and min-scale against a replica of
Megatron-LM's DynamicGradScaler.update (Megatron is not installed).
Usage: check_grad_scaler.py with DS_RUN set.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DS_RUN = os.environ.get("DS_RUN", "ds-run")
STEPS = 20
B, D, O = 8, 5, 3
POISONED = [2, 3, 5, 9, 10, 11, 15, 19]

MODEL = """
func.func @step(%w: tensor<{O}x{D}xf32> {{ds.param = "fc.weight", ds.init = #ds.init<file>}},
                %b: tensor<{O}xf32> {{ds.param = "fc.bias", ds.init = #ds.init<file>}},
                %x: tensor<{B}x{D}xf32> {{ds.input = "x"}},
                %y: tensor<{B}x{O}xf32> {{ds.input = "y"}})
    -> (tensor<f32> {{ds.loss}}) attributes {{ds.train_step}} {{
  %p = ds.matmul %x, %w transpose_rhs : tensor<{B}x{D}xf32>, tensor<{O}x{D}xf32> -> tensor<{B}x{O}xf32>
  %b2 = ds.reshape %b : tensor<{O}xf32> -> tensor<1x{O}xf32>
  %q = ds.add %p, %b2 : tensor<{B}x{O}xf32>, tensor<1x{O}xf32> -> tensor<{B}x{O}xf32>
  %l = ds.mse_loss %q, %y : tensor<{B}x{O}xf32> -> tensor<f32>
  return %l : tensor<f32>
}}
""".format(B=B, D=D, O=O)


def torch_trace(w0, b0, xs, ys, poisoned, growth_interval):
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=0.05)
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval)
    trace = []
    for t in range(1, STEPS + 1):
        x = torch.tensor(xs[(t - 1) * B:t * B])
        y = torch.tensor(ys[(t - 1) * B:t * B])
        opt.zero_grad()
        q = x @ w.T + b
        if t in poisoned:
            q = q + float("nan")  # NaN in the forward and the backward
        loss = torch.nn.functional.mse_loss(q, y)
        used = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.step(opt)
        found = sum(v.item() for v in
                    scaler._found_inf_per_device(opt).values())
        scaler.update()
        trace.append({"used": used, "skipped": found > 0,
                      "scale": scaler.get_scale(),
                      "tracker": int(scaler._get_growth_tracker()),
                      "loss": loss.item()})
    return trace, {"fc.weight": w.detach().numpy(),
                   "fc.bias": b.detach().numpy()}


def megatron_trace(pattern, init, growth, backoff, interval, hysteresis,
                   min_scale):
    """Megatron-LM's DynamicGradScaler.update, verbatim in plain Python
    (f32 via numpy)."""
    scale = np.float32(init)
    growth_tracker, hysteresis_tracker = 0, hysteresis
    out = []
    for found_inf in pattern:
        used = float(scale)
        if found_inf:
            growth_tracker = 0
            hysteresis_tracker -= 1
            if hysteresis_tracker <= 0:
                scale = np.maximum(np.float32(scale * backoff),
                                   np.float32(min_scale))
        else:
            growth_tracker += 1
            if growth_tracker == interval:
                growth_tracker = 0
                hysteresis_tracker = hysteresis
                scale = np.float32(scale * growth)
        out.append({"used": used, "skipped": bool(found_inf),
                    "scale": float(scale), "tracker": growth_tracker,
                    "hysteresis": hysteresis_tracker})
    return out


def run_stepwise(work, tag, flags, poisoned, extra_state=()):
    """ds-run one step at a time; returns per-step report entries and the
    state after every step."""
    ckpt = os.path.join(work, tag + ".ckpt")
    entries, states = [], []
    for t in range(1, STEPS + 1):
        report = os.path.join(work, "%s-%d.json" % (tag, t))
        cmd = [DS_RUN, os.path.join(work, "model.mlir"), "--steps", str(t),
               "--params", os.path.join(work, "params"),
               "--data", "x=" + work + "/x.npy", "--data", "y=" + work + "/y.npy",
               "--eval-data", "x=" + work + "/x.npy",
               "--eval-data", "y=" + work + "/y.npy",
               "--optimizer", "sgd", "--lr", "0.05",
               "--inject-nonfinite", "at:" + ",".join(map(str, poisoned)),
               "--report", report, "--checkpoint", ckpt, "--quiet"] + flags
        if t > 1:
            cmd += ["--resume", ckpt]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit("ds-run failed:\n%s%s" % (r.stdout, r.stderr))
        step = json.load(open(report))["steps"][-1]
        entries.append((step, r.stdout))
        st = {"scale": float(np.load(ckpt + "/loss_scale.npy")),
              "tracker": int(np.load(ckpt + "/loss_scale.growth_tracker.npy"))}
        for k in extra_state:
            st[k] = int(np.load("%s/loss_scale.%s.npy" % (ckpt, k)))
        states.append(st)
    return entries, states, ckpt


def main():
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((O, D)).astype(np.float32)
    b0 = rng.standard_normal(O).astype(np.float32)
    xs = rng.standard_normal((STEPS * B, D)).astype(np.float32)
    ys = rng.standard_normal((STEPS * B, O)).astype(np.float32)
    failures = []
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "model.mlir"), "w") as f:
            f.write(MODEL)
        os.makedirs(os.path.join(work, "params"))
        np.save(os.path.join(work, "params", "fc.weight.npy"), w0)
        np.save(os.path.join(work, "params", "fc.bias.npy"), b0)
        np.save(os.path.join(work, "x.npy"), xs)
        np.save(os.path.join(work, "y.npy"), ys)

        # 1. GradScaler, growth_interval = 3.
        entries, states, ckpt = run_stepwise(
            work, "torch", ["--loss-scaling=growth-interval=3"], POISONED)
        ref, params = torch_trace(w0, b0, xs, ys, POISONED, 3)
        for t, ((e, log), st, r) in enumerate(zip(entries, states, ref), 1):
            got = (e["loss_scale"], e["skipped"], st["scale"], st["tracker"])
            want = (r["used"], r["skipped"], r["scale"], r["tracker"])
            if got != want:
                failures.append("step %d: ds (used, skipped, scale, tracker) "
                                "= %s, GradScaler %s" % (t, got, want))
            if r["skipped"] and "step %d: non-finite gradients, skipped; loss " \
                    "scale %g -> %g" % (t, r["used"], r["scale"]) not in log:
                failures.append("step %d: no skip line in %r" % (t, log))
            if not r["skipped"] and (e["loss"] is None or abs(e["loss"] - r["loss"]) > 1e-5 * abs(r["loss"])):
                failures.append("step %d: loss %s vs %g" % (t, e["loss"], r["loss"]))
        worst = 0.0
        for name, v in params.items():
            got = np.load(os.path.join(ckpt, name + ".npy"))
            worst = max(worst, float(np.max(np.abs(got - v))))
        if worst > 1e-5:
            failures.append("parameters differ from torch by %g" % worst)
        grown = sum(1 for a, b in zip(ref, ref[1:]) if b["used"] > a["used"])
        print("GradScaler trace: %d steps, %d skipped, %d growths, scales %s; "
              "state equal at every step; params max diff %.1e" % (
                  STEPS, sum(r["skipped"] for r in ref), grown,
                  sorted(set(r["used"] for r in ref)), worst))

        # 2. Megatron hysteresis + min-scale.
        pattern = [t in POISONED for t in range(1, STEPS + 1)]
        mega = megatron_trace(pattern, 65536.0, 2.0, 0.5, 3, 2, 16384.0)
        entries, states, _ = run_stepwise(
            work, "megatron",
            ["--loss-scaling=growth-interval=3 hysteresis=2 min-scale=16384"],
            POISONED, extra_state=("hysteresis",))
        for t, ((e, _), st, r) in enumerate(zip(entries, states, mega), 1):
            got = (e["loss_scale"], e["skipped"], st["scale"], st["tracker"],
                   st["hysteresis"])
            want = (r["used"], r["skipped"], r["scale"], r["tracker"],
                    r["hysteresis"])
            if got != want:
                failures.append("megatron step %d: ds %s, reference %s" %
                                (t, got, want))
        print("Megatron hysteresis=2 min-scale=16384: scales %s; equal at "
              "every step" % [r["used"] for r in mega])
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

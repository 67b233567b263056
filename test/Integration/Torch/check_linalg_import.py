#!/usr/bin/env python3
"""Trains the parity models through torch-mlir + --ds-import-linalg and
compares with PyTorch eager.

For each model of parity_models.py, in f64 and f32: export the forward +
loss with ds_torch.linalg_export (torch-mlir, linalg-on-tensors), raise it
with `ds-opt --ds-import-linalg`, train 20 steps with ds-run (SGD and
AdamW) from the same initial weights on the same batches as PyTorch eager
with torch.optim, and compare every step's loss and the final parameters
and buffers (BatchNorm running statistics) read from ds-run's checkpoint.
Tolerances: f64 |ds - torch| <= 1e-8 |torch| + 1e-10 for every loss,
parameter and buffer; f32 losses within 1e-4 relative.

Usage: check_linalg_import.py with DS_RUN and DS_OPT set and python/ on
PYTHONPATH. Prints one line per configuration with the worst deviations
and the raised fraction, then `N passed, M failed`.
"""

import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity_models  # noqa: E402
from ds_torch.linalg_export import export_linalg  # noqa: E402

DS_RUN = os.environ.get("DS_RUN", "ds-run")
DS_OPT = os.environ.get("DS_OPT", "ds-opt")
STEPS = 20
OPTIMIZERS = {
    "sgd": (["--optimizer", "sgd", "--lr", "0.1"],
            lambda p: torch.optim.SGD(p, lr=0.1)),
    "adamw": (["--optimizer", "adamw", "--lr", "0.01"],
              lambda p: torch.optim.AdamW(p, lr=0.01)),
}
DTYPES = {"f64": torch.float64, "f32": torch.float32}
INPUT_NAMES = {"gpt": ["tokens", "labels"]}
# A gradient below this in every step is rounding noise (the true gradient
# is 0). Adam divides it by sqrt(v) + eps, so such a parameter moves by up
# to lr * |g| / eps per step in a direction set by the noise, which no two
# implementations share: it is compared to NOISE_ABS absolute instead (a
# real gradient moves it by about lr per step).
NOISE_GRAD = 1e-12
NOISE_ABS = 1e-6


def make_model(name, dtype):
    torch.manual_seed(0)
    return parity_models.MODELS[name][0]().to(dtype)


def make_batches(name, dtype):
    make_batch = parity_models.MODELS[name][2]
    g = torch.Generator().manual_seed(1)
    return [make_batch(g, dtype) for _ in range(STEPS)]


def reference(model, loss_fn, batches, make_opt):
    model = copy.deepcopy(model)
    model.train()
    opt = make_opt(model.parameters())
    losses = []
    gmax = {n: 0.0 for n, _ in model.named_parameters()}
    for batch in batches:
        opt.zero_grad()
        loss = loss_fn(model(*batch[:-1]), batch[-1])
        loss.backward()
        losses.append(loss.item())
        for n, p in model.named_parameters():
            gmax[n] = max(gmax[n], float(p.grad.abs().max()))
        opt.step()
    final = {n: p.detach().numpy() for n, p in model.named_parameters()}
    final.update({n: b.detach().numpy() for n, b in model.named_buffers()
                  if b.is_floating_point()})
    # Parameters the loss does not depend on (a bias right before a
    # BatchNorm): their gradient is rounding noise in both implementations.
    noise = {n for n, g in gmax.items() if g < NOISE_GRAD}
    return np.array(losses), final, noise


def deviation(got, want):
    """max |got - want| / (1e-8 |want| + 1e-10): <= 1 passes in f64."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want) / (1e-8 * np.abs(want) + 1e-10)))


def rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-12)))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def check_model(name, dtype_name, work):
    """Returns a list of (label, ok, message)."""
    dtype = DTYPES[dtype_name]
    _, loss_fn, _ = parity_models.MODELS[name]
    model = make_model(name, dtype)
    batches = make_batches(name, dtype)
    names = INPUT_NAMES.get(name, ["x", "labels"])
    text, options = export_linalg(model, loss_fn, batches[0], dtype, names)
    base = os.path.join(work, "%s_%s" % (name, dtype_name))
    with open(base + ".linalg.mlir", "w") as f:
        f.write(text)
    rc, out = run([DS_OPT, "--allow-unregistered-dialect", base + ".linalg.mlir",
                   "--ds-import-linalg=" + options, "-o", base + ".ds.mlir"])
    label = "%s %s" % (name, dtype_name)
    if rc:
        return [(label, False, "ds-import-linalg failed:\n" + out)]
    m = re.search(r"raised (\d+) of (\d+) ops \(([\d.]+)%\)", out)
    raised = m.group(0) if m else "no report"

    params = base + ".params"
    os.makedirs(params, exist_ok=True)
    for n, p in model.named_parameters():
        np.save(os.path.join(params, n + ".npy"), p.detach().numpy())
    for n, b in model.named_buffers():
        if b.is_floating_point():
            np.save(os.path.join(params, n + ".npy"), b.detach().numpy())
    data = []
    for i, n in enumerate(names):
        path = "%s.%s.npy" % (base, n)
        np.save(path, torch.cat([b[i] for b in batches]).numpy())
        data += ["--data", n + "=" + path, "--eval-data", n + "=" + path]

    results = []
    for opt_name, (flags, make_opt) in OPTIMIZERS.items():
        tag = "%s %s %-5s" % (name, dtype_name, opt_name)
        report = "%s.%s.json" % (base, opt_name)
        ckpt = "%s.%s.ckpt" % (base, opt_name)
        rc, out = run([DS_RUN, base + ".ds.mlir", "--steps", str(STEPS),
                       "--quiet", "--params", params, "--report", report,
                       "--checkpoint", ckpt] + data + flags)
        if rc:
            results.append((tag, False, "ds-run failed:\n" + out))
            continue
        ds_losses = np.array([s["loss"] for s in json.load(open(report))["steps"]])
        losses, final, noise = reference(model, loss_fn, batches, make_opt)
        if dtype_name == "f64":
            worst = {"loss": deviation(ds_losses, losses)}
            noise_dev = 0.0
            for n, v in final.items():
                got = np.load(os.path.join(ckpt, n + ".npy"))
                if n in noise and opt_name == "adamw":
                    noise_dev = max(noise_dev, float(np.max(np.abs(got - v))))
                    continue
                worst[n] = deviation(got, v)
            key = max(worst, key=worst.get)
            ok = worst[key] <= 1.0 and noise_dev <= NOISE_ABS
            msg = ("losses rel %.1e, worst %s rel %.1e (%.2f of tolerance); %s" %
                   (rel(ds_losses, losses), key,
                    rel(np.load(os.path.join(ckpt, key + ".npy")), final[key])
                    if key != "loss" else rel(ds_losses, losses),
                    worst[key], raised))
            if noise and opt_name == "adamw":
                msg += "; zero-gradient %s abs %.1e" % (
                    ",".join(sorted(noise)), noise_dev)
        else:
            err = rel(ds_losses, losses)
            pmax = max(float(np.max(np.abs(np.load(os.path.join(ckpt, n + ".npy")) - v)))
                       for n, v in final.items())
            ok = err <= 1e-4
            msg = "losses rel %.1e (tolerance 1e-4), params max abs diff %.1e; %s" % (
                err, pmax, raised)
        results.append((tag, ok, msg))
    return results


def main():
    torch.set_num_threads(2)
    results = []
    with tempfile.TemporaryDirectory() as work:
        for name in parity_models.MODELS:
            for dtype_name in DTYPES:
                results += check_model(name, dtype_name, work)
    failed = 0
    for tag, ok, msg in results:
        print("%-4s %s: %s" % ("ok" if ok else "FAIL", tag, msg))
        failed += not ok
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

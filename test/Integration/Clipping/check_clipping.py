#!/usr/bin/env python3
"""Checks ds-clip-gradients and the anomaly detector by running ds-run.

The model is loss = sum_i sum(p_i * x_i) in f64, so the gradient of p_i is
exactly the input x_i fed that step: the gradients (and their norms) are
chosen by the test. Parameters are named like a transformer's
(`layers.0.attn.q_proj.weight`: attention, `layers.0.mlp.fc1.weight`: FFN,
`head.weight`: other). SGD with lr = 1 makes each update the clipped
gradient.

1. mode=global (L2 and inf) against torch.nn.utils.clip_grad_norm_, step by
   step over a training run (losses, clip coefficients, parameters).
2. mode=adaptive against a NumPy implementation of the formula (history 4,
   so the ring buffer wraps, and the default 1000).
3. noise-std: reproducible from the seed, different for another seed, with
   the requested standard deviation.
4. The anomaly detector of ds-insert-loss-scaling on a synthetic sequence of
   gradient norms (with poisoned steps in between, which do not count):
   it fires exactly where the definition says.
Usage: check_clipping.py with DS_RUN set.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

DS_RUN = os.environ.get("DS_RUN", "ds-run")
SHAPES = {"layers.0.attn.q_proj.weight": (4, 3),
          "layers.0.mlp.fc1.weight": (4, 2),
          "head.weight": (4,)}
INPUTS = {"layers.0.attn.q_proj.weight": "x_q",
          "layers.0.mlp.fc1.weight": "x_fc",
          "head.weight": "x_h"}


def model(shapes):
    args, body, sums = [], [], []
    for k, (name, shape) in enumerate(shapes.items()):
        t = "tensor<%sxf64>" % "x".join(map(str, shape))
        dims = ", ".join(map(str, range(len(shape))))
        args.append('%%p%d: %s {ds.param = "%s", ds.init = #ds.init<file>}'
                    % (k, t, name))
        args.append('%%x%d: %s {ds.input = "%s"}' % (k, t, INPUTS.get(name, "x%d" % k)))
        body.append("  %%m%d = ds.mul %%p%d, %%x%d : %s, %s -> %s" % (k, k, k, t, t, t))
        body.append("  %%s%d = ds.reduce_sum %%m%d [%s] : %s -> tensor<f64>" % (k, k, dims, t))
        sums.append("%%s%d" % k)
    acc = sums[0]
    for k, s in enumerate(sums[1:]):
        body.append("  %%a%d = ds.add %s, %s : tensor<f64>, tensor<f64> -> tensor<f64>" % (k, acc, s))
        acc = "%%a%d" % k
    return ("func.func @step(%s)\n    -> (tensor<f64> {ds.loss}) attributes {ds.train_step} {\n%s\n"
            "  return %s : tensor<f64>\n}\n") % (",\n    ".join(args), "\n".join(body), acc)


def setup(work, shapes, steps, rng, scales):
    """Writes the model, initial params and per-step gradients (inputs)."""
    with open(os.path.join(work, "model.mlir"), "w") as f:
        f.write(model(shapes))
    os.makedirs(os.path.join(work, "params"), exist_ok=True)
    p0, grads = {}, {}
    for name, shape in shapes.items():
        p0[name] = rng.standard_normal(shape)
        np.save(os.path.join(work, "params", name + ".npy"), p0[name])
        g = np.stack([scales[t] * rng.standard_normal(shape) for t in range(steps)])
        grads[name] = g
        np.save(os.path.join(work, INPUTS.get(name, name) + ".npy"),
                g.reshape((steps * shape[0],) + shape[1:]))
    return p0, grads


def ds_run(work, shapes, steps, flags, tag, seed=0):
    report = os.path.join(work, tag + ".json")
    ckpt = os.path.join(work, tag + ".ckpt")
    cmd = [DS_RUN, os.path.join(work, "model.mlir"), "--steps", str(steps),
           "--seed", str(seed), "--params", os.path.join(work, "params"),
           "--optimizer", "sgd", "--lr", "1", "--report", report,
           "--checkpoint", ckpt, "--print-every", "1000"] + flags
    for name in shapes:
        f = os.path.join(work, INPUTS.get(name, name) + ".npy")
        cmd += ["--data", "%s=%s" % (INPUTS.get(name, name), f),
                "--eval-data", "%s=%s" % (INPUTS.get(name, name), f)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("ds-run failed:\n" + r.stdout + r.stderr)
    params = {n: np.load(os.path.join(ckpt, n + ".npy")) for n in shapes}
    return json.load(open(report))["steps"], params, r.stdout


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def check_global(work, failures):
    steps = 10
    rng = np.random.default_rng(1)
    scales = rng.uniform(0.05, 2.0, steps)
    p0, grads = setup(work, SHAPES, steps, rng, scales)
    for norm in ("2", "inf"):
        got_steps, got, _ = ds_run(
            work, SHAPES, steps,
            ["--clip-gradients=mode=global max-norm=1.5 norm-type=" + norm],
            "global" + norm)
        ps = [torch.tensor(p0[n], requires_grad=True) for n in SHAPES]
        opt = torch.optim.SGD(ps, lr=1.0)
        coefs, losses, clipped = [], [], 0
        for t in range(steps):
            opt.zero_grad()
            xs = [torch.tensor(grads[n][t]) for n in SHAPES]
            loss = sum((p * x).sum() for p, x in zip(ps, xs))
            loss.backward()
            total = torch.nn.utils.clip_grad_norm_(
                ps, 1.5, norm_type=float("inf") if norm == "inf" else 2.0)
            coefs.append(min(1.5 / (float(total) + 1e-6), 1.0))
            clipped += coefs[-1] < 1
            losses.append(loss.item())
            opt.step()
        err = max(rel([s["loss"] for s in got_steps], losses),
                  rel([s["metrics"]["clip_coef"] for s in got_steps], coefs),
                  max(rel(got[n], ps[k].detach().numpy())
                      for k, n in enumerate(SHAPES)))
        print("global norm-type=%s vs torch clip_grad_norm_: %d steps (%d "
              "clipped), worst rel err %.1e" % (norm, steps, clipped, err))
        if err > 1e-12:
            failures.append("global %s: rel err %.2e" % (norm, err))


def adaptive_reference(p0, grads, steps, history):
    kinds = {"layers.0.attn.q_proj.weight": "l2",
             "layers.0.mlp.fc1.weight": "inf", "head.weight": "l2"}
    p = {n: v.copy() for n, v in p0.items()}
    hist, thresholds, t = [], [], None
    for s in range(steps):
        g = {n: grads[n][s] for n in p}
        n_t = np.sqrt(sum(np.linalg.norm(v.ravel()) ** 2 for v in g.values()))
        hist = (hist + [n_t])[-history:]
        t = n_t if t is None else 0.9 * t + 0.1 * np.mean(hist)
        thresholds.append(t)
        for n, v in g.items():
            norm = np.linalg.norm(v.ravel()) if kinds[n] == "l2" else np.max(np.abs(v))
            p[n] = p[n] - v * min(1.0, t / norm)
    return p, thresholds


def check_adaptive(work, failures):
    steps = 14
    rng = np.random.default_rng(2)
    scales = np.exp(rng.uniform(-1.5, 1.5, steps))
    p0, grads = setup(work, SHAPES, steps, rng, scales)
    for history in (4, 1000):
        got_steps, got, _ = ds_run(
            work, SHAPES, steps,
            ["--clip-gradients=mode=adaptive history=%d" % history],
            "adaptive%d" % history)
        ref, thr = adaptive_reference(p0, grads, steps, history)
        err = max(rel([s["metrics"]["clip_threshold"] for s in got_steps], thr),
                  max(rel(got[n], ref[n]) for n in SHAPES))
        print("adaptive history=%d vs NumPy: %d steps, worst rel err %.1e" %
              (history, steps, err))
        if err > 1e-12:
            failures.append("adaptive %d: rel err %.2e" % (history, err))


def check_noise(work, failures):
    shapes = {"layers.0.attn.q_proj.weight": (64, 64), "head.weight": (64,)}
    steps = 3
    rng = np.random.default_rng(3)
    p0, _ = setup(work, shapes, steps, rng, np.zeros(steps))
    flags = ["--clip-gradients=mode=adaptive noise-std=0.01"]
    _, a, _ = ds_run(work, shapes, steps, flags, "noise_a", seed=7)
    _, b, _ = ds_run(work, shapes, steps, flags, "noise_b", seed=7)
    _, c, _ = ds_run(work, shapes, steps, flags, "noise_c", seed=8)
    # Zero gradients: each update is -noise; three steps add three draws.
    d = np.concatenate([(p0[n] - a[n]).ravel() for n in shapes]) / np.sqrt(steps)
    same = all(np.array_equal(a[n], b[n]) for n in shapes)
    differ = all(not np.array_equal(a[n], c[n]) for n in shapes)
    std, mean = float(np.std(d)), float(np.mean(d))
    print("noise-std=0.01: %d samples, std %.5f, mean %.1e; same seed "
          "identical: %s; other seed differs: %s" % (d.size, std, mean, same, differ))
    if not (same and differ and abs(std - 0.01) < 0.0005 and abs(mean) < 0.0005):
        failures.append("noise: std %g mean %g same %s differ %s" %
                        (std, mean, same, differ))


def check_anomaly(work, failures):
    # Global norms per step; poisoned steps (None) are skipped and neither
    # count nor break a run. eps = 0.25: growth must exceed 25 %.
    norms = [1.0, 1.3, 1.7, 2.2, 2.3, 2.9, 3.7, 4.7, None, 6.0, 1.0, 1.25,
             1.6, None, 2.1, 2.7, 0.5, 0.7, 0.9, 1.2]
    steps = len(norms)
    shapes = {"head.weight": (4,)}
    with open(os.path.join(work, "model.mlir"), "w") as f:
        f.write(model(shapes))
    os.makedirs(os.path.join(work, "params"), exist_ok=True)
    np.save(os.path.join(work, "params", "head.weight.npy"), np.zeros(4))
    x = np.zeros((steps * 4,))
    for t, n in enumerate(norms):
        x[4 * t] = 0.0 if n is None else n
    np.save(os.path.join(work, "x_h.npy"), x)
    poisoned = [t + 1 for t, n in enumerate(norms) if n is None]
    got_steps, _, log = ds_run(
        work, shapes, steps,
        ["--loss-scaling", "--inject-nonfinite=" + ",".join(map(str, poisoned)) + ","],
        "anomaly")
    # The definition, literally.
    expected, clean = [], []
    for t, n in enumerate(norms, 1):
        if n is None:
            continue
        clean.append((t, n))
        last = clean[-4:]
        if len(last) == 4 and all(b[1] > 1.25 * a[1] for a, b in zip(last, last[1:])):
            expected.append(t)
    got = [s["step"] for s in got_steps if s["metrics"]["anomaly"] > 0.5]
    logged = [int(m) for m in re.findall(r"^step (\d+): gradient anomaly", log, re.M)]
    norms_ok = all(s["metrics"]["grad_norm"] == n for s, n in zip(got_steps, norms)
                   if n is not None)
    print("anomaly detector: norms %s -> anomalies at %s (expected %s), "
          "logged %s" % (norms, got, expected, logged))
    if got != expected or logged != expected or not norms_ok:
        failures.append("anomaly: got %s logged %s expected %s norms_ok %s"
                        % (got, logged, expected, norms_ok))


def main():
    failures = []
    for check in (check_global, check_adaptive, check_noise, check_anomaly):
        with tempfile.TemporaryDirectory() as work:
            check(work, failures)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The dynamic per-layer bit-width (ds-insert-fake-quant{dynamic-bits} and
ds-qat-bit-width) against a plain loop: three int4 layers whose weight
gradients are fed as data (loss = sum((I W^T) * G), so dW = G^T, with
weights whose per-row largest |w| is negative, so that the straight-through
mask passes everything), layer a given high-variance gradients for the
first steps and tiny ones after. The loop predicts each step's tier from
the same rule (ratio to the mean variance, running estimate, promote above
the threshold, demote after a calm window, never below int4); the
`qat.bits.<weight>` metrics of ds-run's report must match it at every
step: promoted exactly on the predicted iterations, and demoted back.

Usage: check_bit_width.py with DS_OPT and DS_RUN in the environment.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

DS_OPT = os.environ.get("DS_OPT", "ds-opt")
DS_RUN = os.environ.get("DS_RUN", "ds-run")
STEPS, K, THRESHOLD, WINDOW, MOMENTUM = 16, 4, 2.0, 3, 0.5
LAYERS = ("a", "b", "c")


def module():
    t = "tensor<4x4xf32>"
    args = ['%%w%s: %s {ds.param = "%s.weight", ds.init = #ds.init<file>}' % (n, t, n)
            for n in LAYERS]
    args += ['%%x%s: %s {ds.input = "x%s"}' % (n, t, n) for n in LAYERS]
    args += ['%%g%s: %s {ds.input = "g%s"}' % (n, t, n) for n in LAYERS]
    body = []
    for n in LAYERS:
        body.append("  %%y%s = ds.matmul %%x%s, %%w%s transpose_rhs : %s, %s -> %s"
                    % (n, n, n, t, t, t))
        body.append("  %%p%s = ds.mul %%y%s, %%g%s : %s, %s -> %s" % (n, n, n, t, t, t))
        body.append("  %%l%s = ds.reduce_sum %%p%s [0, 1] : %s -> tensor<f32>" % (n, n, t))
    body.append("  %s0 = ds.add %la, %lb : tensor<f32>, tensor<f32> -> tensor<f32>")
    body.append("  %l = ds.add %s0, %lc : tensor<f32>, tensor<f32> -> tensor<f32>")
    return ("func.func @step(%s) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {\n"
            "%s\n  return %%l : tensor<f32>\n}\n" % (", ".join(args), "\n".join(body)))


def predict(grads):
    """Per step and layer, the bits in effect (the rule, in f64)."""
    tier = {n: 0.0 for n in LAYERS}
    est = {n: -1.0 for n in LAYERS}
    calm = {n: 0.0 for n in LAYERS}
    bits = []
    for t in range(STEPS):
        bits.append({n: (4, 8, 32)[int(tier[n])] for n in LAYERS})
        var = {n: float(np.mean(grads[n][t].astype(np.float64) ** 2) -
                        np.mean(grads[n][t].astype(np.float64)) ** 2) for n in LAYERS}
        mean = sum(var.values()) / len(LAYERS)
        for n in LAYERS:
            r = var[n] / mean
            e = r if est[n] < 0 else MOMENTUM * est[n] + (1 - MOMENTUM) * r
            up, low = e > THRESHOLD, e < THRESHOLD / 2
            new_tier = min(tier[n] + 1, 2) if up else tier[n]
            new_calm = 0.0 if up else (calm[n] + 1 if low else 0.0)
            if new_calm >= WINDOW and tier[n] > 0:
                new_tier, new_calm = tier[n] - 1, 0.0
            est[n], tier[n], calm[n] = e, new_tier, new_calm
    return bits


def main():
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as work:
        src = os.path.join(work, "step.mlir")
        with open(src, "w") as f:
            f.write(module())
        policy = os.path.join(work, "int4.yaml")
        with open(policy, "w") as f:
            f.write("quant:\n  - op: ds.matmul\n    weight: int4\n    group: channel\n"
                    "    activation: none\n")
        step = os.path.join(work, "qat.mlir")
        r = subprocess.run(
            [DS_OPT, src, "--ds-training-pipeline=fake-quant-policy=%s "
             "fake-quant-weight-observer=current fake-quant-dynamic-bits "
             "fake-quant-bits-threshold=%g fake-quant-bits-window=%d "
             "fake-quant-bits-momentum=%g optimizer-kind=sgd optimizer-lr=1e-30"
             % (policy, THRESHOLD, WINDOW, MOMENTUM), "-o", step],
            capture_output=True, text=True)
        if r.returncode:
            print(r.stderr)
            return 1
        init = os.path.join(work, "init")
        os.makedirs(init)
        for n in LAYERS:
            w = rng.uniform(0.1, 0.9, (K, K)).astype(np.float32)
            w[np.arange(K), rng.integers(0, K, K)] = -1.0  # each row's largest |w|
            np.save(os.path.join(init, n + ".weight.npy"), w)
        grads, cmd = {}, [DS_RUN, step, "--steps", str(STEPS), "--quiet", "--params",
                          init, "--report", os.path.join(work, "r.json")]
        for n in LAYERS:
            scale = np.ones(STEPS)
            if n == "a":
                scale[:5], scale[5:] = 3.0, 0.05
            g = (rng.standard_normal((STEPS, K, K)) * scale[:, None, None]).astype(np.float32)
            grads[n] = np.transpose(g, (0, 2, 1))  # dW = G^T
            np.save(os.path.join(work, "g%s.npy" % n), g.reshape(STEPS * K, K))
            np.save(os.path.join(work, "x%s.npy" % n),
                    np.tile(np.eye(K, dtype=np.float32), (STEPS, 1)))
            for kind in ("g", "x"):
                path = os.path.join(work, "%s%s.npy" % (kind, n))
                cmd += ["--data", "%s%s=%s" % (kind, n, path),
                        "--eval-data", "%s%s=%s" % (kind, n, path)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(r.stdout + r.stderr)
            return 1
        report = json.load(open(os.path.join(work, "r.json")))
        got = [{n: int(s["metrics"]["qat.bits.%s.weight" % n]) for n in LAYERS}
               for s in report["steps"]]
    expected = predict(grads)
    line = lambda seq, n: " ".join(str(b[n]) for b in seq)
    ok = got == expected
    for n in LAYERS:
        print("layer %s bits per step: %s%s" % (n, line(got, n), "" if ok else
                                                "\n        predicted: " + line(expected, n)))
    promoted = any(b["a"] > 4 for b in got) and got[-1]["a"] == 4
    print("%s bits match the predicted tiers at every step; layer a promoted and "
          "demoted back: %s" % ("ok  " if ok else "FAIL", promoted))
    return 0 if ok and promoted else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""ds-insert-fake-quant against torch.ao's FakeQuantize modules, by running
compiled code: a linear layer y = fq_a(x) fq_w(W)^T with loss sum(y * g),
trained by ds-run and by PyTorch on the same 20 batches, with torch.ao's
x86 QAT qconfig (activations quint8 0..127 affine with a moving-average
observer, weights qint8 per-channel symmetric), the observers frozen from
iteration FREEZE (disable_observer) and fake quantization on from
iteration START (enable_fake_quant).

  lr ~ 0 (the weight stays exactly as it is): after every step, the
    observers' min / max and the scales and zero points of both
    fake-quantizers are bit-identical to torch.ao's (the loss, a GEMM and a
    sum, within 1e-5 relative);
  lr = 0.05 (a real training loop, where the weight gradient's GEMM may
    round differently by an ulp): at every step scales within 1e-5
    relative, zero points within +-1, the loss within 1e-5 relative.

Usage: check_qat.py with DS_OPT and DS_RUN in the environment.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch.ao.quantization import (FakeQuantize, MovingAverageMinMaxObserver,
                                   MovingAveragePerChannelMinMaxObserver)

DS_OPT = os.environ.get("DS_OPT", "ds-opt")
DS_RUN = os.environ.get("DS_RUN", "ds-run")
STEPS, FREEZE, START = 20, 12, 3
B, K, N = 8, 10, 6

MODULE = """
func.func @step(%w: tensor<6x10xf32> {ds.param = "fc.weight", ds.init = #ds.init<file>},
                %x: tensor<8x10xf32> {ds.input = "x"}, %g: tensor<8x6xf32> {ds.input = "g"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %y = ds.matmul %x, %w transpose_rhs : tensor<8x10xf32>, tensor<6x10xf32> -> tensor<8x6xf32>
  %p = ds.mul %y, %g : tensor<8x6xf32>, tensor<8x6xf32> -> tensor<8x6xf32>
  %l = ds.reduce_sum %p [0, 1] : tensor<8x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}
"""


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def torch_run(w0, xs, gs, lr):
    """Per step: the loss and the fake-quantizers' state after the step."""
    act = FakeQuantize(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=127,
                       dtype=torch.quint8, qscheme=torch.per_tensor_affine)
    wfq = FakeQuantize(observer=MovingAveragePerChannelMinMaxObserver, quant_min=-128,
                       quant_max=127, dtype=torch.qint8,
                       qscheme=torch.per_channel_symmetric, ch_axis=0)
    w = torch.tensor(w0, requires_grad=True)
    opt = torch.optim.SGD([w], lr=lr)
    out = []
    for k in range(STEPS):
        for fq in (act, wfq):
            if k < START:
                fq.disable_fake_quant()
            else:
                fq.enable_fake_quant()
            if k >= FREEZE:
                fq.disable_observer()
        x = torch.tensor(xs[k * B:(k + 1) * B])
        g = torch.tensor(gs[k * B:(k + 1) * B])
        y = torch.nn.functional.linear(act(x), wfq(w))
        loss = (y * g).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        state = {"loss": loss.item()}
        for tag, fq in (("input", act), ("weight", wfq)):
            obs = fq.activation_post_process
            state[tag + ".min"] = obs.min_val.detach().numpy().copy()
            state[tag + ".max"] = obs.max_val.detach().numpy().copy()
            state[tag + ".scale"] = fq.scale.detach().numpy().copy().reshape(
                obs.min_val.shape)
            state[tag + ".zero_point"] = fq.zero_point.numpy().astype(
                np.float32).reshape(obs.min_val.shape)
        out.append(state)
    return out


def ds_run(work, w0, xs, gs, lr, steps=STEPS, extra=""):
    """Per step: the same, from a ds-run of 1, 2, ... `steps` steps."""
    src = os.path.join(work, "step.mlir")
    with open(src, "w") as f:
        f.write(MODULE)
    step = os.path.join(work, "qat-%g%s.mlir" % (lr, extra and "-policy"))
    run([DS_OPT, src, "--ds-training-pipeline=fake-quant "
         "fake-quant-freeze-observers-at=%d fake-quant-from=%d optimizer-kind=sgd "
         "optimizer-lr=%r%s" % (FREEZE, START, lr, extra), "-o", step])
    init = os.path.join(work, "init")
    os.makedirs(init, exist_ok=True)
    np.save(os.path.join(init, "fc.weight.npy"), w0)
    np.save(os.path.join(work, "x.npy"), xs)
    np.save(os.path.join(work, "g.npy"), gs)
    out = []
    for n in range(1, steps + 1):
        res = os.path.join(work, "res-%g%s-%d" % (lr, extra and "-policy", n))
        run([DS_RUN, step, "--steps", str(n), "--quiet", "--params", init,
             "--data", "x=" + os.path.join(work, "x.npy"),
             "--data", "g=" + os.path.join(work, "g.npy"),
             # Every row trains (no held-out tail).
             "--eval-data", "x=" + os.path.join(work, "x.npy"),
             "--eval-data", "g=" + os.path.join(work, "g.npy"), "--save-results", res])
        r = {f[:-4]: np.load(os.path.join(res, f)) for f in os.listdir(res)}
        state = {"loss": float(r["loss"])}
        for tag in ("input", "weight"):
            for q in ("min", "max", "scale", "zero_point"):
                state[tag + "." + q] = r["update.qat.%s.%s@fc.weight" % (tag, q)]
        out.append(state)
    return out


def same_bits(a, b):
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def main():
    rng = np.random.default_rng(11)
    w0 = (rng.standard_normal((N, K)) * 0.3).astype(np.float32)
    # Batches whose ranges move, so that the moving averages move.
    xs = np.concatenate([(rng.standard_normal((B, K)) * (1 + 0.5 * np.sin(k))
                          + 0.3 * np.cos(k)) for k in range(STEPS)]).astype(np.float32)
    gs = rng.standard_normal((STEPS * B, N)).astype(np.float32)
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        # 1. The weight fixed: everything bit-identical.
        ref = torch_run(w0, xs, gs, 1e-30)
        got = ds_run(work, w0, xs, gs, 1e-30)
        bad = []
        for k, (e, d) in enumerate(zip(ref, got)):
            for key in e:
                if key == "loss":
                    if abs(d[key] - e[key]) > 1e-5 * max(abs(e[key]), 1e-6):
                        bad.append("step %d loss %r vs torch %r" % (k, d[key], e[key]))
                elif not same_bits(d[key], e[key]):
                    bad.append("step %d %s: %s != torch %s" % (k, key, d[key], e[key]))
        print("%-4s observer state bit-identical at each of %d steps%s" % (
            "ok" if not bad else "FAIL", STEPS, "".join("\n  " + b for b in bad[:8])))
        failures += bool(bad)
        # 2. A training loop.
        ref = torch_run(w0, xs, gs, 0.05)
        got = ds_run(work, w0, xs, gs, 0.05)
        worst = {"scale": 0.0, "zero_point": 0.0, "loss": 0.0}
        bad = []
        for k, (e, d) in enumerate(zip(ref, got)):
            le = abs(d["loss"] - e["loss"]) / max(abs(e["loss"]), 1e-6)
            worst["loss"] = max(worst["loss"], le)
            if le > 1e-5:
                bad.append("step %d loss %r vs torch %r" % (k, d["loss"], e["loss"]))
            for tag in ("input", "weight"):
                s = np.max(np.abs(d[tag + ".scale"] - e[tag + ".scale"]) /
                           np.abs(e[tag + ".scale"]))
                z = np.max(np.abs(d[tag + ".zero_point"] - e[tag + ".zero_point"]))
                worst["scale"] = max(worst["scale"], float(s))
                worst["zero_point"] = max(worst["zero_point"], float(z))
                if s > 1e-5 or z > 1:
                    bad.append("step %d %s: scale rel %.1e, zero point %g" % (k, tag, s, z))
        print("%-4s training loop: worst scale rel %.1e, zero point %g, loss rel %.1e%s" % (
            "ok" if not bad else "FAIL", worst["scale"], worst["zero_point"],
            worst["loss"], "".join("\n  " + b for b in bad[:8])))
        failures += bool(bad)
        # 3. INT4 weights per group of 5 along the reduction axis (a policy
        #    file): the per-group symmetric scales against NumPy.
        policy = os.path.join(work, "int4.yaml")
        with open(policy, "w") as f:
            f.write("quant:\n  - op: ds.matmul\n    weight: int4\n    group: 5\n"
                    "    activation: uint8\n")
        got = ds_run(work, w0, xs, gs, 1e-30, steps=2,
                     extra=" fake-quant-policy=" + policy)
        groups = w0.reshape(N, K // 5, 5)
        lo = np.minimum(groups.min(axis=2), np.float32(0))
        hi = np.maximum(groups.max(axis=2), np.float32(0))
        scale = np.maximum((np.maximum(-lo, hi) / np.float32(7.5)).astype(np.float32),
                           np.finfo(np.float32).eps).astype(np.float32)
        ok = all(same_bits(d["weight.scale"], scale) and
                 same_bits(d["weight.min"], groups.min(axis=2)) for d in got)
        print("%-4s int4 per-group weight scales bit-identical to NumPy%s" % (
            "ok" if ok else "FAIL", "" if ok else ": %s vs %s" % (
                got[-1]["weight.scale"], scale)))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

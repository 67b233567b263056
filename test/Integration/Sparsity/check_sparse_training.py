#!/usr/bin/env python3
"""Checks dynamic block sparsity (ds-sparsify-matmul) against a reference.

A three-layer MLP (fc1, fc2 block-sparse; fc3, the head, dense) is trained
by ds-run and by an independent reference: PyTorch autograd on the weights
multiplied by their expanded masks as dense tensors, the masks updated by a
NumPy top-k on the block scores (stable argsort: ties drop the lower index
first), RigL's rules (the dense gradient of the masked weight scores the
regrowth; no optimizer step on a mask-update iteration, so torch.optim's
step count holds; dropped blocks and their moments zeroed, grown blocks
start at zero) and torch.optim. Compared, per configuration:
  - the loss of every step, the scheduled sparsity s(t) of every step
    against the closed form, and the blocks dropped and grown per update;
  - the final parameters, masks, optimizer moments and step count from
    ds-run's checkpoint;
  - that weights and moments are exactly zero outside the masks.
In f64 through the dense reference lowering (1e-10), and the first
configuration again in f32 through the runtime's 8x8 kernels (losses 1e-4
relative). Usage: check_sparse_training.py with DS_RUN set.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DS_RUN = os.environ.get("DS_RUN", "ds-run")
STEPS = 20
B, D, H, O = 12, 32, 64, 8
BLOCK = 8

MODEL = """
func.func @step(%w1: tensor<{H}x{D}x{t}> {{ds.param = "fc1.weight", ds.init = #ds.init<file>}},
                %b1: tensor<{H}x{t}> {{ds.param = "fc1.bias", ds.init = #ds.init<file>}},
                %w2: tensor<{H}x{H}x{t}> {{ds.param = "fc2.weight", ds.init = #ds.init<file>}},
                %w3: tensor<{O}x{H}x{t}> {{ds.param = "fc3.weight", ds.init = #ds.init<file>}},
                %x: tensor<{B}x{D}x{t}> {{ds.input = "x"}},
                %y: tensor<{B}x{O}x{t}> {{ds.input = "y"}})
    -> (tensor<{t}> {{ds.loss}}) attributes {{ds.train_step}} {{
  %h1 = ds.matmul %x, %w1 transpose_rhs : tensor<{B}x{D}x{t}>, tensor<{H}x{D}x{t}> -> tensor<{B}x{H}x{t}>
  %bb = ds.reshape %b1 : tensor<{H}x{t}> -> tensor<1x{H}x{t}>
  %h2 = ds.add %h1, %bb : tensor<{B}x{H}x{t}>, tensor<1x{H}x{t}> -> tensor<{B}x{H}x{t}>
  %a1 = ds.tanh %h2 : tensor<{B}x{H}x{t}>
  %h3 = ds.matmul %a1, %w2 transpose_rhs : tensor<{B}x{H}x{t}>, tensor<{H}x{H}x{t}> -> tensor<{B}x{H}x{t}>
  %a2 = ds.tanh %h3 : tensor<{B}x{H}x{t}>
  %q = ds.matmul %a2, %w3 transpose_rhs : tensor<{B}x{H}x{t}>, tensor<{O}x{H}x{t}> -> tensor<{B}x{O}x{t}>
  %l = ds.mse_loss %q, %y : tensor<{B}x{O}x{t}> -> tensor<{t}>
  return %l : tensor<{t}>
}}
"""

SPARSE = ["fc1.weight", "fc2.weight"]

# name, --sparsity options, settings for the reference, optimizer flags,
# torch optimizer factory.
CONFIGS = [
    ("cosine-uniform-regrow",
     "schedule=cosine initial=0.5 final=0.8 hold=0.2 update-every=7 regrow "
     "drop-fraction=0.5",
     dict(schedule="cosine", initial=0.5, final=0.8, hold=0.2, every=7,
          regrow=True, drop=0.5, end=0.75, dist="uniform", score="l1"),
     ["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.1"],
     lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
    ("cubic-erk-l2",
     "schedule=cubic initial=0.3 final=0.7 hold=0.1 update-every=5 "
     "distribution=erk score=l2",
     dict(schedule="cubic", initial=0.3, final=0.7, hold=0.1, every=5,
          regrow=False, drop=0.3, end=0.75, dist="erk", score="l2"),
     ["--optimizer", "momentum", "--lr", "0.05", "--weight-decay", "0.01"],
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("constant-global-regrow",
     "schedule=constant final=0.75 update-every=6 regrow distribution=global "
     "drop-fraction=0.3 regrow-end=0.9",
     dict(schedule="constant", initial=0.8, final=0.75, hold=0.3, every=6,
          regrow=True, drop=0.3, end=0.9, dist="global", score="l1"),
     ["--optimizer", "adam", "--lr", "0.01"],
     lambda p: torch.optim.Adam(p, lr=0.01)),
]

STATE_NAMES = {"exp_avg": "adam.m", "exp_avg_sq": "adam.v",
               "momentum_buffer": "momentum_buffer"}


def scheduled(c, t):
    """s(t): the closed forms of ds-sparsify-matmul's description."""
    if c["schedule"] == "constant":
        return c["final"]
    T = STEPS
    p = (t - c["hold"] * T) / ((1 - c["hold"]) * T)
    p = min(max(p, 0.0), 1.0)
    if c["schedule"] == "cubic":
        return c["final"] + (c["initial"] - c["final"]) * (1 - p) ** 3
    return c["final"] - (c["final"] - c["initial"]) * (1 + math.cos(math.pi * p)) / 2


def regrowing(c, t):
    return c["regrow"] and 0 < t < c["end"] * STEPS


def drop_fraction(c, t):
    p = min(t / (c["end"] * STEPS), 1.0)
    return c["drop"] / 2 * (1 + math.cos(math.pi * p))


def is_update(c, t):
    if t % c["every"]:
        return False
    return (t == 0 or scheduled(c, t) != scheduled(c, t - c["every"])
            or regrowing(c, t))


def block_scores(x, kind):
    r, k = x.shape
    xb = x.reshape(r // BLOCK, BLOCK, k // BLOCK, BLOCK)
    return (np.abs(xb) if kind == "l1" else xb * xb).sum(axis=(1, 3))


def top_k(scores, k):
    """1 on the k highest: the tail of a stable ascending sort."""
    flat = scores.ravel()
    mask = np.zeros(flat.size, np.int8)
    if k > 0:
        mask[np.argsort(flat, kind="stable")[flat.size - k:]] = 1
    return mask.reshape(scores.shape)


def expand(mask):
    return np.kron(mask, np.ones((BLOCK, BLOCK))).astype(bool)


def erk_active(shapes, s):
    n = len(shapes)
    size = [r * k for r, k in shapes]
    raw = [(r + k) / (r * k) for r, k in shapes]
    order = sorted(range(n), key=lambda i: -raw[i])
    target = (1 - s) * sum(size)
    eps = None
    for j in range(n - 1, -1, -1):
        dense = sum(size[order[i]] for i in range(j))
        weighted = sum(raw[order[i]] * size[order[i]] for i in range(j, n))
        e = (target - dense) / weighted
        if eps is None:
            eps = e
        elif e * raw[order[j]] <= 1:
            eps = e
    blocks = [r * k // BLOCK // BLOCK for r, k in shapes]
    return [int(min(max(eps * raw[i], 0.0), 1.0) * blocks[i] + 0.5)
            for i in range(n)]


def new_masks(c, t, masks, weights, dense_grads):
    """The masks after the update at iteration t, and the per-layer counts."""
    s = scheduled(c, t)
    shapes = [weights[p].shape for p in SPARSE]
    nbs = [masks[p].size for p in SPARSE]
    df = drop_fraction(c, t)
    grow = lambda a: int(df * a) if regrowing(c, t) else 0
    wsc = [np.where(masks[p] != 0, block_scores(weights[p], c["score"]), -1.0)
           for p in SPARSE]
    gsc = [block_scores(dense_grads[p], c["score"]) for p in SPARSE]
    if c["dist"] == "global":
        total = sum(nbs)
        active = total - int(s * total + 0.5)
        g = grow(active)
        keep = top_k(np.concatenate([w.ravel() for w in wsc]), active - g)
        keeps, off = [], 0
        for p, nb in zip(SPARSE, nbs):
            keeps.append(keep[off:off + nb].reshape(masks[p].shape))
            off += nb
        gs = np.concatenate([np.where(k != 0, -1.0, gg).ravel()
                             for k, gg in zip(keeps, gsc)])
        grown = top_k(gs, g)
        out, off = {}, 0
        for p, nb, k in zip(SPARSE, nbs, keeps):
            out[p] = k + grown[off:off + nb].reshape(k.shape)
            off += nb
        return out
    if c["dist"] == "erk":
        actives = erk_active(shapes, s)
    else:
        actives = [nb - int(s * nb + 0.5) for nb in nbs]
    out = {}
    for p, a, w, gg in zip(SPARSE, actives, wsc, gsc):
        g = grow(a)
        keep = top_k(w, a - g)
        out[p] = keep + top_k(np.where(keep != 0, -1.0, gg), g)
    return out


def reference(c, make_opt, init, xs, ys, dtype):
    torch.set_default_dtype(dtype)
    params = {k: torch.tensor(v, dtype=dtype, requires_grad=True)
              for k, v in init.items()}
    opt = make_opt(list(params.values()))
    masks = {p: np.ones((params[p].shape[0] // BLOCK,
                         params[p].shape[1] // BLOCK), np.int8) for p in SPARSE}
    losses, sched, changes = [], [], []
    for t in range(STEPS):
        x = torch.tensor(xs[t * B:(t + 1) * B], dtype=dtype)
        y = torch.tensor(ys[t * B:(t + 1) * B], dtype=dtype)
        # The masked weights as leaves: their gradient is the dense one.
        masked = {p: (params[p].detach() *
                      torch.tensor(expand(masks[p]), dtype=dtype)
                      ).requires_grad_() for p in SPARSE}
        h = torch.tanh(x @ masked["fc1.weight"].T + params["fc1.bias"])
        h = torch.tanh(h @ masked["fc2.weight"].T)
        loss = torch.nn.functional.mse_loss(h @ params["fc3.weight"].T, y)
        opt.zero_grad()
        loss.backward()
        losses.append(loss.item())
        sched.append(scheduled(c, t))
        dense = {p: masked[p].grad.detach().numpy() for p in SPARSE}
        for p in SPARSE:
            params[p].grad = torch.tensor(dense[p] * expand(masks[p]),
                                          dtype=dtype)
        if is_update(c, t):
            weights = {p: params[p].detach().numpy() for p in SPARSE}
            fresh = new_masks(c, t, masks, weights, dense)
            changes.append({p: (int(((masks[p] != 0) & (fresh[p] == 0)).sum()),
                                int(((masks[p] == 0) & (fresh[p] != 0)).sum()))
                            for p in SPARSE})
            masks = fresh
        else:
            changes.append({p: (0, 0) for p in SPARSE})
            opt.step()
        with torch.no_grad():
            for p in SPARSE:
                keep = torch.tensor(expand(masks[p]), dtype=dtype)
                params[p].mul_(keep)
                for k, v in opt.state[params[p]].items():
                    if k in STATE_NAMES:
                        v.mul_(keep)
    state = {}
    for name, p in params.items():
        for k, v in opt.state[p].items():
            if k in STATE_NAMES:
                state[STATE_NAMES[k] + "@" + name] = v.detach().numpy()
            elif k == "step":
                state["step"] = float(v)
    for p in SPARSE:
        state["sparsity.mask@" + p] = masks[p]
    return (losses, sched, changes,
            {k: v.detach().numpy() for k, v in params.items()}, state)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12))) \
        if a.size else 0.0


def run(work, name, dtype, options, flags):
    t = "f64" if dtype == torch.float64 else "f32"
    model = os.path.join(work, "model_%s.mlir" % t)
    with open(model, "w") as f:
        f.write(MODEL.format(B=B, D=D, H=H, O=O, t=t))
    report = os.path.join(work, "%s_%s.json" % (name, t))
    ckpt = os.path.join(work, "%s_%s.ckpt" % (name, t))
    cmd = [DS_RUN, model, "--steps", str(STEPS), "--quiet",
           "--params", os.path.join(work, "params_" + t),
           "--data", "x=%s/x_%s.npy" % (work, t),
           "--data", "y=%s/y_%s.npy" % (work, t),
           "--eval-data", "x=%s/x_%s.npy" % (work, t),
           "--eval-data", "y=%s/y_%s.npy" % (work, t),
           "--sparsity=" + options, "--report", report,
           "--checkpoint", ckpt] + flags
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode:
        raise RuntimeError("ds-run failed:\n" + r.stdout + r.stderr)
    return json.load(open(report))["steps"], ckpt


def main():
    rng = np.random.default_rng(11)
    init = {"fc1.weight": rng.standard_normal((H, D)) / math.sqrt(D),
            "fc1.bias": rng.standard_normal(H) * 0.1,
            "fc2.weight": rng.standard_normal((H, H)) / math.sqrt(H),
            "fc3.weight": rng.standard_normal((O, H)) / math.sqrt(H)}
    xs = rng.standard_normal((STEPS * B, D))
    ys = rng.standard_normal((STEPS * B, O))
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for t, np_t in (("f64", np.float64), ("f32", np.float32)):
            os.makedirs(os.path.join(work, "params_" + t))
            for k, v in init.items():
                np.save(os.path.join(work, "params_" + t, k + ".npy"),
                        v.astype(np_t))
            np.save(os.path.join(work, "x_%s.npy" % t), xs.astype(np_t))
            np.save(os.path.join(work, "y_%s.npy" % t), ys.astype(np_t))
        runs = [(c, torch.float64) for c in CONFIGS] + \
               [(CONFIGS[0], torch.float32)]
        for (name, options, c, flags, make_opt), dtype in runs:
            f32 = dtype == torch.float32
            label = name + (" f32 (8x8 kernels)" if f32 else " f64")
            try:
                steps, ckpt = run(work, name, dtype, options, flags)
            except RuntimeError as e:
                print("FAIL %s: %s" % (label, e))
                failures += 1
                continue
            ref_init = {k: v.astype(np.float32) if f32 else v
                        for k, v in init.items()}
            losses, sched, changes, params, state = reference(
                c, make_opt, ref_init, xs, ys, dtype)
            tol = 1e-4 if f32 else 1e-10
            checks = [("losses", rel([s["loss"] for s in steps], losses), tol),
                      ("s(t)", rel([s["metrics"]["sparsity.scheduled"]
                                    for s in steps], sched), 1e-12)]
            counts = [[(s["metrics"]["sparsity.dropped@" + p],
                        s["metrics"]["sparsity.grown@" + p]) for p in SPARSE]
                      for s in steps]
            want = [[changes[i][p] for p in SPARSE] for i in range(STEPS)]
            checks.append(("dropped/grown", 0.0 if counts == want else 1.0,
                           0.0))
            if not f32:
                for k, v in list(params.items()) + list(state.items()):
                    got = np.load(os.path.join(ckpt, k + ".npy"))
                    exact = k.startswith("sparsity.") or k == "step"
                    checks.append((k, rel(got, v), 0.0 if exact else 1e-9))
            for p in SPARSE:
                off = ~expand(np.load(os.path.join(ckpt,
                                                   "sparsity.mask@%s.npy" % p)))
                for k in [p] + [s + "@" + p for s in ("adam.m", "adam.v",
                                                       "momentum_buffer")]:
                    f = os.path.join(ckpt, k + ".npy")
                    if os.path.exists(f):
                        nz = int(np.count_nonzero(np.load(f)[off]))
                        checks.append((k + " off-mask nonzeros", nz, 0))
            bad = [ch for ch in checks if not ch[1] <= ch[2]]
            updates = sum(1 for s in steps
                          if s["metrics"]["sparsity.mask_update"])
            print("%-4s %-42s %d quantities, %d mask updates, final sparsity "
                  "%s%s" % ("ok" if not bad else "FAIL", label, len(checks),
                            updates,
                            ", ".join("%.3f" % steps[-1]["metrics"][
                                "sparsity@" + p] for p in SPARSE),
                            "".join("\n       %s: %.3g > %.3g" % ch
                                    for ch in bad)))
            failures += bool(bad)
    print("%d passed, %d failed" % (len(CONFIGS) + 1 - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

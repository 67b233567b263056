#!/usr/bin/env python3
"""Mixed precision trains as well as FP32: the GPT-style example with the
default policy (q/k/v GEMMs in FP8 E4M3/E5M2 with delayed scaling, the FFN
activations in BF16) against FP32.

Data: a fixed learnable token stream (a noisy permutation chain), 64 fixed
held-out batches. Two FP32 runs with different initialisation seeds give
the seed-to-seed spread; the mixed run (seed 0) must end within
max(1 %, 2 x spread) of the FP32 run with the same seed. The precision map
must show every q/k/v projection GEMM, forward and backward, in FP8.
Usage: check_accuracy.py [--steps N] with DS_RUN and DS_SRC set.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

DS_RUN = os.environ.get("DS_RUN", "ds-run")
MODEL = os.path.join(os.environ.get("DS_SRC", "."), "examples", "gpt_block.mlir")
B, T, V = 8, 64, 128


def token_stream(rng, sequences):
    """Each next token is perm[token] with probability 0.8, else uniform."""
    perm = np.random.default_rng(1234).permutation(V)
    x = np.empty((sequences, T + 1), np.int64)
    x[:, 0] = rng.integers(0, V, sequences)
    for i in range(T):
        follow = rng.random(sequences) < 0.8
        x[:, i + 1] = np.where(follow, perm[x[:, i]], rng.integers(0, V, sequences))
    return x[:, :-1], x[:, 1:]


def run(work, tag, steps, seed, precision):
    report = os.path.join(work, tag + ".json")
    cmd = [DS_RUN, MODEL, "--steps", str(steps), "--seed", str(seed), "--quiet",
           "--lr", "3e-3", "--eval-every", str(steps), "--eval-batches", "64",
           "--report", report, "--threads", "1"]
    for name in ("tokens", "targets"):
        cmd += ["--data", "%s=%s/train_%s.npy" % (name, work, name),
                "--eval-data", "%s=%s/eval_%s.npy" % (name, work, name)]
    if precision:
        cmd.append("--precision")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s: ds-run failed:\n%s%s" % (tag, r.stdout, r.stderr))
    rep = json.load(open(report))
    return rep["eval"][-1]["loss"], rep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as work:
        for split, n in (("train", args.steps * B), ("eval", 64 * B)):
            tokens, targets = token_stream(rng, n)
            np.save(os.path.join(work, "%s_tokens.npy" % split), tokens)
            np.save(os.path.join(work, "%s_targets.npy" % split), targets)
        fp32_a, rep_a = run(work, "fp32_seed0", args.steps, 0, False)
        fp32_b, _ = run(work, "fp32_seed1", args.steps, 1, False)
        mixed, rep_m = run(work, "mixed_seed0", args.steps, 0, True)
    spread = abs(fp32_a - fp32_b) / fp32_a
    delta = abs(mixed - fp32_a) / fp32_a
    bound = max(0.01, 2 * spread)
    fails = 0
    print("held-out loss after %d steps (64 batches): FP32 %.4f (seed 0), %.4f (seed 1); "
          "mixed %.4f" % (args.steps, fp32_a, fp32_b, mixed))
    print("%s mixed vs FP32: %.3f %% (bound max(1 %%, 2 x seed spread %.3f %%) = %.3f %%)"
          % ("ok  " if delta <= bound else "FAIL", 100 * delta, 100 * spread, 100 * bound))
    fails += delta > bound
    pmap = rep_m.get("precision_map", [])
    qkv = [e for e in pmap if e.get("op") == "ds.matmul" and
           e.get("role") in ("attn.q", "attn.k", "attn.v", "attn.qkv")]
    fwd = [e for e in qkv if ".grad" not in e["label"]]
    bwd = [e for e in qkv if ".grad" in e["label"]]
    ok_map = len(fwd) == 3 and all(e["compute"] == "f8E4M3FN" for e in fwd) and \
        len(bwd) >= 3 and all(e["compute"] == "f8E5M2" for e in bwd)
    print("%s precision map: %d q/k/v GEMMs forward in %s, %d backward in %s; ops by "
          "compute type %s" % ("ok  " if ok_map else "FAIL", len(fwd),
                               sorted({e["compute"] for e in fwd}), len(bwd),
                               sorted({e["compute"] for e in bwd}),
                               rep_m["summary"].get("ops_by_compute_type")))
    fails += not ok_map
    t32 = rep_a["summary"]["mean_step_ms"]
    tmx = rep_m["summary"]["mean_step_ms"]
    print("step time: FP32 %.1f ms, mixed %.1f ms (ratio %.2f; not a benchmark)"
          % (t32, tmx, tmx / t32))
    print("%d passed, %d failed" % (2 - fails, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

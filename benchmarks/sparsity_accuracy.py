#!/usr/bin/env python3
"""Dynamic block sparsity trains close to dense: the GPT block at d_model
256 as a character-level language model of Debian's fortune cookies (the
package `fortunes`, which `make accuracy` installs; demo/prepare_text.py),
trained by ds-run dense and with --sparsity (8x8 blocks, masks updated
every 100 steps) after the same number of steps, on the same batches, with
the same held-out batches:

  - the seeds' schedule: 80 % held for 30 % of the run, then a cosine to
    98 % (magnitude pruning);
  - a constant 90 %, by magnitude, and with RigL's regrowth (drop fraction
    0.3, decaying to 0 at 75 % of the run);

Prints the held-out losses, their change against dense and the step times
side by side. Gate (issue 13): the constant 90 % at most 5 % above dense
(a lower held-out loss passes: sparsity also regularizes).
The seeds' claims (ResNet-50 at 95 % sparsity -0.3 % top-1, 19x fewer
FLOPs; BERT-base pre-training 72 h -> 3.5 h) are printed beside them: no
ResNet-50, ImageNet or BERT here, so they are not reproduced.

Usage: sparsity_accuracy.py --ds-run build/bin/ds-run [--steps N]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args, model, work, tag, data, sparsity=None):
    report = os.path.join(work, tag + ".json")
    cmd = [args.ds_run, model, "--steps", str(args.steps), "--seed", "0",
           "--quiet", "--lr", "2e-3", "--schedule", "warmup-cosine",
           "--warmup-steps", str(min(50, args.steps // 20)),
           "--eval-every", str(args.steps),
           "--eval-batches", "32", "--report", report,
           "--threads", str(args.threads)] + data
    if sparsity:
        cmd.append("--sparsity=" + sparsity)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s: ds-run failed:\n%s%s" % (tag, r.stdout,
                                                          r.stderr))
    rep = json.load(open(report))
    s = rep["summary"]
    layers = s.get("sparsity", {}).get("layers", {})
    final = [v["final_sparsity"] for v in layers.values()]
    tail = [st["loss"] for st in rep["steps"][-50:]]
    return (rep["eval"][-1]["loss"], s["median_step_ms"],
            sum(final) / len(final) if final else 0.0, sum(tail) / len(tail))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-run", default="build/bin/ds-run")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt256.mlir")
        subprocess.run([sys.executable,
                        os.path.join(SRC, "examples", "gen_examples.py"),
                        "gpt", "--d-model", "256", "--heads", "4", "--seq",
                        "64", "--batch", "8", "--vocab", "128", "-o", model],
                       check=True)
        text = os.path.join(work, "text")
        subprocess.run([sys.executable, os.path.join(SRC, "demo",
                                                     "prepare_text.py"),
                        text, "--seq", "64"], check=True, capture_output=True)
        data = []
        for name in ("tokens", "targets"):
            data += ["--data", "%s=%s/%s.npy" % (name, text, name),
                     "--eval-data", "%s=%s/eval_%s.npy" % (name, text, name)]
        runs = [
            ("dense", None),
            ("seeds' cosine 80 % -> 98 %", "schedule=cosine initial=0.8 "
             "final=0.98 hold=0.3"),
            ("constant 90 %", "schedule=constant final=0.9"),
            ("constant 90 % + RigL regrowth", "schedule=constant final=0.9 "
             "regrow"),
        ]
        print("GPT block d_model 256 on fortune cookies, %d steps, AdamW "
              "lr 2e-3 (warm-up + cosine, as make demo), held-out loss over "
              "32 batches; train: mean loss of the last 50 steps"
              % args.steps)
        print("%-34s %9s %9s %9s %10s %8s" % ("run", "sparsity", "train",
                                              "held-out", "vs dense",
                                              "step ms"))
        dense = None
        fails = 0
        for tag, spec in runs:
            loss, ms, sp, train = run(args, model, work,
                                      tag.split()[0] + str(len(tag)), data,
                                      spec)
            if dense is None:
                dense = (loss, ms)
            delta = (loss - dense[0]) / dense[0]
            # The gate bounds the loss sparsity costs; a lower loss passes.
            gated = tag == "constant 90 %"
            ok = not gated or delta <= 0.05
            fails += not ok
            print("%-34s %8.1f%% %9.4f %9.4f %+9.2f%% %8.1f%s" % (
                tag, 100 * sp, train, loss, 100 * delta, ms,
                ("  (gate 5 %%: %s)" % ("ok" if ok else "FAIL")) if gated
                else ""), flush=True)
        print("The seeds claim ResNet-50 at 95 % sparsity -0.3 % top-1 with "
              "19x fewer FLOPs, and BERT-base pre-training 72 h -> 3.5 h "
              "(not reproduced: no ResNet-50, ImageNet or BERT here).")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

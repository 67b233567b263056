#!/usr/bin/env python3
"""Compressed gradient all-reduce trains close to uncompressed: the GPT
block at d_model 256 as a character-level language model of Debian's
fortune cookies (as benchmarks/sparsity_accuracy.py), trained data-parallel
on N MPI ranks (scripts/ds-mpirun, one thread each) for the same steps on
the same global batches, with every compression scheme of
ds-compress-allreduce:

  - uncompressed (the reference), DDP's fp16 and bf16 hooks;
  - DGC's top-k at 0.1 % (threshold from a 1 % sample, error feedback,
    sparsity warm-up, 4 stages of steps / 200 iterations);
  - the seed's three tiers over a curve of quantile thresholds
    (theta_low, theta_high): the fraction dropped and the fraction sent in
    8 bits;
  - PowerSGD at rank 4 (warm start, error feedback), compressed after the
    first steps / 200 iterations.

SGD with momentum 0.9 by default (DGC's setting; top-k with DGC's
momentum correction, which makes the optimizer plain SGD); --optimizer
adamw runs the same with AdamW, where error feedback fares badly (an
element that is sent every k-th step arrives k times larger, and Adam's
second moment shrinks its steps by about sqrt(k)).

Prints the held-out loss, its change against uncompressed, the bytes this
rank put on the wire per step (payloads; dense for uncompressed), the
compression ratio and the median step time. Goals (issue 14): top-k >= 100x
fewer bytes within 1 % of the uncompressed held-out loss; three-tier: a
setting >= 30x within 1 %. The seed reports -68 % traffic (3.1x) on
ResNet-50 with -0.1 % top-1 (not reproduced: no ResNet-50 here).

Usage: dp_accuracy.py --ds-run build/bin/ds-run [--ranks 4] [--steps 1000]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = os.path.join(SRC, "scripts", "ds-mpirun")


def run(args, model, work, tag, data, compress):
    report = os.path.join(work, tag + ".json")
    # DGC's momentum correction moves the momentum into the compressor: the
    # optimizer is then plain SGD with the same momentum.
    dgc = compress and "momentum=" in compress
    optimizer = ["--optimizer", "sgd" if dgc else args.optimizer]
    if args.optimizer == "momentum" and not dgc:
        optimizer += ["--momentum", "0.9"]
    cmd = [MPIRUN, "-np", str(args.ranks), args.ds_run, model,
           "--data-parallel", "--steps", str(args.steps), "--seed", "0",
           "--quiet", "--lr", str(args.lr), "--schedule", "warmup-cosine",
           "--warmup-steps", str(min(50, args.steps // 20)),
           "--eval-every", str(args.steps), "--eval-batches", "32",
           "--report", report, "--threads", "1"] + optimizer + data
    if compress:
        cmd.append("--compress-allreduce=" + compress)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s: ds-run failed:\n%s%s" % (tag, r.stdout[-2000:],
                                                          r.stderr[-2000:]))
    rep = json.load(open(report))
    s = rep["summary"]
    dp = s["data_parallel"]
    return (rep["eval"][-1]["loss"], s["median_step_ms"],
            dp["bytes_sent_per_step"], dp.get("compression_ratio", 1.0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-run", default="build/bin/ds-run")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4,
                    help="rows per rank (the global batch is ranks x batch)")
    ap.add_argument("--optimizer", default="momentum",
                    choices=["momentum", "adamw"],
                    help="momentum: SGD with momentum 0.9 (DGC's setting; "
                    "top-k then uses DGC's momentum correction); adamw")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--only", default="",
                    help="comma-separated run numbers (0 = uncompressed)")
    args = ap.parse_args()
    if args.lr is None:
        args.lr = 0.1 if args.optimizer == "momentum" else 2e-3
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt256.mlir")
        subprocess.run([sys.executable,
                        os.path.join(SRC, "examples", "gen_examples.py"),
                        "gpt", "--d-model", "256", "--heads", "4", "--seq",
                        "64", "--batch", str(args.batch), "--vocab", "128",
                        "-o", model], check=True)
        text = os.path.join(work, "text")
        subprocess.run([sys.executable, os.path.join(SRC, "demo",
                                                     "prepare_text.py"),
                        text, "--seq", "64"], check=True, capture_output=True)
        data = []
        for name in ("tokens", "targets"):
            data += ["--data", "%s=%s/%s.npy" % (name, text, name),
                     "--eval-data", "%s=%s/eval_%s.npy" % (name, text, name)]
        warm = max(1, args.steps // 200)
        runs = [
            ("uncompressed", None),
            ("fp16 (DDP hook)", "scheme=fp16"),
            ("bf16 (DDP hook)", "scheme=bf16"),
            ("top-k 0.1 % (DGC)", "scheme=topk ratio=0.001 "
             "warmup-iterations=%d" % warm +
             (" momentum=0.9" if args.optimizer == "momentum" else "")),
            ("three-tier q 0.90/0.99", "quantile-low=0.9 quantile-high=0.99"),
            ("three-tier q 0.95/0.99", "quantile-low=0.95 quantile-high=0.99"),
            ("three-tier q 0.97/0.995", "quantile-low=0.97 "
             "quantile-high=0.995"),
            ("three-tier q 0.99/0.999", "quantile-low=0.99 "
             "quantile-high=0.999"),
            ("powersgd rank 4", "scheme=powersgd rank=4 "
             "start-iteration=%d" % warm),
        ]
        print("GPT block d_model 256 on fortune cookies, %d ranks x %d rows, "
              "%d steps, %s lr %g (warm-up + cosine), held-out loss over "
              "32 batches" % (args.ranks, args.batch, args.steps,
                              "SGD momentum 0.9" if args.optimizer ==
                              "momentum" else "AdamW", args.lr))
        print("%-26s %9s %10s %12s %9s %8s" % ("scheme", "held-out",
                                              "vs uncomp", "KiB/step",
                                              "ratio", "step ms"))
        base = None
        best = {"topk": 0.0, "three": 0.0}
        only = {int(x) for x in args.only.split(",") if x}
        for number, (tag, spec) in enumerate(runs):
            if only and number not in only:
                continue
            try:
                loss, ms, sent, ratio = run(args, model, work,
                                            "run%d" % number, data, spec)
            except RuntimeError as e:
                # A diverged run is a result too: say so and go on.
                reason = [l for l in str(e).splitlines() if "error:" in l]
                print("%-26s diverged: %s" % (tag, reason[0] if reason
                                              else "ds-run failed"),
                      flush=True)
                continue
            if base is None:
                base = loss
            delta = (loss - base) / base
            within = delta <= 0.01
            if tag.startswith("top-k") and within:
                best["topk"] = max(best["topk"], ratio)
            if tag.startswith("three-tier") and within:
                best["three"] = max(best["three"], ratio)
            print("%-26s %9.4f %+9.2f%% %12.1f %8.1fx %8.1f" % (
                tag, loss, 100 * delta, sent / 1024, ratio, ms), flush=True)
        print("goals: top-k >= 100x within 1 %%: %s (%.0fx); three-tier >= "
              "30x within 1 %%: %s (%.0fx)" % (
                  "met" if best["topk"] >= 100 else "NOT met", best["topk"],
                  "met" if best["three"] >= 30 else "NOT met",
                  best["three"]))
        print("The seed reports -68 % gradient traffic (3.1x) on ResNet-50 "
              "with -0.1 % top-1 (not reproduced: no ResNet-50 here).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Dynamic 8x8 block sparsity: kernel speed and the GPT step, on this machine.

1. The runtime's block-sparse kernels against oneDNN's dense sgemm on the
   same shapes, (M, K, N) = (2048, 1024, 1024), (2048, 1024, 4096),
   (2048, 4096, 1024), at 50/80/90/95/98 % block sparsity, for the three
   training products (forward Y = X W^T, dX = dY W, the sampled dW = dY^T
   X), 2 threads: build/bin/ds-runtime-sparse-benchmark, which runs dense
   and sparse interleaved in one process and prints the ratios beside the
   useful GFLOP/s and the FLOP limit 1 / (1 - s).
2. The GPT block (examples/gen_examples.py gpt, d_model 256) trained by
   ds-run dense and with --sparsity at a constant 80 %, 90 % and 95 %:
   median step time over the steps after the first mask update, the runs
   alternating `--repeats` times (a shared 2-core machine is noisy), and the
   block-sparse kernels' executed share of the dense FLOPs from the report.

Usage: sparsity.py --ds-run build/bin/ds-run --kernel-bench
       build/bin/ds-runtime-sparse-benchmark [--quick]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gpt_step(args, work, model, sparsity, rep):
    report = os.path.join(work, "gpt-%s-%d.json" % (sparsity or "dense", rep))
    cmd = [args.ds_run, model, "--steps", str(args.steps), "--quiet",
           "--threads", str(args.threads), "--report", report]
    if sparsity:
        cmd.append("--sparsity=schedule=constant final=%s" % sparsity)
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    rep = json.load(open(report))
    # Step 1 compiles lazily and, with sparsity, prunes the dense start.
    ms = [s["time_ms"] for s in rep["steps"][2:]]
    kernels = rep["summary"].get("sparsity", {}).get("kernels", {})
    return statistics.median(ms), kernels.get("executed_over_dense")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-run", default="build/bin/ds-run")
    ap.add_argument("--kernel-bench", default="build/bin/ds-runtime-sparse-benchmark")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--d-model", type=int, default=256)
    args = ap.parse_args()

    print("== 8x8 block-sparse kernels vs oneDNN dense sgemm", flush=True)
    cmd = [args.kernel_bench, "--threads", str(args.threads)]
    if args.quick:
        cmd.append("--quick")
    subprocess.run(cmd, check=True)

    print("\n== GPT block d_model %d, batch 8 x seq 64: ds-run training step, "
          "%d threads" % (args.d_model, args.threads), flush=True)
    levels = [None, "0.8", "0.9", "0.95"]
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.mlir")
        subprocess.run([sys.executable, os.path.join(SRC, "examples",
                                                     "gen_examples.py"),
                        "gpt", "--d-model", str(args.d_model), "--heads", "4",
                        "--seq", "64", "--batch", "8", "--vocab", "128",
                        "-o", model], check=True)
        times = {lvl: [] for lvl in levels}
        share = {}
        for rep in range(args.repeats):
            for lvl in levels:
                ms, executed = gpt_step(args, work, model, lvl, rep)
                times[lvl].append(ms)
                share[lvl] = executed
        dense = statistics.median(times[None])
        print("%-10s %10s %10s %22s" % ("linear", "step ms", "vs dense",
                                        "kernel FLOPs vs dense"))
        for lvl in levels:
            ms = statistics.median(times[lvl])
            print("%-10s %10.1f %9.2fx %22s" % (
                "dense" if lvl is None else "%g %%" % (100 * float(lvl)), ms,
                dense / ms, "-" if share[lvl] is None else
                "%.3f" % share[lvl]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

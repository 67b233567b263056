#!/usr/bin/env python3
"""Integer inference against f32: the int8 GEMM of the runtime beside its
f32 GEMM on linear-layer shapes at batch 64, and the three examples (MLP,
CNN, GPT block) trained with QAT and evaluated three ways on the same
held-out batches in one ds-run process: the fake-quantized forward, the
forward converted to integer inference (ds-convert-fake-quant) and the
plain f32 forward. Prints losses and time ratios side by side (one process,
one machine: ratios, not absolute times).

Goals (issue 12): int8 GEMMs >= 2x the f32 ones; integer inference within
one output quantization step of the fake-quantized forward (the loss delta
is printed; per-layer bounds are checked by
test/Integration/Quant/integer-inference.test).

Usage: integer_inference.py --ds-run build/bin/ds-run
           --gemm-bench build/bin/ds-runtime-gemm-benchmark [--steps N]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(SRC, "examples", "gen_examples.py")


def gemm_ratios(bench):
    """int8 / f32 speed per linear-layer shape, from Google Benchmark."""
    r = subprocess.run([bench, "--benchmark_filter=BM_LinearLayer",
                        "--benchmark_format=json", "--benchmark_min_time=0.3",
                        "--benchmark_repetitions=3",
                        "--benchmark_report_aggregates_only=true"],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("GEMM benchmark failed:\n" + r.stderr)
    times = {}
    for b in json.loads(r.stdout)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        args = dict(p.split(":") for p in b["run_name"].split("/")[1:]
                    if ":" in p)
        key = (int(args["m"]), int(args["k"]), int(args["n"]))
        times.setdefault(key, {})[int(args["kind"])] = b["real_time"]
    print("int8 GEMM vs f32 GEMM (runtime, all threads), activations [64, K] x "
          "weight [N, K]^T:")
    print("  %-16s %10s %14s %14s" % ("M x K x N", "f32 us",
                                      "int8 7-bit", "int8 full"))
    worst = None
    for key in sorted(times):
        t = times[key]
        r7, rf = t[0] / t[1], t[0] / t[2]
        worst = r7 if worst is None else min(worst, r7)
        print("  %-16s %10.1f %13.2fx %13.2fx" % ("%dx%dx%d" % key, t[0] / 1e3,
                                                  r7, rf))
    print("  (7-bit: torch.ao's reduce_range activations, one oneDNN u8 x s8 "
          "GEMM; full: int8 activations, two GEMMs on 7-bit halves where the "
          "CPU has no VNNI)")
    return worst


def example(ds_run, work, name, gen_args, steps, fake_quant):
    path = os.path.join(work, name + ".mlir")
    subprocess.run([sys.executable, GEN] + gen_args + ["-o", path], check=True)
    report = os.path.join(work, name + ".json")
    cmd = [ds_run, path, "--steps", str(steps), "--quiet", "--lr", "3e-3",
           "--eval-every", str(steps), "--eval-batches", "16",
           "--fake-quant=" + fake_quant, "--integer-eval", "--report", report]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s: ds-run failed:\n%s%s" % (name, r.stdout, r.stderr))
    rep = json.load(open(report))
    ev = rep["eval"][-1]
    ie = rep["summary"]["integer_eval"]
    ms = ie["forward_ms"]
    print("  %-5s held-out loss fake-quant %.5f, int8 %.5f (%+.1e), f32 %.5f; "
          "forward ms fake-quant %.2f, int8 %.2f, f32 %.2f: int8 / f32 %.2fx"
          % (name, ev["loss"], ev["int8_loss"], ev["int8_loss"] - ev["loss"],
             ev["f32_loss"], ms["fake_quant"], ms["int8"], ms["f32"],
             ms["f32"] / ms["int8"]))
    for left in ie["left_in_f32"]:
        print("        left in f32: " + left.split(" at ")[0] + ": " +
              left.split(": ", 1)[1])
    return ev


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-run", default="build/bin/ds-run")
    ap.add_argument("--gemm-bench", default="build/bin/ds-runtime-gemm-benchmark")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    if os.path.exists(args.gemm_bench):
        gemm_ratios(args.gemm_bench)
    else:
        print("(no %s: Google Benchmark missing; GEMM ratios skipped)"
              % args.gemm_bench)
    print("\nQAT for %d steps, then held-out evaluation three ways (batch 64):"
          % args.steps)
    # Attention projections are kept in BF16 by the default tiers; every
    # layer INT8 here, so that all of the GPT block's linear layers convert.
    every_layer = ("policy=" + os.path.join(SRC, "examples", "policies", "qat-int8.yaml")
                   + " weight-observer=current")
    with tempfile.TemporaryDirectory() as work:
        example(args.ds_run, work, "mlp",
                ["mlp", "--batch", "64", "--features", "256", "--hidden", "1024"],
                args.steps, every_layer)
        example(args.ds_run, work, "cnn", ["cnn", "--batch", "64"], args.steps,
                every_layer)
        example(args.ds_run, work, "gpt",
                ["gpt", "--batch", "4", "--seq", "16", "--d-model", "256"],
                args.steps, every_layer)
    return 0


if __name__ == "__main__":
    sys.exit(main())

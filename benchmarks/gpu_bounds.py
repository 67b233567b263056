#!/usr/bin/env python3
"""The GPU benchmark step's roofline bounds, from its launch reports.

Generates the GPT step of the GPU check's benchmark (gen_examples.py gpt
--d-model 1024 --heads 16 --seq 1024 --batch 8, dropout 0), compiles it
with ds-gpu-pipeline in f32, BF16-mixed and FP8 (the benchmark's policies,
scripts/gpu-check/*.yaml), and prints what each step's launch report
(ds-gpu-launch-report) says: kernel launches, the kernels' DRAM traffic,
the GEMMs' FLOPs, and the bounds at an H200's peaks (4.8 TB/s; dense 1979
FP8, 989 BF16, 67 FP32 TFLOP/s), side by side, with the f32 step's bound
over each step's (the speedup the bounds allow). No GPU needed: this is what a measured step
time on an H200 is compared with (docs/GPUBackend.md, "The launch report").

With --data-parallel, also the FP8 step data-parallel (`fuse=true`: DDP's
buckets on NCCL, in place), its gradients computed in their buckets and,
to compare, copied into them (`bucket-views=false`), and with DDP's bf16
hook (`compress-scheme=bf16`: the buckets rounded to bf16 on the device
and summed by NCCL; half the bytes on the network, which the bounds do not
count, for a rounding and a widening pass).

Usage: benchmarks/gpu_bounds.py [--ds-opt build/bin/ds-opt] [--layers 12]
[--data-parallel] (make bench; not part of make check)
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = [  # label, ds-training-pipeline options, ds-gpu-pipeline options
    ("f32", "", ""),
    ("bf16", f"policy={ROOT}/scripts/gpu-check/bf16.yaml", ""),
    ("fp8", f"policy={ROOT}/scripts/gpu-check/fp8.yaml", ""),
]
# The FP8 step data-parallel (DDP's buckets, all-reduced on NCCL in place),
# with the gradients computed in their buckets and, to compare, copied in.
DATA_PARALLEL = [
    ("fp8 dp", f"policy={ROOT}/scripts/gpu-check/fp8.yaml fuse=true", ""),
    ("fp8 dp copied", f"policy={ROOT}/scripts/gpu-check/fp8.yaml fuse=true",
     "bucket-views=false"),
    ("fp8 dp bf16", f"policy={ROOT}/scripts/gpu-check/fp8.yaml fuse=true "
     "compress=true compress-scheme=bf16", ""),
]


def totals(report):
    """The first function's totals in a launch report."""
    def number(pattern):
        m = re.search(pattern, report, re.M)
        if not m:
            sys.exit(f"gpu_bounds: no '{pattern}' in the launch report")
        return [float(g) for g in m.groups()]

    launches, = number(r"^ds-gpu-launch-report: @\w+: (\d+) kernel launches")
    moved, kernel_us = number(r"^  kernels: \d+, ([\d.]+) MB moved: ([\d.]+) us")
    gflop, gemm_us = number(r"^  GEMMs: \d+, ([\d.]+) GFLOP, [\d.]+ MB moved: ([\d.]+) us")
    bound_us, = number(r"^  bound: ([\d.]+) us")
    return launches, moved, kernel_us, gflop, gemm_us, bound_us


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ds-opt", default=os.path.join(ROOT, "build/bin/ds-opt"))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--data-parallel", action="store_true",
                    help="also the FP8 step data-parallel, its gradients "
                    "computed in their buckets and copied in")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        step = os.path.join(tmp, "gpt.mlir")
        subprocess.run([sys.executable, os.path.join(ROOT, "examples/gen_examples.py"),
                        "gpt", "--d-model", "1024", "--heads", "16", "--seq", "1024",
                        "--batch", "8", "--vocab", "128", "--dropout", "0",
                        "--layers", str(args.layers), "-o", step], check=True)
        rows = []
        for label, pipeline, gpu in POLICIES + (DATA_PARALLEL if args.data_parallel else []):
            report = os.path.join(tmp, label.replace(" ", "_") + ".txt")
            print(f"gpu_bounds: compiling the {args.layers}-layer step ({label})",
                  file=sys.stderr, flush=True)
            start = time.time()
            subprocess.run([args.ds_opt, step, f"--ds-training-pipeline={pipeline}",
                            f"--ds-gpu-pipeline=chip=sm_90 format=llvm launch-report={report} {gpu}",
                            "-o", os.devnull], check=True)
            rows.append((label, time.time() - start, totals(open(report).read())))

    print(f"\nGPT step, {args.layers} layers, d_model 1024, seq 1024, batch 8: "
          "bounds at an H200's peaks (ds-gpu-launch-report)")
    print(f"{'step':<13} {'launches':>8} {'traffic GB':>10} {'kernels ms':>10} "
          f"{'GFLOP':>8} {'GEMMs ms':>9} {'bound ms':>9} {'speedup':>7} {'compile s':>9}")
    f32_bound = rows[0][2][5]
    for label, seconds, (launches, moved, kernel_us, gflop, gemm_us, bound_us) in rows:
        print(f"{label:<13} {launches:>8.0f} {moved / 1e3:>10.1f} {kernel_us / 1e3:>10.1f} "
              f"{gflop:>8.0f} {gemm_us / 1e3:>9.1f} {bound_us / 1e3:>9.1f} "
              f"{f32_bound / bound_us:>6.2f}x {seconds:>9.1f}")
    bounds = {label: totals[5] for label, _, totals in rows}
    # The goal compares the FP8 step with BF16 mixed precision.
    print(f"\nfp8 over bf16: {bounds['bf16'] / bounds['fp8']:.2f}x in the bounds "
          "(the goal: 1.2x over PyTorch's BF16 AMP, measured)")
    if args.data_parallel:
        print(f"fp8 data-parallel over fp8: {bounds['fp8 dp'] / bounds['fp8']:.3f}x; "
              f"gradients copied into the buckets over computed in them: "
              f"{bounds['fp8 dp copied'] / bounds['fp8 dp']:.3f}x; "
              f"bf16 hook over uncompressed: "
              f"{bounds['fp8 dp bf16'] / bounds['fp8 dp']:.3f}x (the network "
              "not counted: it carries half the bytes)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Compares two ds-run runs of one model: the CPU path's and the GPU path's
(here with the kernels emulated on the host, on the stub libcuda).

    compare_runs.py CPU_REPORT GPU_REPORT CPU_CKPT GPU_CKPT RTOL [TENSOR_RTOL]

Every step's loss and every held-out evaluation must agree within RTOL
(relative), every tensor of the two final checkpoints within TENSOR_RTOL
(default RTOL) of the tensor's largest magnitude, and the checkpoints must
be at the same step. A parameter whose gradient is zero but for rounding
(an attention key's bias, a convolution's bias before batch norm) moves by
AdamW's +-lr steps wherever the noise points, on either path, and FP8 flips
roundings; for such models TENSOR_RTOL may be "-": the tensors are then
only checked to be finite.
Prints one PASS line with the largest differences, or FAIL lines; the exit
status says which."""

import json
import os
import sys

import numpy as np


def rel(a, b):
    # A non-finite loss (a poisoned step) is null in the report: equal only
    # to another.
    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    return abs(a - b) / max(abs(b), 1e-30)


def main():
    cpu_report, gpu_report, cpu_ckpt, gpu_ckpt, rtol = sys.argv[1:6]
    rtol = float(rtol)
    tensor_rtol = sys.argv[6] if len(sys.argv) > 6 else str(rtol)
    tensor_rtol = float("inf") if tensor_rtol == "-" else float(tensor_rtol)
    cpu, gpu = (json.load(open(p)) for p in (cpu_report, gpu_report))
    fails = []
    worst_loss = 0.0
    for kind in ("steps", "eval"):
        a, b = cpu.get(kind, []), gpu.get(kind, [])
        if [x["step"] for x in a] != [x["step"] for x in b]:
            fails.append(f"{kind}: steps differ: {[x['step'] for x in a]} vs "
                         f"{[x['step'] for x in b]}")
            continue
        for x, y in zip(a, b):
            d = rel(y["loss"], x["loss"])
            worst_loss = max(worst_loss, d)
            if d > rtol:
                fails.append(f"{kind} step {x['step']}: loss {y['loss']} vs "
                             f"CPU {x['loss']} (relative {d:.2e})")
    if not cpu.get("steps"):
        fails.append("the CPU report has no steps")
    runner = [json.load(open(os.path.join(c, "runner.json")))
              for c in (cpu_ckpt, gpu_ckpt)]
    if runner[0]["runner"]["step"] != runner[1]["runner"]["step"]:
        fails.append("checkpoints at steps %d and %d" % (
            runner[0]["runner"]["step"], runner[1]["runner"]["step"]))
    worst_tensor = 0.0
    for t in runner[0]["tensors"]:
        a = np.load(os.path.join(cpu_ckpt, t["file"])).astype(np.float64)
        b = np.load(os.path.join(gpu_ckpt, t["file"])).astype(np.float64)
        if a.shape != b.shape:
            fails.append(f"{t['key']}: shapes {a.shape} and {b.shape}")
            continue
        scale = max(np.abs(a).max(initial=0.0), 1e-30)
        d = float(np.abs(a - b).max(initial=0.0)) / scale
        worst_tensor = max(worst_tensor, d)
        if not np.isfinite(b).all() or d > tensor_rtol:
            fails.append(f"{t['key']}: max difference {d:.2e} of its scale")
    if fails:
        for f in fails:
            print("FAIL:", f)
        return 1
    print(f"PASS: {len(cpu['steps'])} steps, {len(cpu.get('eval', []))} "
          f"evaluations, {len(runner[0]['tensors'])} tensors; worst loss "
          f"{worst_loss:.1e}, worst tensor {worst_tensor:.1e} (rtol {rtol:g}, "
          f"tensors {tensor_rtol:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Exports check_ops.py's lowering execution cases as compiled steps, so that
they run where there is no MLIR (the GPU machine of scripts/gpu-check.sh).

Each group becomes one training step (`ds.train_step`): every case input is a
state argument `case.c<i>_a<k>` (its value written into the step's init/
checkpoint), every case output a metric `c<i>_o<k>`, the loss a constant 0,
and one unused parameter makes it a training step. `ds-run --emit-step`
compiles it for the CPU or a CUDA chip; `ds-step-run --steps 1
--save-results` runs it; compare_cases.py (NumPy only) checks the results
against the references computed here, with each case's tolerances.

The runner's tensors carry no FP8, so an FP8 input is stored in f32 (its
values are FP8 values, so the cast is exact) and cast to FP8 at the top of
the step, and an FP8 output is cast to f32 for its metric: the FP8 GEMM
cases then run through the device's FP8 lowering (cuBLASLt's FP8 kernels
on sm_89 and newer). A case the device's pipeline does not lower (`not
supported by ds-gpu-pipeline: '<op>'`: the techniques without GPU kernels)
is left out and listed.

usage: export_cases.py --ds-run PATH --out DIR [--device cpu|cuda]
                       [--chip sm_90] [--group NAME ...]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_ops  # noqa: E402
from check_ops import BF16, BOOL, E4M3, E5M2, F16, F32, F64, T, TA  # noqa: E402

# How each dtype is stored in .npy, as ds-run's checkpoints store it.
STORE = {BF16: "<u2"}
# Carried as f32 (exactly) across the step's boundary.
FP8 = (E4M3, E5M2)


def carried(dtype):
    return F32 if np.dtype(dtype) in FP8 else np.dtype(dtype)


def renamed(text, prefix):
    """`text` with every SSA name %x renamed %<prefix>x (block arguments
    included), so that cases share one function."""
    return re.sub(r"%([A-Za-z_$.][\w$.]*|\d+)", lambda m: f"%{prefix}{m.group(1)}",
                  text)


def step_module(name, cases):
    args = [f'%unused: tensor<f32> {{ds.param = "unused", ds.init = #ds.init<zeros>}}']
    results = ["tensor<f32> {ds.loss}", "tensor<f32> {ds.update = 0 : i64}"]
    body, values = [], ["%zero", "%unused"]
    for ci, case in enumerate(cases):
        p = f"c{ci}_"
        body.append(f"// {case.name}")
        for k, a in enumerate(case.inputs):
            arg = f"%{p}a{k}"
            if a.dtype in FP8:
                body.append(f"%{p}a{k} = ds.cast %{p}a{k}_f32 : "
                            f"{T(a.shape, F32)} -> {TA(a)}")
                arg += "_f32"
            args.append(f'{arg}: {T(a.shape, carried(a.dtype))} '
                        f'{{ds.state = #ds.state<"case.{p}a{k}">, ds.init = #ds.init<zeros>}}')
        body += [renamed(line.strip(), p) for line in case.body.strip().splitlines()]
        for k, (out, shape, dtype) in enumerate(case.outputs):
            value = renamed(out, p)
            if np.dtype(dtype) in FP8:
                body.append(f"{value}_f32 = ds.cast {value} : {T(shape, dtype)} -> {T(shape, F32)}")
                value += "_f32"
            results.append(f'{T(shape, carried(dtype))} {{ds.metric = "{p}o{k}"}}')
            values.append(value)
    types = ", ".join(r.split(" {")[0] for r in results)
    return (f"func.func @{name}({', '.join(args)})\n    -> ({', '.join(results)})\n"
            f"    attributes {{ds.train_step}} {{\n  "
            + "\n  ".join(body) +
            f"\n  %zero = arith.constant dense<0.0> : tensor<f32>\n"
            f"  return {', '.join(values)} : {types}\n}}\n")


def save(path, a):
    a = np.asarray(a)
    if a.dtype in FP8:
        a = a.astype(F32)
    if a.dtype in STORE:
        a = a.view(np.uint16)
    np.save(path, a.copy(order="C"), allow_pickle=False)


def reference(a, dtype):
    """The reference as compare_cases.py reads it: floats in f64 for f64
    outputs and in f32 for narrower ones (so that bf16 and FP8 need no
    ml_dtypes there; f32 holds every such value, and rounds a reference of
    an f32 output by 6e-8 relative at most, far inside any tolerance, while
    an exact one is an f32 already), integers in i64, booleans as such.
    Half the bytes of f64: the GPU bundle carries these."""
    dtype = np.dtype(dtype)
    a = np.asarray(a)
    if dtype == BOOL:
        return a.astype(bool)
    if dtype.kind in "iu":
        return a.astype(np.int64)
    return a.astype(np.float64 if dtype.itemsize > 4 else np.float32)


def tolerances(case, dtype, device):
    dtype = np.dtype(dtype)
    if dtype.kind not in "f" and dtype not in (BF16,):
        return 0.0, 0.0
    if device == "cuda" and case.device_tol:
        return case.device_tol
    default = {F64: (1e-9, 1e-12), F32: (1e-4, 1e-5), BF16: (1e-2, 1e-2),
               F16: (1e-3, 1e-3)}[dtype]
    return (case.rtol if case.rtol is not None else default[0],
            case.atol if case.atol is not None else default[1])


def compile_group(name, cases, args, workdir):
    """Emits the group's step, leaving out the cases the pipeline refuses.
    Returns (kept cases, [(case, why)] left out)."""
    left = []
    kept = list(cases)
    step_dir = os.path.join(args.out, name)
    while kept:
        src = os.path.join(workdir, f"{name}.mlir")
        with open(src, "w") as f:
            f.write(step_module(name.replace("-", "_"), kept))
        cmd = [args.ds_run, src, "--emit-step", step_dir]
        if args.device == "cuda":
            cmd += ["--device", "cuda", "--gpu-chip", args.chip]
            if args.emulate_kernels:
                # At most 3 blocks per launch: the grid-stride loops over
                # elements and outputs take several trips.
                cmd += ["--gpu-emulate-kernels", "--gpu-max-blocks", "3"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode == 0:
            return kept, left
        refused = re.search(r"not supported by ds-gpu-pipeline: '([\w.]+)'", p.stderr)
        if not refused:
            sys.exit(f"export_cases.py: {name}: ds-run failed:\n{p.stderr[-4000:]}")
        op = refused.group(1)
        pattern = re.compile(re.escape(op) + r"\b")
        drop = [c for c in kept if pattern.search(c.body)]
        if not drop:
            sys.exit(f"export_cases.py: {name}: '{op}' is refused but no case "
                     f"names it:\n{p.stderr[-2000:]}")
        left += [(c.name, f"{op} has no GPU lowering") for c in drop]
        kept = [c for c in kept if c not in drop]
    return kept, left


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ds-run", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--chip", default="sm_90")
    ap.add_argument("--emulate-kernels", action="store_true",
                    help="with --device cuda: kernels run on the host (the "
                         "stub libcuda's testing mode, ds-run "
                         "--gpu-emulate-kernels), at most 3 blocks per launch")
    ap.add_argument("--group", action="append", choices=sorted(check_ops.GROUPS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(args.out, ".work")
    os.makedirs(work, exist_ok=True)
    index = {"groups": [], "left_out": []}
    for g in args.group or sorted(check_ops.GROUPS):
        cases, left = compile_group(g, check_ops.GROUPS[g](), args, work)
        index["left_out"] += [{"group": g, "case": c, "why": w} for c, w in left]
        if not cases:
            continue
        step_dir = os.path.join(args.out, g)
        ref_dir = os.path.join(step_dir, "reference")
        os.makedirs(ref_dir, exist_ok=True)
        entries = []
        for ci, case in enumerate(cases):
            for k, a in enumerate(case.inputs):
                save(os.path.join(step_dir, "init", f"case.c{ci}_a{k}.npy"), a)
            wants = case.ref(*case.inputs)
            outputs = []
            for k, ((_, shape, dtype), want) in enumerate(zip(case.outputs, wants)):
                metric = f"c{ci}_o{k}"
                np.save(os.path.join(ref_dir, metric + ".npy"),
                        reference(np.asarray(want).reshape(shape), dtype))
                rtol, atol = tolerances(case, carried(dtype), args.device)
                outputs.append({"metric": metric,
                                "dtype": check_ops.MLIR_ELEM[carried(dtype)],
                                "rtol": rtol, "atol": atol})
            entries.append({"case": case.name, "outputs": outputs})
        with open(os.path.join(step_dir, "cases.json"), "w") as f:
            json.dump({"group": g, "cases": entries}, f, indent=1)
        index["groups"].append({"group": g, "cases": len(cases)})
        print(f"export_cases.py: {g}: {len(cases)} cases -> {step_dir}"
              + (f" ({len(left)} left out)" if left else ""))
    shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    for e in index["left_out"]:
        print(f"export_cases.py: left out {e['group']}/{e['case']}: {e['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Emulated low-precision GEMMs against NumPy, and their speed.

Each case is a compiled `ds.cast` of both f32 operands to a narrow type
(bf16, f8E4M3FN, f8E5M2) followed by `ds.matmul` with an f32 result. The
lowering extends the rounded operands back to f32 and calls the runtime's
f32 GEMM (oneDNN), FP32 accumulation. The reference is NumPy's matmul in
f64 of the same operands rounded with ml_dtypes. The error measure is
elementwise relative to the natural scale of f32 accumulation,
`|c - ref| / sum_k |a_ik| |b_kj|` (so cancellation in a sum cannot blow it
up), and must be at most 1e-5. The compiled code must call the library
GEMM (no loop nest). The time of a 256x256x256 E4M3 and BF16 step (casts
included) next to the f32 one is printed for information only: a timing
is no assertion on a shared, noisy machine (it was flaky under load).

Usage: check_gemms.py --ds-opt PATH --runtime LIBDSRT
"""

import argparse
import os
import sys
import time

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from compiled import CompiledModule  # noqa: E402

TYPES = {"bf16": ml_dtypes.bfloat16, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
         "f8E5M2": ml_dtypes.float8_e5m2, "f32": np.float32}
# name -> (lhs shape, rhs shape, transpose_rhs)
SHAPES = {"square": ((256, 256), (256, 256), False),
          "linear": ((4, 32, 96), (48, 96), True),
          "odd": ((37, 129), (129, 65), False)}
TOLERANCE = 1e-5


def T(shape, elem):
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def out_shape(a, b, tr):
    n = b[0] if tr else b[1]
    return a[:-1] + (n,)


def module_text():
    fns = []
    for elem in TYPES:
        for name, (a, b, tr) in SHAPES.items():
            c = out_shape(a, b, tr)
            t = " transpose_rhs" if tr else ""
            if elem == "f32":
                body = f"""%c = ds.matmul %a, %b{t} : {T(a, 'f32')}, {T(b, 'f32')} -> {T(c, 'f32')}"""
            else:
                body = f"""%an = ds.cast %a : {T(a, 'f32')} -> {T(a, elem)}
    %bn = ds.cast %b : {T(b, 'f32')} -> {T(b, elem)}
    %c = ds.matmul %an, %bn{t} : {T(a, elem)}, {T(b, elem)} -> {T(c, 'f32')}"""
            fns.append(f"""
  func.func @{elem}_{name}(%a: {T(a, 'f32')}, %b: {T(b, 'f32')}) -> {T(c, 'f32')}
      attributes {{llvm.emit_c_interface}} {{
    {body}
    return %c : {T(c, 'f32')}
  }}""")
    return "module attributes {ds.contract = {}} {" + "".join(fns) + "\n}\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-opt", required=True)
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    # One GEMM thread: on a busy 2-core machine a second OpenMP worker waits
    # for the scheduler, which would measure the machine, not the code.
    os.environ["OMP_NUM_THREADS"] = "1"
    mod = CompiledModule(module_text(), ds_opt=args.ds_opt, runtime=args.runtime)
    failed = False

    # The GEMMs are library calls: one dsrt_matmul_f32 per function, and no
    # loop nest is left that multiplies and adds.
    with open(os.path.join(mod.workdir, "module.ll")) as f:
        ll = f.read()
    calls = ll.count("call void @dsrt_matmul_f32(")
    print(f"library GEMM calls: {calls} (functions: {len(TYPES) * len(SHAPES)})")
    failed |= calls < len(TYPES) * len(SHAPES)

    rng = np.random.default_rng(0)
    for elem, dtype in TYPES.items():
        for name, (sa, sb, tr) in SHAPES.items():
            # Scaled into the formats' ranges, with some values in E4M3's
            # subnormals.
            a = (rng.standard_normal(sa) * 3).astype(np.float32)
            b = (rng.standard_normal(sb) * 0.5).astype(np.float32)
            c = np.empty(out_shape(sa, sb, tr), dtype=np.float32)
            mod.call(f"{elem}_{name}", a, b, c)
            ar = a.astype(dtype).astype(np.float64)
            br = b.astype(dtype).astype(np.float64)
            if tr:
                br = br.T
            ref = np.matmul(ar, br)
            scale = np.matmul(np.abs(ar), np.abs(br))
            err = float(np.max(np.abs(c - ref) / np.maximum(scale, 1e-30)))
            ok = err <= TOLERANCE
            failed |= not ok
            print(f"{elem:9s} {name:7s} max relative error {err:.2e} "
                  f"{'ok' if ok else 'FAIL'}")

    # Speed: the E4M3 step (two casts + GEMM) against the f32 GEMM.
    sa, sb, _ = SHAPES["square"]
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    c = np.empty((sa[0], sb[1]), dtype=np.float32)

    def best(fn):
        for _ in range(20):
            mod.call(fn, a, b, c)
        times = []
        for _ in range(args.reps):
            t = time.perf_counter()
            mod.call(fn, a, b, c)
            times.append(time.perf_counter() - t)
        # The fastest run: the machine's capability, not its other load
        # (on a busy 2-core machine a woken OpenMP worker can cost a
        # scheduler time slice).
        return float(np.min(times))
    t32 = best("f32_square")
    for elem in ("f8E4M3FN", "bf16"):
        t8 = best(f"{elem}_square")
        ratio = t8 / t32
        print(f"256x256x256 {elem} step {t8 * 1e6:.0f} us, f32 {t32 * 1e6:.0f} us, "
              f"ratio {ratio:.2f}")
    mod.close()
    print("FAILED" if failed else "PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

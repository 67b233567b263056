#!/usr/bin/env python3
"""Speed of the compiled narrow-float casts next to PyTorch's `.to()`.

Compiles `ds.cast` f32 -> f8E4M3FN, f8E5M2 (plain and saturating), bf16,
f16 and back to f32 with ds-cpu-pipeline (ds-emulate-narrow-floats does
the rounding), and times them against torch's `.to()` on the same NumPy
buffers in the same process. GB/s counts bytes read plus bytes written.
The compiled code is single-threaded; PyTorch is shown with one thread and
with its default.

Usage: benchmarks/casts.py [--ds-opt build/bin/ds-opt] [--elements N]
(not part of make check)
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "lib"))
from compiled import CompiledModule  # noqa: E402

CASTS = [  # name, target, saturate, torch dtype, storage
    ("e4m3", "f8E4M3FN", False, torch.float8_e4m3fn, np.uint8),
    ("e4m3_sat", "f8E4M3FN", True, torch.float8_e4m3fn, np.uint8),
    ("e5m2", "f8E5M2", False, torch.float8_e5m2, np.uint8),
    ("e5m2_sat", "f8E5M2", True, torch.float8_e5m2, np.uint8),
    ("bf16", "bf16", False, torch.bfloat16, np.uint16),
    ("f16", "f16", False, torch.float16, np.uint16),
]


def best_of(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-opt", default=os.path.join(ROOT, "build", "bin", "ds-opt"))
    ap.add_argument("--elements", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    n = args.elements
    fns = []
    for name, mlir, sat, _, _ in CASTS:
        s = " saturate" if sat else ""
        fns.append(f"""
  func.func @{name}(%x: tensor<{n}xf32>) -> tensor<{n}x{mlir}> attributes {{llvm.emit_c_interface}} {{
    %r = ds.cast %x{s} : tensor<{n}xf32> -> tensor<{n}x{mlir}>
    return %r : tensor<{n}x{mlir}>
  }}
  func.func @{name}_back(%x: tensor<{n}x{mlir}>) -> tensor<{n}xf32> attributes {{llvm.emit_c_interface}} {{
    %r = ds.cast %x : tensor<{n}x{mlir}> -> tensor<{n}xf32>
    return %r : tensor<{n}xf32>
  }}""")
    mod = CompiledModule("module attributes {ds.contract = {}} {" + "".join(fns) + "\n}\n",
                         ds_opt=args.ds_opt)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    xt = torch.from_numpy(x)
    threads = torch.get_num_threads()
    print(f"{n} elements; GB/s = bytes read + written; compiled: 1 thread; "
          f"torch: 1 and {threads} threads")
    print(f"{'cast':18s} {'compiled':>9s} {'torch x1':>9s} {'torch x' + str(threads):>9s}")
    for name, mlir, sat, dtype, storage in CASTS:
        out = np.empty(n, dtype=storage)
        back = np.empty(n, dtype=np.float32)
        nbytes = n * (4 + out.itemsize)
        t_ours = best_of(lambda: mod.call(name, x, out), args.reps)
        t_back = best_of(lambda: mod.call(name + "_back", out, back), args.reps)
        maxv = 448.0 if mlir == "f8E4M3FN" else 57344.0

        def ref():
            y = xt
            if sat:
                y = torch.where(y.isinf(), y, y.clamp(-maxv, maxv))
            return y.to(dtype)
        narrow = ref()
        res = {}
        for th in (1, threads):
            torch.set_num_threads(th)
            res[th] = (best_of(ref, args.reps),
                       best_of(lambda: narrow.to(torch.float32), args.reps))
        torch.set_num_threads(threads)
        print(f"f32 -> {name:11s} {nbytes / t_ours / 1e9:9.1f} "
              f"{nbytes / res[1][0] / 1e9:9.1f} {nbytes / res[threads][0] / 1e9:9.1f}")
        print(f"{name:11s} -> f32 {nbytes / t_back / 1e9:9.1f} "
              f"{nbytes / res[1][1] / 1e9:9.1f} {nbytes / res[threads][1] / 1e9:9.1f}")
    mod.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Chains of elementwise ds ops on bf16 and f16 through ds-cpu-pipeline,
bit for bit against PyTorch eager on the same types.

ds-cpu-pipeline fuses each chain into one loop, computes every narrow op
in f32 and rounds after each one (arith-emulate-unsupported-floats, then
ds-emulate-narrow-floats), which is what PyTorch's CPU kernels do; a
rounding dropped between two fused ops shows up here as a mismatch.
Usage: check_elementwise.py --ds-opt PATH
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from compiled import CompiledModule  # noqa: E402

N = 1 << 16
TYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def module_text():
    fns = []
    for t in TYPES:
        T = f"tensor<{N}x{t}>"
        # GELU (erf evaluated in f32, rounded once) only for bf16: f32's
        # inline erf polynomial (ds-approximate-math, a few ulp) differs
        # from PyTorch's erf often enough to flip ~1 in 10^4 f16 roundings.
        gelu = (f"%g = ds.gelu %x : {T}\n    %r = ds.add %q, %g : {T}, {T} -> {T}"
                if t == "bf16" else f"%r = ds.add %q, %x : {T}, {T} -> {T}")
        fns.append(f"""
  func.func @chain_{t}(%a: tensor<{N}xf32>, %b: tensor<{N}xf32>) -> tensor<{N}xf32>
      attributes {{llvm.emit_c_interface}} {{
    %x = ds.cast %a : tensor<{N}xf32> -> {T}
    %y = ds.cast %b : tensor<{N}xf32> -> {T}
    %m = ds.mul %x, %y : {T}, {T} -> {T}
    %s = ds.add %m, %x : {T}, {T} -> {T}
    %d = ds.sub %s, %y : {T}, {T} -> {T}
    %q = ds.mul %d, %d : {T}, {T} -> {T}
    {gelu}
    %o = ds.cast %r : {T} -> tensor<{N}xf32>
    return %o : tensor<{N}xf32>
  }}""")
    return "module attributes {ds.contract = {}} {" + "".join(fns) + "\n}\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-opt", required=True)
    args = ap.parse_args()
    mod = CompiledModule(module_text(), ds_opt=args.ds_opt)
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(N) * 4).astype(np.float32)
    b = (rng.standard_normal(N) * 4).astype(np.float32)
    failed = False
    for t, dtype in TYPES.items():
        out = np.empty(N, np.float32)
        mod.call(f"chain_{t}", a, b, out)
        x, y = torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype)
        d = x * y + x - y
        g = torch.nn.functional.gelu(x) if t == "bf16" else x
        ref = (d * d + g).float().numpy()
        bad = int(np.sum((out.view(np.uint32) != ref.view(np.uint32))
                         & ~(np.isnan(out) & np.isnan(ref))))
        print(f"{t}: {N} elements, {bad} mismatches")
        failed |= bad > 0
    mod.close()
    print("FAILED" if failed else "PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

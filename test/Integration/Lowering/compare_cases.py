#!/usr/bin/env python3
"""Compares the results of an exported lowering-case step (export_cases.py,
run by `ds-step-run STEP --steps 1 --save-results RESULTS`) with the
references computed where it was exported, with each case's tolerances:
|got - want| <= atol + rtol |want|, NaN and inf matching exactly; integers
and booleans exactly. Needs NumPy only (it runs on the GPU machine).

usage: compare_cases.py STEP_DIR RESULTS_DIR
Prints one line (PASS or FAIL with the first mismatches); exit 0 on PASS.
"""

import json
import os
import sys

import numpy as np


def load(path, dtype):
    a = np.load(path, allow_pickle=False)
    if dtype == "bf16":  # stored as its raw bits, '<u2'
        a = (a.astype(np.uint32) << 16).view(np.float32)
    if dtype == "i1":
        return a.astype(bool)
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    return a.astype(np.int64)


def mismatch(got, want, rtol, atol):
    """A failure message, or None when `got` matches `want` (check_ops.py
    uses the same test for its floats)."""
    if got.shape != want.shape:
        return f"shape {got.shape} != reference {want.shape}"
    if want.dtype.kind in "biu":
        bad = got != want
        if bad.any():
            i = tuple(int(k) for k in np.argwhere(bad)[0])
            return f"{int(bad.sum())}/{bad.size} differ, first at {i}: {got[i]} vs {want[i]}"
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        nan_ok = np.isnan(got) == np.isnan(want)
        inf_ok = np.where(np.isinf(want) | np.isinf(got), got == want, True)
        fin = np.isfinite(got) & np.isfinite(want)
        close = np.where(fin, np.abs(got - want) <= atol + rtol * np.abs(want), True)
        bad = ~(nan_ok & inf_ok & close)
        if bad.any():
            i = tuple(int(k) for k in np.argwhere(bad)[0])
            err = np.max(np.where(fin, np.abs(got - want), 0))
            return (f"{int(bad.sum())}/{bad.size} differ (max abs err {err:.3g}), "
                    f"first at {i}: got {float(got[i])!r} want {float(want[i])!r}")
    return None


def main():
    step_dir, results = sys.argv[1], sys.argv[2]
    spec = json.load(open(os.path.join(step_dir, "cases.json")))
    failures, outputs = [], 0
    for case in spec["cases"]:
        for out in case["outputs"]:
            outputs += 1
            path = os.path.join(results, out["metric"] + ".npy")
            if not os.path.exists(path):
                failures.append(f"{case['case']}: no result {out['metric']}.npy")
                continue
            want = np.load(os.path.join(step_dir, "reference", out["metric"] + ".npy"))
            got = load(path, out["dtype"])
            if want.dtype.kind == "f":  # f32 or f64 (export_cases.reference)
                want, got = want.astype(np.float64), got.astype(np.float64)
            msg = mismatch(got, want, out["rtol"], out["atol"])
            if msg:
                failures.append(f"{case['case']} ({out['metric']}): {msg}")
    n = len(spec["cases"])
    if failures:
        print(f"FAIL: {spec['group']}: {len(failures)} of {outputs} outputs "
              f"({n} cases) differ: " + "; ".join(failures[:3]))
        return 1
    print(f"PASS: {spec['group']}: {n} cases, {outputs} outputs within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())

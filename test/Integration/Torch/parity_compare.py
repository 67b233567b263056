#!/usr/bin/env python3
"""The parity criteria of check_parity.py, on NumPy arrays alone, so that
the GPU check (scripts/gpu-check.sh, where there is no ds_torch and no
MLIR) applies the same ones to a step trained by ds-step-run.

  f64: every loss and every element within 1e-8 relative + 1e-10 absolute;
  f32: every loss within 1e-4 relative; per parameter
       ||p_ds - p_torch|| <= 1e-3 ||p_torch - p_0||; other float state
       (running statistics) 1e-4 relative in norm; integers exactly.

usage (an exported case, see check_parity.py --export):
  parity_compare.py CASE_DIR LOSSES.json STATE_DIR
where LOSSES.json is ds-step-run's --losses file and STATE_DIR its
--save-state directory. Prints one line; exit 0 when within the criteria.
"""

import json
import os
import sys

import numpy as np


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))) if a.size else 0.0


def compare_training(f64, ds_losses, losses, got, ref, initial, params):
    """`got` / `ref`: tensor name -> final value (ds, PyTorch); `initial`:
    parameter name -> initial value; `params`: the parameter names.
    Returns (ok, worst loss rel. error, worst tensor deviation, problems)."""
    bad = []
    ds_losses, losses = np.array(ds_losses, np.float64), np.array(losses, np.float64)
    if ds_losses.shape != losses.shape:
        return False, float("inf"), float("inf"), [
            "%d losses, PyTorch has %d" % (ds_losses.size, losses.size)]
    if f64:
        ok = np.abs(ds_losses - losses) <= 1e-8 * np.abs(losses) + 1e-10
    else:
        ok = np.abs(ds_losses - losses) <= 1e-4 * np.abs(losses)
    worst_loss = rel_err(ds_losses, losses)
    if not ok.all():
        bad.append("losses: worst rel err %.2e at step %d" % (
            worst_loss, int(np.argmax(~ok))))
    worst = 0.0
    for key, r in ref.items():
        g = got[key]
        if r.dtype.kind != "f":  # batch counters
            measure = float(np.max(np.abs(g.astype(np.int64) - r))) if r.size else 0.0
            fine = measure == 0
        elif f64:
            measure = rel_err(g, r)
            fine = bool((np.abs(g - r) <= 1e-8 * np.abs(r) + 1e-10).all())
        elif key in params:
            r = r.astype(np.float64)
            moved = np.linalg.norm(r - initial[key])
            measure = np.linalg.norm(g - r) / max(moved, 1e-30)
            fine = measure <= 1e-3
        else:  # f32 running statistics
            r = r.astype(np.float64)
            measure = np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-30)
            fine = measure <= 1e-4
        worst = max(worst, measure)
        if not fine:
            bad.append("%s: deviation %.2e" % (key, measure))
    return not bad, worst_loss, worst, bad


def main():
    case, losses_path, state = sys.argv[1:4]
    meta = json.load(open(os.path.join(case, "reference", "parity.json")))
    ds_losses = [s["loss"] if s["loss"] is not None else float("nan")
                 for s in json.load(open(losses_path))["steps"]]
    load = lambda d, k: np.load(os.path.join(d, k + ".npy"))
    ref = {k: load(os.path.join(case, "reference", "final"), k) for k in meta["tensors"]}
    got = {k: load(state, k) for k in meta["tensors"]}
    initial = {k: load(os.path.join(case, "reference", "initial"), k).astype(np.float64)
               for k in meta["params"]}
    ok, wl, wp, bad = compare_training(meta["dtype"] == "f64", ds_losses,
                                       meta["losses"], got, ref, initial,
                                       set(meta["params"]))
    print("%s: loss %.4f -> %.4f; worst loss rel err %.1e, worst tensor "
          "deviation %.1e%s" % ("PASS" if ok else "FAIL", meta["losses"][0],
                                meta["losses"][-1], wl, wp,
                                "; " + "; ".join(bad[:3]) if bad else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

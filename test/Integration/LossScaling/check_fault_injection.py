#!/usr/bin/env python3
"""Fault injection: poisoned steps are skipped and never reach the state.

Trains examples/mlp.mlir for 300 steps with AdamW, --loss-scaling and
--inject-nonfinite=25 (25 random steps, seeded): the loss op's activation is
NaN inside the compiled step on those steps. Checked: every poisoned step is
skipped and logged; no other step is skipped; every clean step's loss is
finite (a NaN parameter would poison every later loss); every parameter and
optimizer state in the final checkpoint is finite; Adam's step count equals
the number of clean steps; the report's summary counts agree; the same seed
poisons the same steps and another seed others.
Usage: check_fault_injection.py with DS_RUN and DS_SRC set.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

DS_RUN = os.environ.get("DS_RUN", "ds-run")
MODEL = os.path.join(os.environ.get("DS_SRC", "."), "examples", "mlp.mlir")
STEPS, N = 300, 25


def run(work, tag, seed):
    report = os.path.join(work, tag + ".json")
    ckpt = os.path.join(work, tag + ".ckpt")
    r = subprocess.run([DS_RUN, MODEL, "--steps", str(STEPS), "--seed", str(seed),
                        "--loss-scaling", "--inject-nonfinite", str(N),
                        "--optimizer", "adamw", "--lr", "0.01",
                        "--print-every", "100", "--report", report,
                        "--checkpoint", ckpt], capture_output=True, text=True)
    if r.returncode:
        sys.exit("ds-run failed:\n" + r.stdout + r.stderr)
    return r.stdout, json.load(open(report)), ckpt


def main():
    failures = []
    with tempfile.TemporaryDirectory() as work:
        log, report, ckpt = run(work, "a", 4)
        summary, steps = report["summary"], report["steps"]
        injected = summary["injected_nonfinite_steps"]
        skipped = [s["step"] for s in steps if s["skipped"]]
        logged = [int(m) for m in re.findall(
            r"^step (\d+): non-finite gradients, skipped; loss scale \S+ -> \S+ \(injected\)$",
            log, re.M)]
        if len(injected) != N:
            failures.append("%d steps injected, expected %d" % (len(injected), N))
        if skipped != injected:
            failures.append("skipped %s != injected %s" % (skipped, injected))
        if logged != injected:
            failures.append("logged %s != injected %s" % (logged, injected))
        if summary["skipped_steps"] != len(injected) or \
                summary["skipped_step_list"] != injected:
            failures.append("summary counts wrong: %s" % summary)
        bad_loss = [s["step"] for s in steps if not s["skipped"] and
                    (s["loss"] is None or not np.isfinite(s["loss"]))]
        if bad_loss:
            failures.append("non-finite loss on clean steps %s" % bad_loss)
        poisoned_loss = [s["loss"] for s in steps if s["skipped"]]
        if any(l is not None for l in poisoned_loss):
            failures.append("a poisoned step has a finite loss")
        nonfinite = [os.path.basename(f) for f in glob.glob(ckpt + "/*.npy")
                     if not np.all(np.isfinite(np.load(f).astype(np.float64)))]
        if nonfinite:
            failures.append("non-finite checkpoint tensors: %s" % nonfinite)
        adam_steps = int(np.load(ckpt + "/step.npy"))
        if adam_steps != STEPS - len(injected):
            failures.append("Adam step count %d, expected %d" %
                            (adam_steps, STEPS - len(injected)))
        first, last = steps[0]["loss"], steps[-1]["loss"]
        if not last < first:
            failures.append("did not train: loss %g -> %g" % (first, last))
        print("%d steps, %d poisoned at %s: all skipped and logged; Adam step "
              "count %d; %d checkpoint tensors finite; loss %.4f -> %.4f; "
              "final loss scale %g" % (
                  STEPS, len(injected), injected, adam_steps,
                  len(glob.glob(ckpt + "/*.npy")), first, last,
                  summary["final_loss_scale"]))
        _, again, _ = run(work, "b", 4)
        _, other, _ = run(work, "c", 5)
        if again["summary"]["injected_nonfinite_steps"] != injected:
            failures.append("the same seed poisoned other steps")
        if other["summary"]["injected_nonfinite_steps"] == injected:
            failures.append("another seed poisoned the same steps")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checkpoint/resume gives a bit-identical continuation.

Runs MODULE for N steps straight, and for N/2 steps then resumed to N, at
the same --threads, and requires every parameter and state tensor of the two
final checkpoints and every loss of the second half to be bit-identical.
Usage: check_resume.py DS_RUN MODULE N WORKDIR [ds-run flags...]
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ds_run, module, n, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
flags = sys.argv[5:] + ["--quiet", "--threads", "2", "--seed", "3"]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(*extra):
    subprocess.run([ds_run, module] + flags + list(extra), check=True)


run("--steps", str(n), "--checkpoint", work + "/full", "--report", work + "/full.json")
run("--steps", str(n // 2), "--checkpoint", work + "/half")
run("--steps", str(n), "--resume", work + "/half", "--checkpoint",
    work + "/resumed", "--report", work + "/resumed.json")

full = json.load(open(work + "/full.json"))["steps"]
resumed = json.load(open(work + "/resumed.json"))["steps"]
bad = []
if [s["loss"] for s in full[n // 2:]] != [s["loss"] for s in resumed]:
    bad.append("losses of steps %d..%d differ" % (n // 2 + 1, n))
files = sorted(f for f in os.listdir(work + "/full") if f.endswith(".npy"))
for f in files:
    a, b = np.load(work + "/full/" + f), np.load(work + "/resumed/" + f)
    if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
        bad.append(f + " differs")
print("%s: %d tensors and %d losses compared; %s" % (
    os.path.basename(module), len(files), len(resumed),
    "bit-identical" if not bad else "; ".join(bad)))
sys.exit(1 if bad else 0)

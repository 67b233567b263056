#!/usr/bin/env python3
"""Step time of data-parallel training per all-reduce scheme, at 2 and 4
MPI ranks (scripts/ds-mpirun, one thread each), against the same step run
by one process on one rank's rows, side by side in one script:

  - the GPT block at d_model 256 (4 rows of 64 tokens per rank), with
    DDP-style buckets of 1 MiB (so several buckets overlap the backward);
  - per scheme: the median step time and its ratio to the single-process
    step, the bytes this rank sent per step, the time the communication
    thread spent in MPI, the time the step was blocked in waits, and the
    share of communication hidden behind the backward,
    1 - wait / communication.

On a 2-core machine 4 ranks share 2 cores (the communication threads
included), so the absolute times say more about the scheduler than about
the network; the ratios between schemes and the hidden share are the
point. Usage: dp_step.py --ds-run build/bin/ds-run [--steps 40]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = os.path.join(SRC, "scripts", "ds-mpirun")

SCHEMES = [
    ("uncompressed", None),
    ("fp16", "scheme=fp16"),
    ("top-k 0.1 %", "scheme=topk ratio=0.001"),
    ("three-tier 0.95/0.99", "scheme=three-tier"),
    ("powersgd rank 1", "scheme=powersgd rank=1 start-iteration=0"),
]


def run(cmd, report):
    r = subprocess.run(cmd + ["--report", report], capture_output=True,
                       text=True)
    if r.returncode:
        raise RuntimeError("failed:\n%s%s" % (r.stdout[-2000:],
                                               r.stderr[-2000:]))
    with open(report) as f:
        return json.load(f)["summary"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-run", default="build/bin/ds-run")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ranks", default="2,4")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.mlir")
        subprocess.run([sys.executable,
                        os.path.join(SRC, "examples", "gen_examples.py"),
                        "gpt", "--d-model", "256", "--heads", "4", "--seq",
                        "64", "--batch", "4", "--vocab", "128", "-o", model],
                       check=True)
        common = ["--steps", str(args.steps), "--quiet", "--seed", "0"]
        single = run([args.ds_run, model, "--threads", "1"] + common,
                     os.path.join(work, "single.json"))
        base = single["median_step_ms"]
        print("GPT block d_model 256, 4 x 64 tokens per rank, %d steps, "
              "buckets of 1 MiB; single process (one rank's rows, 1 thread): "
              "%.1f ms/step" % (args.steps, base))
        print("%5s %-22s %9s %8s %10s %9s %9s %8s" % (
            "ranks", "scheme", "step ms", "vs 1p", "KiB/step", "comm ms",
            "wait ms", "hidden"))
        for n in [int(x) for x in args.ranks.split(",")]:
            for tag, spec in SCHEMES:
                cmd = [MPIRUN, "-np", str(n), args.ds_run, model,
                       "--fuse-allreduce=bucket-bytes=1048576 "
                       "first-bucket-bytes=262144", "--threads", "1"] + common
                if spec:
                    cmd.append("--compress-allreduce=" + spec)
                s = run(cmd, os.path.join(work, "r.json"))
                dp = s["data_parallel"]
                comm, wait = dp["comm_thread_ms_per_step"], \
                    dp["wait_ms_per_step"]
                hidden = 1 - wait / comm if comm > 0 else 0.0
                print("%5d %-22s %9.1f %7.2fx %10.1f %9.2f %9.2f %7.0f%%" % (
                    n, tag, s["median_step_ms"], s["median_step_ms"] / base,
                    dp["bytes_sent_per_step"] / 1024, comm, wait,
                    100 * max(0.0, hidden)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

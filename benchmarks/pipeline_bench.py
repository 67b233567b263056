#!/usr/bin/env python3
"""Pipeline parallelism on this machine: predicted vs measured.

1. Calibrates this CPU with one runtime thread (ds-plan --calibrate), and
   writes a cluster file of two such devices (one per MPI rank).
2. Trains a 4-block GPT (f32) as a 2-stage pipeline planned for that
   cluster, GPipe and 1F1B, for several micro-batch counts, one thread per
   rank (scripts/ds-mpirun -np 2), and reads every stage's report:
   - per stage, the compute the plan predicts for a step (M x its forward
     + backward ms per micro-batch) against the measured one (step time
     minus the time the stage waited for its neighbours), side by side;
   - the measured bubble (the stages' mean idle fraction) against the
     theory: (S - 1) / (M + S - 1) for GPipe, and the same for 1F1B's
     flush (PipeDream-Flush idles as long; it keeps fewer activations).
   Each row is one run: the stages' numbers come from the same steps.
Usage: pipeline_bench.py --ds-run BIN --ds-plan BIN [--steps N]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MPIRUN = os.path.join(ROOT, "scripts", "ds-mpirun")
GEN = os.path.join(ROOT, "examples", "gen_examples.py")


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=1800)
    if p.returncode != 0:
        sys.exit("pipeline_bench: %s failed:\n%s%s" %
                 (" ".join(cmd), p.stdout[-2000:], p.stderr[-2000:]))
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ds-run", required=True)
    ap.add_argument("--ds-plan", required=True)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--micro-batches", default="1,2,4,8")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ds-pipeline-bench-")
    env = dict(os.environ, OMP_NUM_THREADS="1")

    cpu = os.path.join(tmp, "cpu.yaml")
    print("pipeline_bench: calibrating this CPU (one thread) ...", flush=True)
    run([args.ds_plan, "--calibrate", "-o", cpu], env=env)
    text = open(cpu).read()
    two = os.path.join(tmp, "two-cpus.yaml")
    with open(two, "w") as f:
        f.write(re.sub(r"\n(\s*)count: 1\n", r"\n\1count: 2\n", text, 1))

    model = os.path.join(tmp, "gpt4.mlir")
    run([sys.executable, GEN, "gpt", "--layers", "4", "--d-model", "128",
         "--heads", "4", "--seq", "64", "--vocab", "256", "--batch", "4",
         "-o", model])

    rows = []
    for schedule in ("gpipe", "1f1b"):
        for m in [int(x) for x in args.micro_batches.split(",")]:
            report = os.path.join(tmp, "%s-m%d.json" % (schedule, m))
            print("pipeline_bench: 2 stages, %s, %d micro-batches ..." %
                  (schedule, m), flush=True)
            run([MPIRUN, "-np", "2", args.ds_run, model, "--stages", "2",
                 "--micro-batches", str(m), "--pipeline-schedule", schedule,
                 "--cluster", two, "--steps", str(args.steps), "--threads",
                 "1", "--optimizer", "sgd", "--report", report, "--quiet"],
                env=env)
            stages = []
            for path in (report, report + ".stage1"):
                with open(path) as f:
                    stages.append(json.load(f)["summary"]["pipeline"])
            rows.append((schedule, m, stages))

    print()
    print("2-stage pipeline of a 4-block GPT (d_model 128, seq 64, micro-batch "
          "4, f32), 2 ranks x 1 thread, planned on this CPU's calibration")
    print("%-6s %3s | %-26s | %-26s | %-8s %-8s %-8s" %
          ("sched", "M", "stage 0 compute ms pred/meas", "stage 1 compute ms "
           "pred/meas", "bubble", "theory", "planned"))
    for schedule, m, stages in rows:
        cells = []
        for k, st in enumerate(stages):
            pred = st["plan"][k]["compute_ms"] * m
            meas = st["measured"]["compute_ms"]
            cells.append("%7.2f / %7.2f (%4.2fx)" % (pred, meas, meas / pred))
        idle = sum(st["measured"]["idle_fraction"] for st in stages) / 2
        theory = 1.0 / (m + 1)
        print("%-6s %3d | %-26s | %-26s | %5.1f %%  %5.1f %%  %5.1f %%" %
              (schedule, m, cells[0], cells[1], 100 * idle, 100 * theory,
               100 * stages[0]["bubble"]))
    print("(compute = step - wait for the neighbours; the update's time "
          "is in the measured compute, not in the per-micro-batch "
          "prediction. bubble: the stages' mean idle fraction; theory: "
          "(S - 1) / (M + S - 1); planned: the plan's, with its stage "
          "imbalance)")


if __name__ == "__main__":
    main()

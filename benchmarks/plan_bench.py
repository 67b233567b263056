#!/usr/bin/env python3
"""Pipeline plans on the seed article's two heterogeneous clusters
(examples/clusters/seed-8xh100-4xv100.yaml, the 12-GPU cluster of its
chapter 3, and seed-256-node.yaml, the 128 H100 / 64 MI210 / 64 Grace
nodes of its chapter 4) for a Llama-70B-shaped decoder and a Llama-7B-shaped
one, from ds-plan's cost model (predicted, not measured):

  - the heterogeneity-aware plan (ds-plan's planner) against two
    baselines: the layers cut into equal counts per stage (uniform split),
    and a plan made as if every device were the slowest one
    (homogeneous-only), both evaluated on the real devices;
  - per plan: predicted step time, utilisation (useful FLOPs over the used
    devices' time), pipeline bubble, and the baselines' step time over the
    plan's (the speed-up of the plan);
  - the wall time of ds-plan itself (parse, training pipeline, layer
    costs, the three plans), the goal being < 10 s for the 80-layer graph
    on the 256-device cluster.

The graphs come from examples/gen_examples.py (shapes only: nothing is
executed). The module's batch is one micro-batch of one sequence;
--micro-batches M sequences make a step. A plan that does not fit a
cluster's memory (the 70B with f32 AdamW state, 12 bytes a parameter
before activations, on the 12 GPUs' 768 GB) is reported with the
planner's error.
Usage: plan_bench.py [--ds-plan build/bin/ds-plan] [--micro-batches 32]
       [--quick] (--quick: only the 7B-shaped graphs)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "examples", "gen_examples.py")
CLUSTERS = [("8xH100+4xV100", "seed-8xh100-4xv100.yaml"),
            ("256 nodes", "seed-256-node.yaml")]
# Llama-2-70B's width and depth (its 8192 x 28672 SwiGLU MLP is a GELU MLP
# of 4 x 8192 here, and its grouped KV heads are full heads: ~65 B
# parameters); Llama-7B's shapes (~6.5 B) at the same context, and at a
# context of 1024. The graphs materialise the attention scores (no flash
# attention, no recomputation): at 4096 tokens they are 64 (32) heads x
# 4096^2 f32 per micro-batch and attention layer, which the baselines'
# cuts rarely fit in a GPU; at 1024 every plan fits.
def llama(layers, d_model, heads, seq):
    return ["--layers", str(layers), "--d-model", str(d_model), "--heads",
            str(heads), "--ffn-mult", "4", "--seq", str(seq), "--vocab",
            "32000", "--batch", "1"]


MODELS = [
    ("70b-shape 4096", llama(80, 8192, 64, 4096)),
    ("7b-shape 4096", llama(32, 4096, 32, 4096)),
    ("7b-shape 1024", llama(32, 4096, 32, 1024)),
]
VARIANTS = [("plan", "heterogeneity-aware"), ("uniform_split", "uniform split"),
            ("homogeneous_only", "homogeneous-only")]


def generate(tmp, name, args):
    path = os.path.join(tmp, name + ".mlir")
    start = time.perf_counter()
    subprocess.run([sys.executable, GEN, "gpt", *args, "-o", path], check=True)
    return path, time.perf_counter() - start


def run_plan(ds_plan, model, cluster, m, extra, tmp):
    out = os.path.join(tmp, "plan.json")
    if os.path.exists(out):
        os.remove(out)
    cmd = [ds_plan, model, "--cluster", cluster, "--micro-batches", str(m),
           "--json", out, *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    result = json.load(open(out)) if proc.returncode == 0 else None
    return result, wall, proc


def cell(plan, ref=None):
    if plan is None or "error" in plan:
        return "%-36s" % "does not fit"
    text = "%8.3f s %5.1f%% %5.1f%%" % (plan["step_seconds"],
                                         100 * plan["utilisation"],
                                         100 * plan["bubble_fraction"])
    if ref is not None:
        text += " %5.2fx" % (plan["step_seconds"] / ref["step_seconds"])
    return "%-36s" % text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-plan", default=os.path.join(ROOT, "build", "bin",
                                                      "ds-plan"))
    ap.add_argument("--micro-batches", type=int, default=32)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--precision", action="store_true",
                    help="also plan with the default precision policy "
                    "(FP8/BF16 where the seeds map them)")
    args = ap.parse_args()
    models = MODELS[1:] if args.quick else MODELS
    m = args.micro_batches
    print("Pipeline plans (ds-plan's cost model; predicted), %d micro-batches "
          "of one sequence per step, 1F1B, f32 AdamW%s" %
          (m, "" if not args.precision else " (and --precision)"))
    print("cells: step time, utilisation of the used devices, bubble; "
          "baselines also their step time / the plan's")
    print("%-16s %-14s %-6s %-26s %-36s %-36s %s" % (
        "model", "cluster", "stages", "plan", "uniform split",
        "homogeneous-only", "ds-plan s"))
    timings, notes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, gen_args in models:
            path, gen_s = generate(tmp, name, gen_args)
            configs = [("f32", [])]
            if args.precision:
                configs.append(("mixed", ["--precision"]))
            for label, cluster_file in CLUSTERS:
                cluster = os.path.join(ROOT, "examples", "clusters",
                                       cluster_file)
                for tag, extra in configs:
                    result, wall, proc = run_plan(args.ds_plan, path, cluster,
                                                  m, extra, tmp)
                    model = name if tag == "f32" else name + " " + tag
                    if result is None:
                        err = proc.stderr.strip().splitlines()
                        print("%-16s %-14s %s" % (
                            model, label, err[-1] if err else
                            "ds-plan exited with %d" % proc.returncode))
                        continue
                    plan = result["plan"]
                    print("%-16s %-14s %-6d %-26s %s %s %.2f" % (
                        model, label, len(plan["stages"]),
                        cell(plan).strip(),
                        cell(result["uniform_split"], plan),
                        cell(result["homogeneous_only"], plan), wall))
                    timings.append((model, label, wall, result["seconds"],
                                    result["layers"], result["devices"],
                                    [result[k]["planner_seconds"]
                                     for k, _ in VARIANTS]))
                    for key, title in VARIANTS[1:]:
                        if "error" in result[key]:
                            notes.append("%s on %s, %s: %s" % (
                                model, label, title, result[key]["error"]))
    if notes:
        print("\nwhy a baseline does not fit (the planner's message):")
        for note in notes:
            print("  " + note)
    print()
    print("ds-plan wall time (s): parse + training pipeline + layer costs + "
          "the three plans (run side by side; each plan's own time)")
    for model, label, wall, sec, layers, devices, each in timings:
        print("%-16s %-14s %3d layers x %3d devices: %6.2f = %.2f + %.2f + "
              "%.2f + %.2f (%s) + process start" % (
                  model, label, layers, devices, wall, sec["parse"],
                  sec["pipeline"], sec["layers"], sec["plan"],
                  " / ".join("%.2f" % t for t in each)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

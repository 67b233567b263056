#!/usr/bin/env python3
"""Checks pipeline parallelism (ds-partition-pipeline) end to end.

A 4-layer GPT (examples/gen_examples.py gpt --layers 4) in f64, with loss
scaling and gradient clipping so that the cross-stage reductions (found_inf,
the global norm, the loss) are exercised:
  - accumulation is right: --accumulate 4 in one process equals one step
    on the whole batch of 4 b rows (an independent reference: no
    micro-batches at all), losses and parameters within 1e-12 relative;
  - pipelining is exact: 2 and 3 stages (one MPI rank each), GPipe and
    1F1B, equal --accumulate 4 on the same micro-batches: the loss of every
    step and every final parameter and optimizer state, per tensor
    ||a - b|| / ||b|| <= 1e-12 over 10 steps;
  - with data parallelism: 2 stages x 2 replicas (4 ranks, oversubscribed),
    and --accumulate 2 on 2 replicas, equal --accumulate 4 in one process on
    the same global batch;
  - QAT and FP8 (state updated by every micro-batch's forward): 2 stages
    equal --accumulate 4 bit for bit (f32, no sum spans the stages);
  - checkpoints: each stage writes its own; 5 + 5 steps through one equal
    10 straight steps bit for bit; resuming with another stage count is
    refused;
  - refusals: ranks that are not stages x replicas, a pipeline without
    mpirun, more stages than layers, a bad schedule: an error, no hang.
Usage: check_pipeline.py with DS_RUN, DS_OPT, DS_MPIRUN and GEN set.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

DS_RUN = os.environ["DS_RUN"]
DS_OPT = os.environ["DS_OPT"]
MPIRUN = os.environ["DS_MPIRUN"]
GEN = os.environ["GEN"]
TIMEOUT = 240
STEPS = 10
TOL = 1e-12
# Momentum SGD: the key biases' gradients are exactly zero in exact
# arithmetic (softmax is invariant to them), so they are rounding noise in
# every run; Adam would turn that noise into lr-sized steps, SGD keeps it
# noise-sized. Tensors at noise level (norm < NOISE) are not compared.
TECHNIQUES = ["--loss-scaling", "--clip-gradients", "--optimizer", "momentum",
              "--lr", "0.05", "--steps", str(STEPS), "--threads", "1",
              "--print-every", "5"]
NOISE = 1e-10

results = []
# LLVM at -O0: these steps compile in a quarter of the time (a 4-layer
# step of 4 micro-batches: 7 s instead of 30 s), and every run of a
# comparison uses the same level.
os.environ.setdefault("DS_RUN_OPT_LEVEL", "0")


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if expect_ok and p.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s%s" %
                           (p.returncode, " ".join(cmd), p.stdout[-3000:],
                            p.stderr[-3000:]))
    return p


def gen(tmp, batch):
    path = os.path.join(tmp, "gpt4-b%d.mlir" % batch)
    if not os.path.exists(path):
        run([sys.executable, GEN, "gpt", "--layers", "4", "--dtype", "f64",
             "--batch", str(batch), "--seq", "8", "--d-model", "16",
             "--heads", "2", "--vocab", "32", "-o", path])
    return path


def load_dir(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)
            if f.endswith(".npy")}


def losses(report):
    with open(report) as f:
        return [s["loss"] for s in json.load(f)["steps"]]


def rel(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


def compare(name, ref_dir, ref_report, out_dir, out_report, params_only=False):
    ref, out = load_dir(ref_dir), load_dir(out_dir)
    keys = [k for k in ref if k.startswith("update.") and
            (not params_only or "@" not in k and not k.startswith(
                "update.adam") and not k.startswith("update.loss_scale"))]
    missing = [k for k in keys if k not in out]
    if missing:
        raise AssertionError("%s: missing results %s" % (name, missing[:5]))
    noise = [k for k in keys if np.linalg.norm(ref[k]) < NOISE]
    keys = [k for k in keys if k not in noise]
    worst = max(((rel(out[k], ref[k]), k) for k in keys), default=(0, ""))
    la, lb = losses(out_report), losses(ref_report)
    worst_loss = max(abs(a - b) / abs(b) for a, b in zip(la, lb))
    if len(la) != len(lb) or worst[0] > TOL or worst_loss > TOL:
        raise AssertionError("%s: worst tensor %s %.3g, worst loss %.3g" %
                             (name, worst[1], worst[0], worst_loss))
    return "%d tensors (%d at noise level skipped), worst %.1e (%s), " \
        "losses %.1e" % (len(keys), len(noise), worst[0], worst[1], worst_loss)


def check(name, fn):
    try:
        detail = fn()
        results.append(True)
        print("ok   %s: %s" % (name, detail), flush=True)
    except Exception as e:  # noqa: BLE001 - report every failure, go on
        results.append(False)
        print("FAIL %s: %s" % (name, e), flush=True)


def main():
    tmp = tempfile.mkdtemp(prefix="ds-pipeline-")
    model = gen(tmp, 2)
    ref_dir, ref_report = os.path.join(tmp, "acc"), os.path.join(tmp, "acc.json")

    def accumulate_vs_full_batch():
        run([DS_RUN, model, "--accumulate", "4", "--save-results", ref_dir,
             "--report", ref_report] + TECHNIQUES)
        full = gen(tmp, 8)
        d, r = os.path.join(tmp, "full"), os.path.join(tmp, "full.json")
        run([DS_RUN, full, "--save-results", d, "--report", r] + TECHNIQUES)
        return compare("accumulate", d, r, ref_dir, ref_report)

    check("accumulate 4 == one step on the whole batch",
          accumulate_vs_full_batch)

    def dropout_accumulation():
        # Each dropout returns its generator's next value, a per-micro-batch
        # state threaded through the micro-batches: micro-batch m draws the
        # counters of rows [m b, (m + 1) b) of the whole batch, so the
        # masks are the whole batch's.
        outs = []
        for batch, flags in ((4, ["--accumulate", "2"]), (8, [])):
            path = os.path.join(tmp, "mlp-b%d.mlir" % batch)
            run([sys.executable, GEN, "mlp", "--dtype", "f64", "--batch",
                 str(batch), "-o", path])
            d = os.path.join(tmp, "mlp-%d" % batch)
            r = d + ".json"
            run([DS_RUN, path, "--save-results", d, "--report", r,
                 "--optimizer", "momentum", "--lr", "0.05", "--steps", "10",
                 "--threads", "1", "--quiet"] + flags)
            outs.append((d, r))
        return compare("dropout", outs[1][0], outs[1][1], outs[0][0],
                       outs[0][1])

    check("dropout: accumulate 2 == one step on the whole batch",
          dropout_accumulation)

    def pipelined(stages, schedule, replicas=1, micro=4):
        def fn():
            tag = "s%d-%s-r%d" % (stages, schedule, replicas)
            d, r = os.path.join(tmp, tag), os.path.join(tmp, tag + ".json")
            args = [DS_RUN, model, "--save-results", d, "--report", r]
            if stages > 1:
                args += ["--stages", str(stages), "--micro-batches",
                         str(micro // replicas), "--pipeline-schedule",
                         schedule]
            else:
                args += ["--accumulate", str(micro // replicas)]
            args += TECHNIQUES
            if replicas > 1:
                args.append("--data-parallel")
            p = run([MPIRUN, "-np", str(stages * replicas)] + args)
            with open(r) as f:
                summary = json.load(f)["summary"]
            plan = summary["pipeline"]
            if plan["stages"] != stages:
                raise AssertionError("report says %s stages" % plan["stages"])
            if replicas > 1 and stages > 1:
                # The gradients' all-reduces apart from the transfers
                # between stages: uncompressed, a ratio of 1.
                dp = summary["data_parallel"]
                if dp["compression_ratio"] != 1 or \
                        dp["bytes_sent_per_step"] <= \
                        dp["bucket_bytes_sent_per_step"]:
                    raise AssertionError("data-parallel bytes: %s" % dp)
            return compare(tag, ref_dir, ref_report, d, r) + (
                "; plan %s" % " | ".join("%s..%s" % tuple(s["layers"])
                                         for s in plan["plan"]))
        return fn

    check("2 stages gpipe == accumulate", pipelined(2, "gpipe"))
    check("2 stages 1f1b == accumulate", pipelined(2, "1f1b"))
    check("3 stages gpipe == accumulate", pipelined(3, "gpipe"))
    check("3 stages 1f1b == accumulate", pipelined(3, "1f1b"))
    check("2 stages x 2 replicas == accumulate",
          pipelined(2, "1f1b", replicas=2))
    check("accumulate 2 x 2 replicas == accumulate 4",
          pipelined(1, "1f1b", replicas=2))

    def techniques():
        # QAT observers and FP8 amax histories are updated by the forward of
        # every micro-batch: threaded through the micro-batches in order, in
        # the pipeline as with one stage. Without clipping or loss scaling
        # no sum spans the stages, so the two are bit-identical.
        f32 = os.path.join(tmp, "gpt4-f32.mlir")
        run([sys.executable, GEN, "gpt", "--layers", "4", "--batch", "2",
             "--seq", "8", "--d-model", "16", "--heads", "2", "--vocab", "32",
             "-o", f32])
        extra = ["--fake-quant", "--precision", "--steps", "6", "--threads",
                 "1", "--optimizer", "momentum", "--lr", "0.05"]
        a, ra = os.path.join(tmp, "fq-acc"), os.path.join(tmp, "fq-acc.json")
        run([DS_RUN, f32, "--accumulate", "4", "--save-results", a,
             "--report", ra] + extra)
        b, rb = os.path.join(tmp, "fq-s2"), os.path.join(tmp, "fq-s2.json")
        run([MPIRUN, "-np", "2", DS_RUN, f32, "--stages", "2",
             "--micro-batches", "4", "--save-results", b, "--report", rb] +
            extra)
        ref, out = load_dir(a), load_dir(b)
        keys = [k for k in ref if k.startswith("update.")]
        state = [k for k in keys if "qat." in k or "fp8." in k]
        diff = [k for k in keys if not np.array_equal(ref[k], out[k])]
        if not state or diff or losses(ra) != losses(rb):
            raise AssertionError("%d observer/amax tensors; differ: %s" %
                                 (len(state), diff[:5]))
        return "%d tensors (%d observer / amax states) bit-identical" % (
            len(keys), len(state))

    check("fake-quant + FP8, 2 stages == accumulate", techniques)

    def time_levels():
        # The time level's step variants are partitioned alike; every stage
        # switches variant on the same step.
        f32 = os.path.join(tmp, "gpt4-f32.mlir")
        r = os.path.join(tmp, "tl.json")
        policy = os.path.join(os.path.dirname(GEN), "policies", "mgpm.yaml")
        run([MPIRUN, "-np", "2", DS_RUN, f32, "--stages", "2",
             "--micro-batches", "2", "--precision=" + policy,
             "--total-steps", "10", "--steps", "3", "--threads", "1",
             "--report", r])
        seen = []
        for path in (r, r + ".stage1"):
            with open(path) as f:
                seen.append([s.get("variant") for s in json.load(f)["steps"]])
        want = [["gpt_step_high_s%d" % k] + ["gpt_step_s%d" % k] * 2
                for k in (0, 1)]
        if seen != want:
            raise AssertionError("variants per stage: %s" % seen)
        return "warm-up variant then the policy's, on both stages"

    check("time-level variants on every stage", time_levels)

    def checkpoint_resume():
        # 2 stages: 5 steps, a checkpoint per stage, 5 more from it, equal
        # to the straight 10 steps of "2 stages 1f1b" bit for bit.
        straight = os.path.join(tmp, "s2-1f1b-r1")
        ck, d = os.path.join(tmp, "ckpt"), os.path.join(tmp, "resumed")
        r = os.path.join(tmp, "resumed.json")
        common = [DS_RUN, model, "--stages", "2", "--micro-batches", "4"]
        steps = TECHNIQUES.index("--steps")
        first = TECHNIQUES[:steps] + ["--steps", "5"] + TECHNIQUES[steps + 2:]
        run([MPIRUN, "-np", "2"] + common + first + ["--checkpoint", ck])
        for k in (0, 1):
            if not os.path.exists(os.path.join(ck, "stage%d" % k)):
                raise AssertionError("no checkpoint of stage %d" % k)
        run([MPIRUN, "-np", "2"] + common + TECHNIQUES +
            ["--resume", ck, "--save-results", d, "--report", r])
        ref, out = load_dir(straight), load_dir(d)
        diff = [k for k in ref if k.startswith("update.") and
                not np.array_equal(ref[k], out[k])]
        if diff:
            raise AssertionError("resumed run differs in %s" % diff[:5])
        p = run([DS_RUN, model, "--accumulate", "4", "--resume", ck] +
                TECHNIQUES, expect_ok=False)
        if p.returncode == 0 or "a pipeline of 2 stage(s)" not in p.stderr:
            raise AssertionError("resume with 1 stage not refused:\n" +
                                 p.stderr[-1500:])
        return "%d tensors bit-identical; 1-stage resume refused" % len(ref)

    check("checkpoint/resume of 2 stages", checkpoint_resume)

    def refusals():
        cases = [
            ([MPIRUN, "-np", "3", DS_RUN, model, "--stages", "2"],
             "must be stages x replicas"),
            ([DS_RUN, model, "--stages", "2"], "scripts/ds-mpirun -np 2"),
            ([DS_OPT, model, "--ds-training-pipeline=pipeline-stages=40"],
             "40 stages but the step has only 12 layers"),
            ([DS_RUN, model, "--accumulate", "2", "--pipeline-schedule",
              "zigzag"], "unknown schedule 'zigzag'"),
            ([DS_RUN, model, "--accumulate", "2", "--eval-every", "2"],
             "not supported with a pipeline"),
            ([DS_RUN, model, "--stages", "2", "--micro-batches", "2",
              "--cluster", "/nonexistent.yaml"], "scripts/ds-mpirun"),
            ([DS_RUN, os.path.join(tmp, "mlp-b4.mlir"), "--accumulate", "2",
              "--data-parallel"], "dropout under ds-data-parallel"),
            ([MPIRUN, "-np", "2", DS_RUN, model, "--cluster",
              "/nonexistent.yaml", "--data-parallel"],
             "with --data-parallel, give --stages"),
        ]
        for cmd, text in cases:
            extra = [] if cmd[0] == DS_OPT else ["--steps", "1"]
            p = run(cmd + extra, expect_ok=False)
            if p.returncode == 0 or text not in p.stdout + p.stderr:
                raise AssertionError("%s: rc %d, no '%s' in:\n%s" % (
                    " ".join(cmd[-4:]), p.returncode, text,
                    (p.stdout + p.stderr)[-1500:]))
        return "%d cases" % len(cases)

    check("refusals", refusals)
    print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

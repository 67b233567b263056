#!/usr/bin/env python3
"""Checks data-parallel training (ds-data-parallel and friends) end to end.

Every run is a real MPI job of 2 ranks (scripts/ds-mpirun), one thread each.
  - equality: the MLP (dropout), GPT and CNN (synchronized batch norm)
    examples in f64, trained on 2 ranks of b rows each, against ds-run in
    one process on the global batch of 2 b rows: the loss of every step and
    every final parameter within 1e-12 relative (per tensor). Optimizer
    state is not compared: some gradients are exactly zero in exact
    arithmetic (a key bias under softmax, a bias before batch norm), so
    their moments are rounding noise in both runs.
  - determinism: under --deterministic, a bucketed and an unbucketed run
    give bit-identical losses and parameters, and --check-replicas 1
    compares every rank's parameters every step (compressed runs too).
  - compression: three-tier, top-k and fp16 runs keep the replicas
    identical; the report counts fewer bytes than dense; a three-tier run
    split by a checkpoint equals the straight run bit for bit, residuals
    included, and the checkpoint holds both ranks' residuals.
  - FP8: the forward GEMMs' amax histories equal a single process's on
    the global batch (MAX-reduced over the ranks, as Transformer Engine's);
  - composition: a block-sparse, fake-quantized, FP8, loss-scaled step
    with a compressed all-reduce keeps the replicas identical;
  - refusals: resuming with another number of ranks, a step without data
    parallelism under mpirun, a global batch the ranks do not divide, bad
    compression options: an error, a non-zero exit, no hang.
Usage: check_data_parallel.py with DS_RUN, DS_OPT, DS_MPIRUN and GEN set.
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
STEPS = 20

results = []


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if expect_ok and p.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s%s" %
                           (p.returncode, " ".join(cmd), p.stdout[-3000:],
                            p.stderr[-3000:]))
    return p


def mpi(n, args, expect_ok=True):
    return run([MPIRUN, "-np", str(n), DS_RUN] + args, expect_ok)


def gen(tmp, model, batch, dtype="f64"):
    path = os.path.join(tmp, "%s-%s-b%d.mlir" % (model, dtype, batch))
    if not os.path.exists(path):
        run([sys.executable, GEN, model, "--dtype", dtype, "--batch",
             str(batch), "-o", path])
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


def check(name, fn):
    try:
        detail = fn()
        results.append(True)
        print("ok   %s%s" % (name, (" " + detail) if detail else ""))
    except Exception as e:  # report and go on: every case is independent
        results.append(False)
        print("FAIL %s: %s" % (name, e))
    sys.stdout.flush()


def equality(tmp, model, local_batch, flags):
    def fn():
        ref = os.path.join(tmp, model + "-ref")
        dp = os.path.join(tmp, model + "-dp")
        full = gen(tmp, model, 2 * local_batch)
        half = gen(tmp, model, local_batch)
        common = ["--steps", str(STEPS), "--quiet"] + flags
        run([DS_RUN, full, "--save-results", ref, "--report",
             ref + ".json"] + common)
        mpi(2, [half, "--data-parallel", "--check-replicas", "1",
                "--save-results", dp, "--report", dp + ".json"] + common)
        worst = rel(losses(dp + ".json"), losses(ref + ".json"))
        if worst > 1e-12:
            raise RuntimeError("losses differ: %.3g" % worst)
        a, b = load_dir(ref), load_dir(dp)
        params = [k for k in a if k.startswith("update.")
                  and "@" not in k and k not in
                  ("update.step", "update.iteration", "update.rng")]
        if not params:
            raise RuntimeError("no parameters saved")
        for k in params:
            d = rel(b[k], a[k])
            if d > 1e-12:
                raise RuntimeError("%s differs: %.3g relative" % (k, d))
            worst = max(worst, d)
        return "(%d parameters, %d steps, max rel %.1e)" % (
            len(params), STEPS, worst)
    return fn


def determinism(tmp):
    def fn():
        model = gen(tmp, "gpt", 2, "f32")
        outs = []
        for tag, extra in [("flat", []),
                           ("bucketed", ["--fuse-allreduce=bucket-bytes=20000 "
                                         "first-bucket-bytes=4000"])]:
            d = os.path.join(tmp, "det-" + tag)
            mpi(2, [model, "--data-parallel", "--deterministic", "--steps",
                    "8", "--quiet", "--check-replicas", "1",
                    "--save-results", d, "--report", d + ".json"] + extra)
            outs.append((load_dir(d), losses(d + ".json")))
        (a, la), (b, lb) = outs
        if la != lb:
            raise RuntimeError("losses differ")
        for k in a:
            if not np.array_equal(a[k], b[k]):
                raise RuntimeError("%s differs" % k)
        return "(%d tensors bit-identical, replicas checked every step)" % len(a)
    return fn


def compressed(tmp, scheme, options, min_ratio, extra=()):
    def fn():
        model = gen(tmp, "mlp", 16, "f32")
        d = os.path.join(tmp, "cmp-" + scheme)
        mpi(2, [model, "--compress-allreduce=" + options,
                "--fuse-allreduce=bucket-bytes=3000 first-bucket-bytes=1000",
                "--steps", str(STEPS), "--quiet", "--check-replicas", "1",
                "--report", d + ".json"] + list(extra))
        with open(d + ".json") as f:
            dp = json.load(f)["summary"]["data_parallel"]
        ls = losses(d + ".json")
        if not all(np.isfinite(ls)) or not ls[-1] < ls[0]:
            raise RuntimeError("the loss did not fall: %s" % ls)
        ratio = dp.get("compression_ratio", 0)
        if ratio < min_ratio:
            raise RuntimeError("compression ratio %.2f < %.2f" %
                               (ratio, min_ratio))
        return "(ratio %.1fx, loss %.3f -> %.3f, %d replica checks)" % (
            ratio, ls[0], ls[-1], dp["replica_checks"])
    return fn


def resume(tmp):
    def fn():
        model = gen(tmp, "mlp", 16, "f32")
        flags = ["--compress-allreduce=scheme=three-tier", "--quiet",
                 "--check-replicas", "1"]
        straight = os.path.join(tmp, "straight")
        mpi(2, [model, "--steps", "10", "--save-results", straight] + flags)
        ckpt = os.path.join(tmp, "ckpt")
        split = os.path.join(tmp, "split")
        mpi(2, [model, "--steps", "5", "--checkpoint", ckpt] + flags)
        files = os.listdir(ckpt)
        per_rank = sorted(f for f in files if "comm.residual" in f)
        ranks0 = [f for f in per_rank if f.endswith("@rank0.npy")]
        ranks1 = [f for f in per_rank if f.endswith("@rank1.npy")]
        if not ranks0 or len(ranks0) != len(ranks1) or \
                len(per_rank) != 2 * len(ranks0):
            raise RuntimeError("checkpoint residuals: %s" % per_rank)
        r0, r1 = [np.load(os.path.join(ckpt, f)) for f in (ranks0[0],
                                                           ranks1[0])]
        if np.array_equal(r0, r1) or not np.any(r0):
            raise RuntimeError("the ranks' residuals should differ and be "
                               "nonzero")
        mpi(2, [model, "--steps", "10", "--resume", ckpt, "--save-results",
                split] + flags)
        a, b = load_dir(straight), load_dir(split)
        for k in a:
            if not np.array_equal(a[k], b[k]):
                raise RuntimeError("%s differs after resume" % k)
        # Another number of ranks is refused.
        p = run([DS_RUN, model, "--steps", "10", "--resume", ckpt] + flags,
                expect_ok=False)
        if p.returncode == 0 or "written by 2 rank(s)" not in p.stderr:
            raise RuntimeError("resume with 1 process: %s" % p.stderr[-500:])
        # And another module.
        other = gen(tmp, "mlp", 16, "f64")
        p = mpi(2, [other, "--steps", "10", "--resume", ckpt] + flags,
                expect_ok=False)
        if p.returncode == 0 or "for a different module" not in p.stderr:
            raise RuntimeError("resume with another module: %s" %
                               p.stderr[-500:])
        return "(%d tensors bit-identical, %d residuals per rank)" % (
            len(a), len(ranks0))
    return fn


def composition(tmp):
    def fn():
        model = gen(tmp, "gpt", 2, "f32")
        d = os.path.join(tmp, "all")
        mpi(2, [model, "--sparsity=schedule=constant final=0.5 "
                "update-every=5", "--fake-quant", "--precision",
                "--loss-scaling", "--compress-allreduce", "--fuse-allreduce",
                "--steps", "10", "--quiet", "--check-replicas", "1",
                "--report", d + ".json"])
        with open(d + ".json") as f:
            rep = json.load(f)
        ls = [st["loss"] for st in rep["steps"]]
        if not all(np.isfinite(ls)):
            raise RuntimeError("non-finite loss: %s" % ls)
        if "sparsity" not in rep["summary"]:
            raise RuntimeError("no sparsity summary")
        return "(sparse, fake-quantized, FP8, loss-scaled, three-tier; " \
            "replicas identical every step)"
    return fn


def refusals(tmp):
    def fn():
        model = gen(tmp, "mlp", 16, "f32")
        cases = [
            (lambda: mpi(2, [model, "--steps", "2"], expect_ok=False),
             "not data parallel"),
            (lambda: mpi(2, [model, "--data-parallel", "--steps", "2",
                             "--global-batch", "33"], expect_ok=False),
             "not divisible by the 2 ranks"),
            (lambda: run([DS_RUN, model, "--compress-allreduce="
                          "quantile-low=0.9 quantile-high=0.5"],
                         expect_ok=False),
             "must not exceed quantile-high"),
            (lambda: run([DS_RUN, model, "--fuse-allreduce=bucket-bytes=0"],
                         expect_ok=False),
             "must be > 0"),
            (lambda: run([DS_OPT, model, "--ds-autodiff",
                          "--ds-compress-allreduce"], expect_ok=False),
             "run ds-data-parallel first"),
            (lambda: run([DS_RUN, model, "--compress-allreduce="
                          "scheme=topk momentum=0.9"], expect_ok=False),
             "use --optimizer sgd"),
        ]
        for make, message in cases:
            p = make()
            if p.returncode == 0 or message not in p.stderr:
                raise RuntimeError("expected '%s', got (%d): %s" %
                                   (message, p.returncode, p.stderr[-800:]))
        return "(%d cases)" % len(cases)
    return fn


def amax_sync(tmp):
    def fn():
        # The FP8 policy's amax histories are MAX-reduced over the ranks
        # (Transformer Engine's amax reduction), not taken from rank 0: the
        # forward GEMMs' input and weight histories of a data-parallel run
        # equal a single process's on the global batch, whose amaxes are
        # the maxima over the ranks' rows. (Rank 0's would miss the other
        # rank's rows wherever their maximum lies there.)
        full = gen(tmp, "mlp", 32, "f32")
        half = gen(tmp, "mlp", 16, "f32")
        ref = os.path.join(tmp, "amax-ref")
        dp = os.path.join(tmp, "amax-dp")
        policy = os.path.join(os.path.dirname(os.path.dirname(GEN)),
                              "scripts", "gpu-check", "fp8.yaml")
        common = ["--precision=" + policy, "--steps", "3", "--quiet"]
        run([DS_RUN, full, "--save-results", ref] + common)
        mpi(2, [half, "--data-parallel", "--check-replicas", "1",
                "--save-results", dp] + common)
        a, b = load_dir(ref), load_dir(dp)
        keys = [k for k in a if "fp8.amax_history" in k and
                (k.endswith(".input") or k.endswith(".weight"))]
        if len(keys) < 2:
            raise RuntimeError("forward amax histories: %s" % sorted(a))
        for k in keys:
            d = rel(b[k], a[k])
            if d > 1e-6:
                raise RuntimeError("%s differs: %.3g relative" % (k, d))
        return "(%d forward histories equal the global batch's)" % len(keys)
    return fn


def main():
    with tempfile.TemporaryDirectory() as tmp:
        check("equal mlp f64 (dropout, loss scaling)",
              equality(tmp, "mlp", 16, ["--loss-scaling"]))
        check("equal gpt f64 (buckets)",
              equality(tmp, "gpt", 2, ["--optimizer", "momentum", "--lr",
                                       "0.05", "--fuse-allreduce="
                                       "bucket-bytes=20000 "
                                       "first-bucket-bytes=4000"]))
        check("equal cnn f64 (synchronized batch norm)",
              equality(tmp, "cnn", 8, ["--optimizer", "momentum", "--lr",
                                       "0.05"]))
        check("deterministic bucketed == unbucketed", determinism(tmp))
        check("three-tier", compressed(tmp, "three-tier",
                                       "scheme=three-tier", 3.0))
        check("topk", compressed(tmp, "topk", "scheme=topk ratio=0.05", 5.0))
        check("fp16", compressed(tmp, "fp16", "scheme=fp16", 1.9))
        check("powersgd", compressed(tmp, "powersgd", "scheme=powersgd "
                                     "rank=1 start-iteration=5", 1.5))
        check("topk + DGC momentum correction",
              compressed(tmp, "dgc", "scheme=topk ratio=0.05 momentum=0.9 "
                         "local-clip=5 warmup-iterations=2", 5.0,
                         ["--optimizer", "sgd", "--lr", "0.05"]))
        check("three-tier checkpoint/resume", resume(tmp))
        check("fp8 amax histories MAX-reduced", amax_sync(tmp))
        check("composition", composition(tmp))
        check("refusals", refusals(tmp))
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())

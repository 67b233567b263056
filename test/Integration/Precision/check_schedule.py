#!/usr/bin/env python3
"""The time level: ds-run follows the precision schedule and the anomaly
fallback, and the high-precision variant computes what FP32 computes.

1. GPT-style example, 10 steps, a policy with FP8/BF16 rules, a channel
   section and `schedule: {warmup: 0.2, finetune: 0.2}`: steps 1-2 and 9-10
   run `gpt_step_high`, steps 3-8 `gpt_step` (from the report). The losses
   of steps 1-2 equal an FP32 run's (the variant rounds nothing); step 3's
   differs (the low-precision policy is really in use).
   The same schedule compiled ahead of time (ds-opt
   --ds-training-pipeline="policy=... total-steps=10 lower") runs alike.
2. Default policy, `--anomaly-steps 3`, an anomaly detector that fires on
   any growth of the gradient norm: every step within 3 steps after an
   anomaly runs the high-precision variant, every other step the policy.
Usage: check_schedule.py with DS_RUN and DS_OPT set.
"""

import json
import os
import subprocess
import sys
import tempfile

DS_RUN = os.environ.get("DS_RUN", "ds-run")
DS_OPT = os.environ.get("DS_OPT", "ds-opt")
HERE = os.path.dirname(os.path.abspath(__file__))
GPT = os.path.join(HERE, "..", "..", "..", "examples", "gpt_block.mlir")

POLICY = """
rules:
  - role: [attn.q, attn.k, attn.v, attn.qkv]
    compute: f8E4M3FN
    grad: f8E5M2
  - role: ffn.up
    compute: bf16
    storage: bf16
  - role: ffn.down
    compute: bf16
channel:
  role: [ffn.up, ffn.down]
  threshold: 2.0
schedule:
  warmup: 0.2
  finetune: 0.2
"""


def run(work, name, extra, steps=10, model=GPT):
    report = os.path.join(work, name + ".json")
    r = subprocess.run([DS_RUN, model, "--steps", str(steps), "--quiet", "--report", report]
                       + extra, capture_output=True, text=True)
    if r.returncode:
        sys.exit("FAIL %s: ds-run failed:\n%s%s" % (name, r.stdout, r.stderr))
    return json.load(open(report))


def main():
    failures = checks = 0

    def check(ok, text):
        nonlocal failures, checks
        checks += 1
        failures += not ok
        print(("ok   " if ok else "FAIL ") + text)

    with tempfile.TemporaryDirectory() as work:
        policy = os.path.join(work, "policy.yaml")
        open(policy, "w").write(POLICY)
        fp32 = run(work, "fp32", [])
        sched = run(work, "schedule", ["--precision=" + policy])
        got = [s["variant"] for s in sched["steps"]]
        want = ["gpt_step_high"] * 2 + ["gpt_step"] * 6 + ["gpt_step_high"] * 2
        check(got == want, "schedule: variants per step %s" % got)
        phases = sched["summary"]["precision_schedule"]["phases"]
        check([(p["phase"], p["first_step"], p["last_step"]) for p in phases]
              == [("warm-up", 1, 2), ("policy", 3, 8), ("fine-tune", 9, 10)],
              "schedule: the report lists the phases")
        l32 = [s["loss"] for s in fp32["steps"]]
        lmp = [s["loss"] for s in sched["steps"]]
        warm = max(abs(a - b) / abs(b) for a, b in zip(lmp[:2], l32[:2]))
        check(warm <= 1e-6, "schedule: warm-up losses equal FP32 (rel diff %.1e)" % warm)
        low = abs(lmp[2] - l32[2]) / abs(l32[2])
        check(low > 1e-6, "schedule: step 3 (policy) differs from FP32 (rel diff %.1e)"
              % low)
        check(all("channels_high" in s for s in sched["steps"]),
              "schedule: every step reports its promoted channels")
        lowered = os.path.join(work, "lowered.mlir")
        subprocess.run([DS_OPT, GPT, "--ds-training-pipeline=policy=%s total-steps=10 "
                        "optimizer-kind=adamw optimizer-lr=0.001 lower" % policy, "-o", lowered],
                       check=True)
        ahead = run(work, "ahead", [], model=lowered)
        check([s["variant"] for s in ahead["steps"]] == want,
              "schedule: compiled ahead of time by ds-opt, ds-run follows it alike")

        k = 3
        anom = run(work, "anomaly", ["--precision", "--anomaly-steps", str(k),
                                     "--loss-scaling=anomaly-epsilon=0 anomaly-count=1"],
                   steps=16)
        events = anom["summary"]["anomaly_step_list"]
        got = [s["variant"] for s in anom["steps"]]
        want = ["gpt_step_high" if any(a < t <= a + k for a in events) else "gpt_step"
                for t in range(1, 17)]
        check(len(events) > 0 and got == want,
              "anomaly: anomalies at %s; high-precision variant on steps %s"
              % (events, [t + 1 for t, v in enumerate(got) if v == "gpt_step_high"]))

        r = subprocess.run([DS_RUN, GPT, "--steps", "2", "--anomaly-steps", "3"],
                           capture_output=True, text=True)
        check(r.returncode != 0 and "--anomaly-steps needs --precision" in r.stderr,
              "bad input: --anomaly-steps without --precision is refused: %s"
              % r.stderr.strip().splitlines()[-1] if r.stderr else "")
    print("%d passed, %d failed" % (checks - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

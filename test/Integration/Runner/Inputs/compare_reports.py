"""Checks that two ds-run reports describe the same training: every step
entry equal but its time, the same evaluations and summary counters.

usage: compare_reports.py A.json B.json
"""
import json
import sys


def main():
    a, b = (json.load(open(p)) for p in sys.argv[1:3])
    steps_a, steps_b = a["steps"], b["steps"]
    if len(steps_a) != len(steps_b):
        sys.exit("FAIL: %d steps against %d" % (len(steps_a), len(steps_b)))
    for x, y in zip(steps_a, steps_b):
        x, y = dict(x), dict(y)
        x.pop("time_ms")
        y.pop("time_ms")
        if x != y:
            sys.exit("FAIL: step %s differs:\n%s\n%s" % (x["step"], x, y))
    if a["eval"] != b["eval"]:
        sys.exit("FAIL: the evaluations differ")
    for key in ("final_loss", "skipped_step_list", "final_loss_scale",
                "anomaly_step_list", "final_step"):
        if a["summary"].get(key) != b["summary"].get(key):
            sys.exit("FAIL: summary %s: %s against %s" %
                     (key, a["summary"].get(key), b["summary"].get(key)))
    skipped = sum(1 for s in steps_a if s.get("skipped"))
    print("%d steps identical (%d skipped), %d evaluations" %
          (len(steps_a), skipped, len(a["eval"])))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Asserts that a ds-run report shows training: the mean loss of the last
10 steps is at least FACTOR times below the mean of the first 3.

Usage: check_training.py REPORT.json FACTOR
"""
import json
import sys

report = json.load(open(sys.argv[1]))
factor = float(sys.argv[2])
losses = [s["loss"] for s in report["steps"]]
start = sum(losses[:3]) / 3
end = sum(losses[-10:]) / 10
ratio = start / end if end > 0 else float("inf")
print("%s: loss %.4f -> %.4f (%.1fx over %d steps, need %.1fx)"
      % (report["summary"]["module"], start, end, ratio, len(losses), factor))
sys.exit(0 if ratio >= factor else 1)

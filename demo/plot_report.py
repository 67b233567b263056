#!/usr/bin/env python3
"""Summarises ds-run reports and plots their loss curves into a PNG.

Usage: plot_report.py OUT.png LABEL=REPORT.json [LABEL=REPORT.json ...]
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = sys.argv[1]
fig, ax = plt.subplots(figsize=(8, 4.5))
print("%-16s %8s %10s %10s %12s %12s" % ("run", "steps", "first loss",
                                         "last loss", "held-out", "ms/step"))
for arg in sys.argv[2:]:
    label, path = arg.split("=", 1)
    r = json.load(open(path))
    steps = [s["step"] for s in r["steps"]]
    losses = [s["loss"] for s in r["steps"]]
    ax.plot(steps, losses, label=label + " (train)", alpha=0.6)
    if r["eval"]:
        ax.plot([e["step"] for e in r["eval"]], [e["loss"] for e in r["eval"]],
                "o-", label=label + " (held-out)")
    s = r["summary"]
    print("%-16s %8d %10.4f %10.4f %12s %12.1f" % (
        label, len(steps), losses[0], sum(losses[-10:]) / min(10, len(losses)),
        "%.4f" % r["eval"][-1]["loss"] if r["eval"] else "-", s["mean_step_ms"]))
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy (nats per character)")
ax.set_title("ds-run: GPT-style block, character-level LM on Debian fortunes")
ax.grid(alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(out, dpi=120)
print("loss curve: %s" % out)

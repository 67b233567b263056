#!/usr/bin/env python3
"""Summarises ds-run reports side by side and plots their loss curves.

Usage: plot_report.py OUT.png LABEL=REPORT.json [LABEL=REPORT.json ...]

The first report is the reference: the others' held-out loss and step time
are given relative to it, and with two or more reports a second panel
plots each one's per-step training loss minus the reference's (same data
and seed, so the batches line up step by step). A report with a precision
map (ds-run --precision) also gets its policy summarised and its ops
counted by compute type.
"""
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SMOOTH = 20  # steps in the moving average of the loss difference


def fail(msg):
    raise SystemExit("plot_report.py: " + msg)


def load(arg):
    """LABEL=REPORT.json -> (label, report), with messages for bad input."""
    label, sep, path = arg.partition("=")
    if not sep or not label or not path:
        fail("expected LABEL=REPORT.json, got '%s'" % arg)
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        fail("cannot read %s: %s" % (path, e))
    if not report.get("steps") or "summary" not in report:
        fail("%s has no steps or no summary; is it a ds-run --report?" % path)
    if not losses(report)[1]:
        fail("%s has no step with a finite loss" % path)
    return label, report


def losses(report):
    """(steps, losses) of the steps with a finite loss (ds-run writes null
    for the others)."""
    finite = [s for s in report["steps"] if s["loss"] is not None]
    return [s["step"] for s in finite], [s["loss"] for s in finite]


def metrics(report):
    """The numbers the table shows for one run."""
    loss = losses(report)[1]
    summary = report["summary"]
    return {
        "steps": len(report["steps"]),
        "first": loss[0],
        "last10": sum(loss[-10:]) / len(loss[-10:]),
        "held_out": report["eval"][-1]["loss"] if report.get("eval") else None,
        "ms": summary["mean_step_ms"],
        "ops": summary.get("ops_by_compute_type", {}),
        "skipped": summary.get("skipped_steps"),
        "anomalies": summary.get("anomaly_events"),
        "high_steps": high_variant_steps(summary),
        "channels": mean_promoted_channels(report),
    }


def high_variant_steps(summary):
    """Steps the time level ran in the high-precision variant, if any."""
    schedule = summary.get("precision_schedule")
    if not schedule:
        return None
    return sum(n for v, n in schedule["steps_by_variant"].items() if v.endswith("_high"))


def mean_promoted_channels(report):
    """Channel level: output channels in the high type per step, averaged
    over the steps of the low-precision variant (None without the level)."""
    counts = [sum(s["channels_high"].values()) for s in report["steps"]
              if "channels_high" in s and not s.get("variant", "").endswith("_high")]
    return sum(counts) / len(counts) if counts else None


def fmt(spec, value):
    return "-" if value is None else spec % value


def table_rows(runs):
    """(row name, [cell per run]) for the side-by-side table; with two or
    more runs, the first is the reference of the relative rows."""
    ref_label = runs[0][0]
    ms = [metrics(r) for _, r in runs]
    ref = ms[0]

    def cells(spec, key):
        return [fmt(spec, m[key]) for m in ms]

    def vs_ref(spec, key, relate):
        return ["-"] + [fmt(spec, None if m[key] is None or ref[key] is None
                             else relate(m[key], ref[key])) for m in ms[1:]]

    relative = len(ms) > 1
    rows = [("steps", cells("%d", "steps")),
            ("first loss", cells("%.4f", "first")),
            ("last-10 mean loss", cells("%.4f", "last10")),
            ("final held-out loss", cells("%.4f", "held_out"))]
    if relative:
        rows.append(("held-out vs " + ref_label,
                     vs_ref("%+.2f%%", "held_out", lambda v, b: 100 * (v - b) / b)))
    rows.append(("mean ms/step", cells("%.1f", "ms")))
    if relative:
        rows.append(("step time vs " + ref_label,
                     vs_ref("%.2fx", "ms", lambda v, b: v / b)))
    for t in sorted({t for m in ms for t in m["ops"]}):
        rows.append(("ops computing in " + t, [fmt("%d", m["ops"].get(t)) for m in ms]))
    if any(m["skipped"] is not None for m in ms):
        rows.append(("skipped steps", cells("%d", "skipped")))
    if any(m["anomalies"] is not None for m in ms):
        rows.append(("gradient anomalies", cells("%d", "anomalies")))
    if any(m["high_steps"] is not None for m in ms):
        rows.append(("steps in the FP32 variant", cells("%d", "high_steps")))
    if any(m["channels"] is not None for m in ms):
        rows.append(("channels promoted (mean)", cells("%.1f", "channels")))
    return rows


def print_table(runs):
    rows = table_rows(runs)
    name_w = max(len(name) for name, _ in rows)
    cell_w = max(12, max(len(label) for label, _ in runs))
    print("%-*s" % (name_w, "") + "".join(" %*s" % (cell_w, l) for l, _ in runs))
    for name, cells in rows:
        print("%-*s" % (name_w, name) + "".join(" %*s" % (cell_w, c) for c in cells))


def policy_summary(report):
    """One line per policy rule that matched (forward ops only; L.grad<k>
    entries are the backward GEMMs of the forward op L), then the rest."""
    rules = {}  # rule -> (roles, decision), in the map's order
    rest = 0
    for e in report.get("precision_map", []):
        if re.search(r"\.grad\d+$", e["label"]):
            continue
        if e["rule"].startswith("no rule"):
            rest += 1
            continue
        decision = ", ".join("%s %s" % (k, e[k])
                             for k in ("compute", "storage", "grad", "scaling")
                             if k in e and e[k] != "f32")
        roles, _ = rules.setdefault(e["rule"], ([], decision))
        if e.get("role") and e["role"] not in roles:
            roles.append(e["role"])
    lines = ["  %s: %s" % (", ".join(roles) or "(no role)", decision or "f32")
             for roles, decision in rules.values()]
    return lines + ["  the other %d forward ops: f32" % rest]


def print_policies(runs):
    for label, r in runs:
        if r.get("precision_map"):
            print("%s: precision policy (from the report's precision map)" % label)
            print("\n".join(policy_summary(r)))


def moving_average(values, n):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - n] if i >= n else 0.0)
        out.append(total / min(i + 1, n))
    return out


def color(i):
    """The i-th run's colour, the same in both panels."""
    return "C%d" % (i % 10)


def plot_losses(ax, runs):
    for i, (label, r) in enumerate(runs):
        ax.plot(*losses(r), color=color(i), label=label + " (train)", alpha=0.5, lw=0.8)
        if r.get("eval"):
            ax.plot([e["step"] for e in r["eval"]], [e["loss"] for e in r["eval"]],
                    "o-", color=color(i), label=label + " (held-out)")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.set_title("ds-run: GPT-style block, character-level LM on Debian fortunes")
    ax.grid(alpha=0.3)
    ax.legend()


def plot_differences(ax, runs):
    ref_label, ref = runs[0]
    ref_train = dict(zip(*losses(ref)))
    ref_eval = {e["step"]: e["loss"] for e in ref.get("eval", [])}
    for i, (label, r) in enumerate(runs[1:], start=1):
        common = [(s, l - ref_train[s]) for s, l in zip(*losses(r)) if s in ref_train]
        if not common:
            continue
        steps, diff = zip(*common)
        ax.plot(steps, diff, color=color(i), alpha=0.3, lw=0.6)
        ax.plot(steps, moving_average(diff, SMOOTH), color=color(i),
                label="%s - %s (train, %d-step mean)" % (label, ref_label, SMOOTH))
        evals = [(e["step"], e["loss"] - ref_eval[e["step"]])
                 for e in r.get("eval", []) if e["step"] in ref_eval]
        if evals:
            ax.plot(*zip(*evals), "o", color=color(i),
                    label="%s - %s (held-out)" % (label, ref_label))
    ax.axhline(0, color="black", lw=0.6)
    ax.set_ylabel("loss difference (nats)")
    ax.grid(alpha=0.3)
    ax.legend()


def plot(out, runs):
    panels = 2 if len(runs) > 1 else 1
    fig, axes = plt.subplots(panels, 1, figsize=(8, 4.5 * panels), sharex=True,
                             squeeze=False, gridspec_kw={"height_ratios": [2, 1][:panels]})
    plot_losses(axes[0][0], runs)
    if panels == 2:
        plot_differences(axes[1][0], runs)
    axes[-1][0].set_xlabel("step")
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=120)
    except (OSError, ValueError) as e:
        fail("cannot write %s: %s" % (out, e))


def main(argv):
    if len(argv) < 3:
        fail("usage: plot_report.py OUT.png LABEL=REPORT.json [LABEL=REPORT.json ...]")
    runs = [load(a) for a in argv[2:]]
    print_table(runs)
    print_policies(runs)
    plot(argv[1], runs)
    print("loss curves: %s" % argv[1])


if __name__ == "__main__":
    main(sys.argv)

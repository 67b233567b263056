#!/usr/bin/env python3
"""A step's measured device time per kernel and GEMM against its bounds.

Joins what `ds-step-run --profile N` printed (device time per step of each
kernel and cuBLASLt GEMM, by name) with the step's launch report
(`ds-run --gpu-launch-report`, or the GPU check's bench/launch-report-*.txt):
a kernel by its name (`<function>_k<N>`, the report's last column), a GEMM
by its shape. For each it prints the time per step and per call, the
bound per call, how many times the bound the call took, and what the call
achieved (GB/s for a kernel, TFLOP/s for a GEMM), longest first, and the
totals. A kernel that deduplication merged with later identical ones
counts their calls too; they have the same shapes, so the same bound.

Usage: benchmarks/profile_vs_bound.py PROFILE.txt REPORT.txt [--top N]
(NumPy-free; the GPU check's report brings profile-<variant>.txt back)
"""

import argparse
import re
import sys

PROFILE_LINE = re.compile(
    r"profile\s+([\d.]+) ms\s+[\d.]+%\s+([\d.]+) calls\s+(.+?)\s*$")
STEPS_LINE = re.compile(r"profile of steps (\d+)\.\.(\d+)")
KERNEL_ROW = re.compile(
    r"^\s*\d+\s+kernel\s+(\S+ x \S+)\s+([\d.]+)\s+([\d.]+)\s+-\s+([\d.]+)"
    r"\s+(\S+)\s+(\S+)\s*$")
GEMM_ROW = re.compile(
    r"^\s*\d+\s+gemm\s+(\d+) x (\d+)x(\d+)x(\d+) \S+\s+[\d.]+\s+[\d.]+"
    r"\s+[\d.]+\s+([\d.]+)")
GEMM_NAME = re.compile(r"cublasLt .* (\d+)x(\d+)x(\d+)(?:x(\d+))?")


def parse_report(text):
    kernels, gemms = {}, {}
    for line in text.splitlines():
        m = KERNEL_ROW.match(line)
        if m:
            shape, read, written, bound, where, name = m.groups()
            kernels.setdefault(name, {
                "shape": shape, "mb": float(read) + float(written),
                "bound": float(bound), "where": where})
            continue
        m = GEMM_ROW.match(line)
        if m:
            b, mm, n, k, bound = m.groups()
            gemms.setdefault((int(b), int(mm), int(n), int(k)), float(bound))
    return kernels, gemms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("report")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    try:
        profile = open(args.profile).read()
        report = open(args.report).read()
    except OSError as e:
        sys.exit(f"profile_vs_bound.py: error: {e}")
    kernels, gemms = parse_report(report)
    if not kernels and not gemms:
        sys.exit(f"profile_vs_bound.py: error: {args.report} has no launch "
                 "report rows")
    entries = [m.groups() for m in map(PROFILE_LINE.search,
                                       profile.splitlines()) if m]
    if not entries:
        sys.exit(f"profile_vs_bound.py: error: {args.profile} has no profile "
                 "lines (ds-step-run --profile N)")

    rows, unmatched = [], []
    totals = {"kernel": [0.0, 0.0], "gemm": [0.0, 0.0]}
    for ms, calls, name in entries:
        ms, calls = float(ms), float(calls)
        per_call = 1e3 * ms / calls if calls else 0.0
        if name.startswith("cublasLt"):
            g = GEMM_NAME.match(name)
            m, n, k, b = (int(x) if x else 1 for x in g.groups()) if g else (0,) * 4
            bound = gemms.get((b, m, n, k))
            flops = 2.0 * b * m * n * k
            rate = f"{flops / per_call / 1e6:.0f} TFLOP/s" if per_call else "-"
            kind, where = "gemm", ""
        else:
            info = kernels.get(name)
            if info is None:
                unmatched.append(name)
                continue
            bound, where = info["bound"], info["where"]
            rate = f"{info['mb'] / per_call * 1e3:.0f} GB/s" if per_call else "-"
            kind = "kernel"
        totals[kind][0] += ms
        if bound is not None:
            totals[kind][1] += calls * bound / 1e3
        ratio = (f"{per_call / bound:.1f}x" if bound else "-")
        rows.append((ms, calls, per_call, bound, ratio, rate, name, where))

    print(f"{'ms/step':>9} {'calls':>6} {'us/call':>9} {'bound us':>9} "
          f"{'x bound':>8} {'achieved':>13}  name  location")
    for ms, calls, per_call, bound, ratio, rate, name, where in rows[:args.top]:
        b = f"{bound:.2f}" if bound is not None else "-"
        print(f"{ms:9.3f} {calls:6.1f} {per_call:9.2f} {b:>9} {ratio:>8} "
              f"{rate:>13}  {name}  {where}".rstrip())
    if len(rows) > args.top:
        rest = sum(r[0] for r in rows[args.top:])
        print(f"{rest:9.3f}  ({len(rows) - args.top} others)")
    for kind in ("kernel", "gemm"):
        ms, bound = totals[kind]
        print(f"{kind}s: {ms:.3f} ms/step measured, {bound:.3f} ms/step bound"
              + (f" ({ms / bound:.1f}x)" if bound else ""))
    if unmatched:
        print(f"not in the report: {', '.join(unmatched)}")


if __name__ == "__main__":
    main()

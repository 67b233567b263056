#!/usr/bin/env python3
"""Compares the quantization summaries of two ds-run reports (the CPU
path's and the GPU path's).

    compare_quant_summary.py CPU_REPORT GPU_REPORT RTOL

The reports' `summary.quant` lists must name the same quantized values in
the same order (layer, value, granularity), with equal zero points and
ranges and scales within RTOL (relative; a per-channel entry's count, min
and max each). Prints one PASS line, or FAIL lines; the exit status says
which."""

import json
import sys


def fields(entry):
    """The numbers of an entry: a scalar, or a per-channel summary."""
    out = {}
    for key in ("min", "max", "scale", "zero_point"):
        v = entry.get(key)
        if isinstance(v, dict):
            for k, x in v.items():
                out[f"{key}.{k}"] = x
        elif v is not None:
            out[key] = v
    return out


def main():
    cpu_report, gpu_report, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3])
    cpu, gpu = (json.load(open(p))["summary"].get("quant", [])
                for p in (cpu_report, gpu_report))
    fails = []
    if not cpu:
        fails.append("the CPU report has no quantized values")
    if len(cpu) != len(gpu):
        fails.append(f"{len(cpu)} quantized values against {len(gpu)}")
    for a, b in zip(cpu, gpu):
        name = f"{a['layer']} {a['value']}"
        if [a[k] for k in ("layer", "value", "granularity")] != \
                [b[k] for k in ("layer", "value", "granularity")]:
            fails.append(f"{name}: {b['layer']} {b['value']} on the GPU")
            continue
        fa, fb = fields(a), fields(b)
        if fa.keys() != fb.keys():
            fails.append(f"{name}: fields {sorted(fa)} and {sorted(fb)}")
            continue
        for key, x in fa.items():
            y = fb[key]
            exact = key.startswith("zero_point") or key.endswith("count")
            bad = x != y if exact else \
                abs(x - y) > rtol * max(abs(x), abs(y), 1e-30)
            if bad:
                fails.append(f"{name}: {key} {y} against the CPU's {x}")
    if fails:
        for f in fails:
            print("FAIL:", f)
        return 1
    print(f"PASS: {len(cpu)} quantized values, zero points equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())

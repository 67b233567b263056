#!/usr/bin/env python3
"""FP32 vs the default mixed policy on the GPT-style example: memory and
CPU step time, side by side (make bench-mp; not part of make check).

Memory is read from the differentiated step's IR: the bytes of activations
saved for the backward (values the forward computes and backward ops read)
and of the weights as the GEMMs read them. Step time is measured by ds-run,
alternating FP32 and mixed runs and reporting medians (the machine is
noisy).

Usage: mixed_precision.py [--ds-opt PATH] [--ds-run PATH] [--steps N] [--runs R]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "examples", "gpt_block.mlir")
BYTES = {"f64": 8, "f32": 4, "i64": 8, "i32": 4, "bf16": 2, "f16": 2,
         "f8E4M3FN": 1, "f8E5M2": 1, "i1": 1}
OP = re.compile(r"^\s*(%[\w#:,% ]+?) = (\"?[\w.]+\"?) (.*)$")
TYPE = re.compile(r"tensor<((?:\d+x)*)(\w+)>")


def tensor_bytes(t):
    m = TYPE.fullmatch(t)
    if not m:
        return 0
    n = 1
    for d in m.group(1).split("x")[:-1]:
        n *= int(d)
    return n * BYTES.get(m.group(2), 4)


def saved_for_backward(text):
    """(bytes of forward values read by backward ops, by element type)."""
    defs = {}  # SSA name -> (is forward, type)
    saved = {}
    for line in text.splitlines():
        m = OP.match(line)
        if not m:
            continue
        results, rest = m.group(1), m.group(3)
        backward = "ds.vjp_of" in rest
        sig = rest.rsplit(" : ", 1)[-1] if " : " in rest else ""
        types = TYPE.findall(sig)
        out_types = ["tensor<%s%s>" % t for t in types]
        names = [r.strip() for r in results.split(",")]
        res_type = out_types[-1] if out_types else ""
        for n in names:
            defs[n] = (not backward, res_type)
        if backward:
            for used in re.findall(r"%[\w#]+", rest.split(" : ")[0]):
                fwd, t = defs.get(used, (False, ""))
                if fwd and used not in saved:
                    saved[used] = t
    by_type = {}
    for t in saved.values():
        et = TYPE.fullmatch(t).group(2) if TYPE.fullmatch(t) else "?"
        by_type[et] = by_type.get(et, 0) + tensor_bytes(t)
    return sum(by_type.values()), by_type


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-opt", default=os.path.join(HERE, "..", "build", "bin", "ds-opt"))
    ap.add_argument("--ds-run", default=os.path.join(HERE, "..", "build", "bin", "ds-run"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as work:
        for tag, extra in (("fp32", []), ("mixed", ["--ds-assign-precision"])):
            out = subprocess.run([args.ds_opt, MODEL, "--ds-autodiff"] + extra,
                                 capture_output=True, text=True, check=True).stdout
            rows[tag] = saved_for_backward(out)
        times = {"fp32": [], "mixed": []}
        for _ in range(args.runs):
            for tag, extra in (("fp32", []), ("mixed", ["--precision"])):
                report = os.path.join(work, tag + ".json")
                subprocess.run([args.ds_run, MODEL, "--steps", str(args.steps), "--quiet",
                                "--threads", "2", "--report", report] + extra, check=True)
                times[tag].append(json.load(open(report))["summary"]["mean_step_ms"])
    f32_bytes, f32_types = rows["fp32"]
    mp_bytes, mp_types = rows["mixed"]
    print("GPT-style example (examples/gpt_block.mlir), default mixed policy vs FP32")
    print("  activations saved for backward: FP32 %.2f MiB %s" % (f32_bytes / 2**20, f32_types))
    print("                                  mixed %.2f MiB %s" % (mp_bytes / 2**20, mp_types))
    print("                                  ratio %.2f" % (mp_bytes / f32_bytes))
    t32, tmp = statistics.median(times["fp32"]), statistics.median(times["mixed"])
    print("  CPU step time (median of %d runs, %d steps, 2 threads): FP32 %.2f ms, mixed "
          "%.2f ms, ratio %.2f (target <= 1.3)" % (args.runs, args.steps, t32, tmp, tmp / t32))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""FP32 vs the default mixed policy on the GPT-style example: memory and
CPU step time, side by side (make bench; not part of make check).

Memory is read from the training step's IR (ds-autodiff, ds-assign-precision
for the mixed policy, ds-insert-optimizer with ds-run's default AdamW):

  - activations saved for the backward: values the forward computes and
    backward ops (those with ds.vjp_of) read;
  - FP32 master weights (function arguments with ds.param) and optimizer
    state, which the policy leaves as they are by design, and the FP8
    scaling state (amax histories) the policy adds;
  - the weights as the GEMMs read them: each distinct ds.matmul operand
    that is a parameter or a cast, scaling, reshape or transpose of one,
    at its own type (an FP8 or BF16 GEMM reads the narrow copy).

Step time is measured by ds-run, alternating FP32 and mixed runs and
reporting medians (the machine is noisy).

Usage: mixed_precision.py [--ds-opt PATH] [--ds-run PATH] [--steps N] [--runs R]
"""

import argparse
import collections
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
ARG = re.compile(r"(%arg\d+): (tensor<[^>]*>) \{([^}]*)\}")
PARAM = re.compile(r'ds\.param = "')
STATE = re.compile(r'ds\.state = #ds\.state<"([^"]*)"')
# Ops between a parameter and a GEMM operand that leave it the same weight:
# casts, per-tensor scaling (a multiply by a scalar), reshapes, transposes.
WEIGHT_VIEWS = {"ds.cast", "ds.mul", "ds.reshape", "ds.transpose"}
# ds-assign-precision's state names start with this; the rest is the
# optimizer's.
FP8_STATE = "fp8."
# ds.op per SSA result: its name, operands with their types, result type,
# and whether it belongs to the backward.
Op = collections.namedtuple("Op", "name operands operand_types result_type backward")


def dims(t):
    """The dimensions of a ranked tensor type ([] for a scalar or no tensor)."""
    m = TYPE.fullmatch(t)
    return [int(d) for d in m.group(1).split("x")[:-1]] if m else []


def tensor_bytes(t):
    if not TYPE.fullmatch(t):
        return 0
    n = 1
    for d in dims(t):
        n *= d
    return n * BYTES.get(element_type(t), 4)


def element_type(t):
    m = TYPE.fullmatch(t)
    return m.group(2) if m else "?"


def by_type(types):
    """(total bytes, {element type: bytes}) of a list of tensor types."""
    out = {}
    for t in types:
        out[element_type(t)] = out.get(element_type(t), 0) + tensor_bytes(t)
    return sum(out.values()), out


def parse_ops(text):
    """{SSA result: Op}, in program order."""
    ops = {}
    for line in text.splitlines():
        m = OP.match(line)
        if not m:
            continue
        results, name, rest = m.group(1), m.group(2), m.group(3)
        sig = rest.rsplit(" : ", 1)[-1] if " : " in rest else ""
        types = ["tensor<%s%s>" % t for t in TYPE.findall(sig)]
        operands = re.findall(r"%[\w#]+", rest.split(" : ")[0])
        op = Op(name, operands, types[:len(operands)], types[-1] if types else "",
                "ds.vjp_of" in rest)
        for r in results.split(","):
            ops[r.strip()] = op
    return ops


def parse_args(text):
    """({SSA arg: type} of parameters, [(state name, type)])."""
    params, state = {}, []
    for arg, t, attrs in ARG.findall(text):
        if PARAM.search(attrs):
            params[arg] = t
        elif state_name := STATE.search(attrs):
            state.append((state_name.group(1), t))
    return params, state


def saved_for_backward(ops):
    """(bytes of forward values read by backward ops, by element type)."""
    saved = {}
    for op in ops.values():
        if op.backward:
            for used in op.operands:
                fwd = ops.get(used)
                if fwd is not None and not fwd.backward:
                    saved[used] = fwd.result_type
    return by_type(saved.values())


def is_weight(value, ops, params):
    """Whether value is a parameter or a view of one (WEIGHT_VIEWS, with
    one non-scalar operand)."""
    while value not in params:
        op = ops.get(value)
        if op is None or op.name not in WEIGHT_VIEWS:
            return False
        tensors = [v for v, t in zip(op.operands, op.operand_types) if dims(t)]
        if len(tensors) != 1:
            return False
        value = tensors[0]
    return True


def weights_read_by_gemms(ops, params):
    """(bytes of the distinct weight operands of ds.matmul, by type)."""
    read = {}
    for op in ops.values():
        if op.name != "ds.matmul":
            continue
        for v, t in zip(op.operands, op.operand_types):
            if is_weight(v, ops, params):
                read[v] = t
    return by_type(read.values())


def memory(text):
    """The memory figures of one training step's IR."""
    ops = parse_ops(text)
    params, state = parse_args(text)
    optimizer = [t for n, t in state if not n.startswith(FP8_STATE)]
    scaling = [t for n, t in state if n.startswith(FP8_STATE)]
    return {
        "activations": saved_for_backward(ops),
        "master": by_type(list(params.values()) + optimizer),
        "scaling": by_type(scaling),
        "gemm_weights": weights_read_by_gemms(ops, params),
    }


def run(cmd):
    """Runs a tool; its failure is a message, not a traceback."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        sys.exit("mixed_precision.py: %s not found (build first, or pass its path)" % cmd[0])
    except subprocess.CalledProcessError as e:
        sys.exit("mixed_precision.py: %s failed:\n%s" % (" ".join(cmd), e.stderr.strip()))


def print_memory(title, fp32, mixed):
    """Three lines: FP32, mixed (MiB and bytes by type), ratio."""
    (b32, t32), (bmp, tmp) = fp32, mixed
    pad = " " * (len(title) + 4)
    print("  %s: FP32  %.3f MiB %s" % (title, b32 / 2**20, t32))
    print("%smixed %.3f MiB %s" % (pad, bmp / 2**20, tmp))
    print("%sratio %s" % (pad, "%.2f" % (bmp / b32) if b32 else "-"))


def measure_memory(ds_opt):
    """{"fp32"|"mixed": memory figures} of the training step's IR."""
    passes = {"fp32": ["--ds-autodiff"],
              "mixed": ["--ds-autodiff", "--ds-assign-precision"]}
    return {tag: memory(run([ds_opt, MODEL] + p + ["--ds-insert-optimizer=kind=adamw"]))
            for tag, p in passes.items()}


MGPM = os.path.join(HERE, "..", "examples", "policies", "mgpm.yaml")


def policy_phase_ms(report):
    """Mean step time of the steps the low-precision variant ran (all steps
    without a schedule), warm-up steps of that variant excluded."""
    steps = report["steps"]
    main_variant = {s.get("variant") for s in steps} - {None}
    low = [s["time_ms"] for s in steps
           if not main_variant or s.get("variant") and not s["variant"].endswith("_high")]
    low = low[5:] if len(low) > 10 else low
    return statistics.mean(low)


def measure_step_ms(ds_run, steps, runs):
    """{"fp32"|"mixed"|"mgpm": median of the runs' mean step time in the
    policy phase}, alternating."""
    configs = (("fp32", []), ("mixed", ["--precision"]), ("mgpm", ["--precision=" + MGPM]))
    times = {tag: [] for tag, _ in configs}
    with tempfile.TemporaryDirectory() as work:
        for _ in range(runs):
            for tag, extra in configs:
                report = os.path.join(work, tag + ".json")
                run([ds_run, MODEL, "--steps", str(steps), "--quiet", "--threads", "2",
                     "--report", report] + extra)
                with open(report) as f:
                    times[tag].append(policy_phase_ms(json.load(f)))
    return {tag: statistics.median(t) for tag, t in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ds-opt", default=os.path.join(HERE, "..", "build", "bin", "ds-opt"))
    ap.add_argument("--ds-run", default=os.path.join(HERE, "..", "build", "bin", "ds-run"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    mem = measure_memory(args.ds_opt)
    ms = measure_step_ms(args.ds_run, args.steps, args.runs)
    print("GPT-style example (examples/gpt_block.mlir), default mixed policy vs FP32")
    for key, title in (("activations", "activations saved for backward"),
                       ("master", "FP32 master weights + AdamW state"),
                       ("scaling", "FP8 scaling state (amax histories)"),
                       ("gemm_weights", "weights as the GEMMs read them")):
        print_memory(title, mem["fp32"][key], mem["mixed"][key])
    print("  CPU step time (median of %d runs, %d steps, 2 threads): FP32 %.2f ms, mixed "
          "%.2f ms, ratio %.2f (target <= 1.3)" % (args.runs, args.steps, ms["fp32"],
                                                   ms["mixed"], ms["mixed"] / ms["fp32"]))
    print("  with all three MGPM levels (examples/policies/mgpm.yaml: channel split of the "
          "FFN GEMMs; the policy phase of its schedule): %.2f ms, ratio %.2f"
          % (ms["mgpm"], ms["mgpm"] / ms["fp32"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Execution tests of --convert-ds-to-linalg against NumPy and PyTorch.

Each case is one or a few ds ops on seeded random inputs. A group of cases
becomes one module: `@main` builds every input as an `arith.constant`
(written as raw little-endian bytes, so bit-exact) and calls one function
per case that takes the inputs as arguments (so no constant folding can
stand in for the lowering), runs the ds ops and prints each result. Results
are printed bit-exactly: floats are bitcast to integers of their width
(f16/bf16 are first extended to f32, which is exact) and printed with
printMemrefI32/I64. The module goes through ds-opt with each CPU pipeline
below ("plain" and "fused") and mlir-runner; the printed values are
compared with the reference (PyTorch where it defines the op: conv,
pooling, gelu, batch norm, cross-entropy and their gradients; NumPy
elsewhere, including a NumPy Philox4x32-10 checked against its known
answers).

Usage: check_ops.py --ds-opt PATH [--group NAME ...] [--pipeline NAME ...]
                    [--only REGEX] [--list] [--keep DIR]
Exit status 0 when every case matches; otherwise a table of mismatches.
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

import ml_dtypes
import numpy as np
from compare_cases import mismatch as float_mismatch  # the GPU check's too
import torch
import torch.nn.functional as F

# The lowering under test followed by the CPU path of ds-cpu-pipeline
# (without its training-step ABI passes and library GEMMs): one-shot
# bufferization, loops, LLVM. "fused" adds the pipeline's elementwise fusion
# on tensors; "plain" checks the lowering's own IR without it.
CPU_TAIL = [
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map}",
    "canonicalize",
    "buffer-deallocation-pipeline",
    "func.func(convert-linalg-to-loops)",
    "expand-strided-metadata",
    "lower-affine",
    "convert-scf-to-cf",
    # Narrow floats as ds-cpu-pipeline emulates them (LLVM has no FP8).
    "arith-emulate-unsupported-floats{source-types=bf16,f16,f8E4M3FN,f8E5M2 "
    "target-type=f32}",
    "ds-emulate-narrow-floats",
    "convert-math-to-llvm",
    "convert-math-to-libm",
    "convert-to-llvm",
    "reconcile-unrealized-casts",
]
# The GPU path's matmul lowering (narrow-gemms fp8-gemms: bf16/f16 and
# cuBLASLt-shaped FP8 operands kept narrow, FP8 operands transposed into
# X * W^T), executed on the CPU: the loops extend in the body, so this checks
# the lowering's transposes and mixed types numerically.
NARROW_TAIL = CPU_TAIL
PIPELINES = {
    "narrow": ",".join(["func.func(convert-ds-to-linalg{narrow-gemms fp8-gemms})"]
                       + NARROW_TAIL),
    # Every option ds-gpu-pipeline sets (also parallel-scatter: the linked
    # rows of embedding_grad; gemm-convs: convolutions as im2col + matmul),
    # then the GPU path's fusion.
    "gpu": ",".join(["func.func(convert-ds-to-linalg{narrow-gemms fp8-gemms "
                     "parallel-scatter gemm-convs})",
                     "func.func(canonicalize,cse,ds-fuse-elementwise,"
                     "canonicalize,cse)"] + NARROW_TAIL),
    "plain": ",".join(["func.func(convert-ds-to-linalg)"] + CPU_TAIL),
    "fused": ",".join(["func.func(convert-ds-to-linalg)",
                       "func.func(canonicalize,cse,linalg-fuse-elementwise-ops,"
                       "canonicalize,cse)"] + CPU_TAIL),
}

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
I64 = np.dtype(np.int64)
I32 = np.dtype(np.int32)
BOOL = np.dtype(np.bool_)

MLIR_ELEM = {BF16: "bf16", F16: "f16", F32: "f32", F64: "f64", I64: "i64",
             I32: "i32", BOOL: "i1", E4M3: "f8E4M3FN", E5M2: "f8E5M2"}


def T(shape, dtype):
    """The MLIR tensor type of `shape` and `dtype`."""
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{MLIR_ELEM[np.dtype(dtype)]}>"


def TA(a):
    return T(a.shape, a.dtype)


class Case:
    """`body` is MLIR text that reads the inputs %a0, %a1, ... and defines
    the SSA values named in `outputs` ((name, shape, dtype) triples); `ref`
    maps the input arrays to the expected arrays. Tolerances are for the
    float outputs: |got - want| <= atol + rtol |want|; NaN and inf must
    match exactly. `device_tol` (rtol, atol), where set, replaces them on a
    GPU (export_cases.py --device cuda), for what a GPU rightly computes
    differently."""

    def __init__(self, name, inputs, body, outputs, ref, rtol=None, atol=None,
                 device_tol=None):
        self.name = name
        self.inputs = [np.asarray(a) for a in inputs]
        self.body = body
        self.outputs = outputs
        self.ref = ref
        self.rtol = rtol
        self.atol = atol
        self.device_tol = device_tol


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


#===------------------------------------------------------------------------===#
# Module generation
#===------------------------------------------------------------------------===#

def dense_literal(a):
    """An exact `dense<...>` literal of array `a`."""
    if a.dtype == BOOL:
        flat = ", ".join("true" if v else "false" for v in a.ravel())
        return f"dense<[{flat}]>" if a.ndim else f"dense<{flat}>"
    if a.size == 0:
        return "dense<>"
    raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
    return f'dense<"0x{raw.hex().upper()}">'


def print_output(name, shape, dtype, tag):
    """MLIR that prints the tensor `name` bit-exactly; returns (text, kind)
    where kind is the integer width printed."""
    dtype = np.dtype(dtype)
    rank = len(shape)
    dims = ", ".join(f"d{i}" for i in range(rank))
    idmap = f"affine_map<({dims}) -> ({dims})>"
    iters = ", ".join(['"parallel"'] * rank)
    src_t = T(shape, dtype)
    elem = MLIR_ELEM[dtype]
    if dtype in (F32, BF16, F16):
        out_elem, width, func = "i32", 32, "printMemrefI32"
    elif dtype == I32:
        out_elem, width, func = "i32", 32, "printMemrefI32"
    else:
        out_elem, width, func = "i64", 64, "printMemrefI64"
    out_t = src_t.replace(elem + ">", out_elem + ">")
    lines = []
    v = name
    if dtype not in (I64, I32):
        if dtype in (BF16, F16):
            conv = (f"%{tag}_xe = arith.extf %{tag}_x : {elem} to f32\n"
                    f"      %{tag}_y = arith.bitcast %{tag}_xe : f32 to i32")
        elif dtype == F32:
            conv = f"%{tag}_y = arith.bitcast %{tag}_x : f32 to i32"
        elif dtype == F64:
            conv = f"%{tag}_y = arith.bitcast %{tag}_x : f64 to i64"
        else:  # i1
            conv = f"%{tag}_y = arith.extui %{tag}_x : i1 to i64"
        lines.append(f"%{tag}_e = tensor.empty() : {out_t}")
        lines.append(
            f"%{tag}_c = linalg.generic {{indexing_maps = [{idmap}, {idmap}], "
            f"iterator_types = [{iters}]}} ins({v} : {src_t}) "
            f"outs(%{tag}_e : {out_t}) {{\n"
            f"    ^bb0(%{tag}_x: {elem}, %{tag}_o: {out_elem}):\n"
            f"      {conv}\n"
            f"      linalg.yield %{tag}_y : {out_elem}\n"
            f"    }} -> {out_t}")
        v = f"%{tag}_c"
    mem_t = out_t.replace("tensor<", "memref<")
    lines.append(f"%{tag}_b = bufferization.to_buffer {v} : {out_t} to {mem_t}")
    lines.append(f"%{tag}_u = memref.cast %{tag}_b : {mem_t} to "
                 f"memref<*x{out_elem}>")
    lines.append(f"call @{func}(%{tag}_u) : (memref<*x{out_elem}>) -> ()")
    return "\n  ".join(lines), width


def build_module(cases):
    funcs = []
    main = []
    for ci, case in enumerate(cases):
        args = ", ".join(f"%a{i}: {TA(a)}" for i, a in enumerate(case.inputs))
        prints = []
        for oi, (name, shape, dtype) in enumerate(case.outputs):
            text, _ = print_output(name, shape, dtype, f"p{oi}")
            prints.append(text)
        body = "\n  ".join(line.strip() for line in case.body.strip().splitlines())
        funcs.append(f"// {case.name}\nfunc.func @case{ci}({args}) {{\n  {body}\n  "
                     + "\n  ".join(prints) + "\n  return\n}")
        names = []
        for i, a in enumerate(case.inputs):
            main.append(f"%c{ci}_{i} = arith.constant {dense_literal(a)} : {TA(a)}")
            names.append(f"%c{ci}_{i}")
        types = ", ".join(TA(a) for a in case.inputs)
        main.append(f"call @case{ci}({', '.join(names)}) : ({types}) -> ()")
    decls = "\n".join(
        f"func.func private @{f}(memref<*x{t}>) attributes {{llvm.emit_c_interface}}"
        for f, t in (("printMemrefI32", "i32"), ("printMemrefI64", "i64")))
    return ("\n\n".join(funcs) + "\n\nfunc.func @main() {\n  " +
            "\n  ".join(main) + "\n  return\n}\n\n" + decls + "\n")


#===------------------------------------------------------------------------===#
# Running and comparing
#===------------------------------------------------------------------------===#

def parse_prints(stdout):
    """The integer lists of every printed memref, in order."""
    blocks = stdout.split("Unranked Memref")[1:]
    out = []
    for b in blocks:
        data = b.split("data =", 1)[1]
        out.append([int(v) for v in re.findall(r"-?\d+", data)])
    return out


def decode(values, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype in (F32, BF16, F16):
        a = np.array(values, dtype=np.int64).astype(np.uint32).view(np.float32)
    elif dtype == F64:
        a = np.array(values, dtype=np.int64).view(np.float64)
    elif dtype == BOOL:
        a = np.array(values, dtype=np.int64).astype(bool)
    else:
        a = np.array(values, dtype=np.int64).astype(dtype)
    return a.reshape(shape)


def compare(case, got, want, dtype):
    """A failure message, or None when `got` matches `want`."""
    dtype = np.dtype(dtype)
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != reference {want.shape}"
    if dtype.kind in "iub":
        bad = got != want.astype(got.dtype)
        if bad.any():
            i = np.argwhere(bad)[0]
            return (f"{int(bad.sum())}/{bad.size} differ, first at {tuple(i)}: "
                    f"{got[tuple(i)]} vs {want[tuple(i)]}")
        return None
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    default = {F64: (1e-9, 1e-12), F32: (1e-4, 1e-5), BF16: (1e-2, 1e-2),
               F16: (1e-3, 1e-3)}[dtype]
    rtol = case.rtol if case.rtol is not None else default[0]
    atol = case.atol if case.atol is not None else default[1]
    return float_mismatch(g, w, rtol, atol)


def run_module(cases, args, tag, pipeline):
    """Compiles and runs `cases` as one module; returns (outputs, error)."""
    text = build_module(cases)
    workdir = args.keep or tempfile.mkdtemp(prefix="ds-lowering-")
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, f"{tag}.mlir")
    llvm = os.path.join(workdir, f"{tag}.llvm.mlir")
    with open(src, "w") as f:
        f.write(text)
    try:
        p = subprocess.run([args.ds_opt, src, f"--pass-pipeline=builtin.module({PIPELINES[pipeline]})",
                            "-o", llvm], capture_output=True, text=True)
        if p.returncode != 0:
            return None, "compile failed:\n" + p.stderr[-3000:]
        libs = ",".join(os.path.join(args.lib_dir, l) for l in
                        ("libmlir_c_runner_utils.so", "libmlir_runner_utils.so"))
        p = subprocess.run([args.mlir_runner, llvm, "-e", "main",
                            "-entry-point-result=void", f"-shared-libs={libs}"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return None, "run failed:\n" + p.stderr[-3000:]
        return parse_prints(p.stdout), None
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def check_group(name, cases, args, pipeline):
    """Runs a group; returns a list of (case, message) failures."""
    printed, error = run_module(cases, args, f"{name}-{pipeline}", pipeline)
    if error is not None:
        if len(cases) == 1:
            return [(f"{cases[0].name} [{pipeline}]", error)]
        # Find the culprit(s) one case at a time.
        failures = []
        for c in cases:
            failures += check_group(f"{name}-{c.name}", [c], args, pipeline)
        return failures or [(f"{name} [{pipeline}]", error)]
    expected = sum(len(c.outputs) for c in cases)
    if len(printed) != expected:
        return [(name, f"printed {len(printed)} tensors, expected {expected}")]
    failures = []
    k = 0
    for c in cases:
        wants = c.ref(*c.inputs)
        for (oname, shape, dtype), want in zip(c.outputs, wants):
            got = decode(printed[k], shape, dtype)
            k += 1
            msg = compare(c, got, np.asarray(want), dtype)
            if msg:
                failures.append((f"{c.name} {oname} [{pipeline}]", msg))
    return failures


#===------------------------------------------------------------------------===#
# References
#===------------------------------------------------------------------------===#

def t64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def to_np(t, dtype):
    return t.detach().numpy().astype(dtype)


PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """Random123's Philox4x32-10 on arrays of uint64 words (each < 2^32)."""
    c = [np.asarray(w, dtype=np.uint64) for w in ctr]
    k0, k1 = (np.uint64(w) for w in key)
    for _ in range(10):
        p0 = np.uint64(PHILOX_M0) * c[0]
        p1 = np.uint64(PHILOX_M1) * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK32
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0 = (k0 + np.uint64(PHILOX_W0)) & MASK32
        k1 = (k1 + np.uint64(PHILOX_W1)) & MASK32
    return c


def check_philox_kat():
    z = np.zeros(1, dtype=np.uint64)
    assert int(philox4x32_10([z, z, z, z], [0, 0])[0][0]) == 0x6627E8D5
    f = np.full(1, 0xFFFFFFFF, dtype=np.uint64)
    assert int(philox4x32_10([f, f, f, f], [0xFFFFFFFF] * 2)[0][0]) == 0x408F276D


def dropout_ref(x, rng, p):
    key, ctr = (int(v) & 0xFFFFFFFFFFFFFFFF for v in rng)
    i = np.arange(x.size, dtype=np.uint64)
    c = (np.uint64(ctr) + i)  # wraps mod 2^64
    z = np.zeros_like(c)
    w = philox4x32_10([c & MASK32, c >> np.uint64(32), z, z],
                      [key & 0xFFFFFFFF, key >> 32])[0]
    keep = (w.astype(np.float64) * 2.0 ** -32 >= p).reshape(x.shape)
    scale = x.dtype.type(1.0 - p)
    y = np.where(keep, x / scale, x.dtype.type(0)).astype(x.dtype)
    new = np.array([rng[0], (ctr + x.size) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64)
    return y, new.view(np.int64)


#===------------------------------------------------------------------------===#
# Cases
#===------------------------------------------------------------------------===#

def randn(name, shape, dtype=F32, scale=1.0):
    return (rng_for(name).standard_normal(shape) * scale).astype(dtype)


def quantized(a, step):
    """`a` rounded to multiples of `step`, in its dtype: a few bits of
    entropy an element, so that the large cases' inputs compress well in
    the GPU bundle (60 MiB in all)."""
    return (np.round(a / step) * step).astype(a.dtype)


def elementwise_cases():
    cases = []

    def binary(op, npf, a, b, name=None, **kw):
        name = name or f"{op}_{MLIR_ELEM[a.dtype]}"
        out_shape = np.broadcast_shapes(a.shape, b.shape)
        body = f"%r = ds.{op} %a0, %a1 : {TA(a)}, {TA(b)} -> {T(out_shape, a.dtype)}"
        cases.append(Case(name, [a, b], body, [("%r", out_shape, a.dtype)],
                          lambda x, y: [npf(x, y)], **kw))

    a = randn("bin.a", (3, 1, 7))
    b = randn("bin.b", (1, 5, 7))
    binary("add", np.add, a, b)
    binary("sub", np.subtract, a.astype(F64), np.array(0.75), name="sub_scalar_f64")
    binary("mul", np.multiply, randn("mul.a", (3, 5, 7), F64), randn("mul.b", (3, 5, 1), F64))
    binary("div", np.divide, randn("div.a", (4, 6)), randn("div.b", (1, 6)) + 3)
    # maximum/minimum propagate NaN (torch.maximum).
    mx = randn("max.a", (3, 5))
    mx[0, 1] = np.nan
    my = randn("max.b", (3, 5))
    my[2, 3] = np.nan
    my[1, 1] = mx[1, 1]
    binary("maximum", lambda x, y: torch.maximum(t64(x), t64(y)).numpy(), mx, my)
    binary("minimum", lambda x, y: torch.minimum(t64(x), t64(y)).numpy(), mx.astype(F64),
           my.astype(F64))
    ia = rng_for("int.a").integers(-50, 50, (3, 4)).astype(I64)
    ib = rng_for("int.b").integers(-50, 50, (1, 4)).astype(I64)
    binary("add", np.add, ia, ib, name="add_i64")
    binary("maximum", np.maximum, ia.astype(I32), ib.astype(I32), name="maximum_i32")

    # Narrow floats: arithmetic in the type, transcendental math via f32.
    for dt in (BF16, F16):
        h = randn("narrow.a", (3, 5), dt)
        binary("add", np.add, h, randn("narrow.b", (1, 5), dt))
        for op, f in [("gelu", F.gelu), ("exp", torch.exp), ("sigmoid", torch.sigmoid)]:
            cases.append(Case(f"{op}_{MLIR_ELEM[dt]}", [h], f"%r = ds.{op} %a0 : {TA(h)}",
                              [("%r", h.shape, dt)], lambda v, f=f: [f(t64(v)).numpy()]))

    # Compare: every predicate, broadcasting, NaN (ordered except ne).
    ca = np.round(randn("cmp.a", (4, 5)))
    ca[0, 0] = np.nan
    cb = np.round(randn("cmp.b", (1, 5)))
    for pred, f in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                    ("le", np.less_equal), ("gt", np.greater),
                    ("ge", np.greater_equal)]:
        body = (f"%r = ds.compare {pred}, %a0, %a1 : {TA(ca)}, {TA(cb)} -> "
                f"{T((4, 5), BOOL)}")
        cases.append(Case(f"compare_{pred}", [ca, cb], body,
                          [("%r", (4, 5), BOOL)],
                          lambda x, y, f=f: [f(x, y)]))
    ci = rng_for("cmpi").integers(-3, 3, (2, 3)).astype(I64)
    cases.append(Case("compare_lt_i64", [ci, np.array(0, dtype=I64)],
                      f"%r = ds.compare lt, %a0, %a1 : {TA(ci)}, tensor<i64> -> "
                      f"{T((2, 3), BOOL)}", [("%r", (2, 3), BOOL)],
                      lambda x, y: [x < y]))

    # Select with a computed condition and broadcast branches.
    sx = randn("sel.x", (3, 5, 7))
    sy = randn("sel.y", (3, 1, 7))
    body = f"""
      %zero = arith.constant dense<0.0> : tensor<f32>
      %c = ds.compare gt, %a0, %zero : {TA(sx)}, tensor<f32> -> {T(sx.shape, BOOL)}
      %r = ds.select %c, %a1, %zero : {T(sx.shape, BOOL)}, {TA(sy)}, tensor<f32> -> {TA(sx)}
    """
    cases.append(Case("select_broadcast", [sx, sy], body, [("%r", sx.shape, F32)],
                      lambda x, y: [np.where(x > 0, y, 0)]))

    # A broadcast condition.
    body = f"""
      %zero = arith.constant dense<0.0> : tensor<f32>
      %c = ds.compare gt, %a0, %zero : {T((3, 1, 7), F32)}, tensor<f32> -> {T((3, 1, 7), BOOL)}
      %r = ds.select %c, %a1, %a2 : {T((3, 1, 7), BOOL)}, {TA(sx)}, {TA(sy)} -> {TA(sx)}
    """
    cx = randn("sel.c", (3, 1, 7))
    cases.append(Case("select_broadcast_cond", [cx, sx, sy], body, [("%r", sx.shape, F32)],
                      lambda c, x, y: [np.where(c > 0, x, y)]))

    # ds.broadcast: new leading dim, repeated size-1 dim, kept dim.
    bx = randn("bcast", (5, 1))
    body = f"%r = ds.broadcast %a0 dims = [1, 2] : {TA(bx)} -> {T((3, 5, 7), F32)}"
    cases.append(Case("broadcast", [bx], body, [("%r", (3, 5, 7), F32)],
                      lambda x: [np.broadcast_to(x[None], (3, 5, 7))]))
    body = f"%r = ds.broadcast %a0 dims = [] : tensor<f64> -> {T((2, 3), F64)}"
    cases.append(Case("broadcast_scalar", [np.array(2.5)], body,
                      [("%r", (2, 3), F64)],
                      lambda x: [np.full((2, 3), 2.5)]))

    # Unary ops, in f32 and f64.
    ux = randn("unary", (3, 5, 7), scale=3.0)
    ux[0, 0, :4] = [0.0, -0.0, 80.0, -80.0]
    pos = np.abs(ux) + 0.1
    unary = [
        ("relu", ux, lambda t: torch.relu(t)),
        ("silu", ux, F.silu),
        ("sigmoid", ux, torch.sigmoid),
        ("tanh", ux, torch.tanh),
        ("exp", ux / 4, torch.exp),
        ("log", pos, torch.log),
        ("sqrt", pos, torch.sqrt),
        ("rsqrt", pos, torch.rsqrt),
        ("neg", ux, torch.neg),
        ("abs", ux, torch.abs),
    ]
    for op, x, f in unary:
        for dt in (F32, F64):
            xi = x.astype(dt)
            cases.append(Case(f"{op}_{MLIR_ELEM[dt]}", [xi],
                              f"%r = ds.{op} %a0 : {TA(xi)}",
                              [("%r", xi.shape, dt)],
                              lambda v, f=f, dt=dt: [to_np(f(t64(v)), dt)]))
    big = np.array([-100.0, -88.0, -80.0, -20.0, 0.0, 20.0, 80.0, 100.0], dtype=F32)
    cases.append(Case("sigmoid_extremes", [big], f"%r = ds.sigmoid %a0 : {TA(big)}",
                      [("%r", big.shape, F32)],
                      lambda v: [to_np(torch.sigmoid(t64(v)), F32)], atol=1e-37))

    # GELU and its gradient, both approximations, vs torch.
    gx = randn("gelu.x", (3, 5, 7), scale=2.0)
    gy = randn("gelu.dy", (3, 5, 7))
    for approx in ("none", "tanh"):
        attr = "" if approx == "none" else " approximate = tanh"
        for dt in (F32, F64):
            x = gx.astype(dt)
            cases.append(Case(
                f"gelu_{approx}_{MLIR_ELEM[dt]}", [x], f"%r = ds.gelu %a0{attr} : {TA(x)}",
                [("%r", x.shape, dt)],
                lambda v, a=approx, dt=dt: [to_np(F.gelu(t64(v), approximate=a), dt)]))

            def grad_ref(v, dy, a=approx, dt=dt):
                t = t64(v).requires_grad_()
                F.gelu(t, approximate=a).backward(t64(dy))
                return [to_np(t.grad, dt)]
            cases.append(Case(
                f"gelu_grad_{approx}_{MLIR_ELEM[dt]}", [x, gy.astype(dt)],
                f"%r = ds.gelu_grad %a0, %a1{attr} : {TA(x)}", [("%r", x.shape, dt)],
                grad_ref))

    # Causal mask: T < S (aligned to the last query), default -inf and 0.
    mx = randn("mask", (2, 3, 4, 6))

    def mask_ref(v, fill):
        t, s = v.shape[-2:]
        i = np.arange(t)[:, None]
        j = np.arange(s)[None, :]
        return [np.where(j > i + (s - t), fill, v).astype(v.dtype)]
    cases.append(Case("causal_mask", [mx], f"%r = ds.causal_mask %a0 : {TA(mx)}",
                      [("%r", mx.shape, F32)], lambda v: mask_ref(v, -np.inf)))
    m64 = mx[0].astype(F64)
    cases.append(Case("causal_mask_fill0_f64", [m64],
                      f"%r = ds.causal_mask %a0 fill = 0.0 : {TA(m64)}",
                      [("%r", m64.shape, F64)], lambda v: mask_ref(v, 0.0)))

    # Casts.
    cx = randn("cast", (3, 5), scale=100.0)
    cases.append(Case("cast_f32_f64", [cx], f"%r = ds.cast %a0 : {TA(cx)} -> {T(cx.shape, F64)}",
                      [("%r", cx.shape, F64)], lambda v: [v.astype(F64)], rtol=0, atol=0))
    c64 = randn("cast64", (3, 5), F64)
    cases.append(Case("cast_f64_f32", [c64], f"%r = ds.cast %a0 : {TA(c64)} -> {T(c64.shape, F32)}",
                      [("%r", c64.shape, F32)], lambda v: [v.astype(F32)], rtol=0, atol=0))
    cases.append(Case("cast_f32_bf16", [cx], f"%r = ds.cast %a0 : {TA(cx)} -> {T(cx.shape, BF16)}",
                      [("%r", cx.shape, BF16)],
                      lambda v: [torch.from_numpy(v).to(torch.bfloat16).float().numpy()],
                      rtol=0, atol=0))
    cases.append(Case("cast_f32_f16", [cx], f"%r = ds.cast %a0 : {TA(cx)} -> {T(cx.shape, F16)}",
                      [("%r", cx.shape, F16)], lambda v: [v.astype(F16)], rtol=0, atol=0))
    sat = np.array([1e5, -1e5, 65519.0, 65520.0, 7e4, np.inf, -np.inf, np.nan, 1.5, -3.0],
                   dtype=F32)

    def sat_ref(v):
        fin = np.isfinite(v)
        c = np.where(fin, np.clip(v, -65504.0, 65504.0), v)
        return [c.astype(F16)]
    cases.append(Case("cast_saturate_f16", [sat],
                      f"%r = ds.cast %a0 saturate : {TA(sat)} -> {T(sat.shape, F16)}",
                      [("%r", sat.shape, F16)], sat_ref, rtol=0, atol=0))
    def nosat_ref(v):
        with np.errstate(over="ignore"):
            return [v.astype(F16)]
    cases.append(Case("cast_nosat_f16", [sat],
                      f"%r = ds.cast %a0 : {TA(sat)} -> {T(sat.shape, F16)}",
                      [("%r", sat.shape, F16)], nosat_ref, rtol=0, atol=0))
    # The rounding's edges, which a GPU converts with its own instructions
    # (cvt.rn.bf16.f32, cvt.rn.f16.f32 on sm_80 and newer) where the CPU
    # runs integer code: ties to even, subnormal results and sources,
    # the largest finite values and the first that overflow, inf, NaN.
    edges = np.array([
        0x3F808000, 0x3F818000, 0x3F80C000, 0xBF808000,  # bf16 ties, above a tie
        0x00000001, 0x00400000, 0x007FFFFF, 0x00800000, 0x80000001,  # f32 subnormals
        0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0xFF7F8000,  # bf16's max, overflow
        0x33000000, 0x33000001, 0x33800000, 0x387FC000, 0x38800000,  # f16 subnormals
        0x477FE000, 0x477FEFFF, 0x477FF000, 0xC77FF000,  # f16's max, overflow
        0x7F800000, 0xFF800000, 0x7FC00000, 0x00000000, 0x80000000],
        dtype=np.uint32).view(F32)
    cases.append(Case("cast_f32_bf16_edges", [edges],
                      f"%r = ds.cast %a0 : {TA(edges)} -> {T(edges.shape, BF16)}",
                      [("%r", edges.shape, BF16)],
                      lambda v: [torch.from_numpy(v).to(torch.bfloat16).float().numpy()],
                      rtol=0, atol=0))
    cases.append(Case("cast_f32_f16_edges", [edges],
                      f"%r = ds.cast %a0 : {TA(edges)} -> {T(edges.shape, F16)}",
                      [("%r", edges.shape, F16)], nosat_ref, rtol=0, atol=0))
    # Extension: bf16 subnormals, its largest value, inf and NaN, exactly.
    bedges = np.array([0x0001, 0x007F, 0x0080, 0x8001, 0x7F7F, 0xFF7F, 0x7F80,
                       0xFF80, 0x7FC0, 0x3F80], dtype=np.uint16).view(BF16)
    cases.append(Case("cast_bf16_f32_edges", [bedges],
                      f"%r = ds.cast %a0 : {TA(bedges)} -> {T(bedges.shape, F32)}",
                      [("%r", bedges.shape, F32)], lambda v: [v.astype(F32)],
                      rtol=0, atol=0))
    # FP8 roundings and widenings, which sm_89 and newer run as cvt
    # instructions (ds-lower-fp8-casts-to-nvvm) that saturate where the
    # arith cast gives NaN (E4M3FN past 464) or inf (E5M2 from 61440): the
    # thresholds on both sides, ties, subnormals, inf, NaN; and every FP8
    # bit pattern widened.
    fp8_edges = {
        E4M3: [0x43E00000, 0x43E08000, 0x43E80000, 0x43E80001, 0xC3E80001, 0x43F00000,
               0x3F880000, 0x3F980000, 0x3B000000, 0x3A800000, 0x3AC00000, 0x3C800000,
               0x3B400000, 0x00000001, 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000],
        E5M2: [0x47600000, 0x476FFFFF, 0x47700000, 0xC7700000, 0x47800000, 0x3F900000,
               0x3FB00000, 0x37800000, 0x37000000, 0x37C00000, 0x38800000, 0x00000001,
               0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000]}
    for fp8, tname, torch_t in ((E4M3, "e4m3", torch.float8_e4m3fn),
                                (E5M2, "e5m2", torch.float8_e5m2)):
        fx = np.array(fp8_edges[fp8], dtype=np.uint32).view(F32)
        body = f"""
          %q = ds.cast %a0 : {TA(fx)} -> {T(fx.shape, fp8)}
          %r = ds.cast %q : {T(fx.shape, fp8)} -> {T(fx.shape, F32)}
        """
        cases.append(Case(f"cast_f32_{tname}_edges", [fx], body, [("%r", fx.shape, F32)],
                          lambda v, t=torch_t: [torch.from_numpy(v).to(t).float().numpy()],
                          rtol=0, atol=0))
        every = np.arange(256, dtype=np.uint8).view(fp8)
        cases.append(Case(f"cast_{tname}_f32_all", [every],
                          f"%r = ds.cast %a0 : {TA(every)} -> {T(every.shape, F32)}",
                          [("%r", every.shape, F32)], lambda v: [v.astype(F32)],
                          rtol=0, atol=0))
    cases.append(Case("cast_f32_i32", [cx], f"%r = ds.cast %a0 : {TA(cx)} -> {T(cx.shape, I32)}",
                      [("%r", cx.shape, I32)], lambda v: [np.trunc(v).astype(I32)]))
    ii = rng_for("cast.i").integers(-(2**40), 2**40, (7,)).astype(I64)
    cases.append(Case("cast_i64_f32", [ii], f"%r = ds.cast %a0 : {TA(ii)} -> {T(ii.shape, F32)}",
                      [("%r", ii.shape, F32)], lambda v: [v.astype(F32)], rtol=0, atol=0))
    cases.append(Case("cast_i64_i32", [ii], f"%r = ds.cast %a0 : {TA(ii)} -> {T(ii.shape, I32)}",
                      [("%r", ii.shape, I32)], lambda v: [v.astype(I32)]))
    body = f"""
      %zero = arith.constant dense<0.0> : tensor<f32>
      %c = ds.compare gt, %a0, %zero : {TA(cx)}, tensor<f32> -> {T(cx.shape, BOOL)}
      %r = ds.cast %c : {T(cx.shape, BOOL)} -> {T(cx.shape, F64)}
    """
    cases.append(Case("cast_i1_f64", [cx], body, [("%r", cx.shape, F64)],
                      lambda v: [(v > 0).astype(F64)]))
    return cases


def matmul_cases():
    cases = []

    def mm(name, a, b, tl=False, tr=False, out_dtype=None, **kw):
        out_dtype = np.dtype(out_dtype or a.dtype)
        at = np.swapaxes(a, -1, -2) if tl else a
        bt = np.swapaxes(b, -1, -2) if tr else b
        shape = np.matmul(at.astype(F64), bt.astype(F64)).shape
        flags = (" transpose_lhs" if tl else "") + (" transpose_rhs" if tr else "")
        body = (f"%r = ds.matmul %a0, %a1{flags} : {TA(a)}, {TA(b)} -> "
                f"{T(shape, out_dtype)}")

        def ref(x, y):
            x = np.swapaxes(x, -1, -2) if tl else x
            y = np.swapaxes(y, -1, -2) if tr else y
            return [np.matmul(x.astype(F64), y.astype(F64))]
        if a.dtype in (E4M3, E5M2):
            # Hopper's FP8 tensor cores add in fewer bits than f32 (about
            # 14; DeepSeek-V3, section 3.3.2), so on a GPU the product is
            # checked to the FP8 GEMM bar of the runtime check: 1e-3 of
            # the output's scale (seen: 5e-5 relative, 2.7e-3 absolute).
            rms = float(np.sqrt(np.mean(np.square(ref(a, b)[0]))))
            kw["device_tol"] = (1e-3, 1e-3 * rms)
        cases.append(Case(name, [a, b], body, [("%r", shape, out_dtype)], ref, **kw))

    mm("matmul_2d", randn("m.a", (3, 5)), randn("m.b", (5, 7)))
    mm("matmul_2d_tl_f64", randn("m.a", (5, 3), F64), randn("m.b", (5, 7), F64), tl=True)
    mm("matmul_2d_tr", randn("m.a", (3, 5)), randn("m.b", (7, 5)), tr=True)
    mm("matmul_2d_tl_tr", randn("m.a", (5, 3)), randn("m.b", (7, 5)), tl=True, tr=True)
    mm("matmul_batch4d_f64", randn("m.a", (2, 3, 4, 5), F64), randn("m.b", (2, 3, 5, 6), F64))
    mm("matmul_batch4d_tl", randn("m.a", (2, 2, 5, 3)), randn("m.b", (2, 2, 5, 4)), tl=True)
    mm("matmul_batch3d_tl_tr", randn("m.a", (3, 5, 4)), randn("m.b", (3, 6, 5)), tl=True, tr=True)
    mm("matmul_batch3d_tr_f64", randn("m.a", (3, 4, 5), F64), randn("m.b", (3, 6, 5), F64), tr=True)
    mm("matmul_shared_rhs", randn("m.a", (2, 3, 4, 5)), randn("m.b", (5, 7)))
    mm("matmul_shared_rhs_tr_f64", randn("m.a", (3, 4, 5), F64), randn("m.b", (7, 5), F64), tr=True)
    mm("matmul_shared_rhs_tl", randn("m.a", (2, 3, 5, 4)), randn("m.b", (5, 7)), tl=True)
    mm("matmul_shared_rhs_tl_tr_f64", randn("m.a", (3, 5, 4), F64), randn("m.b", (7, 5), F64),
       tl=True, tr=True)
    mm("matmul_bf16_to_f32", randn("m.a", (3, 5), BF16), randn("m.b", (5, 7), BF16),
       out_dtype=F32)
    mm("matmul_bf16_shared_tr_to_f32", randn("m.a", (2, 3, 8), BF16),
       randn("m.b", (4, 8), BF16), tr=True, out_dtype=F32)
    mm("matmul_f32_to_bf16", randn("m.a", (3, 5)), randn("m.b", (5, 7)), out_dtype=BF16)
    # FP8 products as the FP8 policy makes them (E4M3 activations and
    # weights, E5M2 gradients), in the shapes of cuBLASLt's FP8 path
    # (multiples of 16): the forward X * W^T, the backward's dY * W and
    # dY^T * X (transposed into X * W^T by fp8-gemms), a batched X, and a
    # size that is not a multiple of 16 (extended to f32 instead).
    fp8 = dict(out_dtype=F32, rtol=1e-5, atol=1e-5)
    mm("matmul_e4m3_tn", randn("m.a", (32, 16), E4M3), randn("m.b", (48, 16), E4M3),
       tr=True, **fp8)
    mm("matmul_e5m2_e4m3_nn", randn("m.a", (32, 48), E5M2), randn("m.b", (48, 16), E4M3),
       **fp8)
    mm("matmul_e5m2_e4m3_tl", randn("m.a", (32, 48), E5M2), randn("m.b", (32, 16), E4M3),
       tl=True, **fp8)
    mm("matmul_e4m3_e5m2_tl_tr", randn("m.a", (16, 32), E4M3), randn("m.b", (48, 16), E5M2),
       tl=True, tr=True, **fp8)
    mm("matmul_e4m3_batched_tn", randn("m.a", (2, 16, 32), E4M3),
       randn("m.b", (16, 32), E4M3), tr=True, **fp8)
    mm("matmul_e4m3_unaligned", randn("m.a", (5, 16), E4M3), randn("m.b", (16, 7), E4M3),
       **fp8)

    # Causal attention forward and backward, written as ds-autodiff writes
    # the backward (the cotangent masked, the score gradient masked). With
    # library GEMMs each of the six products runs as one GEMM per block of
    # 256 rows over the lower block triangle (ds.causal_gemm): 320 tokens
    # are a block of 256 and a ragged one of 64. The scores' GEMMs leave
    # the upper blocks unwritten (on the stub libcuda poisoned with NaN),
    # which the masks must keep out of every output. The second case puts
    # dropout on the probabilities (GPT-2's attn_pdrop), its gradient
    # through the same mask: a dropout keeps a zero zero, so the context
    # and dV GEMMs still skip the depth above the diagonal. The third keeps
    # the score-sized matrices in bf16, as the BF16 and FP8 policies do:
    # the probabilities and their gradient are then read by the GEMMs
    # alone (the softmax's gradient recomputes them from the scores), and
    # their kernels stop storing each row at its diagonal block
    # (UnreadRowTails.h), which the GEMMs must not read past either.
    for name, pd, dt in [("causal_attention_f32", 0.0, F32),
                         ("causal_attention_dropout_f32", 0.25, F32),
                         ("causal_attention_bf16", 0.0, BF16)]:
        b, t, d = 2, 320, 16
        hs, ss = (b, t, d), (b, t, t)
        inputs = [randn(f"{name}.{x}", hs, dt) for x in ("q", "k", "v", "do")]
        if pd:
            inputs.append(np.array([0x5DEECE66D, 7], dtype=np.int64))
        h, sc = T(hs, dt), T(ss, F32)
        # The GEMMs' score-sized operands and results (f32 or bf16), and
        # the casts between them and the f32 softmax (none in f32).
        sn = T(ss, dt)

        def narrowed(value):  # an f32 value a GEMM reads: the GEMM's name
            if dt == F32:
                return "", value
            return f"{value}n = ds.cast {value} : {sc} -> {sn}", value + "n"

        def widened(value):  # a GEMM's result, f32 after: the GEMM's name
            if dt == F32:
                return "", value
            return f"{value} = ds.cast {value}n : {sn} -> {sc}", value + "n"
        scale = 1.0 / np.sqrt(d)
        # With dropout, the GEMMs read the dropped probabilities %pv, and
        # the softmax's gradient reads their cotangent %dpv through the same
        # mask; without, both are the values themselves.
        pv, dpv = ("%pv", "%dpv") if pd else ("%p", "%dp")
        dropped = (f"%pv, %rng1 = ds.dropout %p, %a4 p = {pd:e} : {sc}, tensor<2xi64>"
                   if pd else "")
        undrop = (f"%dp, %rng2 = ds.dropout %dpv, %a4 p = {pd:e} : {sc}, tensor<2xi64>"
                  if pd else "")
        s0w, s0g = widened("%s0")
        pn, pvg = narrowed(pv)
        dpw, dpg = widened(dpv)
        gn, gsg = narrowed("%gs")
        body = f"""
          %c = arith.constant dense<{scale:.8e}> : tensor<f32>
          {s0g} = ds.matmul %a0, %a1 transpose_rhs : {h}, {h} -> {sn}
          {s0w}
          %s1 = ds.mul %s0, %c : {sc}, tensor<f32> -> {sc}
          %s = ds.causal_mask %s1 : {sc}
          %p = ds.softmax %s axis = 2 : {sc}
          {dropped}
          {pn}
          %o = ds.matmul {pvg}, %a2 : {sn}, {h} -> {h}
          {dpg} = ds.matmul %a3, %a2 transpose_rhs : {h}, {h} -> {sn}
          %dv = ds.matmul {pvg}, %a3 transpose_lhs : {sn}, {h} -> {h}
          {dpw}
          {undrop}
          %pdy0 = ds.mul %dp, %p : {sc}, {sc} -> {sc}
          %pdy = ds.causal_mask %pdy0 fill = 0.0 : {sc}
          %dpm = ds.causal_mask %dp fill = 0.0 : {sc}
          %r = ds.reduce_sum %pdy [2] keep_dims : {sc} -> {T((b, t, 1), F32)}
          %u = ds.sub %dpm, %r : {sc}, {T((b, t, 1), F32)} -> {sc}
          %g = ds.mul %p, %u : {sc}, {sc} -> {sc}
          %gm = ds.causal_mask %g fill = 0.0 : {sc}
          %gs = ds.mul %gm, %c : {sc}, tensor<f32> -> {sc}
          {gn}
          %dq = ds.matmul {gsg}, %a1 : {sn}, {h} -> {h}
          %dk = ds.matmul {gsg}, %a0 transpose_lhs : {sn}, {h} -> {h}
        """

        def attention_ref(q, k, v, do, rng=None, pd=pd, ss=ss, scale=scale, dt=dt):
            # Each GEMM's operands and result rounded to dt as the IR does.
            def r(x):
                return x if dt == F32 else x.astype(dt).astype(F64)
            keep = (dropout_ref(np.ones(ss, F32), rng, pd)[0].astype(F64)
                    if pd else 1.0)
            q, k, v, do = (x.astype(F64) for x in (q, k, v, do))
            s = r(np.matmul(q, np.swapaxes(k, 1, 2))) * scale
            s = np.where(np.triu(np.ones(s.shape[1:], bool), 1), -np.inf, s)
            p = np.exp(s - s.max(2, keepdims=True))
            p /= p.sum(2, keepdims=True)
            pdrop = r(p * keep)
            dp = r(np.matmul(do, np.swapaxes(v, 1, 2))) * keep
            g = r(p * (dp - (p * dp).sum(2, keepdims=True)) * scale)
            return [r(np.matmul(pdrop, v)), r(np.matmul(g, k)),
                    r(np.matmul(np.swapaxes(g, 1, 2), q)),
                    r(np.matmul(np.swapaxes(pdrop, 1, 2), do))]
        # bf16: a few elements round the other way from the f64 reference's
        # (13 of 10240 by an ulp at most on the CPU): 4 ulps of slack.
        tol = dict(rtol=1.6e-2, atol=8e-3) if dt == BF16 else {}
        cases.append(Case(name, inputs, body,
                          [("%o", hs, dt), ("%dq", hs, dt), ("%dk", hs, dt),
                           ("%dv", hs, dt)], attention_ref, **tol))
    return cases


def shape_cases():
    cases = []
    x = randn("shape.x", (3, 5, 7))
    for shape in [(15, 7), (3, 35), (5, 21), (105,), (7, 3, 5), (1, 3, 5, 7, 1)]:
        cases.append(Case(f"reshape_to_{'x'.join(map(str, shape))}", [x],
                          f"%r = ds.reshape %a0 : {TA(x)} -> {T(shape, F32)}",
                          [("%r", shape, F32)], lambda v, s=shape: [v.reshape(s)]))
    body = f"""
      %e = ds.reshape %a0 : tensor<f64> -> {T((1, 1), F64)}
      %r = ds.reshape %e : {T((1, 1), F64)} -> tensor<f64>
    """
    cases.append(Case("reshape_scalar", [np.array(3.25)], body, [("%e", (1, 1), F64), ("%r", (), F64)],
                      lambda v: [v.reshape(1, 1), v]))
    x4 = randn("tr.x", (2, 3, 4, 5), F64)
    cases.append(Case("transpose", [x4],
                      f"%r = ds.transpose %a0 [2, 0, 3, 1] : {TA(x4)} -> {T((4, 2, 5, 3), F64)}",
                      [("%r", (4, 2, 5, 3), F64)], lambda v: [v.transpose(2, 0, 3, 1)]))
    # Swaps of the two innermost dimensions: 32 x 32 tiles through shared
    # memory on the GPU, with partial tiles at the edges (70 = 2 x 32 + 6).
    for name, shape, perm, dt in [("transpose_2d_tiles_f32", (70, 45), [1, 0], F32),
                                  ("transpose_batched_f64", (3, 40, 33), [0, 2, 1], F64),
                                  ("transpose_2d_tiles_f16", (33, 65), [1, 0], F16)]:
        xt = randn(name, shape, dt)
        out = tuple(shape[p] for p in perm)
        cases.append(Case(name, [xt],
                          f"%r = ds.transpose %a0 [{', '.join(map(str, perm))}] : {TA(xt)} -> "
                          f"{T(out, dt)}",
                          [("%r", out, dt)], lambda v, p=perm: [v.transpose(p)]))
    # The attention head split's pattern: an add, a transpose, a reshape and
    # a rounding, which ds-fuse-elementwise rounds before the transpose
    # (into the add); bit for bit.
    ha, hb = randn("hs.a", (2, 4, 3, 5)), randn("hs.b", (2, 4, 3, 5))
    body = f"""
      %s = ds.add %a0, %a1 : {TA(ha)}, {TA(hb)} -> {TA(ha)}
      %t = ds.transpose %s [0, 2, 1, 3] : {TA(ha)} -> {T((2, 3, 4, 5), F32)}
      %v = ds.reshape %t : {T((2, 3, 4, 5), F32)} -> {T((2, 3, 20), F32)}
      %r = ds.cast %v : {T((2, 3, 20), F32)} -> {T((2, 3, 20), BF16)}
    """
    cases.append(Case("transpose_then_round", [ha, hb], body, [("%r", (2, 3, 20), BF16)],
                      lambda a, b: [torch.from_numpy((a + b).transpose(0, 2, 1, 3).reshape(2, 3, 20))
                                    .to(torch.bfloat16).float().numpy()],
                      rtol=0, atol=0))
    # The head split's own order: the add's result reshaped, transposed,
    # then rounded; the rounding moves before both, into the add.
    body = f"""
      %s = ds.add %a0, %a1 : {T((2, 3, 20), F32)}, {T((2, 3, 20), F32)} -> {T((2, 3, 20), F32)}
      %h = ds.reshape %s : {T((2, 3, 20), F32)} -> {T((2, 3, 4, 5), F32)}
      %t = ds.transpose %h [0, 2, 1, 3] : {T((2, 3, 4, 5), F32)} -> {T((2, 4, 3, 5), F32)}
      %r = ds.cast %t : {T((2, 4, 3, 5), F32)} -> {T((2, 4, 3, 5), BF16)}
    """
    ra, rb = randn("rs.a", (2, 3, 20)), randn("rs.b", (2, 3, 20))
    cases.append(Case("reshape_transpose_then_round", [ra, rb], body,
                      [("%r", (2, 4, 3, 5), BF16)],
                      lambda a, b: [torch.from_numpy((a + b).reshape(2, 3, 4, 5)
                                                     .transpose(0, 2, 1, 3).copy())
                                    .to(torch.bfloat16).float().numpy()],
                      rtol=0, atol=0))
    # Attention's context: a bf16 value (a batched GEMM's rounded result)
    # read widened through the head merge, a transpose and a reshape, by a
    # reduction and an elementwise op. ds-fuse-elementwise moves the
    # widening past the transpose and the reshape into both readers, so the
    # transpose moves bf16; bit for bit.
    wa = randn("wt.a", (2, 4, 3, 5))
    body = f"""
      %n = ds.cast %a0 : {TA(wa)} -> {T((2, 4, 3, 5), BF16)}
      %w = ds.cast %n : {T((2, 4, 3, 5), BF16)} -> {TA(wa)}
      %t = ds.transpose %w [0, 2, 1, 3] : {TA(wa)} -> {T((2, 3, 4, 5), F32)}
      %v = ds.reshape %t : {T((2, 3, 4, 5), F32)} -> {T((2, 3, 20), F32)}
      %m = ds.reduce_max %t [0, 1, 2, 3] : {T((2, 3, 4, 5), F32)} -> tensor<f32>
      %r = ds.mul %v, %v : {T((2, 3, 20), F32)}, {T((2, 3, 20), F32)} -> {T((2, 3, 20), F32)}
    """

    def widened_ref(a):
        n = torch.from_numpy(a).to(torch.bfloat16).float().numpy()
        v = n.transpose(0, 2, 1, 3).reshape(2, 3, 20)
        return [n.max().reshape(()), v * v]
    cases.append(Case("widen_then_transpose", [wa], body,
                      [("%m", (), F32), ("%r", (2, 3, 20), F32)], widened_ref,
                      rtol=0, atol=0))
    cases.append(Case("slice_strided", [x],
                      f"%r = ds.slice %a0 offsets [1, 0, 2] strides [1, 2, 2] : {TA(x)} -> "
                      f"{T((2, 3, 3), F32)}",
                      [("%r", (2, 3, 3), F32)], lambda v: [v[1:3, 0:5:2, 2:7:2]]))
    src = randn("ins.src", (2, 3, 3))
    body = (f"%r = ds.insert_slice %a0 into %a1 offsets [1, 0, 2] strides [1, 2, 2] : "
            f"{TA(src)} into {TA(x)}")

    def ins_ref(s, d):
        d = d.copy()
        d[1:3, 0:5:2, 2:7:2] = s
        return [d]
    cases.append(Case("insert_slice_strided", [src, x], body, [("%r", x.shape, F32)], ins_ref))
    c1, c2, c3 = randn("cat.1", (3, 2, 4)), randn("cat.2", (3, 5, 4)), randn("cat.3", (3, 1, 4))
    cases.append(Case("concat", [c1, c2, c3],
                      f"%r = ds.concat %a0, %a1, %a2 axis = 1 : {TA(c1)}, {TA(c2)}, {TA(c3)} -> "
                      f"{T((3, 8, 4), F32)}",
                      [("%r", (3, 8, 4), F32)], lambda a, b, c: [np.concatenate([a, b, c], 1)]))
    return cases


def reduction_cases():
    cases = []
    x = randn("red.x", (3, 5, 7), F64)
    for op, f in [("reduce_sum", np.sum), ("reduce_mean", np.mean), ("reduce_max", np.max)]:
        for dims, keep in [((0, 2), False), ((1,), True), ((0, 1, 2), False)]:
            shape = tuple(1 if (i in dims) else s for i, s in enumerate(x.shape)) if keep \
                else tuple(s for i, s in enumerate(x.shape) if i not in dims)
            for dt in (F32, F64):
                xi = x.astype(dt)
                kd = " keep_dims" if keep else ""
                body = (f"%r = ds.{op} %a0 [{', '.join(map(str, dims))}]{kd} : {TA(xi)} -> "
                        f"{T(shape, dt)}")
                cases.append(Case(
                    f"{op}_{'_'.join(map(str, dims))}{'_keep' if keep else ''}_{MLIR_ELEM[dt]}",
                    [xi], body, [("%r", shape, dt)],
                    lambda v, f=f, d=dims, k=keep: [f(v.astype(F64), axis=d, keepdims=k)]))
    nx = randn("red.nan", (2, 4))
    nx[1, 2] = np.nan
    cases.append(Case("reduce_max_nan", [nx],
                      f"%r = ds.reduce_max %a0 [1] : {TA(nx)} -> {T((2,), F32)}",
                      [("%r", (2,), F32)], lambda v: [torch.amax(t64(v), 1).numpy()]))

    # Few outputs of many elements (a tensor's sum, amax or norm): the GPU
    # path splits each output's range over several blocks (or threads) and
    # folds their partial results in a second launch.
    for name, shape, dims, op, f, dt in [
            ("reduce_sum_all_large_f32", (20000,), (0,), "reduce_sum", np.sum, F32),
            ("reduce_max_rows_large_f32", (3, 20000), (1,), "reduce_max", np.max, F32),
            ("reduce_sum_cols_large_f64", (20000, 2), (0,), "reduce_sum", np.sum, F64),
            # Inputs contiguous along the outputs (a bias gradient): a thread
            # per output on the GPU, each column cut into runs (700 = 20 x 34
            # + 20: the last run short) whose partial results a second launch
            # folds.
            ("reduce_sum_cols_split_f32", (700, 40), (0,), "reduce_sum", np.sum, F32),
            ("reduce_max_cols_3d_f32", (30, 50, 24), (0, 1), "reduce_max", np.max, F32),
            ("reduce_sum_mid_f64", (6, 400, 10), (1,), "reduce_sum", np.sum, F64)]:
        xi = randn(name, shape, dt)
        out = tuple(s for i, s in enumerate(shape) if i not in dims)
        cases.append(Case(
            name, [xi],
            f"%r = ds.{op} %a0 [{', '.join(map(str, dims))}] : {TA(xi)} -> {T(out, dt)}",
            [("%r", out, dt)], lambda v, f=f, d=dims: [f(v.astype(F64), axis=d)]))

    # The FP8 policy's quantisation: a tensor's amax and its scaled,
    # saturating cast, which the GPU path runs as one kernel that reads the
    # tensor once (convert-linalg-to-ds-gpu's fuse-siblings; 66560 elements,
    # over its 65536-element floor): through the same loops, and through a
    # reshape (a cotangent's amax over [B, T, N] and its cast as [B*T, N]).
    # Both roundings bit for bit.
    qshape = (2, 128, 260)
    for name, view, fp8 in [("amax_and_cast_e4m3", qshape, E4M3),
                            ("amax_and_reshaped_cast_e5m2", (256, 260), E5M2)]:
        qx = randn(name, qshape, scale=40.0)
        qs = np.array(0.75, F32)
        reshape = (f"%v = ds.reshape %a0 : {TA(qx)} -> {T(view, F32)}"
                   if view != qshape else "")
        src = "%v" if reshape else "%a0"
        body = f"""
          %a = ds.abs %a0 : {TA(qx)}
          %m = ds.reduce_max %a [0, 1, 2] : {TA(qx)} -> {T((), F32)}
          {reshape}
          %s = ds.mul {src}, %a1 : {T(view, F32)}, {TA(qs)} -> {T(view, F32)}
          %q = ds.cast %s saturate : {T(view, F32)} -> {T(view, fp8)}
          %r = ds.cast %q : {T(view, fp8)} -> {T(view, F32)}
        """
        cases.append(Case(
            name, [qx, qs], body, [("%m", (), F32), ("%r", view, F32)],
            lambda x, s, v=view, t=fp8: [np.abs(x).max(),
                                         (x.reshape(v) * s).astype(t).astype(F32)],
            rtol=0, atol=0))

    # The FP8 GEMMs' transposed operands (TN layout) are written by the cast
    # that makes them (ds-fuse-transposes: Transformer Engine's
    # cast-transpose), over 32 x 32 tiles through shared memory, with the
    # amax in the same kernel: through the same loops (a batched swap), and
    # through a reshape (a [B, T, K] input transposed as [K, B*T]). 260 and
    # 130 are not multiples of 32: partial tiles at both edges. Bit for bit.
    for name, view, perm, fp8 in [("amax_cast_transpose_e4m3", (2, 130, 260), [0, 2, 1], E4M3),
                                  ("amax_cast_reshape_transpose_e5m2", (260, 260), [1, 0], E5M2)]:
        qx = randn(name, (2, 130, 260), scale=40.0)
        qs = np.array(0.75, F32)
        out = tuple(view[p] for p in perm)
        reshape = (f"%qv = ds.reshape %q : {T(qx.shape, fp8)} -> {T(view, fp8)}"
                   if view != qx.shape else "")
        src = "%qv" if reshape else "%q"
        body = f"""
          %a = ds.abs %a0 : {TA(qx)}
          %m = ds.reduce_max %a [0, 1, 2] : {TA(qx)} -> {T((), F32)}
          %s = ds.mul %a0, %a1 : {TA(qx)}, {TA(qs)} -> {TA(qx)}
          %q = ds.cast %s saturate : {TA(qx)} -> {T(qx.shape, fp8)}
          {reshape}
          %t = ds.transpose {src} [{', '.join(map(str, perm))}] : {T(view, fp8)} -> {T(out, fp8)}
          %r = ds.cast %q : {T(qx.shape, fp8)} -> {TA(qx)}
          %rt = ds.cast %t : {T(out, fp8)} -> {T(out, F32)}
        """
        cases.append(Case(
            name, [qx, qs], body, [("%m", (), F32), ("%r", qx.shape, F32), ("%rt", out, F32)],
            lambda x, s, v=view, p=perm, t=fp8: [
                np.abs(x).max(), (x * s).astype(t).astype(F32),
                (x * s).astype(t).astype(F32).reshape(v).transpose(p)],
            rtol=0, atol=0))
    # Without a reduction beside it: the tiles alone, the transposed copy the
    # cast's only output (70 x 45, partial tiles).
    cx = randn("cast_transpose_bf16", (70, 45))
    body = f"""
      %s = ds.mul %a0, %a0 : {TA(cx)}, {TA(cx)} -> {TA(cx)}
      %q = ds.cast %s : {TA(cx)} -> {T(cx.shape, BF16)}
      %r = ds.transpose %q [1, 0] : {T(cx.shape, BF16)} -> {T((45, 70), BF16)}
    """
    cases.append(Case("cast_transpose_bf16", [cx], body, [("%r", (45, 70), BF16)],
                      lambda x: [torch.from_numpy(x * x).to(torch.bfloat16).float().numpy().T],
                      rtol=0, atol=0))

    # A bias gradient beside the cast-transpose of its cotangent: the column
    # sums run over the same tiles (Transformer Engine's
    # cast_transpose_dbias; convert-linalg-to-ds-gpu's fuse-siblings), with
    # the amax and through the same loops, and without one through a
    # reshape. The cotangent is bf16 and read widened, as the FP8 policy
    # keeps it. Its elements are eighths of at most 32, so every order of
    # summation is exact: bit for bit. 130 and 260 are not multiples of 32.
    dshape = (2, 130, 260)
    for name, view, perm, fp8 in [("amax_cast_transpose_dbias_e5m2", dshape, [0, 2, 1], E5M2),
                                  ("cast_reshape_transpose_dbias_bf16", (260, 260), [1, 0], BF16)]:
        dx = (rng_for(name).integers(-255, 256, dshape) / 8.0).astype(BF16)
        out = tuple(view[p] for p in perm)
        amax = fp8 != BF16
        reshape = (f"%qv = ds.reshape %q : {T(dshape, fp8)} -> {T(view, fp8)}"
                   if view != dshape else "")
        amax_ops = (f"""%a = ds.abs %x : {T(dshape, F32)}
          %m = ds.reduce_max %a [0, 1, 2] : {T(dshape, F32)} -> {T((), F32)}"""
                    if amax else "")
        body = f"""
          %x = ds.cast %a0 : {TA(dx)} -> {T(dshape, F32)}
          %db = ds.reduce_sum %x [0, 1] : {T(dshape, F32)} -> {T((260,), F32)}
          {amax_ops}
          %s = ds.mul %x, %{"a1" if amax else "x"} : {T(dshape, F32)}, {T(() if amax else dshape, F32)} -> {T(dshape, F32)}
          %q = ds.cast %s{" saturate" if amax else ""} : {T(dshape, F32)} -> {T(dshape, fp8)}
          {reshape}
          %t = ds.transpose {"%qv" if reshape else "%q"} [{', '.join(map(str, perm))}] : {T(view, fp8)} -> {T(out, fp8)}
          %rt = ds.cast %t : {T(out, fp8)} -> {T(out, F32)}
        """
        def ref(x, s=None, v=view, p=perm, t=fp8):
            xf = x.astype(np.float64)
            q = (xf * s if s is not None else xf * xf).astype(F32)
            q = (torch.from_numpy(q).to(torch.bfloat16).float().numpy() if t == BF16
                 else q.astype(t).astype(F32))
            refs = [xf.sum((0, 1)).astype(F32)]
            if s is not None:
                refs.append(np.abs(xf).max().astype(F32))
            return refs + [q.reshape(v).transpose(p)]
        inputs = [dx, np.array(0.75, F32)] if amax else [dx]
        outputs = [("%db", (260,), F32)] + ([("%m", (), F32)] if amax else []) + [("%rt", out, F32)]
        cases.append(Case(name, inputs, body, outputs, ref, rtol=0, atol=0))

    # The cotangent itself computed from two tensors (a GELU's gradient
    # from its input and the upstream gradient), rounded to bf16 and read by
    # the amax, the bias gradient and the cast-transpose alone: the GPU path
    # computes it in their kernel instead of writing it (Transformer
    # Engine's dact_cast_transpose_dbias). Eighths of at most 15, so the
    # products are exact in bf16 and every order of summation is exact.
    ah = (rng_for("dact.h").integers(-15, 16, dshape) / 8.0).astype(BF16)
    ag = (rng_for("dact.g").integers(-15, 16, dshape) / 8.0).astype(BF16)
    body = f"""
      %h = ds.cast %a0 : {TA(ah)} -> {T(dshape, F32)}
      %g = ds.cast %a1 : {TA(ag)} -> {T(dshape, F32)}
      %p = ds.mul %h, %g : {T(dshape, F32)}, {T(dshape, F32)} -> {T(dshape, F32)}
      %d = ds.cast %p : {T(dshape, F32)} -> {T(dshape, BF16)}
      %x = ds.cast %d : {T(dshape, BF16)} -> {T(dshape, F32)}
      %db = ds.reduce_sum %x [0, 1] : {T(dshape, F32)} -> {T((260,), F32)}
      %a = ds.abs %x : {T(dshape, F32)}
      %m = ds.reduce_max %a [0, 1, 2] : {T(dshape, F32)} -> {T((), F32)}
      %s = ds.mul %x, %a2 : {T(dshape, F32)}, {T((), F32)} -> {T(dshape, F32)}
      %q = ds.cast %s saturate : {T(dshape, F32)} -> {T(dshape, E5M2)}
      %t = ds.transpose %q [0, 2, 1] : {T(dshape, E5M2)} -> {T((2, 260, 130), E5M2)}
      %rt = ds.cast %t : {T((2, 260, 130), E5M2)} -> {T((2, 260, 130), F32)}
    """
    def dact_ref(h, g, s):
        x = h.astype(np.float64) * g.astype(np.float64)
        return [x.sum((0, 1)).astype(F32), np.abs(x).max().astype(F32),
                (x * s).astype(F32).astype(E5M2).astype(F32).transpose(0, 2, 1)]
    cases.append(Case("dact_cast_transpose_dbias_e5m2", [ah, ag, np.array(0.75, F32)], body,
                      [("%db", (260,), F32), ("%m", (), F32), ("%rt", (2, 260, 130), F32)],
                      dact_ref, rtol=0, atol=0))

    # Attention's head merge ([B, H, T, D] to [B, T, H*D]) read only by the
    # amax, the bias gradient and the FP8 cast-transpose of the merged
    # tensor, as the q, k and v gradients are under the FP8 policy: the GPU
    # path reads the unmerged tensor in their tiles and never writes the
    # merged one (ds-fuse-collapsed-transposes), and the bias gradient's
    # partial sums are per head (H) and column (D). 130 rows of tokens and
    # heads of 88 are not multiples of 32; bf16 vectors of 8 along D.
    # Eighths of at most 32: every order of summation is exact.
    hs = (2, 3, 130, 88)
    hx = (rng_for("head_merge.dq").integers(-255, 256, hs) / 8.0).astype(BF16)
    merged = (2, 130, 264)
    body = f"""
      %m = ds.transpose %a0 [0, 2, 1, 3] : {TA(hx)} -> {T((2, 130, 3, 88), BF16)}
      %v = ds.reshape %m : {T((2, 130, 3, 88), BF16)} -> {T(merged, BF16)}
      %x = ds.cast %v : {T(merged, BF16)} -> {T(merged, F32)}
      %db = ds.reduce_sum %x [0, 1] : {T(merged, F32)} -> {T((264,), F32)}
      %a = ds.abs %x : {T(merged, F32)}
      %mx = ds.reduce_max %a [0, 1, 2] : {T(merged, F32)} -> {T((), F32)}
      %s = ds.mul %x, %a1 : {T(merged, F32)}, {T((), F32)} -> {T(merged, F32)}
      %q = ds.cast %s saturate : {T(merged, F32)} -> {T(merged, E5M2)}
      %t = ds.transpose %q [0, 2, 1] : {T(merged, E5M2)} -> {T((2, 264, 130), E5M2)}
      %rq = ds.cast %q : {T(merged, E5M2)} -> {T(merged, F32)}
      %rt = ds.cast %t : {T((2, 264, 130), E5M2)} -> {T((2, 264, 130), F32)}
    """
    def head_merge_ref(x, s):
        m = x.astype(np.float64).transpose(0, 2, 1, 3).reshape(merged)
        q = (m * s).astype(F32).astype(E5M2).astype(F32)
        return [m.sum((0, 1)).astype(F32), np.abs(m).max().astype(F32), q,
                q.transpose(0, 2, 1)]
    cases.append(Case("head_merge_cast_transpose_dbias_e5m2", [hx, np.array(0.75, F32)], body,
                      [("%db", (264,), F32), ("%mx", (), F32), ("%rq", merged, F32),
                       ("%rt", (2, 264, 130), F32)],
                      head_merge_ref, rtol=0, atol=0))

    # A layer norm's weight and bias gradients: two column sums of one
    # cotangent, which the GPU path folds side by side in one launch that
    # loads the cotangent once (convert-linalg-to-ds-gpu's column groups).
    # Eighths of at most 16: every order of summation is exact.
    gy = (rng_for("column_group.dy").integers(-127, 128, dshape) / 8.0).astype(F32)
    gx = (rng_for("column_group.x").integers(-127, 128, dshape) / 8.0).astype(F32)
    body = f"""
      %p = ds.mul %a0, %a1 : {TA(gy)}, {TA(gx)} -> {TA(gy)}
      %dw = ds.reduce_sum %p [0, 1] : {TA(gy)} -> {T((260,), F32)}
      %db = ds.reduce_sum %a0 [0, 1] : {TA(gy)} -> {T((260,), F32)}
    """
    cases.append(Case("column_group_sums_f32", [gy, gx], body,
                      [("%dw", (260,), F32), ("%db", (260,), F32)],
                      lambda y, x: [(y.astype(np.float64) * x).sum((0, 1)).astype(F32),
                                    y.astype(np.float64).sum((0, 1)).astype(F32)],
                      rtol=0, atol=0))

    # A GELU gradient's shape whose result a GEMM reads, the bias gradient
    # that sums it over the rows, and a second column sum of it times one of
    # its inputs: on the GPU the elementwise op runs in the two sums' launch
    # (a column group's producer), each thread storing the elements it
    # folds and handing both sums its result and the second its input.
    # Columns of 264: bf16 vectors of 8 aligned, elements misaligned; a
    # per-row operand read once for all lanes; 192 rows in runs of 32
    # (partial sums). Eighths: the products are exact in f32, and their
    # sums at any order too.
    ph = (rng_for("column_producer.h").integers(-16, 17, (2, 96, 264)) / 8.0).astype(BF16)
    pg = (rng_for("column_producer.g").integers(-16, 17, (2, 96, 264)) / 8.0).astype(BF16)
    pr = (rng_for("column_producer.r").integers(-16, 17, (2, 96, 1)) / 8.0).astype(F32)
    pshape = T((2, 96, 264), F32)
    body = f"""
      %h = ds.cast %a0 : {TA(ph)} -> {pshape}
      %g = ds.cast %a1 : {TA(pg)} -> {pshape}
      %p = ds.mul %h, %g : {pshape}, {pshape} -> {pshape}
      %q = ds.add %p, %a2 : {pshape}, {TA(pr)} -> {pshape}
      %d = ds.cast %q : {pshape} -> {T((2, 96, 264), BF16)}
      %x = ds.cast %d : {T((2, 96, 264), BF16)} -> {pshape}
      %db = ds.reduce_sum %x [0, 1] : {pshape} -> {T((264,), F32)}
      %xh = ds.mul %x, %h : {pshape}, {pshape} -> {pshape}
      %dw = ds.reduce_sum %xh [0, 1] : {pshape} -> {T((264,), F32)}
    """

    def column_producer_ref(h, g, r):
        q = h.astype(np.float64) * g.astype(np.float64) + r
        d = torch.from_numpy(q.astype(F32)).to(torch.bfloat16).float().numpy().astype(np.float64)
        return [d.sum((0, 1)).astype(F32), (d * h).sum((0, 1)).astype(F32), d]
    cases.append(Case("column_producer_bf16", [ph, pg, pr], body,
                      [("%db", (264,), F32), ("%dw", (264,), F32), ("%d", (2, 96, 264), BF16)],
                      column_producer_ref, rtol=0, atol=0))

    # A layer norm gradient's shape in one row group: two row statistics,
    # the input gradient added to a residual gradient, then three column
    # sums (the weight and bias gradients of the norm, the bias gradient of
    # the linear layer before it, which sums the input gradient) and the
    # input gradient's rounding for the next GEMM. On the GPU the column
    # sums run in the group's kernel, each team folding its rows in shared
    # memory (RowGroups.h). A warp a row with its row in registers (8192
    # rows of 72: vectors of 2, the second only in 4 lanes; misaligned,
    # elements, 3 a lane), and a block a row (1024 rows of 100: vectors of
    # 4 aligned, 4 elements a group misaligned). Positive eighths: no sum
    # cancels, so the f32 sums in any order stay within 1e-4 of f64's.
    for name, (rows, cols) in [("row_group_column_sums_warp_f32", (8192, 72)),
                               ("row_group_column_sums_block_f32", (1024, 100))]:
        shape, keep = (rows, cols), (rows, 1)
        cx = (rng_for(name + ".x").integers(0, 17, shape) / 8.0).astype(BF16)
        cdy = (rng_for(name + ".dy").integers(1, 17, shape) / 8.0).astype(BF16)
        cw = (rng_for(name + ".w").integers(1, 9, (1, cols)) / 8.0).astype(F32)
        cg = (rng_for(name + ".g").integers(0, 17, shape) / 8.0).astype(BF16)
        f32 = T(shape, F32)
        body = f"""
          %x = ds.cast %a0 : {TA(cx)} -> {f32}
          %dy = ds.cast %a1 : {TA(cdy)} -> {f32}
          %g = ds.cast %a3 : {TA(cg)} -> {f32}
          %xs = ds.reduce_sum %x [1] keep_dims : {f32} -> {T(keep, F32)}
          %xc = ds.mul %x, %xs : {f32}, {T(keep, F32)} -> {f32}
          %gy = ds.mul %dy, %a2 : {f32}, {TA(cw)} -> {f32}
          %t = ds.mul %gy, %xc : {f32}, {f32} -> {f32}
          %r1 = ds.reduce_sum %t [1] keep_dims : {f32} -> {T(keep, F32)}
          %d0 = ds.add %gy, %r1 : {f32}, {T(keep, F32)} -> {f32}
          %dx = ds.add %g, %d0 : {f32}, {f32} -> {f32}
          %p = ds.mul %dy, %xc : {f32}, {f32} -> {f32}
          %dw = ds.reduce_sum %p [0] : {f32} -> {T((cols,), F32)}
          %db = ds.reduce_sum %dy [0] : {f32} -> {T((cols,), F32)}
          %dbias = ds.reduce_sum %dx [0] : {f32} -> {T((cols,), F32)}
          %c = ds.cast %dx : {f32} -> {T(shape, BF16)}
        """

        def column_sums_ref(x, dy, w, g):
            x, dy, g = (v.astype(np.float64) for v in (x, dy, g))
            xc = x * x.sum(1, keepdims=True)
            gy = dy * w
            dx = g + gy + (gy * xc).sum(1, keepdims=True)
            return [(dy * xc).sum(0).astype(F32), dy.sum(0).astype(F32),
                    dx.sum(0).astype(F32),
                    torch.from_numpy(dx.astype(F32)).to(torch.bfloat16).float().numpy()]
        cases.append(Case(name, [cx, cdy, cw, cg], body,
                          [("%dw", (cols,), F32), ("%db", (cols,), F32),
                           ("%dbias", (cols,), F32), ("%c", shape, BF16)],
                          column_sums_ref))

    # A residual sum and the layer norm that reads it: the GPU path runs the
    # sum as the first member of the norm's row group (it writes the rows
    # that the statistics then read back from the cache). A warp a row
    # (8192 rows of 32: the element cache) and a block a row (1024 rows of
    # 100: vectors of 4 aligned).
    for name, (rows, cols) in [("row_group_producer_warp_f32", (8192, 32)),
                               ("row_group_producer_block_f32", (1024, 100))]:
        shape = (rows, cols)
        px = (rng_for(name + ".x").integers(-16, 17, shape) / 8.0).astype(BF16)
        pr = (rng_for(name + ".r").integers(-16, 17, shape) / 8.0).astype(BF16)
        pw = randn(name + ".w", (cols,))
        pb = randn(name + ".b", (cols,))
        f32 = T(shape, F32)
        body = f"""
          %x = ds.cast %a0 : {TA(px)} -> {f32}
          %r = ds.cast %a1 : {TA(pr)} -> {f32}
          %h = ds.add %x, %r : {f32}, {f32} -> {f32}
          %y = ds.layer_norm %h, %a2, %a3 : {f32}, {TA(pw)}, {TA(pb)}
          %yb = ds.cast %y : {f32} -> {T(shape, BF16)}
        """
        # The norm's output in bf16 (the reference rounded too): 8192 x 32
        # f64 references of f32 values would take 2 MiB of the GPU bundle.
        cases.append(Case(name, [px, pr, pw, pb], body,
                          [("%h", shape, F32), ("%yb", shape, BF16)],
                          lambda x, r, w, b, cols=cols: [
                              x.astype(np.float64) + r.astype(np.float64),
                              to_np(F.layer_norm(t64(x.astype(np.float64) + r.astype(np.float64)),
                                                 (cols,), t64(w), t64(b)), BF16)]))

    sm = randn("softmax", (3, 5, 7), scale=3.0)
    lx = randn("ln.x", (3, 5, 7), F64, 2.0) + 1.5
    lw, lb = randn("ln.w", (5, 7), F64), randn("ln.b", (5, 7), F64)
    for op, f in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
        for axis in (0, 1, 2):
            for dt in (F32, F64):
                xi = sm.astype(dt)
                cases.append(Case(f"{op}_axis{axis}_{MLIR_ELEM[dt]}", [xi],
                                  f"%r = ds.{op} %a0 axis = {axis} : {TA(xi)}",
                                  [("%r", xi.shape, dt)],
                                  lambda v, f=f, a=axis: [f(t64(v), a).numpy()]))
    for dt in (BF16, F16):
        xi = sm[0].astype(dt)
        cases.append(Case(f"softmax_{MLIR_ELEM[dt]}", [xi], f"%r = ds.softmax %a0 axis = 1 : {TA(xi)}",
                          [("%r", xi.shape, dt)], lambda v: [torch.softmax(t64(v), 1).numpy()],
                          rtol=3e-2, atol=1e-3))
        lw16 = lw[0].astype(dt)
        cases.append(Case(f"layer_norm_{MLIR_ELEM[dt]}", [lx[0].astype(dt), lw16, lw16],
                          f"%r = ds.layer_norm %a0, %a1, %a2 : {T((5, 7), dt)}, {T((7,), dt)}, {T((7,), dt)}",
                          [("%r", (5, 7), dt)],
                          lambda x, w, b: [F.layer_norm(t64(x), (7,), t64(w), t64(b)).numpy()],
                          rtol=3e-2, atol=3e-2))
    # Rows of 32 elements or more: on the GPU, a softmax's (a layer norm's)
    # passes over each row run in one block-per-row launch.
    wide = randn("softmax.wide", (6, 48), scale=3.0)
    for op, f, dt in [("softmax", torch.softmax, F32), ("log_softmax", torch.log_softmax, F64)]:
        xi = wide.astype(dt)
        cases.append(Case(f"{op}_rows48_{MLIR_ELEM[dt]}", [xi],
                          f"%r = ds.{op} %a0 axis = 1 : {TA(xi)}", [("%r", xi.shape, dt)],
                          lambda v, f=f: [f(t64(v), 1).numpy()]))
    wx, ww, wb = randn("ln.wide.x", (5, 40)) + 1.0, randn("ln.wide.w", (40,)), randn("ln.wide.b", (40,))
    cases.append(Case("layer_norm_rows40_f32", [wx, ww, wb],
                      f"%r = ds.layer_norm %a0, %a1, %a2 : {TA(wx)}, {TA(ww)}, {TA(wb)}",
                      [("%r", wx.shape, F32)],
                      lambda x, w, b: [F.layer_norm(t64(x), (40,), t64(w), t64(b)).numpy()]))
    # Many short rows (8192 or more, of 1024 elements at most): on the GPU, a
    # warp per row, the lanes combining with shuffles. 8197 and 8195 rows
    # are not multiples of a block's 8 warps: the last block's spare warps
    # reread the last row and write nothing.
    # Rows of 72 and 68 f32, aligned: each lane keeps 2 vectors of 2
    # elements in registers (a vector row cache, narrowed so that every
    # lane has one), the second past the row's end in all but 4 or 2 lanes.
    for name, shape, op, f, dt in [
            ("softmax_warp_rows_f32", (8200, 40), "softmax", torch.softmax, F32),
            ("log_softmax_warp_rows_f32", (8197, 33), "log_softmax", torch.log_softmax, F32),
            ("softmax_warp_rows72_f32", (8195, 72), "softmax", torch.softmax, F32),
            ("log_softmax_warp_rows68_f32", (8192, 68), "log_softmax", torch.log_softmax, F32)]:
        xi = quantized(randn(name, shape, dt, 3.0), 1 / 16)
        cases.append(Case(name, [xi], f"%r = ds.{op} %a0 axis = 1 : {TA(xi)}",
                          [("%r", xi.shape, dt)], lambda v, f=f: [f(t64(v), 1).numpy()]))
    # A causal softmax and its gradient, as attention's: on the GPU, the
    # scores above the diagonal are not loaded (MaskedReads.h), and read as
    # zero where the mask's select discards them. Rows of 64 for a block each
    # (4 x 64 rows), and for a warp each with a vector row cache (8192 rows,
    # 2-element vectors of f32, 2 of bf16; the gradient only). The gradient is given the
    # scores, not the probabilities, so that it recomputes them from the
    # scores, as attention's backward does: there every read of the scores
    # is masked, and so is the cotangent's, which ds.softmax's gradient
    # masks above the diagonal (where p is 0) as autodiff builds it.
    def causal_softmax_ref(x, dy=None, dt=F32):
        t = t64(x).requires_grad_()
        rows, cols = x.shape[-2:]
        above = torch.triu(torch.ones(rows, cols, dtype=torch.bool), 1 + cols - rows)
        y = torch.softmax(t.masked_fill(above, float("-inf")), -1)
        if dy is None:
            return [to_np(y.detach(), dt)]
        y.backward(t64(dy))
        return [to_np(t.grad, dt)]
    for name, shape, dt in [("causal_softmax_f32", (4, 64, 64), F32),
                            ("causal_softmax_warp_rows_f32", (128, 64, 64), F32),
                            ("causal_softmax_warp_rows_bf16", (128, 64, 64), BF16)]:
        x = randn(name, shape, scale=3.0).astype(dt)
        dy = randn(name + ".dy", shape).astype(dt)
        if dt == F32 and "warp" in name:
            x, dy = quantized(x, 1 / 16), quantized(dy, 1 / 64)
        f32 = T(shape, F32)
        # bf16 as the precision policies keep attention's scores: stored in
        # bf16, computed in f32, rounded once at the end.
        bf16 = dt == BF16
        tol = dict(rtol=1e-2, atol=1e-3) if bf16 else {}

        def widened(arg, value):
            return f"{value} = ds.cast {arg} : {TA(x)} -> {f32}\n" if bf16 else ""

        def result(value):
            return (f"%r = ds.cast {value} : {f32} -> {TA(x)}", "%r") if bf16 else ("", value)
        xv, dyv = ("%x", "%dy") if bf16 else ("%a0", "%a1")
        forward = widened("%a0", "%x") + f"""
          %m = ds.causal_mask {xv} : {f32}
          %p = ds.softmax %m axis = 2 : {f32}
        """
        # The warp rows' forward runs inside their gradient's group (its
        # first members); alone, it would only add 11 MB to the GPU bundle.
        if "warp" not in name:
            narrow, out = result("%p")
            cases.append(Case(name, [x], forward + narrow, [(out, shape, dt)],
                              lambda v, dt=dt: causal_softmax_ref(v, dt=dt), **tol))
        keep = T(shape[:-1] + (1,), F32)
        narrow, out = result("%gm")
        backward = widened("%a1", "%dy") + forward + f"""
          %t0 = ds.mul {dyv}, %p : {f32}, {f32} -> {f32}
          %t = ds.causal_mask %t0 fill = 0.0 : {f32}
          %dym = ds.causal_mask {dyv} fill = 0.0 : {f32}
          %s = ds.reduce_sum %t [2] keep_dims : {f32} -> {keep}
          %d = ds.sub %dym, %s : {f32}, {keep} -> {f32}
          %g = ds.mul %p, %d : {f32}, {f32} -> {f32}
          %gm = ds.causal_mask %g fill = 0.0 : {f32}
        """ + narrow
        cases.append(Case(name.replace("softmax", "softmax_grad"), [x, dy], backward,
                          [(out, shape, dt)],
                          lambda v, g, dt=dt: causal_softmax_ref(v, g, dt), **tol))
    xi = quantized(randn("reduce_sum_warp_rows_f64", (8195, 32), F64), 1 / 256)
    cases.append(Case("reduce_sum_warp_rows_f64", [xi],
                      f"%r = ds.reduce_sum %a0 [1] : {TA(xi)} -> {T((8195,), F64)}",
                      [("%r", (8195,), F64)], lambda v: [np.sum(v, axis=1)]))
    huge = (randn("softmax.big", (2, 6)) * 10 + np.array([[1000.0], [-1000.0]])).astype(F32)
    for op, f in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
        cases.append(Case(f"{op}_stable", [huge], f"%r = ds.{op} %a0 axis = 1 : {TA(huge)}",
                          [("%r", huge.shape, F32)], lambda v, f=f: [f(t64(v), 1).numpy()]))

    # layer_norm over the trailing two dims, rms_norm over the last.
    for dt in (F32, F64):
        args = [lx.astype(dt), lw.astype(dt), lb.astype(dt)]
        cases.append(Case(
            f"layer_norm_{MLIR_ELEM[dt]}", args,
            f"%r = ds.layer_norm %a0, %a1, %a2 eps = 1.0e-03 : {TA(args[0])}, {TA(args[1])}, "
            f"{TA(args[2])}", [("%r", lx.shape, dt)],
            lambda x, w, b: [F.layer_norm(t64(x), (5, 7), t64(w), t64(b), eps=1e-3).numpy()]))
        rw = randn("rms.w", (7,), dt)
        cases.append(Case(
            f"rms_norm_{MLIR_ELEM[dt]}", [lx.astype(dt), rw],
            f"%r = ds.rms_norm %a0, %a1 eps = 1.0e-06 : {TA(lx.astype(dt))}, {TA(rw)}",
            [("%r", lx.shape, dt)],
            lambda x, w: [F.rms_norm(t64(x), (7,), t64(w), eps=1e-6).numpy()]))

    # batch_norm, training mode, vs torch (unbiased running variance).
    def bn_case(name, shape, dt, momentum, eps):
        x = (randn(name + ".x", shape, F64, 2.0) + 0.5).astype(dt)
        c = shape[1]
        w, b = randn(name + ".w", (c,), dt), randn(name + ".b", (c,), dt)
        rm, rv = randn(name + ".rm", (c,), dt), (np.abs(randn(name + ".rv", (c,))) + 0.5).astype(dt)

        def ref(x, w, b, rm, rv):
            trm, trv = t64(rm).clone(), t64(rv).clone()
            y = F.batch_norm(t64(x), trm, trv, t64(w), t64(b), training=True,
                             momentum=momentum, eps=eps)
            return [y.numpy(), trm.numpy(), trv.numpy()]
        body = (f"%y, %m, %v = ds.batch_norm %a0, %a1, %a2, %a3, %a4 momentum = {momentum:e} "
                f"eps = {eps:e} : {TA(x)}, {TA(w)}")
        cases.append(Case(name, [x, w, b, rm, rv], body,
                          [("%y", shape, dt), ("%m", (c,), dt), ("%v", (c,), dt)], ref))
    bn_case("batch_norm_4d_f64", (4, 3, 5, 6), F64, 0.2, 1e-3)
    bn_case("batch_norm_4d_f32", (2, 5, 3, 7), F32, 0.1, 1e-5)
    bn_case("batch_norm_2d_f64", (6, 4), F64, 0.3, 1e-5)

    # Losses.
    logits = randn("ce.logits", (6, 11), F64, 3.0)
    labels = rng_for("ce.labels").integers(0, 11, (6,)).astype(I64)
    for dt in (F32, F64):
        lg = logits.astype(dt)
        cases.append(Case(
            f"cross_entropy_{MLIR_ELEM[dt]}", [lg, labels],
            f"%r = ds.cross_entropy %a0, %a1 : {TA(lg)}, {TA(labels)} -> {T((), dt)}",
            [("%r", (), dt)], lambda x, l: [F.cross_entropy(t64(x), torch.from_numpy(l)).numpy()]))

        def ce_grad_ref(x, l, g):
            t = t64(x).requires_grad_()
            F.cross_entropy(t, torch.from_numpy(l)).backward(t64(g))
            return [t.grad.numpy()]
        g = np.array(0.7, dtype=dt)
        cases.append(Case(
            f"cross_entropy_grad_{MLIR_ELEM[dt]}", [lg, labels, g],
            f"%r = ds.cross_entropy_grad %a0, %a1, %a2 : {TA(lg)}, {TA(labels)}, {TA(g)}",
            [("%r", lg.shape, dt)], ce_grad_ref))
    # Out-of-range labels: logsumexp only; no one-hot in the gradient.
    bad = np.array([3, -1, 11, 0, 100, 10], dtype=I64)

    def lse(x):
        m = x.max(1, keepdims=True)
        return (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]

    def ce_bad_ref(x, l):
        ok = (l >= 0) & (l < x.shape[1])
        tgt = np.where(ok, x[np.arange(len(l)), np.clip(l, 0, x.shape[1] - 1)], 0)
        return [np.mean(lse(x) - tgt)]

    def ce_bad_grad_ref(x, l, g):
        p = np.exp(x - lse(x)[:, None])
        onehot = (np.arange(x.shape[1])[None, :] == l[:, None]).astype(F64)
        return [g * (p - onehot) / x.shape[0]]
    cases.append(Case("cross_entropy_bad_labels", [logits, bad],
                      f"%r = ds.cross_entropy %a0, %a1 : {TA(logits)}, {TA(bad)} -> tensor<f64>",
                      [("%r", (), F64)], ce_bad_ref))
    g = np.array(1.3)
    cases.append(Case("cross_entropy_grad_bad_labels", [logits, bad, g],
                      f"%r = ds.cross_entropy_grad %a0, %a1, %a2 : {TA(logits)}, {TA(bad)}, tensor<f64>",
                      [("%r", logits.shape, F64)], ce_bad_grad_ref))
    big = np.array([[1000.0, 999.0, -5.0], [-1000.0, -1001.0, -999.5]], dtype=F32)
    lb = np.array([1, 2], dtype=I64)
    cases.append(Case("cross_entropy_stable", [big, lb],
                      f"%r = ds.cross_entropy %a0, %a1 : {TA(big)}, {TA(lb)} -> tensor<f32>",
                      [("%r", (), F32)],
                      lambda x, l: [F.cross_entropy(t64(x), torch.from_numpy(l)).numpy()]))
    for dt in (F32, F64):
        p, t = randn("mse.p", (3, 5, 7), dt), randn("mse.t", (3, 5, 7), dt)
        cases.append(Case(f"mse_loss_{MLIR_ELEM[dt]}", [p, t],
                          f"%r = ds.mse_loss %a0, %a1 : {TA(p)} -> {T((), dt)}",
                          [("%r", (), dt)],
                          lambda a, b: [F.mse_loss(t64(a), t64(b)).numpy()]))
    return cases


def nn_cases():
    cases = []

    # conv2d and its two gradients against torch (autograd for the grads).
    def conv(name, n, c, h, w, o, kh, kw, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1,
             bias=True, dt=F64):
        x = randn(name + ".x", (n, c, h, w), dt)
        wt = randn(name + ".w", (o, c // groups, kh, kw), dt)
        b = randn(name + ".b", (o,), dt)
        ref = F.conv2d(t64(x), t64(wt), t64(b) if bias else None, stride, pad, dil, groups)
        oshape = tuple(ref.shape)
        dy = randn(name + ".dy", oshape, dt)
        attrs = (f"strides = [{stride[0]}, {stride[1]}] padding = [{pad[0]}, {pad[1]}] "
                 f"dilation = [{dil[0]}, {dil[1]}] groups = {groups}")
        if bias:
            body = (f"%r = ds.conv2d %a0, %a1, %a2 {attrs} : {TA(x)}, {TA(wt)}, {TA(b)} -> "
                    f"{T(oshape, dt)}")
            inputs = [x, wt, b]
        else:
            body = f"%r = ds.conv2d %a0, %a1 {attrs} : {TA(x)}, {TA(wt)} -> {T(oshape, dt)}"
            inputs = [x, wt]
        cases.append(Case(name, inputs, body, [("%r", oshape, dt)],
                          lambda *a: [F.conv2d(t64(a[0]), t64(a[1]),
                                               t64(a[2]) if len(a) > 2 else None,
                                               stride, pad, dil, groups).numpy()]))

        def grads(x, wt, dy):
            tx, tw = t64(x).requires_grad_(), t64(wt).requires_grad_()
            F.conv2d(tx, tw, None, stride, pad, dil, groups).backward(t64(dy))
            return tx.grad.numpy(), tw.grad.numpy()
        cases.append(Case(name + "_grad_input", [dy, wt, x],
                          f"%r = ds.conv2d_grad_input %a0, %a1 {attrs} : {TA(dy)}, {TA(wt)} -> {TA(x)}",
                          [("%r", x.shape, dt)], lambda d, w_, x_: [grads(x_, w_, d)[0]]))
        cases.append(Case(name + "_grad_weight", [dy, x, wt],
                          f"%r = ds.conv2d_grad_weight %a0, %a1 {attrs} : {TA(dy)}, {TA(x)} -> {TA(wt)}",
                          [("%r", wt.shape, dt)], lambda d, x_, w_: [grads(x_, w_, d)[1]]))

    conv("conv_s2_p1_bias", 2, 3, 7, 6, 4, 3, 3, stride=(2, 2), pad=(1, 1))
    conv("conv_groups2_dil_f32", 2, 4, 8, 7, 6, 3, 2, stride=(1, 2), pad=(1, 0), dil=(2, 1),
         groups=2, bias=False, dt=F32)
    conv("conv_dil2_p2", 1, 2, 6, 7, 3, 3, 3, pad=(2, 2), dil=(2, 2))
    conv("conv_1x1_p1_s2", 2, 3, 5, 6, 2, 1, 1, stride=(2, 2), pad=(1, 1), bias=False)
    conv("conv_s3_uneven", 1, 2, 10, 9, 3, 2, 3, stride=(3, 2), pad=(0, 1), bias=True)
    # f32, the type the GPU path turns into im2col + GEMM (gemm-convs):
    # the forward with its bias, strides, dilations and uneven padding, and
    # a 1 x 1 convolution (the patches are the input).
    conv("conv_s2_p1_bias_f32", 2, 3, 7, 6, 4, 3, 3, stride=(2, 2), pad=(1, 1), dt=F32)
    conv("conv_dil2_s3_uneven_f32", 1, 3, 11, 9, 5, 3, 2, stride=(2, 3), pad=(2, 1),
         dil=(2, 1), bias=False, dt=F32)
    conv("conv_1x1_f32", 2, 8, 5, 5, 4, 1, 1, dt=F32)
    conv("conv_s2_p1_bias_bf16", 2, 3, 7, 6, 4, 3, 3, stride=(2, 2), pad=(1, 1), dt=BF16)

    # Pooling: overlapping windows with ties (small integer values).
    def pool(name, kind, shape, kernel, stride=None, pad=(0, 0), dt=F64):
        x = rng_for(name).integers(-3, 4, shape).astype(dt)
        s = stride or kernel
        f = F.max_pool2d if kind == "max" else F.avg_pool2d
        oshape = tuple(f(t64(x), kernel, s, pad).shape)
        dy = randn(name + ".dy", oshape, dt)
        sattr = f" strides = [{stride[0]}, {stride[1]}]" if stride else ""
        attrs = f"kernel = [{kernel[0]}, {kernel[1]}]{sattr} padding = [{pad[0]}, {pad[1]}]"
        cases.append(Case(f"{kind}_pool2d_{name}", [x],
                          f"%r = ds.{kind}_pool2d %a0 {attrs} : {TA(x)} -> {T(oshape, dt)}",
                          [("%r", oshape, dt)], lambda v: [f(t64(v), kernel, s, pad).numpy()]))

        def grad(v, d):
            t = t64(v).requires_grad_()
            f(t, kernel, s, pad).backward(t64(d))
            return [t.grad.numpy()]
        cases.append(Case(f"{kind}_pool2d_grad_{name}", [x, dy],
                          f"%r = ds.{kind}_pool2d_grad %a0, %a1 {attrs} : {TA(x)}, {TA(dy)}",
                          [("%r", x.shape, dt)], grad))

    pool("k3s2p1", "max", (2, 3, 7, 6), (3, 3), (2, 2), (1, 1))
    pool("k3s1p1_f32", "max", (1, 2, 5, 5), (3, 3), (1, 1), (1, 1), dt=F32)
    pool("k2_default", "max", (2, 3, 5, 7), (2, 2))
    pool("k3x2s2x1p1", "avg", (2, 3, 7, 6), (3, 2), (2, 1), (1, 1))
    pool("k2_default", "avg", (2, 2, 4, 5), (2, 2), dt=F32)

    # Embedding and its gradient: repeated and out-of-range indices.
    for dt in (F32, F64):
        table = randn("emb.table", (11, 4), dt)
        idx = np.array([[0, 3, 3, 10, -2], [11, 100, 3, 5, 0], [7, 7, 7, -100, 1]], dtype=I64)
        cases.append(Case(f"embedding_{MLIR_ELEM[dt]}", [table, idx],
                          f"%r = ds.embedding %a0, %a1 : {TA(table)}, {TA(idx)} -> {T((3, 5, 4), dt)}",
                          [("%r", (3, 5, 4), dt)], lambda t, i: [t[np.clip(i, 0, 10)]]))
        g = randn("emb.grad", (3, 5, 4), dt)

        def emb_grad_ref(g, i):
            out = np.zeros((11, 4))
            np.add.at(out, np.clip(i, 0, 10).ravel(), g.reshape(-1, 4).astype(F64))
            return [out]
        cases.append(Case(f"embedding_grad_{MLIR_ELEM[dt]}", [g, idx],
                          f"%r = ds.embedding_grad %a0, %a1 : {TA(g)}, {TA(idx)} -> {T((11, 4), dt)}",
                          [("%r", (11, 4), dt)], emb_grad_ref))
    # Enough positions for the GPU lowering's block reductions (>= 32 per
    # output): a vocabulary larger than the positions, one row selected
    # by half of them (a long list), rows never selected, and clamping.
    # The GPU lowering walks a list longer than its pieces (32 links here)
    # in pieces, whose sums round once more than the CPU's loop: both are
    # checked against f64 sums, to f32 rounding.
    def emb_grad_long(name, shape, vocab, dim, pad_every):
        rng = rng_for(name)
        idx = rng.integers(-3, vocab + 3, size=shape).astype(I64)
        idx.reshape(-1)[::pad_every] = 5
        g = randn(name + ".grad", shape + (dim,), F32)

        def ref(g, i):
            out = np.zeros((vocab, dim), dtype=F64)
            np.add.at(out, np.clip(i, 0, vocab - 1).ravel(),
                      g.reshape(-1, dim).astype(F64))
            return [out]
        cases.append(Case(name, [g, idx],
                          f"%r = ds.embedding_grad %a0, %a1 : {TA(g)}, {TA(idx)} -> "
                          f"{T((vocab, dim), F32)}",
                          [("%r", (vocab, dim), F32)], ref, rtol=1e-6, atol=1e-6))
    # Row 5's list: 48 positions, a piece and a half.
    emb_grad_long("embedding_grad_long_f32", (4, 24), 67, 6, 2)
    # The same shape without the long list: every list one piece of the
    # GPU's two levels, so both paths give the CPU loop's bits.
    short_idx = rng_for("emb.short").integers(-3, 70, size=(4, 24)).astype(I64)
    g_short = randn("emb.grad_short", (4, 24, 6), F32)

    def emb_grad_short_ref(g, i):
        out = np.zeros((67, 6), dtype=F32)
        for p, row in enumerate(np.clip(i, 0, 66).ravel()):
            out[row] += g.reshape(-1, 6)[p]
        return [out]
    cases.append(Case("embedding_grad_short_lists_f32", [g_short, short_idx],
                      f"%r = ds.embedding_grad %a0, %a1 : {TA(g_short)}, {TA(short_idx)} -> "
                      f"{T((67, 6), F32)}",
                      [("%r", (67, 6), F32)], emb_grad_short_ref, rtol=0, atol=0))
    # Padding: row 5 takes 5 of every 6 positions, a list of 250 (7 full
    # pieces and one of 26); rows of 1 to 3 positions beside it.
    pad = rng_for("emb.pad").integers(0, 40, size=(300,)).astype(I64)
    pad[np.arange(300) % 6 != 0] = 5
    g_pad = randn("emb.grad_pad", (300, 3), F32)

    def emb_grad_pad_ref(g, i):
        out = np.zeros((40, 3), dtype=F64)
        np.add.at(out, i, g.astype(F64))
        return [out]
    cases.append(Case("embedding_grad_padding_f32", [g_pad, pad],
                      f"%r = ds.embedding_grad %a0, %a1 : {TA(g_pad)}, {TA(pad)} -> "
                      f"{T((40, 3), F32)}",
                      [("%r", (40, 3), F32)], emb_grad_pad_ref, rtol=1e-6, atol=1e-6))
    # The GPT benchmark's shape (8 x 1024 positions over a vocabulary of
    # 128), half of it padding (row 0): a list of 4096 positions, 32 pieces
    # of 128. On a GPU, the linked rows' reductions are a block per row
    # (rows of 8192), as in the benchmark.
    tokens = rng_for("emb.tokens").integers(0, 128, size=(8, 1024)).astype(I64)
    tokens[:, 512:] = 0
    g_tok = randn("emb.grad_tokens", (8, 1024, 2), F32)

    def emb_grad_tokens_ref(g, i):
        out = np.zeros((128, 2), dtype=F64)
        np.add.at(out, i.ravel(), g.reshape(-1, 2).astype(F64))
        return [out]
    cases.append(Case("embedding_grad_padded_batch_f32", [g_tok, tokens],
                      f"%r = ds.embedding_grad %a0, %a1 : {TA(g_tok)}, {TA(tokens)} -> "
                      f"{T((128, 2), F32)}",
                      [("%r", (128, 2), F32)], emb_grad_tokens_ref, rtol=1e-5, atol=1e-5))
    i32 = np.array([2, 9, -1, 2], dtype=I32)
    t2 = randn("emb.t2", (5, 3))
    cases.append(Case("embedding_i32_idx", [t2, i32],
                      f"%r = ds.embedding %a0, %a1 : {TA(t2)}, {TA(i32)} -> {T((4, 3), F32)}",
                      [("%r", (4, 3), F32)], lambda t, i: [t[np.clip(i, 0, 4)]]))

    # Dropout: bit-exact keep mask against NumPy Philox; the counter
    # crosses a 32-bit boundary and the key uses both words.
    check_philox_kat()
    for name, shape, dt, p, rng in [
            ("dropout_f32", (3, 5, 7), F32, 0.3, [0x0123456789ABCDEF, 0xFFFFFFF0]),
            ("dropout_f64", (4, 33), F64, 0.5, [-7, 2**40 + 5]),
            ("dropout_p0", (2, 3), F32, 0.0, [1, 2])]:
        x = randn(name, shape, dt)
        rng = np.array(rng, dtype=np.uint64).view(np.int64) if rng[0] >= 0 else \
            np.array(rng, dtype=np.int64)
        body = (f"%y, %s = ds.dropout %a0, %a1 p = {p:e} : {TA(x)}, tensor<2xi64>")
        cases.append(Case(name, [x, rng], body, [("%y", shape, dt), ("%s", (2,), I64)],
                          lambda v, r, p=p: list(dropout_ref(v, r, p)), rtol=0, atol=0))
    return cases


def sparse_cases():
    """The dense reference lowering of the block-sparsity ops. Masks are
    i32 inputs and outputs cast to and from i8 in the body (the harness has
    no i8). Inactive blocks of the weights hold NaN: they must not leak."""
    cases = []

    def blocks(name, shape, block, density=0.5):
        m = rng_for(name).random((shape[0] // block, shape[1] // block))
        return (m < density).astype(I32)

    def expand(m, block):
        return np.kron(m, np.ones((block, block))).astype(bool)

    def bsmm(name, x, w, mask, block, transpose, dt):
        w = np.where(expand(mask, block), w, np.nan).astype(dt)
        n = w.shape[0] if transpose else w.shape[1]
        out = x.shape[:-1] + (n,)
        i8 = "tensor<%sxi8>" % "x".join(map(str, mask.shape))
        flag = " transpose_weight" if transpose else ""
        body = f"""
          %m = ds.cast %a2 : {T(mask.shape, I32)} -> {i8}
          %r = ds.block_sparse_matmul %a0, %a1, %m block = {block}{flag} : {TA(x)}, {TA(w)}, {i8} -> {T(out, dt)}
        """

        def ref(xv, wv, mv):
            wm = np.where(expand(mv, block), wv.astype(F64), 0.0)
            return [np.matmul(xv.astype(F64), wm.T if transpose else wm)]
        cases.append(Case(name, [x, w, mask], body, [("%r", out, dt)], ref))

    bsmm("block_sparse_matmul_tw", randn("bs.x", (5, 16)), randn("bs.w", (24, 16)),
         blocks("bs.m", (24, 16), 8), 8, True, F32)
    bsmm("block_sparse_matmul_3d_f64", randn("bs.x3", (2, 3, 24), F64),
         randn("bs.w3", (24, 16), F64), blocks("bs.m3", (24, 16), 8), 8, False, F64)
    bsmm("block_sparse_matmul_block4_empty", randn("bs.x4", (3, 8)),
         randn("bs.w4", (12, 8)), np.zeros((3, 2), I32), 4, True, F32)

    a, b = randn("sd.a", (2, 5, 16)), randn("sd.b", (2, 5, 24))
    sm = blocks("sd.m", (16, 24), 8)
    body = f"""
      %m = ds.cast %a2 : {T(sm.shape, I32)} -> tensor<2x3xi8>
      %r = ds.block_sampled_matmul %a0, %a1, %m block = 8 : {TA(a)}, {TA(b)}, tensor<2x3xi8> -> {T((16, 24), F32)}
    """
    cases.append(Case("block_sampled_matmul", [a, b, sm], body,
                      [("%r", (16, 24), F32)],
                      lambda x, y, m: [np.where(expand(m, 8), np.einsum(
                          "bmr,bmc->rc", x.astype(F64), y.astype(F64)), 0.0)]))

    def top_k_ref(v, k):
        flat = v.ravel()
        order = sorted(range(flat.size), key=lambda i: (
            not np.isnan(flat[i]), 0 if np.isnan(flat[i]) else flat[i], i))
        out = np.zeros(flat.size, I32)
        for i in order[max(flat.size - int(k), 0):] if k > 0 else []:
            out[i] = 1
        return out.reshape(v.shape)

    def top_k(name, v, k):
        i8 = "tensor<%sxi8>" % "x".join(map(str, v.shape))
        body = f"""
          %k = arith.constant dense<{k}> : tensor<i64>
          %m = ds.top_k_mask %a0, %k : {TA(v)}, tensor<i64> -> {i8}
          %r = ds.cast %m : {i8} -> {T(v.shape, I32)}
        """
        cases.append(Case(name, [v], body, [("%r", v.shape, I32)],
                          lambda x, k=k: [top_k_ref(x, min(max(k, 0), x.size))]))

    for name, dt, k in (("top_k_mask_ties_nan", F32, 7), ("top_k_mask_f64", F64, 3),
                        ("top_k_mask_k_past_end", F32, 40), ("top_k_mask_k_zero", F32, 0)):
        v = rng_for(name).integers(0, 4, (4, 5)).astype(dt)
        v[1, 2] = np.nan
        v[3, 0] = np.nan
        top_k(name, v, k)
    # Many keys (11 and 17 index bits): long runs of equal scores, -0 beside +0,
    # infinities, NaN, and the k-th key inside a run.
    # 72000 keys: past 65536, the select takes 4-bit digits.
    for name, dt, k, shape in (("top_k_mask_runs_f32", F32, 777, (48, 40)),
                               ("top_k_mask_runs_f64", F64, 1000, (48, 40)),
                               ("top_k_mask_runs_4bit_digits", F32, 30001, (300, 240))):
        g = rng_for(name)
        v = g.integers(-3, 4, shape).astype(dt)
        v[(v == 0) & (g.random(v.shape) < 0.5)] = -0.0
        v[g.random(v.shape) < 0.02] = np.nan
        v[g.random(v.shape) < 0.01] = np.inf
        v[g.random(v.shape) < 0.01] = -np.inf
        v[g.random(v.shape) < 0.05] *= 1.5
        top_k(name, v, k)
    return cases


GROUPS = {
    "elementwise": elementwise_cases,
    "matmul-shape": lambda: matmul_cases() + shape_cases(),
    "reductions": reduction_cases,
    "nn": nn_cases,
    "sparse": sparse_cases,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ds-opt", required=True)
    ap.add_argument("--mlir-runner", default=shutil.which("mlir-runner") or
                    "/usr/lib/llvm-22/bin/mlir-runner")
    ap.add_argument("--lib-dir", default=None,
                    help="directory of libmlir_(c_)runner_utils.so")
    ap.add_argument("--group", action="append", choices=sorted(GROUPS))
    ap.add_argument("--pipeline", action="append", choices=sorted(PIPELINES),
                    help="default: all")
    ap.add_argument("--only", metavar="REGEX",
                    help="only the cases whose name matches (re.search)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep", help="keep the generated modules in this directory")
    args = ap.parse_args()
    if args.lib_dir is None:
        args.lib_dir = os.path.join(os.path.dirname(os.path.realpath(args.mlir_runner)),
                                    "..", "lib")
    groups = args.group or sorted(GROUPS)
    start = time.time()
    work = {g: GROUPS[g]() for g in groups}
    if args.only:
        work = {g: [c for c in cases if re.search(args.only, c.name)]
                for g, cases in work.items()}
        work = {g: cases for g, cases in work.items() if cases}
        if not work:
            print(f"error: no case matches --only {args.only!r}", file=sys.stderr)
            return 2
    if args.list:
        for g, cases in work.items():
            for c in cases:
                print(f"{g}: {c.name}")
        return 0
    pipelines = args.pipeline or ["fused", "plain"]
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(check_group, g, cases, args, p)
                   for g, cases in work.items() for p in pipelines]
        for fut in futures:
            failures += fut.result()
    total = sum(len(c) for c in work.values())
    if failures:
        width = max(len(n) for n, _ in failures)
        print(f"FAILED: {len(failures)} mismatch(es) in {total} cases")
        print(f"{'case'.ljust(width)}  problem")
        for n, msg in failures:
            print(f"{n.ljust(width)}  {msg}")
        return 1
    print(f"PASSED: {total} cases ({', '.join(groups)}; pipelines "
          f"{', '.join(pipelines)}) in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

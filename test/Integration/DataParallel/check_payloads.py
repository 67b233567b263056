#!/usr/bin/env python3
"""Checks the runtime's compressed gradient payloads against NumPy.

The encoder a compressed all-reduce runs (dsrt_compress_encode_f32 in
libdsrt, called through ctypes) against an independent NumPy implementation
of docs/CompressedPayloads.md:
  - three tiers, thresholds from quantiles (np.quantile, method="lower")
    and fixed: the decoded values bit for bit, the payload's header (tier
    sizes, s8, t16) and indices, the residual v - decoded;
  - top-k (DGC's sampled threshold): the elements sent and their values;
  - the payload decodes (dsrt_compress_decode_add_f32) to the same values,
    and a truncated payload is refused;
  - error feedback: an element below theta_low accumulates in the residual
    and is sent on the step the accumulation predicts.
Usage: check_payloads.py with DSRT_LIB set to libdsrt.so.
"""

import ctypes
import math
import os
import struct
import sys

import numpy as np

lib = ctypes.CDLL(os.environ["DSRT_LIB"])
f32p = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")
lib.dsrt_compress_encode_f32.argtypes = [
    f32p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_double,
    ctypes.c_double, ctypes.c_double, f32p, ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_int64)]
lib.dsrt_compress_decode_add_f32.argtypes = [
    ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, f32p]
lib.dsrt_last_error.restype = ctypes.c_char_p

THREE_TIER, TOPK = 1, 2
results = []


def encode(grad, residual, scheme, p0, p1, p2):
    n = grad.size
    decoded = np.zeros(n, np.float32)
    size = ctypes.c_int64(0)
    res = None if residual is None else residual.ctypes.data_as(
        ctypes.c_void_p)
    # First the size, then the bytes.
    lib.dsrt_compress_encode_f32(grad, res, n, scheme, p0, p1, p2, decoded,
                                 None, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    cap = ctypes.c_int64(size.value)
    if lib.dsrt_compress_encode_f32(grad, res, n, scheme, p0, p1, p2,
                                    decoded, ctypes.cast(buf, ctypes.c_void_p),
                                    ctypes.byref(cap)) != 0:
        raise RuntimeError(lib.dsrt_last_error().decode())
    return decoded, buf.raw[:cap.value]


def leb128(data, pos, count):
    out, prev = [], -1
    for _ in range(count):
        value = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        prev = prev + 1 + value
        out.append(prev)
    return np.array(out, dtype=np.int64), pos


def lower_quantile(a, q):
    return np.sort(a)[int(math.floor(q * (a.size - 1)))]


def three_tier_ref(v, fixed, p1, p2):
    a = np.abs(v)
    if fixed:
        lo, hi = np.float32(p1), np.float32(p2)
    else:
        lo, hi = lower_quantile(a, p1), lower_quantile(a, p2)
        assert lo == np.quantile(a, p1, method="lower")
    high = a > hi
    mid = (a > lo) & ~high
    dec = np.zeros_like(v)
    s8 = np.float32(0)
    if high.any():
        s8 = np.float32(a[high].max()) / np.float32(127)
        q = np.clip(np.rint(v[high] / s8), -127, 127)
        dec[high] = q.astype(np.float32) * s8
    t16 = np.float32(1) if hi == 0 else np.float32(
        2.0 ** math.ceil(math.log2(float(hi))))
    while t16 / 2 >= hi and hi > 0:  # the smallest power of two >= hi
        t16 = np.float32(t16 / 2)
    while t16 < hi:
        t16 = np.float32(t16 * 2)
    dec[mid] = (v[mid] / t16).astype(np.float16).astype(np.float32) * t16
    return dec, np.nonzero(high)[0], np.nonzero(mid)[0], s8, t16


def topk_ref(v, ratio):
    n = v.size
    k = math.ceil(ratio * n)
    m = min(n, max(64, math.ceil(n / 100)))
    sample = np.abs(v[(np.arange(m) * n) // m])
    thr = np.sort(sample)[int(math.floor((1 - ratio) * (m - 1)))]
    sel = np.nonzero(np.abs(v) >= thr)[0]
    if sel.size > 2 * k:
        order = np.lexsort((sel, -np.abs(v[sel])))  # |v| desc, index asc
        sel = np.sort(sel[order[:k]])
    dec = np.zeros_like(v)
    dec[sel] = v[sel]
    return dec, sel


def check(name, fn):
    try:
        detail = fn()
        results.append(True)
        print("ok   %s%s" % (name, (" " + detail) if detail else ""))
    except Exception as e:
        results.append(False)
        print("FAIL %s: %s" % (name, e))


def same(a, b):
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


def three_tier_cases():
    rng = np.random.default_rng(7)
    cases = 0
    for n in [1, 2, 17, 1000, 4099]:
        for scale in [1e-6, 1.0, 3e4]:
            for fixed, p1, p2 in [(False, 0.95, 0.99), (False, 0.5, 0.9),
                                  (False, 0.0, 1.0), (False, 0.7, 0.7),
                                  (True, 0.5 * scale, 2 * scale)]:
                g = (rng.standard_normal(n) * scale).astype(np.float32)
                r = (rng.standard_normal(n) * scale * 0.1).astype(np.float32)
                dec, payload = encode(g, r, THREE_TIER, 1.0 if fixed else 0.0,
                                      p1, p2)
                v = (g + r).astype(np.float32)
                ref, hi_idx, mid_idx, s8, t16 = three_tier_ref(v, fixed, p1,
                                                               p2)
                if not same(dec, ref):
                    bad = np.nonzero(dec != ref)[0][:3]
                    raise RuntimeError(
                        "n=%d scale=%g q=(%g,%g): decoded differs at %s: %s "
                        "vs %s" % (n, scale, p1, p2, bad, dec[bad], ref[bad]))
                sid, nn, nh, nm, ps8, pt16 = struct.unpack_from("<BIIIff",
                                                                payload)
                if (sid, nn, nh, nm) != (1, n, hi_idx.size, mid_idx.size) or \
                        np.float32(ps8) != s8 or np.float32(pt16) != t16:
                    raise RuntimeError("header %s vs %s" % (
                        (sid, nn, nh, nm, ps8, pt16),
                        (1, n, hi_idx.size, mid_idx.size, s8, t16)))
                idx, pos = leb128(payload, 21, nh)
                if not np.array_equal(idx, hi_idx):
                    raise RuntimeError("8-bit indices differ")
                idx, _ = leb128(payload, pos + nh, nm)
                if not np.array_equal(idx, mid_idx):
                    raise RuntimeError("16-bit indices differ")
                acc = np.zeros(n, np.float32)
                if lib.dsrt_compress_decode_add_f32(payload, len(payload), n,
                                                    acc) != 0 or \
                        not same(acc, ref):
                    raise RuntimeError("the payload does not decode to the "
                                       "values")
                cases += 1
    # A truncated payload is refused and the accumulator left alone.
    acc = np.ones(1000, np.float32)
    if lib.dsrt_compress_decode_add_f32(payload[:-1], len(payload) - 1, n,
                                        acc) == 0 or not np.all(acc == 1):
        raise RuntimeError("a truncated payload was accepted")
    lib.dsrt_clear_error()
    return "(%d cases: values, header, indices, decode)" % cases


def topk_cases():
    rng = np.random.default_rng(11)
    cases = 0
    for n in [10, 64, 1000, 20000]:
        for ratio in [0.001, 0.01, 0.25, 1.0]:
            g = rng.standard_normal(n).astype(np.float32)
            if cases % 3 == 0:
                g[: n // 2] = 1.0  # ties
            dec, payload = encode(g, None, TOPK, ratio, 0, 0)
            ref, sel = topk_ref(g, ratio)
            if not same(dec, ref):
                raise RuntimeError("n=%d ratio=%g: %d sent vs %d" % (
                    n, ratio, np.count_nonzero(dec), sel.size))
            sid, nn, count = struct.unpack_from("<BII", payload)
            if (sid, nn, count) != (2, n, sel.size):
                raise RuntimeError("header")
            cases += 1
    return "(%d cases)" % cases


def error_feedback():
    # Element 0 gets 0.3 every step, below theta_low = 1: it waits in the
    # residual until the accumulated value exceeds 1, then goes out in the
    # 16-bit tier, and its rounding error stays behind.
    n, g0, lo, hi = 64, np.float32(0.3), 1.0, 100.0
    g = np.zeros(n, np.float32)
    g[0] = g0
    g[1] = 50.0  # keeps the other tiers busy
    predicted, acc = None, np.float32(0)
    for t in range(1, 20):
        acc = np.float32(acc + g0)
        if acc > np.float32(lo):
            predicted = t
            break
    residual = np.zeros(n, np.float32)
    sent_at = None
    for t in range(1, 20):
        dec, _ = encode(g, residual, THREE_TIER, 1.0, lo, hi)
        v = (g + residual).astype(np.float32)
        residual = (v - dec).astype(np.float32)
        if dec[0] != 0:
            sent_at = t
            t16 = np.float32(128)
            expect = (v[0] / t16).astype(np.float16).astype(np.float32) * t16
            if dec[0] != expect or residual[0] != np.float32(v[0] - expect):
                raise RuntimeError("sent %r, expected %r" % (dec[0], expect))
            break
    if sent_at != predicted:
        raise RuntimeError("sent at step %s, predicted %s" % (sent_at,
                                                              predicted))
    return "(sent on step %d as predicted)" % sent_at


def main():
    check("three-tier payloads == NumPy", three_tier_cases)
    check("top-k payloads == NumPy", topk_cases)
    check("error feedback sends on the predicted step", error_feedback)
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())

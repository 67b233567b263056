#!/usr/bin/env python3
"""Communication time per step of each all-reduce scheme at scale, from the
compression ratios measured on this machine (benchmarks/dp_accuracy.py:
the GPT block on 4 ranks) and a link model (Hockney: alpha + bytes / beta
per message, full-duplex links, no congestion):

  - dense f32 / fp16 / bf16: ring all-reduce, 2 (N - 1) messages of
    S / N bytes each: 2 (N - 1) alpha + 2 (N - 1) / N * S / beta;
  - sparse payloads (top-k, three-tier): DGC's all-gather of every rank's
    payload P = S / ratio, as a ring: (N - 1) alpha + (N - 1) P / beta,
    or the dense ring when that is cheaper (SparCML's switch, as the
    runtime does);
  - PowerSGD: two ring all-reduces of the factors (its ratio measured).

Default: a 7B-parameter model (f32 gradients, 28 GB), 64 ranks on
100 Gb/s links (12.5 GB/s), alpha = 5 us. The ratios are what one
d_model-256 block gave (payload bytes include indices and headers);
larger tensors compress at least as well, since headers amortize.
Usage: dp_simulate.py [--params 7e9] [--ranks 64] [--gbps 100]
       [--ratio NAME=X ...]
"""

import argparse

# Measured by benchmarks/dp_accuracy.py (4 ranks, 1000 steps, SGD momentum
# lr 0.05): bytes the uncompressed all-reduce sends / bytes the scheme
# sends, per step.
MEASURED = {
    "fp16": 2.0,
    "bf16": 2.0,
    "top-k 0.1 %": 259.4,
    "three-tier q 0.90/0.99": 13.7,
    "three-tier q 0.95/0.99": 28.0,
    "three-tier q 0.97/0.995": 45.5,
    "three-tier q 0.99/0.999": 127.5,
    "powersgd rank 4": 28.3,
}
SPARSE = ("top-k", "three-tier")


def ring_allreduce(size, n, alpha, beta):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / beta


def ring_allgather(payload, n, alpha, beta):
    return (n - 1) * alpha + (n - 1) * payload / beta


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=float, default=7e9)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--gbps", type=float, default=100.0)
    ap.add_argument("--alpha-us", type=float, default=5.0)
    ap.add_argument("--ratio", action="append", default=[],
                    help="override a measured ratio, NAME=X")
    args = ap.parse_args()
    ratios = dict(MEASURED)
    for item in args.ratio:
        name, value = item.rsplit("=", 1)
        ratios[name] = float(value)
    n, alpha, beta = args.ranks, args.alpha_us * 1e-6, args.gbps * 1e9 / 8
    size = 4 * args.params
    dense = ring_allreduce(size, n, alpha, beta)
    print("%.3g parameters (f32 gradients, %.1f GB), %d ranks, %.0f Gb/s "
          "links, alpha %.0f us" % (args.params, size / 1e9, n, args.gbps,
                                     args.alpha_us))
    print("%-26s %8s %14s %12s %9s  %s" % ("scheme", "ratio", "sent/rank GB",
                                           "comm s/step", "speed-up",
                                           "algorithm"))
    print("%-26s %8s %14.2f %12.3f %9s  %s" % (
        "uncompressed", "1.0x", 2 * (n - 1) / n * size / 1e9, dense, "1.0x",
        "ring all-reduce"))
    for name, ratio in ratios.items():
        if name.startswith(SPARSE):
            payload = size / ratio
            gather = ring_allgather(payload, n, alpha, beta)
            t, algo, sent = gather, "all-gather of payloads", \
                (n - 1) * payload
            if dense < gather:
                t, algo, sent = dense, "dense (SparCML switch)", \
                    2 * (n - 1) / n * size
        else:
            t = ring_allreduce(size / ratio, n, alpha, beta)
            algo = "ring all-reduce" + (" x2 (P, Q)" if "power" in name
                                        else "")
            sent = 2 * (n - 1) / n * size / ratio
        print("%-26s %7.1fx %14.2f %12.3f %8.1fx  %s" % (
            name, ratio, sent / 1e9, t, dense / t, algo))
    print("A sparse all-gather grows with N (every rank receives N - 1 "
          "payloads): past N ~ 2 ratio it loses to the dense ring.")
    return 0


if __name__ == "__main__":
    main()

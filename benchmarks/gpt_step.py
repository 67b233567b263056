#!/usr/bin/env python3
"""GPT-style training step: ds-run vs PyTorch eager, on this machine.

Both sides train the same model (examples/gen_examples.py gpt: token +
position embedding, pre-LayerNorm, causal multi-head attention with separate
q/k/v projections, tanh-GELU MLP, LM head, cross-entropy) with AdamW, at the
same size and thread count, each in its own process (one OpenMP runtime per
process). Printed side by side: mean step time (warm-up steps skipped), peak
RSS and cold compile time, then the ratios. The two sides run alternately
`--repeats` times and the medians are reported, since a 2-core machine
shared with other work is noisy. With --compare-causal-block, ds-run also
runs with --causal-block 0 (each of causal attention's six GEMMs as one
GEMM over the whole score matrix instead of one per 256-row block over its
lower block triangle), alternating with the other two, and the ratio of the
two ds-run times is printed. Run it through `make bench`, or:

    benchmarks/gpt_step.py --ds-run build/bin/ds-run [--d-model 256 ...]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "examples", "gen_examples.py")


def torch_side(a):
    """Runs in a child process; prints one JSON line."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    d, h, t, v, b = a.d_model, a.heads, a.seq, a.vocab, a.batch
    dh = d // h

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Embedding(v, d)
            self.wpe = torch.nn.Embedding(t, d)
            self.ln1, self.ln2, self.ln_f = (torch.nn.LayerNorm(d) for _ in range(3))
            self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
            self.head = torch.nn.Linear(d, v, bias=False)
            self.register_buffer("mask", torch.triu(torch.ones(t, t, dtype=torch.bool), 1))

        def forward(self, tok, tgt):
            x = self.wte(tok) + self.wpe.weight[None]
            y = self.ln1(x)
            split = lambda z: z.view(b, t, h, dh).transpose(1, 2)
            q, k, vv = split(self.q(y)), split(self.k(y)), split(self.v(y))
            s = (q @ k.transpose(-1, -2)) * (1.0 / dh ** 0.5)
            p = s.masked_fill(self.mask, float("-inf")).softmax(-1)
            x = x + self.o((p @ vv).transpose(1, 2).reshape(b, t, d))
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(b * t, v), tgt.view(b * t))

    model = Block()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tok = torch.randint(0, v, (b, t))
    tgt = torch.randint(0, v, (b, t))
    times = []
    for _ in range(a.steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(tok, tgt)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
    steady = times[a.warmup:]
    print(json.dumps({
        "mean_step_ms": sum(steady) / len(steady),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "compile_s": 0.0,
    }))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ds-run", default=os.path.join(HERE, "..", "build", "bin", "ds-run"))
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare-causal-block", action="store_true",
                    help="also time ds-run --causal-block 0")
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_side(a)

    size = ["--d-model", str(a.d_model), "--heads", str(a.heads), "--seq",
            str(a.seq), "--batch", str(a.batch), "--vocab", str(a.vocab)]
    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    runs_ds, runs_pt, runs_whole = [], [], []
    with tempfile.TemporaryDirectory() as work:
        module = os.path.join(work, "gpt.mlir")
        subprocess.run([sys.executable, GEN, "gpt", "-o", module] + size, check=True)
        report = os.path.join(work, "report.json")
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        def run_ds(extra):
            subprocess.run([a.ds_run, module, "--steps", str(a.steps), "--threads",
                            str(a.threads), "--quiet", "--report", report] + extra,
                           check=True)
            s = json.load(open(report))["summary"]
            return {"mean_step_ms": s["mean_step_ms"],
                    "peak_rss_bytes": s["peak_rss_bytes"],
                    "compile_s": s["compile_time_s"]["total"],
                    "compile_mlir_s": s["compile_time_s"]["mlir"],
                    "compile_llvm_s": s["compile_time_s"]["llvm"]}
        for _ in range(a.repeats):
            runs_ds.append(run_ds([]))
            if a.compare_causal_block:
                runs_whole.append(run_ds(["--causal-block", "0"]))
            out = subprocess.run([sys.executable, __file__, "--torch-child"] + size +
                                 ["--threads", str(a.threads), "--steps", str(a.steps),
                                  "--warmup", str(a.warmup)],
                                 check=True, capture_output=True, text=True, env=env)
            runs_pt.append(json.loads(out.stdout.strip().splitlines()[-1]))
    ds = {k: median([r[k] for r in runs_ds]) for k in runs_ds[0]}
    pt = {k: median([r[k] for r in runs_pt]) for k in runs_pt[0]}

    print("GPT block d_model=%d heads=%d seq=%d batch=%d vocab=%d, %d threads, "
          "%d steps (%d warm-up skipped), AdamW, median of %d alternating runs"
          % (a.d_model, a.heads, a.seq, a.batch, a.vocab, a.threads, a.steps,
             a.warmup, a.repeats))
    print("%-22s %14s %14s %10s" % ("", "ds-run", "PyTorch eager", "ratio"))
    print("%-22s %14.1f %14.1f %10.2f" % ("mean step [ms]", ds["mean_step_ms"],
                                          pt["mean_step_ms"],
                                          ds["mean_step_ms"] / pt["mean_step_ms"]))
    print("%-22s %14.1f %14.1f %10.2f" % ("peak RSS [MiB]", ds["peak_rss_bytes"] / 2**20,
                                          pt["peak_rss_bytes"] / 2**20,
                                          ds["peak_rss_bytes"] / pt["peak_rss_bytes"]))
    print("%-22s %14.2f %14s" % ("cold compile [s]", ds["compile_s"], "-"))
    print("%-22s %14.2f %14s" % ("  of which MLIR [s]", ds["compile_mlir_s"], "-"))
    print("%-22s %14.2f %14s" % ("  of which LLVM [s]", ds["compile_llvm_s"], "-"))
    print("per-run step ratios: %s" % ", ".join(
        "%.2f" % (d["mean_step_ms"] / p["mean_step_ms"]) for d, p in zip(runs_ds, runs_pt)))
    if runs_whole:
        whole = median([r["mean_step_ms"] for r in runs_whole])
        print("%-22s %14.1f %14s %10.2f" % ("ds, causal GEMMs whole", whole, "-",
                                              ds["mean_step_ms"] / whole))
        print("  (ratio: ds-run's step over ds-run --causal-block 0's; per run: %s)"
              % ", ".join("%.2f" % (d["mean_step_ms"] / w["mean_step_ms"])
                          for d, w in zip(runs_ds, runs_whole)))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""CNN training step: convolutions as im2col + GEMM vs loop nests, and
PyTorch eager, on this machine.

The model is examples/gen_examples.py cnn (two conv3x3 + batch norm + ReLU
+ 2x2 pooling blocks, a linear head, cross-entropy) trained with AdamW. The
same training step (ds-training-pipeline) is lowered twice by
ds-cpu-pipeline: with `gemm-convs` (the default: patches x weight on the
runtime's GEMM, oneDNN) and without (linalg's convolution loop nests), and
each is trained by ds-run; PyTorch eager trains the same architecture at
the same size and thread count in its own process. The three run
alternately `--repeats` times and the medians are reported, with the
ratios, since a 2-core machine shared with other work is noisy. Run it
through `make bench`, or:

    benchmarks/conv_step.py --ds-opt build/bin/ds-opt --ds-run build/bin/ds-run
"""

import argparse
import json
import os
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
    c0, c1, c2, hw = a.channels, a.width, 2 * a.width, a.image

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(c0, c1, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(c1, c2, 3, padding=1)
            self.bn1, self.bn2 = torch.nn.BatchNorm2d(c1), torch.nn.BatchNorm2d(c2)
            self.fc = torch.nn.Linear(c2 * (hw // 4) ** 2, a.classes)

        def forward(self, x, y):
            h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
            h = F.avg_pool2d(F.relu(self.bn2(self.conv2(h))), 2)
            return F.cross_entropy(self.fc(h.flatten(1)), y)

    model = CNN()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(a.batch, c0, hw, hw)
    y = torch.randint(0, a.classes, (a.batch,))
    times = []
    for _ in range(a.steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        model(x, y).backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
    steady = times[a.warmup:]
    print(json.dumps({"mean_step_ms": sum(steady) / len(steady)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ds-opt", default=os.path.join(HERE, "..", "build", "bin", "ds-opt"))
    ap.add_argument("--ds-run", default=os.path.join(HERE, "..", "build", "bin", "ds-run"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--torch-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_side(a)

    size = ["--batch", str(a.batch), "--channels", str(a.channels), "--image",
            str(a.image), "--width", str(a.width), "--classes", str(a.classes)]

    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    runs = {"gemm": [], "loops": [], "torch": []}
    with tempfile.TemporaryDirectory() as work:
        module = os.path.join(work, "cnn.mlir")
        step = os.path.join(work, "step.mlir")
        subprocess.run([sys.executable, GEN, "cnn", "-o", module] + size, check=True)
        subprocess.run([a.ds_opt, module, "--ds-training-pipeline", "-o", step], check=True)
        lowered = {}
        for variant, flag in (("gemm", "true"), ("loops", "false")):
            lowered[variant] = os.path.join(work, variant + ".mlir")
            subprocess.run([a.ds_opt, step, f"--ds-cpu-pipeline=gemm-convs={flag}",
                            "-o", lowered[variant]], check=True)
        report = os.path.join(work, "report.json")
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        for r in range(a.repeats):
            print(f"conv_step.py: run {r + 1}/{a.repeats}", file=sys.stderr, flush=True)
            for variant in ("gemm", "loops"):
                subprocess.run([a.ds_run, lowered[variant], "--steps", str(a.steps),
                                "--threads", str(a.threads), "--quiet", "--report", report],
                               check=True)
                s = json.load(open(report))["summary"]
                runs[variant].append(s["mean_step_ms"])
            if not a.no_torch:
                out = subprocess.run([sys.executable, __file__, "--torch-child"] + size +
                                     ["--threads", str(a.threads), "--steps", str(a.steps),
                                      "--warmup", str(a.warmup)],
                                     check=True, capture_output=True, text=True, env=env)
                runs["torch"].append(json.loads(out.stdout.strip().splitlines()[-1])
                                     ["mean_step_ms"])
    ms = {k: median(v) for k, v in runs.items() if v}
    print("CNN batch=%d %dx%dx%d, widths %d/%d, %d threads, %d steps, AdamW, "
          "median of %d alternating runs"
          % (a.batch, a.channels, a.image, a.image, a.width, 2 * a.width, a.threads,
             a.steps, a.repeats))
    print("%-34s %12s" % ("", "ms/step"))
    print("%-34s %12.1f" % ("ds-run, convolutions as GEMMs", ms["gemm"]))
    print("%-34s %12.1f" % ("ds-run, convolution loop nests", ms["loops"]))
    if "torch" in ms:
        print("%-34s %12.1f" % ("PyTorch eager", ms["torch"]))
    print("loop nests / GEMMs: %.2fx (per run: %s)" % (
        ms["loops"] / ms["gemm"],
        ", ".join("%.2f" % (l / g) for g, l in zip(runs["gemm"], runs["loops"]))))
    if "torch" in ms:
        print("ds-run GEMMs / PyTorch eager: %.2f" % (ms["gemm"] / ms["torch"]))


if __name__ == "__main__":
    sys.exit(main())

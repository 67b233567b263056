#!/usr/bin/env python3
"""Integer inference against the fake-quantized forward, end to end on the
three examples (MLP, CNN, GPT block), with QAT-trained parameters.

Each example is trained for a few QAT steps by ds-run (every linear layer
and convolution INT8, current weight ranges) into a checkpoint. Its
forward is then written with loss = sum(logits * c) for a parameter c, so
that one `ds-run --as-is` step of its gradient gives the logits (grad.c),
at a batch of 1000 inputs (1024 token positions for the GPT block): once
as the frozen fake-quantized forward (ds-insert-fake-quant{observe=false},
the trained scales loaded from the checkpoint) and once converted by
ds-convert-fake-quant. Reported per example: the largest logit deviation,
in output quantization steps ((max - min) / 255 of the logits), and the
argmax agreement, which must be 100 %. The deviation is not gated end to
end: per layer the two agree to an ulp of f32 (integer-inference.test), but
an ulp can move a value across a rounding boundary of the next layer's
quantizer, a whole grid step, and deeper models compound such steps.

Usage: check_integer_examples.py with DS_OPT and DS_RUN in the environment.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

DS_RUN = os.environ.get("DS_RUN", "ds-run")
DS_OPT = os.environ.get("DS_OPT", "ds-opt")
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
GEN = os.path.join(SRC, "examples", "gen_examples.py")
POLICY = os.path.join(SRC, "examples", "policies", "qat-int8.yaml")
FAKE_QUANT = "policy=%s weight-observer=current" % POLICY

# (name, generator arguments for the logits module, inputs maker)
EXAMPLES = (
    ("mlp", ["mlp", "--batch", "1000"],
     lambda rng: {"x": rng.standard_normal((1000, 16)).astype(np.float32),
                  "labels": rng.integers(0, 10, 1000)}),
    ("cnn", ["cnn", "--batch", "1000"],
     lambda rng: {"images": rng.standard_normal((1000, 1, 8, 8)).astype(np.float32),
                  "labels": rng.integers(0, 10, 1000)}),
    ("gpt", ["gpt", "--batch", "16"],
     lambda rng: {"tokens": rng.integers(0, 128, (16, 64)),
                  "targets": rng.integers(0, 128, (16, 64))}),
)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s failed:\n%s%s" % (os.path.basename(cmd[0]),
                                                 r.stdout, r.stderr))
    return r


def logits_module(text):
    """The forward with its cross-entropy loss replaced by sum(logits * c)."""
    m = re.search(r"(%\w+) = ds\.cross_entropy (%\w+), %\w+ : "
                  r"(tensor<(\d+)x(\d+)xf32>), [^\n]*", text)
    if not m:
        raise RuntimeError("no ds.cross_entropy in the example")
    loss, logits, ltype = m.group(1), m.group(2), m.group(3)
    body = ("%%c_logits = ds.mul %s, %%c : %s, %s -> %s\n"
            "  %s = ds.reduce_sum %%c_logits [0, 1] : %s -> tensor<f32>"
            % (logits, ltype, ltype, ltype, loss, ltype))
    text = text[:m.start()] + body + text[m.end():]
    # The parameter c, last (updates name their arguments by index).
    text = re.sub(r"\)\s*->\s*\(",
                  lambda f: ', %%c: %s {ds.param = "c", ds.init = #ds.init<file>})'
                            '\n    -> (' % ltype, text, count=1)
    return text, (int(m.group(4)), int(m.group(5)))


def main():
    rng = np.random.default_rng(5)
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        for name, gen, inputs in EXAMPLES:
            d = os.path.join(work, name)
            os.makedirs(d)
            # 1. QAT training at the example's own size, into a checkpoint.
            ckpt = os.path.join(d, "ckpt")
            run([DS_RUN, os.path.join(SRC, "examples", {"gpt": "gpt_block"}.get(
                name, name) + ".mlir"), "--steps", "30", "--quiet", "--lr", "3e-3",
                 "--fake-quant=" + FAKE_QUANT, "--checkpoint", ckpt])
            # 2. The logits module at 1000 inputs, fake-quantized with frozen
            #    scales read from the checkpoint.
            src = os.path.join(d, "forward.mlir")
            run([sys.executable, GEN] + gen + ["-o", src])
            text, shape = logits_module(open(src).read())
            with open(src, "w") as f:
                f.write(text)
            fq = os.path.join(d, "fq.mlir")
            run([DS_OPT, src, "--ds-insert-fake-quant=" + FAKE_QUANT + " observe=false",
                 "-o", fq])
            frozen = re.sub(r'ds\.init = #ds\.init<[^>]*>, (ds\.state = #ds\.state<"qat\.)',
                            r"ds.init = #ds.init<file>, \1", open(fq).read())
            with open(fq, "w") as f:
                f.write(frozen)
            params = os.path.join(d, "params")
            shutil.copytree(ckpt, params)
            np.save(os.path.join(params, "c.npy"), np.ones(shape, np.float32))
            data = []
            for key, value in inputs(rng).items():
                path = os.path.join(d, key + ".npy")
                np.save(path, value)
                data += ["--data", "%s=%s" % (key, path)]
            got = []
            for convert in (False, True):
                grad = os.path.join(d, "grad%d.mlir" % convert)
                run([DS_OPT, fq] + (["--ds-convert-fake-quant"] if convert else []) +
                    ["--ds-autodiff", "-o", grad])
                out = os.path.join(d, "out%d" % convert)
                run([DS_RUN, grad, "--as-is", "--steps", "1", "--quiet", "--params",
                     params, "--save-results", out] + data)
                got.append(np.load(os.path.join(out, "grad.c.npy")))
            fqv, int8 = got
            step = (fqv.max() - fqv.min()) / 255
            dev = float(np.abs(int8 - fqv).max())
            agree = float(np.mean(fqv.argmax(1) == int8.argmax(1)))
            ok = agree == 1.0
            failed += not ok
            print("%-4s %d predictions: max |int8 - fake-quant| logit %.2e (%.2f output "
                  "steps), argmax agreement %.1f %%  %s"
                  % (name, shape[0], dev, dev / step, 100 * agree,
                     "ok" if ok else "FAILED"))
    print("integer examples: %d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

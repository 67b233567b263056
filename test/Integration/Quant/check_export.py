#!/usr/bin/env python3
"""`ds-run --export-quantized` and ds_torch.load_quantized, end to end.

A two-layer MLP is trained with QAT by ds-run (every layer INT8: torch.ao's
x86 grids) on data files, evaluated on held-out files three ways (the
fake-quantized forward, integer inference, f32) and exported. The same
architecture in PyTorch is loaded from the export with
ds_torch.load_quantized, which gives torch.ao reference quantized modules.
Checked:

  - the export: int8 weight indices (1 byte each), per-channel scales and
    int64 zero points, the activations' grids, the biases in f32, and
    quantized.json with torch.ao's attribute names;
  - torch.ao agrees with the indices: quantizing the dequantized weight
    with torch.quantize_per_channel gives the exported indices;
  - the torch.ao model's held-out loss equals ds-run's (fake-quantized and
    integer) held-out loss on the same batches within 1e-5 relative, and
    its argmax agrees with the f32 logits of the dequantized weights
    (reported);
  - errors: a model that does not fit the export, --export-quantized
    without --fake-quant or without training, a directory that is not an
    export (left untouched).

Usage: check_export.py with DS_RUN in the environment.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
# This checkout's ds_torch, whatever clone the venv's editable install is of.
sys.path.insert(0, os.path.join(SRC, "python"))
import ds_torch  # noqa: E402
import torch.ao.quantization.fx._decomposed  # noqa: E402,F401 (quantized_decomposed ops)

DS_RUN = os.environ.get("DS_RUN", "ds-run")
DS_OPT = os.environ.get("DS_OPT", "ds-opt")
POLICY = os.path.join(SRC, "examples", "policies", "qat-int8.yaml")

FEATURES, HIDDEN, CLASSES, BATCH, EVAL_BATCHES = 16, 48, 10, 32, 8

MODULE = """
func.func @mlp(%fc1_weight: tensor<{h}x{d}xf32> {{ds.param = "fc1.weight", ds.init = #ds.init<uniform, 0.25>}},
               %fc1_bias: tensor<{h}xf32> {{ds.param = "fc1.bias", ds.init = #ds.init<uniform, 0.25>}},
               %fc2_weight: tensor<{c}x{h}xf32> {{ds.param = "fc2.weight", ds.init = #ds.init<uniform, 0.14>}},
               %fc2_bias: tensor<{c}xf32> {{ds.param = "fc2.bias", ds.init = #ds.init<uniform, 0.14>}},
               %x: tensor<{n}x{d}xf32> {{ds.input = "x"}},
               %labels: tensor<{n}xi64> {{ds.input = "labels"}})
    -> (tensor<f32> {{ds.loss}}) attributes {{ds.train_step}} {{
  %h1 = ds.matmul %x, %fc1_weight transpose_rhs : tensor<{n}x{d}xf32>, tensor<{h}x{d}xf32> -> tensor<{n}x{h}xf32>
  %b1 = ds.reshape %fc1_bias : tensor<{h}xf32> -> tensor<1x{h}xf32>
  %h2 = ds.add %h1, %b1 : tensor<{n}x{h}xf32>, tensor<1x{h}xf32> -> tensor<{n}x{h}xf32>
  %h3 = ds.relu %h2 : tensor<{n}x{h}xf32>
  %o1 = ds.matmul %h3, %fc2_weight transpose_rhs : tensor<{n}x{h}xf32>, tensor<{c}x{h}xf32> -> tensor<{n}x{c}xf32>
  %b2 = ds.reshape %fc2_bias : tensor<{c}xf32> -> tensor<1x{c}xf32>
  %o2 = ds.add %o1, %b2 : tensor<{n}x{c}xf32>, tensor<1x{c}xf32> -> tensor<{n}x{c}xf32>
  %l = ds.cross_entropy %o2, %labels : tensor<{n}x{c}xf32>, tensor<{n}xi64> -> tensor<f32>
  return %l : tensor<f32>
}}
""".format(d=FEATURES, h=HIDDEN, c=CLASSES, n=BATCH)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def data(rng, rows):
    x = rng.standard_normal((rows, FEATURES)).astype(np.float32)
    w = np.random.default_rng(99).standard_normal((FEATURES, CLASSES))
    labels = np.argmax(x @ w + 0.5 * rng.standard_normal((rows, CLASSES)), axis=1)
    return x, labels.astype(np.int64)


LOGITS = 1000
LOGIT_X = None


def logits_module():
    """The MLP with explicit frozen fake-quantizers (the state the export
    holds) and loss = sum(logits * c), so that grad.c = logits."""
    d, h, c, n = FEATURES, HIDDEN, CLASSES, LOGITS
    st = lambda k, shape: ('%%%s: tensor<%sf32> {ds.state = #ds.state<"%s">, '
                           'ds.init = #ds.init<file>}'
                           % (k, "".join("%dx" % s for s in shape), k))
    args = [st("x", [n, d])] + [st(k, shp) for k, shp in (
        ("w1", [h, d]), ("b1", [h]), ("w2", [c, h]), ("b2", [c]),
        ("sw1", [h]), ("zw1", [h]), ("sx1", []), ("zx1", []),
        ("sw2", [c]), ("zw2", [c]), ("sx2", []), ("zx2", []))]
    args.append('%%c: tensor<%dx%dxf32> {ds.param = "c", ds.init = #ds.init<file>}' % (n, c))
    body = """
  %lo = arith.constant dense<0.0> : tensor<f32>
  %hi = arith.constant dense<127.0> : tensor<f32>
  %wlo = arith.constant dense<-128.0> : tensor<f32>
  %whi = arith.constant dense<127.0> : tensor<f32>
  %xq = ds.fake_quant %x, %sx1, %zx1, %lo, %hi : tensor<{n}x{d}xf32>, tensor<f32>, tensor<f32>
  %w1q = ds.fake_quant %w1, %sw1, %zw1, %wlo, %whi axis = 0 : tensor<{h}x{d}xf32>, tensor<{h}xf32>, tensor<f32>
  %h1 = ds.matmul %xq, %w1q transpose_rhs : tensor<{n}x{d}xf32>, tensor<{h}x{d}xf32> -> tensor<{n}x{h}xf32>
  %b1r = ds.reshape %b1 : tensor<{h}xf32> -> tensor<1x{h}xf32>
  %h2 = ds.add %h1, %b1r : tensor<{n}x{h}xf32>, tensor<1x{h}xf32> -> tensor<{n}x{h}xf32>
  %h3 = ds.relu %h2 : tensor<{n}x{h}xf32>
  %hq = ds.fake_quant %h3, %sx2, %zx2, %lo, %hi : tensor<{n}x{h}xf32>, tensor<f32>, tensor<f32>
  %w2q = ds.fake_quant %w2, %sw2, %zw2, %wlo, %whi axis = 0 : tensor<{c}x{h}xf32>, tensor<{c}xf32>, tensor<f32>
  %o1 = ds.matmul %hq, %w2q transpose_rhs : tensor<{n}x{h}xf32>, tensor<{c}x{h}xf32> -> tensor<{n}x{c}xf32>
  %b2r = ds.reshape %b2 : tensor<{c}xf32> -> tensor<1x{c}xf32>
  %o2 = ds.add %o1, %b2r : tensor<{n}x{c}xf32>, tensor<1x{c}xf32> -> tensor<{n}x{c}xf32>
  %p = ds.mul %o2, %c : tensor<{n}x{c}xf32>, tensor<{n}x{c}xf32> -> tensor<{n}x{c}xf32>
  %l = ds.reduce_sum %p [0, 1] : tensor<{n}x{c}xf32> -> tensor<f32>
  return %l : tensor<f32>
}
""".replace("{n}", str(n)).replace("{d}", str(d)).replace("{h}", str(h)) \
        .replace("{c}", str(c))
    return ("func.func @logits(%s) -> (tensor<f32> {ds.loss}) attributes "
            "{ds.train_step} {" % ", ".join(args)) + body


def logits_both_ways(work, out, index, rng):
    """Logits of the exported model on 1000 inputs: the fake-quantized
    forward and its integer inference (ds-convert-fake-quant), compiled."""
    global LOGIT_X
    LOGIT_X, _ = data(rng, LOGITS)
    params = os.path.join(work, "logit-params")
    os.makedirs(params)
    save = lambda k, v: np.save(os.path.join(params, k + ".npy"),
                                np.asarray(v, np.float32))
    save("x", LOGIT_X)
    save("c", np.ones((LOGITS, CLASSES), np.float32))
    for i, layer in ((1, "fc1"), (2, "fc2")):
        e = index["layers"][layer]
        q = np.load(os.path.join(out, e["weight"])).astype(np.float32)
        sw = np.load(os.path.join(out, e["weight_scale"]))
        save("w%d" % i, q * sw[:, None])  # re-quantizes to the same indices
        save("b%d" % i, np.load(os.path.join(out, index["parameters"][layer + ".bias"])))
        save("sw%d" % i, sw)
        save("zw%d" % i, np.load(os.path.join(out, e["weight_zero_point"])))
        save("sx%d" % i, e["input_scale"])
        save("zx%d" % i, e["input_zero_point"])
    src = os.path.join(work, "logits.mlir")
    with open(src, "w") as f:
        f.write(logits_module())
    got = []
    for convert in (False, True):
        grad = os.path.join(work, "logits-%d.mlir" % convert)
        cmd = [DS_OPT, src] + (["--ds-convert-fake-quant"] if convert else []) + \
            ["--ds-autodiff", "-o", grad]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError("ds-opt failed:\n" + r.stderr)
        res = os.path.join(work, "logits-res-%d" % convert)
        ds_run([grad, "--as-is", "--steps", "1", "--quiet", "--params", params,
                "--save-results", res])
        got.append(np.load(os.path.join(res, "grad.c.npy")))
    return got[0], got[1]


def ds_run(args, expect_ok=True):
    r = subprocess.run([DS_RUN] + args, capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        raise RuntimeError("ds-run failed:\n" + r.stdout + r.stderr)
    return r


def main():
    problems = []
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as work:
        model_path = os.path.join(work, "mlp.mlir")
        with open(model_path, "w") as f:
            f.write(MODULE)
        files = {}
        for split, rows in (("train", 512), ("eval", BATCH * EVAL_BATCHES)):
            x, y = data(rng, rows)
            files[split] = (os.path.join(work, split + "_x.npy"),
                            os.path.join(work, split + "_y.npy"))
            np.save(files[split][0], x)
            np.save(files[split][1], y)
        out = os.path.join(work, "int8")
        report = os.path.join(work, "report.json")
        common = [model_path, "--data", "x=" + files["train"][0],
                  "--data", "labels=" + files["train"][1],
                  "--eval-data", "x=" + files["eval"][0],
                  "--eval-data", "labels=" + files["eval"][1],
                  "--fake-quant=policy=%s weight-observer=current" % POLICY,
                  "--lr", "3e-3", "--quiet"]
        ds_run(common + ["--steps", "60", "--eval-every", "60", "--eval-batches",
                         str(EVAL_BATCHES), "--integer-eval", "--export-quantized",
                         out, "--report", report])
        ev = json.load(open(report))["eval"][-1]
        index = json.load(open(os.path.join(out, "quantized.json")))

        # The export's contents.
        layers = index["layers"]
        if sorted(layers) != ["fc1", "fc2"]:
            problems.append("layers %s" % sorted(layers))
        if sorted(index["parameters"]) != ["fc1.bias", "fc2.bias"]:
            problems.append("f32 parameters %s" % sorted(index["parameters"]))
        for name, entry in layers.items():
            q = np.load(os.path.join(out, entry["weight"]))
            scale = np.load(os.path.join(out, entry["weight_scale"]))
            zp = np.load(os.path.join(out, entry["weight_zero_point"]))
            if q.dtype != np.int8 or scale.dtype != np.float32 or zp.dtype != np.int64:
                problems.append("%s: dtypes %s %s %s" % (name, q.dtype, scale.dtype, zp.dtype))
            if (entry["weight_qscheme"], entry["weight_dtype"], entry["weight_axis"],
                    entry["weight_quant_min"], entry["weight_quant_max"]) != \
                    ("per_channel_symmetric", "qint8", 0, -128, 127):
                problems.append("%s: weight grid %s" % (name, entry))
            if (entry["input_dtype"], entry["input_quant_min"], entry["input_quant_max"]) \
                    != ("quint8", 0, 127):
                problems.append("%s: input grid %s" % (name, entry))
            # torch.ao quantizes the dequantized weight to the same indices.
            w = torch.from_numpy((q.astype(np.float32)) * scale[:, None])
            again = torch.ops.quantized_decomposed.quantize_per_channel(
                w, torch.from_numpy(scale), torch.from_numpy(zp), 0, -128, 127,
                torch.int8).numpy()
            if not np.array_equal(again, q):
                problems.append("%s: torch.quantize_per_channel disagrees with the "
                                "exported indices in %d elements"
                                % (name, int(np.sum(again != q))))
        b = index["bytes"]
        print("export: %d int8 weight bytes (%d as f32), %d bytes of scales and "
              "zero points" % (b["int8_weights"], b["as_f32"],
                               b["scales_and_zero_points"]))
        if b["as_f32"] != 4 * b["int8_weights"]:
            problems.append("bytes %s" % b)

        # The torch.ao model on the same held-out batches.
        qmodel = ds_torch.load_quantized(MLP(), out)
        import torch.ao.nn.quantized.reference as ref
        if not isinstance(qmodel.fc1[1], ref.Linear):
            problems.append("fc1 is a %s" % type(qmodel.fc1))
        x = torch.from_numpy(np.load(files["eval"][0]))
        y = torch.from_numpy(np.load(files["eval"][1]))
        with torch.no_grad():
            logits = qmodel(x)
            losses = [F.cross_entropy(logits[i * BATCH:(i + 1) * BATCH],
                                      y[i * BATCH:(i + 1) * BATCH]).item()
                      for i in range(EVAL_BATCHES)]
        torch_loss = float(np.mean(losses))
        for key in ("loss", "int8_loss"):
            rel = abs(torch_loss - ev[key]) / abs(ev[key])
            print("held-out loss: torch.ao %.6f, ds-run %s %.6f (rel %.1e)"
                  % (torch_loss, key, ev[key], rel))
            if rel > 1e-5:
                problems.append("torch.ao loss %.7f vs ds-run %s %.7f" %
                                (torch_loss, key, ev[key]))
        # Integer inference against the fake-quantized forward on 1000
        # inputs, with the trained model: logits of both, compiled.
        fq, int8 = logits_both_ways(work, out, index, rng)
        step = (fq.max() - fq.min()) / 255
        dev = float(np.abs(int8 - fq).max())
        agree = float(np.mean(fq.argmax(1) == int8.argmax(1)))
        print("1000 inputs: max |int8 - fake-quant| logit %.2e (output step %.2e), "
              "argmax agreement %.1f %%" % (dev, step, 100 * agree))
        if dev > step or agree < 1.0:
            problems.append("integer inference deviates: %.3g, argmax %.3f" % (dev, agree))
        with torch.no_grad():
            torch_logits = qmodel(torch.from_numpy(LOGIT_X)).numpy()
        tdev = float(np.abs(torch_logits - fq).max())
        print("1000 inputs: max |torch.ao - fake-quant| logit %.2e" % tdev)
        if tdev > 1e-4 * np.abs(fq).max():
            problems.append("torch.ao logits deviate by %.3g" % tdev)

        # Errors.
        class Wrong(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(FEATURES, HIDDEN + 1)
                self.fc2 = nn.Linear(HIDDEN + 1, CLASSES)
        try:
            ds_torch.load_quantized(Wrong(), out)
            problems.append("a model of other shapes loaded")
        except ds_torch.QuantizedExportError as e:
            print("wrong model: %s" % str(e).split(": ", 1)[1])
        r = ds_run(common[:1] + ["--steps", "2", "--export-quantized", out + "2"],
                   expect_ok=False)
        print("no --fake-quant: exit %d: %s" % (r.returncode, r.stderr.strip()))
        r = ds_run(common + ["--steps", "0", "--export-quantized", out + "3"],
                   expect_ok=False)
        print("--steps 0: exit %d: %s" % (r.returncode, r.stderr.strip()))
        busy = os.path.join(work, "busy")
        os.makedirs(busy)
        open(os.path.join(busy, "keep.txt"), "w").write("mine")
        r = ds_run(common + ["--steps", "2", "--export-quantized", busy],
                   expect_ok=False)
        print("non-empty directory: exit %d: %s" % (r.returncode,
                                                   r.stderr.strip().replace(work, "WORK")))
        if os.listdir(busy) != ["keep.txt"]:
            problems.append("the non-export directory was changed: %s" % os.listdir(busy))
        if os.path.exists(out + "2") or os.path.exists(out + "3"):
            problems.append("a refused export wrote a directory")

        # Other models, by their index: the GPT block's Q, K and V
        # projections read one quantized value (each layer gets its
        # quantizer); a [in, out] weight is exported [out, in]; the CNN's
        # batch-norm statistics are buffers and its convolutions are listed
        # as left in f32.
        def export(model, tag, extra=()):
            d = os.path.join(work, tag)
            ds_run([model, "--steps", "2", "--quiet", "--fake-quant=policy=" + POLICY,
                    "--export-quantized", d] + list(extra))
            return json.load(open(os.path.join(d, "quantized.json"))), d
        gpt, _ = export(os.path.join(SRC, "examples", "gpt_block.mlir"), "gpt")
        qkv = [gpt["layers"].get("attn.%s_proj" % p, {}) for p in "qkv"]
        scales = [e.get("input_scale") for e in qkv]
        print("gpt block: q, k, v input scales %s" % ("equal" if len(set(scales)) == 1
                                                      and None not in scales
                                                      else scales))
        if None in scales or len(set(scales)) != 1:
            problems.append("gpt: q/k/v input quantizers %s" % scales)
        xs = os.path.join(work, "two_x.npy")
        np.save(xs, rng.standard_normal((16, 4)).astype(np.float32))
        two, d = export(os.path.join(SRC, "test", "Transforms", "Inputs",
                                     "two-layers.mlir"), "two", ["--data", "x=" + xs])
        fc2 = two["layers"]["fc2"]
        shape = np.load(os.path.join(d, fc2["weight"])).shape
        print("[in, out] weight fc2 [8, 3]: exported %s, weight_axis %d"
              % (list(shape), fc2["weight_axis"]))
        if shape != (3, 8) or fc2["weight_axis"] != 0:
            problems.append("fc2 exported %s axis %d" % (shape, fc2["weight_axis"]))
        cnn, _ = export(os.path.join(SRC, "examples", "cnn.mlir"), "cnn")
        print("cnn: buffers %s; left in f32: %d layers"
              % (", ".join(sorted(cnn["buffers"])), len(cnn["left_in_f32"])))
        if "bn1.running_mean" not in cnn["buffers"] or not cnn["left_in_f32"]:
            problems.append("cnn: buffers %s, left %s" % (cnn["buffers"],
                                                       cnn["left_in_f32"]))
    for p in problems:
        print("FAILED: " + p)
    print("export: %d problems" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

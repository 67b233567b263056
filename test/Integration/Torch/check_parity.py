#!/usr/bin/env python3
"""Training parity with PyTorch through the ds_torch front end.

For each parity model (parity_models.py), optimizer (torch.optim.SGD with
momentum, AdamW with two param groups: no weight decay on biases and
norms) and dtype (f64, f32): the model is exported with
ds_torch.export_training_step, trained by ds-run for STEPS steps, and
trained by PyTorch eager from the same initial weights on the same
batches. Compared: the loss of every step, every parameter and every
buffer (BatchNorm running statistics and batch counters) at the end.

  f64: every loss and every element within 1e-8 relative + 1e-10 absolute;
  f32: every loss within 1e-4 relative; per tensor
       ||p_ds - p_torch|| <= 1e-3 ||p_torch - p_0|| (buffers: 1e-4 relative).

With --export DIR [--chip sm_90], each case is compiled for the chip
instead (ds-run --emit-step, no device needed) and written with its data
and PyTorch's losses and final tensors; scripts/gpu-check.sh trains it with
ds-step-run on the GPU and applies the same criteria (parity_compare.py).

Usage: check_parity.py [--path make-fx|torch-mlir] [--joint] [--sdpa]
[--only NAME] [--export DIR [--chip sm_90]] with DS_RUN (and, for torch-mlir, DS_OPT) set. The
make-fx path is ds_torch.export_training_step; --joint imports PyTorch's
backward instead of ds-autodiff's. The torch-mlir path is
ds_torch.torch_mlir_import (torch-mlir's linalg-on-tensors raised by
ds-opt --ds-import-linalg); it does not carry BatchNorm's batch counters.
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import ds_torch  # noqa: E402
from ds_torch.torch_mlir_import import import_via_torch_mlir  # noqa: E402
from parity_compare import compare_training  # noqa: E402
from parity_models import EXTRA_MODELS, JOINT_UNSUPPORTED, MODELS  # noqa: E402

DS_RUN = os.environ.get("DS_RUN", "ds-run")
STEPS = 20


def make_optimizer(kind, model):
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() < 2 else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=5e-3, betas=(0.9, 0.98))


def batches(make_batch, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [make_batch(g, dtype) for _ in range(STEPS)]


def train_torch(model, loss_fn, opt, data):
    losses = []
    for batch in data:
        opt.zero_grad()
        loss = loss_fn(model(*batch[:-1]), batch[-1])
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def run_ds(step, work, data):
    mlir = os.path.join(work, "model.mlir")
    params = os.path.join(work, "init")
    step.save(mlir, params)
    cmd = [DS_RUN, mlir, "--steps", str(STEPS), "--quiet", "--params", params,
           "--report", os.path.join(work, "report.json"),
           "--checkpoint", os.path.join(work, "ckpt"), "--threads", "1"]
    for i, name in enumerate(step.inputs):
        path = os.path.join(work, name + ".npy")
        np.save(path, torch.cat([b[i] for b in data]).numpy())
        cmd += ["--data", "%s=%s" % (name, path), "--eval-data", "%s=%s" % (name, path)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("ds-run failed:\n%s%s" % (r.stdout, r.stderr))
    report = json.load(open(os.path.join(work, "report.json")))
    return [s["loss"] for s in report["steps"]], os.path.join(work, "ckpt")


def compare(name, dtype, ds_losses, losses, ckpt, model, initial, step):
    """Returns (ok, worst loss rel. error, worst deviation, problems)."""
    tensors = dict(model.named_parameters())
    tensors.update(dict(model.named_buffers()))
    ref, got = {}, {}
    for key, t in tensors.items():
        if key not in step.params and key not in step.states:
            continue  # not part of the step (torch-mlir: batch counters)
        ref[key] = t.detach().numpy()
        got[key] = np.load(os.path.join(ckpt, key + ".npy"))
    return compare_training(dtype == torch.float64, ds_losses, losses, got, ref,
                            initial, set(dict(model.named_parameters())))


def export_case(step, data, losses, model, initial, dtype, out, chip,
                emulate_kernels=False):
    """The case as a step compiled for `chip` (ds-run --emit-step, the
    initial weights in its init/) with its data and PyTorch's losses and
    final tensors, for scripts/gpu-check.sh (parity_compare.py)."""
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        mlir = os.path.join(work, "model.mlir")
        params = os.path.join(work, "params")
        step.save(mlir, params)
        device = [] if chip == "cpu" else ["--device", "cuda", "--gpu-chip", chip]
        if emulate_kernels and device:
            device += ["--gpu-emulate-kernels", "--gpu-max-blocks", "3"]
        r = subprocess.run([DS_RUN, mlir, "--params", params, "--emit-step", out,
                            "--quiet"] + device, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError("ds-run --emit-step failed:\n%s%s" % (r.stdout, r.stderr))
    os.remove(os.path.join(out, "step.o"))
    os.makedirs(os.path.join(out, "data"))
    for i, name in enumerate(step.inputs):
        np.save(os.path.join(out, "data", name + ".npy"),
                torch.cat([b[i] for b in data]).numpy())
    ref = os.path.join(out, "reference")
    tensors = dict(model.named_parameters())
    tensors.update(dict(model.named_buffers()))
    keys = [k for k in tensors if k in step.params or k in step.states]
    for sub, values in (("final", {k: tensors[k].detach().numpy() for k in keys}),
                        ("initial", initial)):
        os.makedirs(os.path.join(ref, sub))
        for k, v in values.items():
            np.save(os.path.join(ref, sub, k + ".npy"), v)
    with open(os.path.join(ref, "parity.json"), "w") as f:
        json.dump({"dtype": "f64" if dtype == torch.float64 else "f32",
                   "steps": STEPS, "losses": losses, "tensors": keys,
                   "params": sorted(initial)}, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", choices=["make-fx", "torch-mlir"], default="make-fx")
    ap.add_argument("--joint", action="store_true")
    ap.add_argument("--only", default=None)
    ap.add_argument("--sdpa", action="store_true",
                    help="also run the GPT block with F.scaled_dot_product_attention")
    ap.add_argument("--export", metavar="DIR",
                    help="instead of training with ds-run, compile every case for "
                         "a CUDA chip into DIR/<case> with its data and PyTorch's "
                         "results (for scripts/gpu-check.sh)")
    ap.add_argument("--chip", default="sm_90", help="or cpu (to test the export)")
    ap.add_argument("--emulate-kernels", action="store_true",
                    help="with --export for a chip: kernels run on the host "
                         "(the stub libcuda's testing mode)")
    args = ap.parse_args()
    models = dict(MODELS)
    if args.only in EXTRA_MODELS:
        models[args.only] = EXTRA_MODELS[args.only]
    if args.sdpa:
        gpt, loss_fn, mk = MODELS["gpt"]
        models["gpt_sdpa"] = (lambda: gpt(sdpa=True), loss_fn, mk)
    passed = failed = 0
    for name, (factory, loss_fn, make_batch) in models.items():
        if args.only and name != args.only:
            continue
        if args.joint and name in JOINT_UNSUPPORTED:
            print("skip %-8s joint: %s" % (name, JOINT_UNSUPPORTED[name]))
            continue
        for kind in ("sgd", "adamw"):
            for dtype in (torch.float64, torch.float32):
                torch.manual_seed(1234)
                model = factory().to(dtype)
                twin = copy.deepcopy(model)
                initial = {k: v.detach().numpy().astype(np.float64).copy()
                           for k, v in model.named_parameters()}
                data = batches(make_batch, dtype, seed=99)
                label = "%-8s %-5s %-7s %s%s" % (name, kind, str(dtype)[6:], args.path,
                                                  " joint" if args.joint else "")
                try:
                    if args.path == "torch-mlir":
                        step = import_via_torch_mlir(twin, loss_fn, data[0],
                                                     make_optimizer(kind, twin))
                    else:
                        step = ds_torch.export_training_step(
                            twin, loss_fn, data[0], make_optimizer(kind, twin),
                            joint=args.joint)
                    losses = train_torch(model, loss_fn, make_optimizer(kind, model), data)
                    if args.export:
                        case = "%s-%s-%s" % (name, kind, str(dtype)[6:])
                        export_case(step, data, losses, model, initial, dtype,
                                    os.path.join(args.export, case), args.chip,
                                    args.emulate_kernels)
                        print("exported %s" % label)
                        passed += 1
                        continue
                    with tempfile.TemporaryDirectory() as work:
                        ds_losses, ckpt = run_ds(step, work, data)
                        ok, wl, wp, bad = compare(name, dtype, ds_losses, losses, ckpt,
                                                  model, initial, step)
                except Exception as e:  # report and go on with the next case
                    print("FAIL %s: %s: %s" % (label, type(e).__name__, e))
                    failed += 1
                    continue
                print("%s %s loss %.4f -> %.4f; worst loss rel err %.1e, worst "
                      "tensor deviation %.1e%s%s" % (
                          "ok  " if ok else "FAIL", label, losses[0], losses[-1], wl, wp,
                          "".join("\n       " + b for b in bad),
                          "\n       " + step.import_report
                          if getattr(step, "import_report", None) else ""))
                passed += ok
                failed += not ok
    print("%d %s, %d failed" % (passed, "exported" if args.export else "passed", failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

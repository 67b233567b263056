#!/usr/bin/env python3
"""ds.fake_quant against torch.ao's kernels (and NumPy where torch has no
kernel), by running compiled code.

Each case is a step whose parameters are the input x, a cotangent w and the
quantization parameters, with loss = sum(fake_quant(x) * w). `ds-opt --ds-autodiff`
and one run of `ds-run --as-is` give grad.w = fake_quant(x) (the forward output, exactly)
and grad.x = the input gradient for the cotangent w; with a learned scale
also grad.scale and grad.zero_point. The inputs put values on rounding ties,
on the clamping bounds and outside them.

  forward and input gradient: bit-exact (f32) against
    torch.fake_quantize_per_tensor_affine / _per_channel_affine (STE),
    torch._fake_quantize_learnable_per_{tensor,channel}_affine (learned);
    per-group INT4 and FP8 against a NumPy / torch-dtype reference;
  learned scale and zero-point gradients (LSQ): within 1e-6 relative of an
    autograd reference written here (round with the straight-through
    estimator, LSQ's gradient scale 1 / sqrt(numel * qmax)), and of torch's
    _fake_quantize_learnable_* kernels on data without rounding ties.

Usage: check_fake_quant.py with DS_OPT and DS_RUN in the environment.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DS_RUN = os.environ.get("DS_RUN", "ds-run")
DS_OPT = os.environ.get("DS_OPT", "ds-opt")


def t(shape):
    return "tensor<%sf32>" % "".join("%dx" % d for d in shape)


def module(xshape, sshape, attrs, qmin, qmax):
    params = [("x", xshape), ("w", xshape), ("scale", sshape), ("zp", sshape)]
    args = ", ".join('%%%s: %s {ds.param = "%s", ds.init = #ds.init<file>}'
                     % (n, t(s), n) for n, s in params)
    dims = ", ".join(str(i) for i in range(len(xshape)))
    return "\n".join([
        "func.func @step(%s) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {" % args,
        "  %%qmin = arith.constant dense<%r> : tensor<f32>" % float(qmin),
        "  %%qmax = arith.constant dense<%r> : tensor<f32>" % float(qmax),
        "  %%y = ds.fake_quant %%x, %%scale, %%zp, %%qmin, %%qmax %s : %s, %s, tensor<f32>"
        % (attrs, t(xshape), t(sshape)),
        "  %%p = ds.mul %%y, %%w : %s, %s -> %s" % (t(xshape), t(xshape), t(xshape)),
        "  %%l = ds.reduce_sum %%p [%s] : %s -> tensor<f32>" % (dims, t(xshape)),
        "  return %l : tensor<f32>",
        "}", ""])


def run_ds(work, name, text, values):
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "params"))
    path = os.path.join(d, "step.mlir")
    with open(path, "w") as f:
        f.write(text)
    for n, v in values.items():
        np.save(os.path.join(d, "params", n + ".npy"), np.asarray(v, dtype=np.float32))
    grad = os.path.join(d, "grad.mlir")
    r = subprocess.run([DS_OPT, path, "--ds-autodiff", "-o", grad],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("ds-opt failed:\n" + r.stderr)
    out = os.path.join(d, "out")
    r = subprocess.run([DS_RUN, grad, "--as-is", "--steps", "1", "--quiet",
                        "--params", os.path.join(d, "params"), "--save-results", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("ds-run failed:\n" + r.stdout + r.stderr)
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out)}


def per_element(v, shape, axis, group):
    """A quantization parameter spread over the input's elements."""
    v = np.asarray(v, np.float32)
    if axis is None:
        return np.full(shape, v, np.float32)
    if group is None:
        view = [1] * len(shape)
        view[axis] = shape[axis]
        return np.broadcast_to(v.reshape(view), shape)
    return np.repeat(v, group, axis=axis)


def inputs(rng, shape, scale, ties=True):
    """Normal values plus far outliers and, with `ties`, exact ties
    (k + 0.5) * scale; `scale` is given per element."""
    x = rng.standard_normal(shape).astype(np.float32) * 2
    flat = x.reshape(-1)
    s = scale.reshape(-1)
    n = flat.size
    if ties:
        flat[: n // 4] = ((np.arange(n // 4) % 9 - 4) + 0.5) * s[: n // 4]
    flat[n // 4: n // 4 + 3] = [100.0, -100.0, 0.0]
    return x


def bits_equal(a, b):
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def check_case(work, rng, name, xshape, sshape, attrs, qmin, qmax, scale, zp, ref,
               ties=True):
    axis = int(attrs.split("axis = ")[1].split()[0]) if "axis" in attrs else None
    group = int(attrs.split("group_size = ")[1].split()[0]) if "group_size" in attrs \
        else None
    x = inputs(rng, xshape, per_element(scale, xshape, axis, group), ties)
    w = rng.standard_normal(xshape).astype(np.float32)
    got = run_ds(work, name, module(xshape, sshape, attrs, qmin, qmax),
                 {"x": x, "w": w, "scale": scale, "zp": zp})
    exp = ref(x, w)
    problems = []
    if not bits_equal(got["grad.w"], exp["y"]):
        problems.append("forward differs in %d elements" % int(np.sum(
            got["grad.w"].astype(np.float32).view(np.uint32) !=
            np.asarray(exp["y"], np.float32).view(np.uint32))))
    if "dx~" in exp:
        e = rel(got["grad.x"], exp["dx~"])
        if e > 1e-6:
            problems.append("input gradient rel err %.2e" % e)
    elif not bits_equal(got["grad.x"], exp["dx"]):
        problems.append("input gradient differs in %d elements" % int(np.sum(
            got["grad.x"].astype(np.float32).view(np.uint32) !=
            np.asarray(exp["dx"], np.float32).view(np.uint32))))
    worst = 0.0
    for k in ("scale", "zp"):
        if k in exp:
            e = rel(got["grad." + k], exp[k])
            worst = max(worst, e)
            if e > 1e-6:
                problems.append("%s gradient rel err %.2e" % (k, e))
    summary = "forward%s bit-exact" % ("" if "dx~" in exp else " and dx")
    if "dx~" in exp or "scale" in exp:
        summary += "; gradients within %.1e" % max(
            worst, rel(got["grad.x"], exp["dx~"]) if "dx~" in exp else 0.0)
    return problems, summary


def torch_ref(fn, learned=False):
    """The reference from a torch function of (x, scale, zero_point)."""
    def ref_for(scale, zp):
        def ref(x, w):
            xt = torch.tensor(x, requires_grad=True)
            # The learnable per-tensor kernel wants one-element tensors.
            shape = (1,) if learned and np.ndim(scale) == 0 else np.shape(scale)
            st = torch.tensor(scale).reshape(shape).requires_grad_(learned)
            zt = torch.tensor(zp).reshape(shape).requires_grad_(True) if learned \
                else torch.tensor(zp).to(torch.int32)
            y = fn(xt, st, zt)
            grads = torch.autograd.grad(y, [xt, st, zt] if learned else [xt],
                                        torch.tensor(w))
            out = {"y": y.detach().numpy(), "dx": grads[0].numpy()}
            if learned:
                out["scale"] = grads[1].numpy().reshape(np.shape(scale))
                out["zp"] = grads[2].numpy().reshape(np.shape(scale))
            return out
        return ref
    return ref_for


class RoundSTE(torch.autograd.Function):
    """round() with the straight-through gradient."""

    @staticmethod
    def forward(ctx, u):
        return torch.round(u)

    @staticmethod
    def backward(ctx, g):
        return g


class GradScale(torch.autograd.Function):
    """The identity whose gradient is scaled by `factor` (LSQ)."""

    @staticmethod
    def forward(ctx, v, factor):
        ctx.factor = factor
        return v.clone()

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


def lsq_ref(scale, zp, qmin, qmax, axis, grad_factor):
    """LSQ with a learned zero point, written with autograd: the zero point
    rounded (STE) and clamped, q = round(x * (1/s) + zp) with the STE,
    y = (clamp(q, qmin, qmax) - zp) * s, and the gradient scale on s and zp."""
    def ref(x, w):
        xt = torch.tensor(x, requires_grad=True)
        st = torch.tensor(scale, requires_grad=True)
        zt = torch.tensor(zp, requires_grad=True)
        s_ = GradScale.apply(st, grad_factor)
        z_ = GradScale.apply(zt, grad_factor)
        z_ = torch.clamp(RoundSTE.apply(z_), qmin, qmax)
        if axis is not None:
            view = [1] * x.ndim
            view[axis] = -1
            s_, z_ = s_.reshape(view), z_.reshape(view)
        inv = 1.0 / s_
        q = RoundSTE.apply(xt * inv + z_)
        y = (torch.clamp(q, qmin, qmax) - z_) * s_
        gx, gs, gz = torch.autograd.grad(y, [xt, st, zt], torch.tensor(w))
        # The forward is torch.ao's kernel (the zero point added after
        # rounding); s * (1/s) in the STE makes dx one ulp off 1 at places.
        with torch.no_grad():
            yf = (torch.clamp(z_ + torch.round(xt * inv), qmin, qmax) - z_) * s_
        return {"y": yf.numpy(), "dx~": gx.numpy(), "scale": gs.numpy(),
                "zp": gz.numpy()}
    return ref


def numpy_group_ref(scale, zp, qmin, qmax, g):
    """Per-group affine fake-quant along the last axis, torch.ao arithmetic."""
    def ref(x, w):
        s = np.repeat(scale, g, axis=-1).astype(np.float32)
        z = np.repeat(zp, g, axis=-1).astype(np.float32)
        inv = (np.float32(1.0) / s).astype(np.float32)
        q = z + np.rint((x * inv).astype(np.float32))
        y = ((np.clip(q, qmin, qmax) - z) * s).astype(np.float32)
        dx = (w * ((q >= qmin) & (q <= qmax))).astype(np.float32)
        return {"y": y, "dx": dx}
    return ref


def fp8_ref(scale, qmax, dtype):
    def ref(x, w):
        inv = np.float32(1.0) / np.float32(scale)
        v = (x * inv).astype(np.float32)
        q = torch.tensor(np.clip(v, -qmax, qmax)).to(dtype).float().numpy()
        y = (q * np.float32(scale)).astype(np.float32)
        dx = (w * ((v >= -qmax) & (v <= qmax))).astype(np.float32)
        return {"y": y, "dx": dx}
    return ref


def main():
    rng = np.random.default_rng(2024)
    failures = 0
    cases = []
    # Per tensor, quint8 with reduce_range (torch.ao's x86 activations).
    s, z = np.float32(0.05), np.float32(37)
    cases.append(("per_tensor_affine", [8, 12], [], "", 0, 127, s, z,
                  torch_ref(lambda x, s_, z_: torch.fake_quantize_per_tensor_affine(
                      x, s_, z_, 0, 127))(s, z)))
    # Per channel (axis 0), qint8 symmetric (torch.ao's x86 weights).
    sc = (rng.uniform(0.01, 0.05, 6)).astype(np.float32)
    zc = np.zeros(6, np.float32)
    cases.append(("per_channel_symmetric", [6, 10], [6], "axis = 0", -128, 127, sc, zc,
                  torch_ref(lambda x, s_, z_: torch.fake_quantize_per_channel_affine(
                      x, s_, z_, 0, -128, 127))(sc, zc)))
    # Per channel along axis 1 with non-zero zero points.
    sc1 = (rng.uniform(0.02, 0.06, 5)).astype(np.float32)
    zc1 = np.array([0, 3, -2, 7, 1], np.float32)
    cases.append(("per_channel_axis1", [4, 5, 3], [5], "axis = 1", -8, 7, sc1, zc1,
                  torch_ref(lambda x, s_, z_: torch.fake_quantize_per_channel_affine(
                      x, s_, z_, 1, -8, 7))(sc1, zc1)))
    # LSQ (learned scale and zero point, gradient scale 1/sqrt(N * qmax)):
    # against the autograd reference above (with ties), and against
    # torch.ao's learnable kernels on data without ties (at a tie their
    # per-tensor kernel rounds the zero point half away from zero and their
    # per-channel kernel fuses x * inv + zp into one FMA, so the two torch
    # kernels disagree with each other there).
    sl, zl = np.float32(0.07), np.float32(2.3)
    gf = 1.0 / np.sqrt(8 * 12 * 127)
    cases.append(("lsq_per_tensor", [8, 12], [], "learned grad_scaling", -128, 127, sl, zl,
                  lsq_ref(sl, zl, -128, 127, None, gf), True))
    cases.append(("learnable_per_tensor", [8, 12], [], "learned grad_scaling", -128, 127,
                  sl, zl,
                  torch_ref(lambda x, s_, z_: torch._fake_quantize_learnable_per_tensor_affine(
                      x, s_, z_, -128, 127, gf), learned=True)(sl, zl), False))
    slc = (rng.uniform(0.03, 0.08, 6)).astype(np.float32)
    zlc = np.array([0.0, 1.4, -2.6, 0.5, 3.0, -1.0], np.float32)
    cases.append(("lsq_per_channel", [6, 10], [6], "axis = 0 learned", -8, 7, slc, zlc,
                  lsq_ref(slc, zlc, -8, 7, 0, 1.0), True))
    cases.append(("learnable_per_channel", [6, 10], [6], "axis = 0 learned", -8, 7, slc,
                  zlc,
                  torch_ref(lambda x, s_, z_: torch._fake_quantize_learnable_per_channel_affine(
                      x, s_, z_, 0, -8, 7, 1.0), learned=True)(slc, zlc), False))
    # INT4 per group of 4 along the reduction axis (symmetric -8..7).
    sg = rng.uniform(0.05, 0.2, (3, 4)).astype(np.float32)
    zg = np.zeros((3, 4), np.float32)
    cases.append(("int4_per_group", [3, 16], [3, 4], "axis = 1 group_size = 4", -8, 7,
                  sg, zg, numpy_group_ref(sg, zg, -8, 7, 4)))
    # FP8 with a scale.
    for fmt, qmax, dt in (("f8E4M3FN", 448.0, torch.float8_e4m3fn),
                          ("f8E5M2", 57344.0, torch.float8_e5m2)):
        sf = np.float32(2.0 / qmax)
        cases.append(("fp8_" + fmt, [8, 12], [], "format = " + fmt, -qmax, qmax,
                      sf, np.float32(0), fp8_ref(sf, qmax, dt)))
    with tempfile.TemporaryDirectory() as work:
        for name, xshape, sshape, attrs, qmin, qmax, scale, zp, ref, *ties in cases:
            try:
                problems, summary = check_case(
                    work, rng, name, xshape, sshape, attrs, qmin, qmax,
                    np.asarray(scale, np.float32), np.asarray(zp, np.float32), ref,
                    *ties)
            except RuntimeError as e:
                problems, summary = [str(e)], ""
            print("%-4s %-24s %s" % ("ok" if not problems else "FAIL", name,
                                     "; ".join(problems) or summary))
            failures += bool(problems)
    print("%d passed, %d failed" % (len(cases) - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

//===- DSQuantOps.td - ds quantization ops -----------------*- tablegen -*-===//
//
// Quantization-aware training: ds.fake_quant (quantize-dequantize with
// torch.ao's exact arithmetic) and the kernel of its gradients. Included
// by DSOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSQUANTOPS_TD
#define DS_DIALECT_DS_IR_DSQUANTOPS_TD

class DS_FakeQuantBase<string mnemonic, list<Trait> traits = []>
    : DS_Op<mnemonic, !listconcat([Pure,
        AllTypesMatch<["scale", "zero_point"]>,
        AllTypesMatch<["qmin", "qmax"]>], traits)> {
  let hasVerifier = 1;
}

def DS_FakeQuantOp : DS_FakeQuantBase<"fake_quant", [
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface,
                              ["isDifferentiableOperand"]>]> {
  let summary = "Quantize-dequantize (fake quantization), as torch.ao";
  let description = [{
    Rounds `input` to the grid of a quantized type and back, in the
    arithmetic of torch.ao's `fake_quantize_per_tensor_affine` /
    `fake_quantize_per_channel_affine` kernels:

        inv = 1 / scale                      (in f32)
        q   = zero_point + nearbyint(x * inv) (ties to even)
        out = (clamp(q, qmin, qmax) - zero_point) * scale

    computed in f32 (f64 for f64 inputs) and rounded once to the input's
    type. The quantization parameters are operands, so that observers can
    compute them in the step and a bit-width can change at run time:
    `scale` and `zero_point` (one float type, integral zero points), and
    `qmin` / `qmax` as rank-0 tensors of that type (-128 / 127 for qint8,
    0 / 127 for quint8 with reduce_range, -8 / 7 for int4).

    Granularity, from the shape of `scale`:
    - per tensor: no `axis`, rank-0 `scale`;
    - per channel: `axis = a`, `scale` of shape `[input.shape[a]]`;
    - per group: `axis = a` and `group_size = g` (g divides
      `input.shape[a]`): `scale` has `input`'s shape with dimension `a`
      divided by g, and element i along `a` uses group `i / g` (torchao's
      groupwise weights group along the reduction axis).

    `format = f8E4M3FN` or `f8E5M2` quantizes to that FP8 format instead:
    `out = fp8(clamp(x * inv, qmin, qmax)) * scale`, rounding to nearest
    even (`zero_point` is unused and should be 0; qmax is the format's
    largest finite value, 448 or 57344, or less).

    Gradient (torch.ao's clipped straight-through estimator): `dx = dy`
    where `qmin <= q <= qmax` (for FP8, `qmin <= x * inv <= qmax`), 0
    elsewhere. `scale` and `zero_point` receive no gradient (observers set
    them) unless the op is `learned` (LSQ / LSQ+, torch.ao's
    `_LearnableFakeQuantize`): then the zero point is first rounded and
    clamped to `[qmin, qmax]`, `q = nearbyint(x * inv + zero_point)` (torch's
    learnable kernels add the zero point before rounding), and per element

        d scale      = dy * ((q - zp) * scale - x) / scale   inside the range,
                       dy * (qmin - zp) below, dy * (qmax - zp) above;
        d zero_point = dy * -scale outside the range, 0 inside;

    summed into `scale`'s shape and multiplied by the gradient scale
    `1 / sqrt(numel(input) * qmax)` when `grad_scaling` is set (LSQ's, as
    `_LearnableFakeQuantize(use_grad_scaling=True)`), by 1 otherwise.

    ```mlir
    %wq = ds.fake_quant %w, %s, %zp, %qmin, %qmax axis = 0
        : tensor<32x16xf32>, tensor<32xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$scale,
      DS_FloatTensor:$zero_point, DS_FloatTensor:$qmin, DS_FloatTensor:$qmax,
      OptionalAttr<I64Attr>:$axis, OptionalAttr<I64Attr>:$group_size,
      OptionalAttr<TypeAttr>:$format, UnitAttr:$learned,
      UnitAttr:$grad_scaling);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $zero_point `,` $qmin `,` $qmax
    (`axis` `=` $axis^)? (`group_size` `=` $group_size^)?
    (`format` `=` $format^)? (`learned` $learned^)?
    (`grad_scaling` $grad_scaling^)? attr-dict
    `:` type($input) `,` type($scale) `,` type($qmin)
  }];
}

def DS_FakeQuantGradOp : DS_FakeQuantBase<"fake_quant_grad", [
    AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "Per-element gradient of ds.fake_quant";
  let description = [{
    With the operands and attributes of the ds.fake_quant it belongs to
    and that op's result cotangent `grad`, computes per element of `input`
    the gradient of `of`: `input` gives `dx` itself; `scale` and
    `zero_point` give the per-element terms of a `learned` op's parameter
    gradients (see ds.fake_quant), before they are summed into the
    parameter's shape and scaled. Not differentiable itself.

    ```mlir
    %dx = ds.fake_quant_grad %x, %s, %zp, %qmin, %qmax, %dy of = input
        : tensor<8x16xf32>, tensor<f32>, tensor<f32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$scale,
      DS_FloatTensor:$zero_point, DS_FloatTensor:$qmin, DS_FloatTensor:$qmax,
      DS_FloatTensor:$grad, DS_FakeQuantGradOf:$of,
      OptionalAttr<I64Attr>:$axis, OptionalAttr<I64Attr>:$group_size,
      OptionalAttr<TypeAttr>:$format, UnitAttr:$learned);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $zero_point `,` $qmin `,` $qmax `,` $grad
    `of` `=` $of (`axis` `=` $axis^)? (`group_size` `=` $group_size^)?
    (`format` `=` $format^)? (`learned` $learned^)? attr-dict
    `:` type($input) `,` type($scale) `,` type($qmin)
  }];
}

def DS_QuantizeOp : DS_Op<"quantize", [Pure,
    AllTypesMatch<["scale", "zero_point"]>, AllTypesMatch<["qmin", "qmax"]>,
    AllShapesMatch<["input", "result"]>]> {
  let summary = "Quantize to integer grid indices, as torch.ao";
  let description = [{
    The integer half of ds.fake_quant: per element
    `clamp(zero_point + nearbyint(x * (1 / scale)), qmin, qmax)` (reciprocal
    in f32, ties to even), stored in the integer result type, which must
    hold [qmin, qmax], checked when they are constants (an 8-bit unsigned
    grid is stored shifted by -128: give zero_point, qmin and qmax
    shifted). Per tensor, or per channel with
    `axis`, as ds.fake_quant. Used by inference graphs that
    `ds-convert-fake-quant` builds; it has no gradient.

    ```mlir
    %wi = ds.quantize %w, %s, %zp, %qmin, %qmax axis = 0
        : tensor<32x16xf32>, tensor<32xf32>, tensor<f32> -> tensor<32x16xi8>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$scale,
      DS_FloatTensor:$zero_point, DS_FloatTensor:$qmin, DS_FloatTensor:$qmax,
      OptionalAttr<I64Attr>:$axis);
  let results = (outs DS_IntTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $zero_point `,` $qmin `,` $qmax
    (`axis` `=` $axis^)? attr-dict
    `:` type($input) `,` type($scale) `,` type($qmin) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_QuantizedMatMulOp : DS_Op<"quantized_matmul", [Pure,
    AllTypesMatch<["lhs_scale", "lhs_zero_point"]>,
    AllTypesMatch<["rhs_scale", "rhs_zero_point"]>]> {
  let summary = "Integer matmul of quantized activations and weights";
  let description = [{
    `lhs` holds the grid indices of activations quantized per tensor with
    `lhs_scale` and `lhs_zero_point` (shape `[..., M, K]`), `rhs` those of a
    weight quantized per tensor or per output channel with `rhs_scale` and
    `rhs_zero_point` (shape `[K, N]`, or `[N, K]` with `transpose_rhs`;
    scale and zero point rank 0, or of shape `[N]` per channel). The result
    is the product of the dequantized operands,

        acc[p, n] = sum_k lhs[p, k] * rhs[k, n]                  (exact, i32)
        result    = (acc - zx * sum_k rhs[k, n] - zw[n] * sum_k lhs[p, k]
                     + K * zx * zw[n]) * (lhs_scale * rhs_scale[n])   (f32)

    i.e. ds.matmul of the two ds.fake_quant values it replaces, with the sum
    done exactly in integers instead of rounded in f32 (zero points are
    integral). The integer GEMM runs in the runtime (oneDNN's int8 kernels,
    exact on every CPU: see dsrt_matmul_s8s8s32). Not
    differentiable: it is for inference.

    ```mlir
    %y = ds.quantized_matmul %xi, %wi, %sx, %zx, %sw, %zw transpose_rhs
        : tensor<64x16xi8>, tensor<32x16xi8>, tensor<f32>, tensor<32xf32>
        -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins DS_IntTensor:$lhs, DS_IntTensor:$rhs,
      DS_FloatTensor:$lhs_scale, DS_FloatTensor:$lhs_zero_point,
      DS_FloatTensor:$rhs_scale, DS_FloatTensor:$rhs_zero_point,
      UnitAttr:$transpose_rhs);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $lhs_scale `,` $lhs_zero_point `,` $rhs_scale `,`
    $rhs_zero_point (`transpose_rhs` $transpose_rhs^)? attr-dict
    `:` type($lhs) `,` type($rhs) `,` type($lhs_scale) `,` type($rhs_scale)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // DS_DIALECT_DS_IR_DSQUANTOPS_TD

//===- DSSparseOps.td - ds block-sparsity ops --------------*- tablegen -*-===//
//
// Dynamic block sparsity (ds-sparsify-matmul): the block-sparse product of
// a linear layer, the weight gradient sampled on its mask, and the top-k
// selection mask updates are built from. Masks are dense i8 tensors with one
// element per block of the weight (nonzero: the block is active), so a mask
// update rewrites a small tensor and never changes the weight's layout.
// Included by DSOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSSPARSEOPS_TD
#define DS_DIALECT_DS_IR_DSSPARSEOPS_TD

def DS_MaskTensor : RankedTensorOf<[I8]>;

def DS_BlockSparseMatMulOp : DS_Op<"block_sparse_matmul", [Pure,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface,
                              ["isDifferentiableOperand"]>]> {
  let summary = "Product with a block-sparse weight";
  let description = [{
    `result = input * op(weight (.) expand(mask))`: the weight `[R, C]` is
    used only on the `block x block` blocks whose element of `mask`
    (`[R / block, C / block]`, i8, nonzero: active) is set; what the weight
    holds elsewhere is ignored. `op` transposes the weight when
    `transpose_weight` is set: then `input` is `[..., C]` and the result
    `[..., R]` (a linear layer `x W^T` with `W = [out, in]`); otherwise
    `input` is `[..., R]` and the result `[..., C]`. Leading dimensions of
    `input` are batch dimensions the weight is shared by.

    Gradient: `d input = d result * op^T(weight (.) expand(mask))` (the same
    sparse weight, the other orientation), and `d weight` is the
    `ds.block_sampled_matmul` of the two on `mask`: the dense gradient of
    the masked weight, kept on the active blocks only (zero elsewhere).
    The mask receives no gradient.

    ```mlir
    %y = ds.block_sparse_matmul %x, %w, %m block = 8 transpose_weight
        : tensor<4x32x64xf32>, tensor<128x64xf32>, tensor<16x8xi8>
          -> tensor<4x32x128xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       DS_MaskTensor:$mask, I64Attr:$block,
                       UnitAttr:$transpose_weight);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $mask `block` `=` $block
    (`transpose_weight` $transpose_weight^)? attr-dict
    `:` type($input) `,` type($weight) `,` type($mask) `->` type($result)
  }];
  let hasVerifier = 1;
  let builders = [
    // Infers the result type.
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$weight,
                   "::mlir::Value":$mask, "int64_t":$block,
                   "bool":$transposeWeight)>
  ];
}

def DS_BlockSampledMatMulOp : DS_Op<"block_sampled_matmul", [Pure]> {
  let summary = "lhs^T * rhs on the active blocks of a mask (SDDMM)";
  let description = [{
    `result[r, c] = sum_m lhs[m, r] * rhs[m, c]` where the block of `(r, c)`
    is active in `mask` (`[R / block, C / block]`, i8, nonzero: active),
    and exactly 0 elsewhere. `lhs` is `[..., R]` and `rhs` `[..., C]` with
    the same leading dimensions, which are summed over (the rows `m`). The
    weight gradient of `ds.block_sparse_matmul`; on a mask that is all ones
    it is the dense product. Not differentiable.

    ```mlir
    %dw = ds.block_sampled_matmul %dy, %x, %m block = 8
        : tensor<4x32x128xf32>, tensor<4x32x64xf32>, tensor<16x8xi8>
          -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$lhs, DS_FloatTensor:$rhs,
                       DS_MaskTensor:$mask, I64Attr:$block);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $mask `block` `=` $block attr-dict
    `:` type($lhs) `,` type($rhs) `,` type($mask) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_TopKMaskOp : DS_Op<"top_k_mask", [Pure]> {
  let summary = "Marks the k largest elements";
  let description = [{
    An i8 tensor of `scores`' shape with 1 on the `k` largest elements of
    `scores` (over all of it, in row-major order) and 0 elsewhere. Among
    equal scores the higher index ranks higher (a stable ascending sort's
    tail: the lower index is dropped first); NaN ranks lowest. `k` (a
    rank-0 i64) is clamped to `[0, numel]`. Mask updates select the blocks
    to keep and to grow with it. Not differentiable.

    ```mlir
    %keep = ds.top_k_mask %scores, %k
        : tensor<16x8xf32>, tensor<i64> -> tensor<16x8xi8>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$scores, RankedTensorOf<[I64]>:$k);
  let results = (outs DS_MaskTensor:$result);
  let assemblyFormat = [{
    $scores `,` $k attr-dict `:` type($scores) `,` type($k) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // DS_DIALECT_DS_IR_DSSPARSEOPS_TD

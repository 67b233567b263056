//===- NarrowGemmOutputs.h - Library GEMMs that write bf16 or f16 --*- C++
//-*-===//
//
// A mixed-precision step rounds a matmul's f32 product to bf16 where the
// policy stores it so (`storage: bf16`): after fusion every reader of the
// product's buffer applies `arith.truncf` to it. cuBLASLt can round in its
// epilogue instead (its D type), which halves the product's write and every
// read of it, after an FP8 GEMM's dequantisation scale and a linear layer's
// bias, which the epilogue applies too. These helpers find such buffers and
// retype them.
//
//===----------------------------------------------------------------------===//

#ifndef DS_CONVERSION_LINALGTORUNTIME_NARROWGEMMOUTPUTS_H
#define DS_CONVERSION_LINALGTORUNTIME_NARROWGEMMOUTPUTS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace mlir::ds {

/// What every reader of a library GEMM's f32 product does to each element
/// before anything else, which cuBLASLt's epilogue can do instead:
///
///   truncf( [mulf(p, scale)]  [addf(., extf(bias))] ) to `type`
///
/// `scale` (FP8 only) is the same at every iteration (computed from rank-0
/// or broadcast buffers and constants), `bias` the same along the product's
/// rows: a value of `type` computed from buffers read only at the reader's
/// loop along the product's columns (N) and constants, as a linear layer's
/// bias is. The GEMM then writes `type` (its D type): half the product's
/// write and of every read of it.
struct GemmEpilogue {
  FloatType type;
  /// The dequantisation scale, as `scaleReader`'s payload computes it, or
  /// null.
  linalg::GenericOp scaleReader;
  Value scale;
  /// The bias in `type` (the operand of the extf), as `biasReader`'s
  /// payload computes it at its loop `biasLoop`, or null.
  linalg::GenericOp biasReader;
  Value bias;
  unsigned biasLoop = 0;
};

/// The epilogue of `gemm`'s output, when its buffer is a `memref.alloc` of
/// static shape in `gemm`'s block that only `gemm` writes (as its sole
/// output) and that is otherwise only read, after `gemm`, directly or
/// through `memref.expand_shape` / `memref.collapse_shape`, as inputs of
/// `linalg.generic` ops whose payloads use the element only as above, with
/// one type, scale and bias for all (default rounding; a scale only with
/// `allowScale`; a bias only where the views keep the last dimension whole).
/// The buffers the scale and bias read must be defined before `gemm` and
/// not written between `gemm` and its readers. `ignore` is a user about to
/// be erased (the zero fill a library call replaces). The type is bf16 or
/// f16. nullopt otherwise.
std::optional<GemmEpilogue> gemmEpilogue(linalg::LinalgOp gemm, bool allowScale,
                                         Operation *ignore = nullptr);

/// The buffers a library call takes for an applied epilogue: the scale (a
/// rank-0 f32) and the bias (a rank-1 buffer of N elements of the type),
/// each null when absent.
struct EpilogueBuffers {
  Value scale, bias;
};

/// Applies `e` (from gemmEpilogue): computes the scale and the bias into
/// new buffers right before `gemm` (generics cloned from the reader's
/// payload), then retypes the output buffer and its views to `e.type`;
/// the readers' block arguments take that type and their multiply, add and
/// truncf fold away. Exact when the GEMM applies the scale to its FP32 sum,
/// adds the bias, and rounds once to nearest even, as cuBLASLt does.
EpilogueBuffers applyEpilogue(linalg::LinalgOp gemm, const GemmEpilogue &e);

} // namespace mlir::ds

#endif // DS_CONVERSION_LINALGTORUNTIME_NARROWGEMMOUTPUTS_H

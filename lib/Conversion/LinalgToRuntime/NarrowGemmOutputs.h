//===- NarrowGemmOutputs.h - Library GEMMs that write bf16 or f16 --*- C++
//-*-===//
//
// A mixed-precision step rounds a matmul's f32 product to bf16 where the
// policy stores it so (`storage: bf16`): after fusion every reader of the
// product's buffer applies `arith.truncf` to it. cuBLASLt can round in its
// epilogue instead (its D type), which halves the product's write and every
// read of it. These helpers find such buffers and retype them.
//
//===----------------------------------------------------------------------===//

#ifndef DS_CONVERSION_LINALGTORUNTIME_NARROWGEMMOUTPUTS_H
#define DS_CONVERSION_LINALGTORUNTIME_NARROWGEMMOUTPUTS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace mlir::ds {

/// The type every reader of `gemm`'s output buffer rounds it to, when the
/// buffer can hold that type instead: it is a `memref.alloc` of static
/// shape in `gemm`'s block that only `gemm` writes (as its sole output)
/// and that is otherwise only read, after `gemm`, directly or through
/// `memref.expand_shape` / `memref.collapse_shape`, as inputs of
/// `linalg.generic` ops whose payloads use the element only through
/// `arith.truncf` to that one type (default rounding), or freed. `ignore` is a
/// user about to be erased (the zero fill a library call replaces). nullopt
/// otherwise.
std::optional<FloatType> roundedOutputType(linalg::LinalgOp gemm,
                                           Operation *ignore = nullptr);

/// Retypes the output buffer of `gemm` (checked by roundedOutputType) to
/// `type`: the alloc and its reshapes change element type, the readers'
/// block arguments become `type` and their `arith.truncf`s fold away.
/// Exact: each reader sees the value its truncf produced, provided the
/// writer rounds to nearest even as arith.truncf does.
void narrowOutputBuffer(linalg::LinalgOp gemm, FloatType type);

/// An FP8 GEMM's product as every reader uses it: multiplied by one
/// dequantisation scale, which the readers compute from values that are
/// the same at every iteration (rank-0 or broadcast buffers, constants),
/// then rounded to `type` (bf16).
struct ScaledRounding {
  FloatType type;
  /// The scale in the first reader's payload (the one to compute).
  linalg::GenericOp reader;
  Value scale;
};

/// The ScaledRounding of `gemm`'s output, when its buffer is as
/// roundedOutputType requires except that each reader's element goes
/// through `arith.mulf` by the scale before its truncf, every reader's
/// scale is the same computation on the same buffers, those buffers are
/// defined before `gemm` and nothing writes them between `gemm` and the
/// readers.
std::optional<ScaledRounding> scaledRoundedOutput(linalg::LinalgOp gemm,
                                                  Operation *ignore = nullptr);

/// Computes the scale of `r` into a new rank-0 f32 buffer right before
/// `gemm` (a rank-0 linalg.generic cloned from the reader's payload), then
/// retypes `gemm`'s output buffer to `r.type` with the readers' multiply
/// and truncf folded away. Returns the scale buffer, for the GEMM's scale
/// pointer: exact when the GEMM applies the scale to its FP32 sum before
/// its one rounding, as cuBLASLt does.
Value narrowScaledOutputBuffer(linalg::LinalgOp gemm, ScaledRounding r);

} // namespace mlir::ds

#endif // DS_CONVERSION_LINALGTORUNTIME_NARROWGEMMOUTPUTS_H

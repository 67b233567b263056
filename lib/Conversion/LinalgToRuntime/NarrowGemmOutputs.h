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

} // namespace mlir::ds

#endif // DS_CONVERSION_LINALGTORUNTIME_NARROWGEMMOUTPUTS_H

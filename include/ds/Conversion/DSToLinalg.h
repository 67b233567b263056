//===- DSToLinalg.h - Lower ds to linalg -----------------------*- C++ -*-===//

#ifndef DS_CONVERSION_DSTOLINALG_H
#define DS_CONVERSION_DSTOLINALG_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::ds {

/// Whether convert-ds-to-runtime turns `op` into a call to a runtime kernel
/// (f32 block-sparse products with blocks of a multiple of 8; top-k masks
/// of f32 or f64 scores; every collective). convert-ds-to-linalg with
/// `runtime-kernels` leaves exactly these ops for it.
bool hasRuntimeKernel(Operation *op);

/// Whether `op` is a collective (ds.all_reduce, ds.all_reduce_start/wait,
/// ds.comm_broadcast, ds.comm_rank): only the runtime runs them, so every
/// lowering leaves them to convert-ds-to-runtime.
bool isCollective(Operation *op);

/// Adds the patterns that lower every ds op to linalg, tensor, arith, math
/// and scf ops on tensors.
/// With `narrowGemms`, matmuls keep bf16/f16 operands, and with `fp8Gemms`
/// the E4M3 operands cuBLASLt's FP8 GEMM takes (see the pass's options).
void populateDSToLinalgPatterns(RewritePatternSet &patterns,
                                bool narrowGemms = false,
                                bool fp8Gemms = false);

} // namespace mlir::ds

#endif // DS_CONVERSION_DSTOLINALG_H

//===- DSToLinalg.h - Lower ds to linalg -----------------------*- C++ -*-===//

#ifndef DS_CONVERSION_DSTOLINALG_H
#define DS_CONVERSION_DSTOLINALG_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

#include <string>

namespace mlir::ds {

/// Why cuBLASLt's FP8 GEMM cannot take a matmul of these operands (the ds
/// matmul's lhs and rhs and its transpose flags), or "" when it can: E4M3 x
/// E4M3 or E4M3 with E5M2 (it has no E5M2 x E5M2 kernel), a 2-D rhs, a
/// 2-D lhs when it is transposed, and M, N, K multiples of 16. Only for
/// operands that are both FP8. convert-ds-to-linalg{fp8-gemms} keeps
/// exactly these FP8; ds-check-gpu-support warns about the others.
std::string fp8GemmObstacle(RankedTensorType lhs, RankedTensorType rhs,
                            bool transposeLhs, bool transposeRhs);

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

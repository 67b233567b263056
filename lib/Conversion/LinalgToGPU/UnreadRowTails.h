//===- UnreadRowTails.h - Entries no one reads above a block diagonal -*- C++
//-*-===//
//
// Causal attention's probabilities and their gradient are score-sized
// matrices whose readers all stop at the diagonal: the library GEMMs run
// over the lower block triangle (ds.causal_gemm, one GEMM per block of B
// rows or columns), and the fused kernels skip what a causal select
// discards (MaskedReads.h). The kernel that writes such a matrix then need
// not store the tail of row i past its diagonal block, columns
// [(i / B + 1) * B, cols): 37.5 % of a 1024-token matrix for B = 256, a
// fifth of each softmax kernel's traffic. Writing more than is read is
// always correct; the analysis only has to show that nothing reads a tail,
// so it accepts known readers and refuses anything else. Internal to
// lib/Conversion/LinalgToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_UNREADROWTAILS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_UNREADROWTAILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::ds::gpu_kernels {

/// On a linalg.generic while convert-linalg-to-ds-gpu runs: for each of its
/// outputs, the block B whose row tails nothing reads (0: read anywhere).
constexpr llvm::StringLiteral kUnreadRowTailsAttr = "ds.gpu_unread_row_tails";

/// Row `row`'s first unread column: min(cols, (row / block + 1) * block).
int64_t rowTailStart(int64_t row, int64_t block, int64_t cols);

/// The same computed at run time for an index `row`.
Value emitRowTailStart(OpBuilder &b, Location loc, Value row, int64_t block,
                       int64_t cols);

/// The fraction of a rows x cols matrix outside the row tails.
double rowHeadsFraction(int64_t rows, int64_t cols, int64_t block);

/// Puts kUnreadRowTailsAttr on every linalg.generic of `f` that writes a
/// buffer whose row tails (its last two dimensions a matrix) nothing in
/// `f` reads. The buffer is an allocation of static shape; every use,
/// through views that keep its last two dimensions, is
///   - a write: a generic's output its body does not read, a fill, a
///     dealloc;
///   - a library GEMM (dsrt_cuda_matmul_*) on a static unit-stride
///     subview, all of whose rows [r0, r1) stop at columns c1 <=
///     rowTailStart(r0): the GEMM's operand is read (or written) whole;
///   - a generic's input whose every use a causal select discards on the
///     tails (unusedOnRowTails, MaskedReads.h).
/// B is the widest first-row block of those GEMMs (1 when there is none:
/// the masked readers alone stop at the diagonal itself).
void markUnreadRowTails(func::FuncOp f);

/// The block of kUnreadRowTailsAttr on `op` for its output `init`, if any.
std::optional<int64_t> unreadRowTailsBlock(linalg::GenericOp op,
                                           OpOperand &init);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_UNREADROWTAILS_H

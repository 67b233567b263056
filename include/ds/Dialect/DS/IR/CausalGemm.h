//===- CausalGemm.h - Triangular structure of attention GEMMs --*- C++ -*-===//
//
// Causal attention multiplies matrices that are half empty: the scores'
// entries above the diagonal are masked away, and the probabilities and
// their gradients are zero there. A `ds.causal_gemm` annotation on a matmul
// (ds.matmul, linalg.matmul / batch_matmul) records which of its operands
// has that structure, in terms of the logical product
//
//   C[m, n] = sum_k A[m, k] * B[k, n]     (A: M x K, B: K x N, C: M x N)
//
// whatever transposes store them, so that the library-GEMM lowering can run
// it as one GEMM per block of `block` rows (or, for a structured rhs,
// columns) of C over just the columns and depth that block needs
// (convert-linalg-to-ds-runtime). The diagonals are those of
// ds.causal_mask: entry (i, j) of an R x S matrix lies above it where
// j > i + (S - R).
//
//   {block = 256 : i64, result = "lower"}  only C's entries on and below
//                                          the diagonal are ever read
//   {block = 256 : i64, lhs = "lower"}     A is zero above its diagonal
//   {block = 256 : i64, lhs = "upper"}     A is zero below its diagonal (A
//                                          is the transpose of a matrix
//                                          that is zero above its own)
//   {block = 256 : i64, rhs = "lower"}     B is zero above its diagonal
//   {block = 256 : i64, rhs = "upper"}     B is zero below its diagonal
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_CAUSALGEMM_H
#define DS_DIALECT_DS_IR_CAUSALGEMM_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace mlir::ds {

struct CausalGemm {
  /// Where an operand is known to be zero: nowhere, above its diagonal
  /// (it is lower triangular), or below it.
  enum class Operand { Dense, Lower, Upper };
  /// Rows (columns) of C per GEMM call.
  int64_t block = 0;
  Operand lhs = Operand::Dense;
  Operand rhs = Operand::Dense;
  /// Only C's entries on and below its diagonal are read.
  bool resultLower = false;

  bool any() const {
    return lhs != Operand::Dense || rhs != Operand::Dense || resultLower;
  }
};

/// The op's `ds.causal_gemm` annotation, if it has a well-formed one.
std::optional<CausalGemm> getCausalGemm(Operation *op);
/// Sets (or, for a structure with nothing known, removes) the annotation.
void setCausalGemm(Operation *op, const CausalGemm &gemm);
/// Checks an annotation's value (the dialect's attribute verifier).
LogicalResult verifyCausalGemmAttr(Operation *op, Attribute value);

/// Whether `v` is a ds.causal_mask with fill -inf, through casts (which
/// keep -inf): a softmax of it along the last axis is 0 above the diagonal.
bool isCausallyMasked(Value v);
/// Whether `v` (rank >= 2) is zero above the diagonal of its last two
/// dimensions: a causal mask with fill 0, a last-axis softmax of a causally
/// masked tensor, and casts, products with a finite constant, quotients by
/// a finite nonzero one, reshapes of the batch dimensions and dropouts of
/// these.
/// (A row whose other entries are not finite may have NaN there in exact
/// arithmetic; the GEMMs then leave out a NaN that is not alone in its row,
/// as flash attention does.)
bool isZeroAboveDiagonal(Value v);
/// Whether every reader of `v` sees only its entries on and below the
/// diagonal: all its uses reach a ds.causal_mask through casts, products
/// with and quotients by a finite constant, reshapes of the batch
/// dimensions and dropouts, which keep each entry in its place in its
/// matrix, or sums, differences, products and quotients with other
/// tensors that do not broadcast `v` (what an entry above the diagonal
/// holds stays above it, for the mask to replace).
bool isReadOnlyOnAndBelowDiagonal(Value v);
/// What is known of a ds.matmul's structure (nothing: `any()` is false),
/// to be run in blocks of `block` rows.
CausalGemm analyzeCausalMatMul(Operation *matmul, int64_t block);

/// Blocks of an M x N x K product with `gemm`'s structure: the rows and
/// columns of C each computes and the depth it sums over. Row blocks when
/// the lhs or the result is structured, else column blocks (a structured
/// rhs). Empty when splitting saves nothing or would leave some block
/// with no depth (then one GEMM it stays).
struct CausalGemmBlock {
  int64_t rowBegin, rowEnd, colBegin, colEnd, depthBegin, depthEnd;
};
SmallVector<CausalGemmBlock> causalGemmBlocks(const CausalGemm &gemm, int64_t m,
                                              int64_t n, int64_t k);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_IR_CAUSALGEMM_H

//===- CausalGemmTest.cpp - Blocks of causal attention's GEMMs ------------===//
//
// causalGemmBlocks against a plain loop: every entry of C that is read lies
// in exactly one block, which sums every term A[i, l] B[l, j] that is not
// known to be zero.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/CausalGemm.h"

#include "gtest/gtest.h"

#include <tuple>

using namespace mlir;
using namespace mlir::ds;

namespace {

using Operand = CausalGemm::Operand;

/// Whether entry (i, l) of an R x S operand with structure `o` may be
/// nonzero.
bool mayBeNonzero(Operand o, int64_t i, int64_t l, int64_t r, int64_t s) {
  if (o == Operand::Lower)
    return l <= i + (s - r);
  if (o == Operand::Upper)
    return l >= i - (r - s);
  return true;
}

/// Whether the blocks give every entry of C that is read every term that
/// may be nonzero, exactly once; `work` is the blocks' multiply-adds.
bool coversEveryTerm(const CausalGemm &g, int64_t m, int64_t n, int64_t k,
                     int64_t &work) {
  SmallVector<CausalGemmBlock> blocks = causalGemmBlocks(g, m, n, k);
  work = 0;
  for (const CausalGemmBlock &b : blocks)
    work += (b.rowEnd - b.rowBegin) * (b.colEnd - b.colBegin) *
            (b.depthEnd - b.depthBegin);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (g.resultLower && j > i + (n - m))
        continue;
      const CausalGemmBlock *owner = nullptr;
      for (const CausalGemmBlock &b : blocks)
        if (b.rowBegin <= i && i < b.rowEnd && b.colBegin <= j &&
            j < b.colEnd) {
          if (owner)
            return false; // written twice
          owner = &b;
        }
      if (!owner)
        return false;
      for (int64_t l = 0; l < k; ++l)
        if (mayBeNonzero(g.lhs, i, l, m, k) &&
            mayBeNonzero(g.rhs, l, j, k, n) &&
            (l < owner->depthBegin || l >= owner->depthEnd))
          return false;
    }
  return true;
}

TEST(CausalGemmTest, SquareAttentionSavesTheUpperBlocks) {
  // 8 blocks of a square: one structure leaves block i (i + 1) / 8 of its
  // row (column) of blocks, (1 + 2 + ... + 8) / 64 = 9/16 of the work; an
  // lhs and a result structure at once (none of attention's products has
  // both), less.
  const int64_t cube = int64_t(256) * 256 * 256;
  for (auto [lhs, rhs, resultLower] :
       {std::tuple{Operand::Dense, Operand::Dense, true},
        {Operand::Lower, Operand::Dense, false},
        {Operand::Upper, Operand::Dense, false},
        {Operand::Dense, Operand::Lower, false},
        {Operand::Dense, Operand::Upper, false},
        {Operand::Lower, Operand::Dense, true},
        {Operand::Upper, Operand::Dense, true}}) {
    CausalGemm g{32, lhs, rhs, resultLower};
    int64_t work = 0;
    ASSERT_TRUE(coversEveryTerm(g, 256, 256, 256, work));
    EXPECT_EQ(causalGemmBlocks(g, 256, 256, 256).size(), 8u);
    if (lhs == Operand::Dense || !resultLower)
      EXPECT_EQ(work * 16, cube * 9);
    else
      EXPECT_LT(work * 16, cube * 9);
  }
}

TEST(CausalGemmTest, RaggedAndRectangular) {
  // A ragged last block, and diagonals offset by N - M, K - M or N - K (a
  // query block that sees earlier keys).
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{200, 200, 16},
                         {200, 16, 200},
                         {16, 200, 200},
                         {150, 16, 300},
                         {300, 16, 150},
                         {16, 300, 150},
                         {16, 150, 300},
                         {100, 260, 16}})
    for (auto lhs : {Operand::Dense, Operand::Lower, Operand::Upper})
      for (auto rhs : {Operand::Dense, Operand::Lower, Operand::Upper})
        for (bool resultLower : {false, true}) {
          CausalGemm g{64, lhs, rhs, resultLower};
          int64_t work = 0;
          if (causalGemmBlocks(g, m, n, k).empty())
            continue;
          EXPECT_TRUE(coversEveryTerm(g, m, n, k, work))
              << m << "x" << n << "x" << k;
          EXPECT_LT(work, m * n * k);
        }
}

TEST(CausalGemmTest, OneGemmWhereSplittingCannotHelp) {
  // Nothing known, one block, or a block whose rows have no terms (they
  // need zeros, which one GEMM writes).
  EXPECT_TRUE(
      causalGemmBlocks(CausalGemm{64, Operand::Dense, Operand::Dense, false},
                       256, 256, 256)
          .empty());
  EXPECT_TRUE(
      causalGemmBlocks(CausalGemm{256, Operand::Lower, Operand::Dense, true},
                       256, 256, 256)
          .empty());
  EXPECT_TRUE(
      causalGemmBlocks(CausalGemm{64, Operand::Lower, Operand::Dense, false},
                       256, 16, 100)
          .empty());
  EXPECT_TRUE(
      causalGemmBlocks(CausalGemm{64, Operand::Dense, Operand::Upper, false},
                       16, 256, 100)
          .empty());
}

} // namespace

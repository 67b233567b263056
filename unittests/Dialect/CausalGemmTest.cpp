//===- CausalGemmTest.cpp - Row blocks of causal attention's GEMMs --------===//
//
// causalGemmBlocks against a plain loop: for every row block, every entry
// of C that is read gets every nonzero term of its sum, and nothing the
// structure rules out is computed.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/CausalGemm.h"

#include "gtest/gtest.h"

#include <tuple>
#include <utility>

using namespace mlir;
using namespace mlir::ds;

namespace {

using Lhs = CausalGemm::Lhs;

/// Whether the blocks give C[i, j] every term A[i, l] B[l, j] with A[i, l]
/// possibly nonzero, for every (i, j) that is read, and the GEMMs' work.
bool coversEveryTerm(const CausalGemm &g, int64_t m, int64_t n, int64_t k,
                     int64_t &work) {
  SmallVector<CausalGemmBlock> blocks = causalGemmBlocks(g, m, n, k);
  work = 0;
  for (const CausalGemmBlock &b : blocks)
    work += (b.rowEnd - b.rowBegin) * b.columns * (b.depthEnd - b.depthBegin);
  for (int64_t i = 0; i < m; ++i) {
    const CausalGemmBlock *row = nullptr;
    for (const CausalGemmBlock &b : blocks)
      if (b.rowBegin <= i && i < b.rowEnd)
        row = &b;
    for (int64_t j = 0; j < n; ++j) {
      bool read = !g.resultLower || j <= i + (n - m);
      if (!read)
        continue;
      if (!row || j >= row->columns)
        return false;
      for (int64_t l = 0; l < k; ++l) {
        bool nonzero = g.lhs == Lhs::Lower   ? l <= i + (k - m)
                       : g.lhs == Lhs::Upper ? l >= i - (m - k)
                                             : true;
        if (nonzero && (l < row->depthBegin || l >= row->depthEnd))
          return false;
      }
    }
  }
  return true;
}

TEST(CausalGemmTest, SquareAttentionSavesTheUpperBlocks) {
  // 8 blocks of a square: one structure leaves block i (i + 1) / 8 of its
  // row of blocks, (1 + 2 + ... + 8) / 64 = 9/16 of the work; both at once
  // (none of attention's products has both), less.
  const int64_t cube = int64_t(256) * 256 * 256;
  for (auto [lhs, resultLower] : {std::pair{Lhs::Dense, true},
                                  {Lhs::Lower, false},
                                  {Lhs::Upper, false},
                                  {Lhs::Lower, true},
                                  {Lhs::Upper, true}}) {
    CausalGemm g{32, lhs, resultLower};
    int64_t work = 0;
    ASSERT_TRUE(coversEveryTerm(g, 256, 256, 256, work));
    EXPECT_EQ(causalGemmBlocks(g, 256, 256, 256).size(), 8u);
    if (lhs == Lhs::Dense || !resultLower)
      EXPECT_EQ(work * 16, cube * 9);
    else
      EXPECT_LT(work * 16, cube * 9);
  }
}

TEST(CausalGemmTest, RaggedAndRectangular) {
  // A last block of 72 rows, and diagonals offset by N - M or K - M (a
  // query block that sees earlier keys).
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{200, 200, 16},
                         {200, 16, 200},
                         {150, 16, 300},
                         {300, 16, 150},
                         {100, 260, 16}})
    for (auto lhs : {Lhs::Dense, Lhs::Lower, Lhs::Upper})
      for (bool resultLower : {false, true}) {
        CausalGemm g{64, lhs, resultLower};
        int64_t work = 0;
        if (causalGemmBlocks(g, m, n, k).empty())
          continue;
        EXPECT_TRUE(coversEveryTerm(g, m, n, k, work))
            << m << "x" << n << "x" << k;
        EXPECT_LT(work, m * n * k);
      }
}

TEST(CausalGemmTest, OneGemmWhereSplittingCannotHelp) {
  // Nothing known, one block of rows, or a block whose rows have no terms
  // (they need zeros, which one GEMM writes).
  EXPECT_TRUE(causalGemmBlocks(CausalGemm{64, Lhs::Dense, false}, 256, 256, 256)
                  .empty());
  EXPECT_TRUE(causalGemmBlocks(CausalGemm{256, Lhs::Lower, true}, 256, 256, 256)
                  .empty());
  EXPECT_TRUE(causalGemmBlocks(CausalGemm{64, Lhs::Lower, false}, 256, 16, 100)
                  .empty());
}

} // namespace

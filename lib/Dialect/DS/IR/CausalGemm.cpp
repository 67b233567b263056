//===- CausalGemm.cpp - Triangular structure of attention GEMMs -----------===//

#include "ds/Dialect/DS/IR/CausalGemm.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::ds;

static constexpr StringLiteral kBlock = "block", kLhs = "lhs",
                               kResult = "result";

std::optional<CausalGemm> mlir::ds::getCausalGemm(Operation *op) {
  auto dict = op->getAttrOfType<DictionaryAttr>(DSDialect::kCausalGemmAttrName);
  if (!dict)
    return std::nullopt;
  CausalGemm gemm;
  auto block = dict.getAs<IntegerAttr>(kBlock);
  if (!block || block.getInt() <= 0)
    return std::nullopt;
  gemm.block = block.getInt();
  if (auto lhs = dict.getAs<StringAttr>(kLhs)) {
    if (lhs.getValue() == "lower")
      gemm.lhs = CausalGemm::Lhs::Lower;
    else if (lhs.getValue() == "upper")
      gemm.lhs = CausalGemm::Lhs::Upper;
    else
      return std::nullopt;
  }
  if (auto result = dict.getAs<StringAttr>(kResult)) {
    if (result.getValue() != "lower")
      return std::nullopt;
    gemm.resultLower = true;
  }
  return gemm;
}

void mlir::ds::setCausalGemm(Operation *op, const CausalGemm &gemm) {
  if (!gemm.any() || gemm.block <= 0) {
    op->removeAttr(DSDialect::kCausalGemmAttrName);
    return;
  }
  Builder b(op->getContext());
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr(kBlock, b.getI64IntegerAttr(gemm.block))};
  if (gemm.lhs != CausalGemm::Lhs::Dense)
    entries.push_back(b.getNamedAttr(
        kLhs, b.getStringAttr(gemm.lhs == CausalGemm::Lhs::Lower ? "lower"
                                                                 : "upper")));
  if (gemm.resultLower)
    entries.push_back(b.getNamedAttr(kResult, b.getStringAttr("lower")));
  op->setAttr(DSDialect::kCausalGemmAttrName, b.getDictionaryAttr(entries));
}

LogicalResult mlir::ds::verifyCausalGemmAttr(Operation *op, Attribute value) {
  auto dict = dyn_cast<DictionaryAttr>(value);
  auto fail = [&]() {
    return op->emitOpError("attribute '")
           << DSDialect::kCausalGemmAttrName
           << "' must be {block = <positive integer>, lhs = \"lower\" or "
              "\"upper\" (optional), result = \"lower\" (optional)}";
  };
  if (!dict)
    return fail();
  for (NamedAttribute entry : dict)
    if (entry.getName() != kBlock && entry.getName() != kLhs &&
        entry.getName() != kResult)
      return fail();
  if (!getCausalGemm(op))
    return fail();
  return success();
}

SmallVector<CausalGemmBlock> mlir::ds::causalGemmBlocks(const CausalGemm &gemm,
                                                        int64_t m, int64_t n,
                                                        int64_t k) {
  SmallVector<CausalGemmBlock> blocks;
  if (!gemm.any() || gemm.block <= 0 || m <= gemm.block || n <= 0 || k <= 0)
    return {};
  bool saves = false;
  for (int64_t r0 = 0; r0 < m; r0 += gemm.block) {
    int64_t r1 = std::min(m, r0 + gemm.block);
    CausalGemmBlock blk{r0, r1, n, 0, k};
    // Row r reads columns up to r + (N - M): the last row of the block
    // bounds them; the columns past that are never read.
    if (gemm.resultLower)
      blk.columns = std::min(n, r1 + (n - m));
    // A zero above its diagonal has row r's terms at depths up to
    // r + (K - M); zero below it, from r - (M - K).
    if (gemm.lhs == CausalGemm::Lhs::Lower)
      blk.depthEnd = std::min(k, r1 + (k - m));
    if (gemm.lhs == CausalGemm::Lhs::Upper)
      blk.depthBegin = std::max<int64_t>(0, r0 - (m - k));
    // Rows nobody reads need no GEMM; rows with no terms would need a
    // zero fill, which one whole GEMM already gives.
    if (blk.columns <= 0)
      continue;
    if (blk.depthEnd <= blk.depthBegin)
      return {};
    saves |= blk.columns < n || blk.depthEnd - blk.depthBegin < k;
    blocks.push_back(blk);
  }
  if (!saves)
    return {};
  return blocks;
}

bool mlir::ds::isCausallyMasked(Value v) {
  while (auto castOp = v.getDefiningOp<CastOp>())
    v = castOp.getInput();
  auto mask = v.getDefiningOp<CausalMaskOp>();
  return mask && mask.getFill().isInfinity() && mask.getFill().isNegative();
}

/// A constant splat of a finite float (through casts): a product with it
/// keeps a zero zero and moves no entry.
static bool isFiniteSplat(Value v) {
  while (auto castOp = v.getDefiningOp<CastOp>())
    v = castOp.getInput();
  DenseFPElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return false;
  return attr.getSplatValue<APFloat>().isFinite();
}

/// For a product of `v` with something: the other operand when it is a
/// finite constant and the product has `v`'s shape.
static bool isScaling(MulOp mul, Value v) {
  Value other = mul.getLhs() == v ? mul.getRhs() : mul.getLhs();
  return other != v &&
         mul.getType().getShape() == cast<ShapedType>(v.getType()).getShape() &&
         isFiniteSplat(other);
}

bool mlir::ds::isZeroAboveDiagonal(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() < 2)
    return false;
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (auto castOp = dyn_cast<CastOp>(def))
    return isZeroAboveDiagonal(castOp.getInput());
  if (auto mask = dyn_cast<CausalMaskOp>(def))
    return mask.getFill().isZero();
  if (auto softmax = dyn_cast<SoftmaxOp>(def))
    return softmax.getAxis() == static_cast<uint64_t>(type.getRank() - 1) &&
           isCausallyMasked(softmax.getInput());
  if (auto mul = dyn_cast<MulOp>(def))
    return llvm::any_of(ValueRange{mul.getLhs(), mul.getRhs()}, [&](Value x) {
      return isScaling(mul, x) && isZeroAboveDiagonal(x);
    });
  return false;
}

bool mlir::ds::isReadOnlyOnAndBelowDiagonal(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() < 2)
    return false;
  return llvm::all_of(v.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isa<CausalMaskOp>(user))
      return true;
    if (auto castOp = dyn_cast<CastOp>(user))
      return isReadOnlyOnAndBelowDiagonal(castOp.getResult());
    if (auto mul = dyn_cast<MulOp>(user))
      return isScaling(mul, v) && isReadOnlyOnAndBelowDiagonal(mul.getResult());
    return false;
  });
}

CausalGemm mlir::ds::analyzeCausalMatMul(Operation *op, int64_t block) {
  CausalGemm gemm;
  auto matmul = dyn_cast<MatMulOp>(op);
  if (!matmul || block <= 0)
    return gemm;
  gemm.block = block;
  if (isZeroAboveDiagonal(matmul.getLhs()))
    gemm.lhs = matmul.getTransposeLhs() ? CausalGemm::Lhs::Upper
                                        : CausalGemm::Lhs::Lower;
  gemm.resultLower = isReadOnlyOnAndBelowDiagonal(matmul.getResult());
  return gemm;
}

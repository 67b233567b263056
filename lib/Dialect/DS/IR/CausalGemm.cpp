//===- CausalGemm.cpp - Triangular structure of attention GEMMs -----------===//

#include "ds/Dialect/DS/IR/CausalGemm.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::ds;

static constexpr StringLiteral kBlock = "block", kLhs = "lhs", kRhs = "rhs",
                               kResult = "result";

/// "lower" or "upper", or nothing for a dense operand.
static std::optional<CausalGemm::Operand> parseOperand(DictionaryAttr dict,
                                                       StringRef key) {
  Attribute entry = dict.get(key);
  if (!entry)
    return CausalGemm::Operand::Dense;
  auto value = dyn_cast<StringAttr>(entry);
  if (!value)
    return std::nullopt;
  if (value.getValue() == "lower")
    return CausalGemm::Operand::Lower;
  if (value.getValue() == "upper")
    return CausalGemm::Operand::Upper;
  return std::nullopt;
}

std::optional<CausalGemm> mlir::ds::getCausalGemm(Operation *op) {
  auto dict = op->getAttrOfType<DictionaryAttr>(DSDialect::kCausalGemmAttrName);
  if (!dict)
    return std::nullopt;
  CausalGemm gemm;
  auto block = dict.getAs<IntegerAttr>(kBlock);
  if (!block || block.getInt() <= 0)
    return std::nullopt;
  gemm.block = block.getInt();
  std::optional<CausalGemm::Operand> lhs = parseOperand(dict, kLhs),
                                     rhs = parseOperand(dict, kRhs);
  if (!lhs || !rhs)
    return std::nullopt;
  gemm.lhs = *lhs;
  gemm.rhs = *rhs;
  if (Attribute result = dict.get(kResult)) {
    auto lower = dyn_cast<StringAttr>(result);
    if (!lower || lower.getValue() != "lower")
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
  for (auto [key, operand] : {std::pair{kLhs, gemm.lhs}, {kRhs, gemm.rhs}})
    if (operand != CausalGemm::Operand::Dense)
      entries.push_back(b.getNamedAttr(
          key, b.getStringAttr(
                   operand == CausalGemm::Operand::Lower ? "lower" : "upper")));
  if (gemm.resultLower)
    entries.push_back(b.getNamedAttr(kResult, b.getStringAttr("lower")));
  op->setAttr(DSDialect::kCausalGemmAttrName, b.getDictionaryAttr(entries));
}

LogicalResult mlir::ds::verifyCausalGemmAttr(Operation *op, Attribute value) {
  auto dict = dyn_cast<DictionaryAttr>(value);
  auto fail = [&]() {
    return op->emitOpError("attribute '")
           << DSDialect::kCausalGemmAttrName
           << "' must be {block = <positive integer>, lhs and rhs = "
              "\"lower\" or \"upper\" (optional), result = \"lower\" "
              "(optional)}";
  };
  if (!dict)
    return fail();
  for (NamedAttribute entry : dict)
    if (entry.getName() != kBlock && entry.getName() != kLhs &&
        entry.getName() != kRhs && entry.getName() != kResult)
      return fail();
  if (!getCausalGemm(op))
    return fail();
  return success();
}

SmallVector<CausalGemmBlock> mlir::ds::causalGemmBlocks(const CausalGemm &gemm,
                                                        int64_t m, int64_t n,
                                                        int64_t k) {
  using Operand = CausalGemm::Operand;
  if (!gemm.any() || gemm.block <= 0 || m <= 0 || n <= 0 || k <= 0)
    return {};
  // Row blocks where the lhs or the result says which columns and depth a
  // row needs; column blocks where only the rhs says which depth a column
  // needs.
  bool byRows = gemm.lhs != Operand::Dense || gemm.resultLower;
  int64_t extent = byRows ? m : n;
  if (extent <= gemm.block)
    return {};
  SmallVector<CausalGemmBlock> blocks;
  bool saves = false;
  for (int64_t b0 = 0; b0 < extent; b0 += gemm.block) {
    int64_t b1 = std::min(extent, b0 + gemm.block);
    CausalGemmBlock blk{0, m, 0, n, 0, k};
    if (byRows) {
      blk.rowBegin = b0;
      blk.rowEnd = b1;
      // Row r reads columns up to r + (N - M): the block's last row bounds
      // them; the columns past that are never read.
      if (gemm.resultLower)
        blk.colEnd = std::min(n, b1 + (n - m));
      // A zero above its diagonal has row r's terms at depths up to
      // r + (K - M); zero below it, from r - (M - K).
      if (gemm.lhs == Operand::Lower)
        blk.depthEnd = std::min(k, b1 + (k - m));
      if (gemm.lhs == Operand::Upper)
        blk.depthBegin = std::max<int64_t>(0, b0 - (m - k));
    } else {
      blk.colBegin = b0;
      blk.colEnd = b1;
      // B zero above its diagonal has column c's terms at depths from
      // c - (N - K); zero below it, up to c + (K - N).
      if (gemm.rhs == Operand::Lower)
        blk.depthBegin = std::max<int64_t>(0, b0 - (n - k));
      if (gemm.rhs == Operand::Upper)
        blk.depthEnd = std::min(k, b1 + (k - n));
    }
    // Rows nobody reads need no GEMM; rows with no terms would need a
    // zero fill, which one whole GEMM already gives.
    if (blk.colEnd <= blk.colBegin)
      continue;
    if (blk.depthEnd <= blk.depthBegin)
      return {};
    saves |= blk.colEnd - blk.colBegin < (byRows ? n : b1 - b0) ||
             blk.depthEnd - blk.depthBegin < k;
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

/// A constant splat of a finite float (through casts), and nonzero with
/// `nonzero`: a product with it, or a quotient by it, keeps a zero zero and
/// moves no entry.
static bool isFiniteSplat(Value v, bool nonzero = false) {
  while (auto castOp = v.getDefiningOp<CastOp>())
    v = castOp.getInput();
  DenseFPElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return false;
  APFloat value = attr.getSplatValue<APFloat>();
  return value.isFinite() && !(nonzero && value.isZero());
}

/// Whether `op`, applied to its operand `v`, keeps every entry of `v` in
/// its place in its matrix (the last two dimensions) in its first result,
/// and a zero zero: a cast, a product with a finite constant, a quotient by
/// a finite nonzero one, a reshape of the batch dimensions only, a dropout
/// (its scale 1 / (1 - p) is finite: p < 1).
static bool keepsEntries(Operation *op, Value v) {
  auto shapeOf = [](Value x) { return cast<ShapedType>(x.getType()); };
  if (isa<CastOp>(op))
    return true;
  if (auto dropout = dyn_cast<DropoutOp>(op))
    return dropout.getInput() == v;
  if (auto mul = dyn_cast<MulOp>(op)) {
    Value other = mul.getLhs() == v ? mul.getRhs() : mul.getLhs();
    return other != v && mul.getType().getShape() == shapeOf(v).getShape() &&
           isFiniteSplat(other);
  }
  if (auto div = dyn_cast<DivOp>(op))
    return div.getLhs() == v && div.getRhs() != v &&
           div.getType().getShape() == shapeOf(v).getShape() &&
           isFiniteSplat(div.getRhs(), /*nonzero=*/true);
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    ArrayRef<int64_t> from = shapeOf(v).getShape(),
                      to = reshape.getType().getShape();
    return from.size() >= 2 && to.size() >= 2 &&
           from.take_back(2) == to.take_back(2);
  }
  return false;
}

bool mlir::ds::isZeroAboveDiagonal(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() < 2)
    return false;
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (auto mask = dyn_cast<CausalMaskOp>(def))
    return mask.getFill().isZero();
  if (auto softmax = dyn_cast<SoftmaxOp>(def))
    return softmax.getAxis() == static_cast<uint64_t>(type.getRank() - 1) &&
           isCausallyMasked(softmax.getInput());
  return llvm::any_of(def->getOperands(), [&](Value x) {
    return keepsEntries(def, x) && isZeroAboveDiagonal(x);
  });
}

/// Whether `op`, applied to its operand `v`, puts what it computes from
/// each entry of `v` in that entry's place, and nowhere else: an op that
/// keepsEntries, or a binary elementwise op whose result has `v`'s shape
/// (the other operand may broadcast). Whatever an entry above the diagonal
/// holds then reaches the result above the diagonal only.
static bool keepsPositions(Operation *op, Value v) {
  if (keepsEntries(op, v))
    return true;
  if (!isa<AddOp, SubOp, MulOp, DivOp>(op))
    return false;
  return cast<ShapedType>(op->getResult(0).getType()).getShape() ==
         cast<ShapedType>(v.getType()).getShape();
}

bool mlir::ds::isReadOnlyOnAndBelowDiagonal(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() < 2)
    return false;
  return llvm::all_of(v.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isa<CausalMaskOp>(user))
      return true;
    return user->getNumResults() >= 1 && keepsPositions(user, v) &&
           isReadOnlyOnAndBelowDiagonal(user->getResult(0));
  });
}

CausalGemm mlir::ds::analyzeCausalMatMul(Operation *op, int64_t block) {
  using Operand = CausalGemm::Operand;
  CausalGemm gemm;
  auto matmul = dyn_cast<MatMulOp>(op);
  if (!matmul || block <= 0)
    return gemm;
  gemm.block = block;
  // A transposed operand is zero on the other side of its diagonal.
  if (isZeroAboveDiagonal(matmul.getLhs()))
    gemm.lhs = matmul.getTransposeLhs() ? Operand::Upper : Operand::Lower;
  if (isZeroAboveDiagonal(matmul.getRhs()))
    gemm.rhs = matmul.getTransposeRhs() ? Operand::Upper : Operand::Lower;
  gemm.resultLower = isReadOnlyOnAndBelowDiagonal(matmul.getResult());
  return gemm;
}

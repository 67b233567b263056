//===- ConvertFakeQuant.cpp - Fake-quantized forward to int8 inference ----===//
//
// Implements ds-convert-fake-quant: every ds.matmul of a frozen,
// fake-quantized forward whose activation and weight operands are integer
// fake-quantizations becomes ds.quantize of each operand and one
// ds.quantized_matmul, the integer GEMM torch.ao's converted model would
// run. The fake-quantizers' scales and zero points are state arguments (the
// trained values); nothing else of the step changes.
//
//===----------------------------------------------------------------------===//

#include "StepUtils.h"

#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_CONVERTFAKEQUANTPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// The value of a splat f32 constant, if `v` is one.
std::optional<double> constantScalar(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

/// The fake-quantizer behind a matmul operand: the ds.fake_quant itself,
/// or one that a ds.select chooses against its own input. Inference takes
/// ds-insert-fake-quant's schedule (`select(iteration >= K, fq, x)`, whose
/// condition compares the i64 iteration counter) as always on; `selected`
/// says when another condition (a dynamic bit-width's tier) chooses.
FakeQuantOp fakeQuantBehind(Value v, bool *selected = nullptr) {
  if (selected)
    *selected = false;
  if (auto fq = v.getDefiningOp<FakeQuantOp>())
    return fq;
  auto select = v.getDefiningOp<SelectOp>();
  if (!select)
    return nullptr;
  auto fq = select.getOnTrue().getDefiningOp<FakeQuantOp>();
  if (!fq || select.getOnFalse() != fq.getInput())
    return nullptr;
  auto cmp = select.getCond().getDefiningOp<CompareOp>();
  bool schedule = cmp && cast<RankedTensorType>(cmp.getLhs().getType())
                             .getElementType()
                             .isInteger(64);
  if (selected)
    *selected = !schedule;
  return fq;
}

/// How an integer grid is stored in i8: as it is, or shifted by -128 (an
/// unsigned 8-bit grid).
struct Grid {
  double qmin, qmax, shift;
};

/// Why `fq` cannot be an integer operand, or its grid.
FailureOr<Grid> integerGrid(FakeQuantOp fq, std::string &why) {
  if (fq.getFormat()) {
    why = "it is fake-quantized to FP8";
    return failure();
  }
  if (fq.getLearned()) {
    why = "its scale is learned (LSQ)";
    return failure();
  }
  if (fq.getGroupSize()) {
    why = "its weight is quantized per group";
    return failure();
  }
  std::optional<double> lo = constantScalar(fq.getQmin()),
                        hi = constantScalar(fq.getQmax());
  if (!lo || !hi) {
    why = "its grid is chosen at run time (dynamic bit-width)";
    return failure();
  }
  if (*lo >= -128 && *hi <= 127)
    return Grid{*lo, *hi, 0.0};
  if (*lo >= 0 && *hi <= 255)
    return Grid{*lo, *hi, 128.0};
  why = "its grid [" + std::to_string(int64_t(*lo)) + ", " +
        std::to_string(int64_t(*hi)) + "] is wider than 8 bits";
  return failure();
}

/// "ds.matmul at loc(...)" for messages.
std::string describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName() << " at " << op->getLoc();
  return text;
}

/// The integer indices of a fake-quantizer's input and the zero point as
/// stored, built once per fake-quantizer (a value several layers read, a
/// weight two matmuls share, is quantized once).
using QuantizedOperands = llvm::DenseMap<Operation *, std::pair<Value, Value>>;

/// Converts `mm` if both operands fit; otherwise says why in `why`.
LogicalResult convertMatMul(MatMulOp mm, QuantizedOperands &done,
                            std::string &why) {
  if (traceToParam(mm.getLhs())) {
    why = "its weight is the lhs (only x W and x W^T layers are converted)";
    return failure();
  }
  if (mm.getTransposeLhs()) {
    why = "its activation operand is transposed";
    return failure();
  }
  bool xSelected, wSelected;
  FakeQuantOp xq = fakeQuantBehind(mm.getLhs(), &xSelected);
  FakeQuantOp wq = fakeQuantBehind(mm.getRhs(), &wSelected);
  if (!xq || !wq) {
    why = fakeQuantBehind(mm.getLhs()) || fakeQuantBehind(mm.getRhs())
              ? "only one operand is fake-quantized (a weight on the lhs, or "
                "an activation left in float)"
              : "";
    return failure();
  }
  if (xSelected || wSelected) {
    why = std::string("its ") + (wSelected ? "weight" : "activation") +
          " is fake-quantized or not by a condition computed at run time "
          "(dynamic bit-width)";
    return failure();
  }
  auto wType = cast<RankedTensorType>(wq.getType());
  if (wType.getRank() != 2) {
    why = "its weight is not 2-D";
    return failure();
  }
  if (xq.getAxis()) {
    why = "its activation is quantized per channel";
    return failure();
  }
  bool tr = mm.getTransposeRhs();
  if (std::optional<int64_t> axis = wq.getAxis();
      axis && *axis != (tr ? 0 : 1)) {
    why = "its weight is quantized along the reduction axis";
    return failure();
  }
  std::string gridWhy;
  FailureOr<Grid> xg = integerGrid(xq, gridWhy);
  if (failed(xg)) {
    why = "its activation cannot be an int8 operand: " + gridWhy;
    return failure();
  }
  FailureOr<Grid> wg = integerGrid(wq, gridWhy);
  if (failed(wg)) {
    why = "its weight cannot be an int8 operand: " + gridWhy;
    return failure();
  }

  OpBuilder b(mm);
  Location loc = mm.getLoc();
  Type i8 = b.getIntegerType(8);
  auto scalarType = RankedTensorType::get({}, b.getF32Type());
  auto constant = [&](double v) -> Value {
    return arith::ConstantOp::create(
        b, loc, scalarType,
        DenseElementsAttr::get(scalarType, b.getFloatAttr(b.getF32Type(), v)));
  };
  // Integer indices of one operand, and its zero point as stored.
  auto quantize = [&](FakeQuantOp fq,
                      const Grid &g) -> std::pair<Value, Value> {
    if (auto it = done.find(fq); it != done.end())
      return it->second;
    // Right after the fake-quantizer, so that every layer reading it sees
    // the indices.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(fq);
    Value zp = fq.getZeroPoint();
    if (g.shift != 0.0)
      zp = SubOp::create(b, loc, zp, constant(g.shift));
    auto type = cast<RankedTensorType>(fq.getType()).clone(i8);
    Value q = QuantizeOp::create(b, loc, type, fq.getInput(), fq.getScale(), zp,
                                 constant(g.qmin - g.shift),
                                 constant(g.qmax - g.shift), fq.getAxisAttr());
    return done[fq] = {q, zp};
  };
  auto [xi, zx] = quantize(xq, *xg);
  auto [wi, zw] = quantize(wq, *wg);
  Value y = QuantizedMatMulOp::create(b, loc, mm.getType(), xi, wi,
                                      xq.getScale(), zx, wq.getScale(), zw,
                                      tr ? b.getUnitAttr() : nullptr);
  mm.replaceAllUsesWith(y);
  mm->erase();
  return success();
}

} // namespace

FailureOr<FakeQuantConversion>
mlir::ds::convertFakeQuant(FunctionOpInterface func) {
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasGrads() || contract->hasParamUpdates())
    return func->emitOpError(
        "converts the forward + loss of a trained model for inference; this "
        "step has gradients or parameter updates (give the forward: the "
        "module before ds-autodiff)");
  SmallVector<FakeQuantOp> fakeQuants;
  func.walk([&](FakeQuantOp fq) { fakeQuants.push_back(fq); });
  if (fakeQuants.empty())
    return func->emitOpError(
        "has no ds.fake_quant to convert: quantize the forward of a model "
        "trained with QAT first (ds-insert-fake-quant{observe=false})");
  // Integer fake-quantizers must read frozen parameters from state: a scale
  // computed in the step means its observer still runs.
  for (FakeQuantOp fq : fakeQuants) {
    std::string why;
    if (failed(integerGrid(fq, why)))
      continue;
    if (!isa<BlockArgument>(fq.getScale()) ||
        !isa<BlockArgument>(fq.getZeroPoint()))
      return fq->emitOpError(
          "computes its scale in the step: its observer still runs, so the "
          "model is still being trained; convert the frozen forward "
          "(ds-insert-fake-quant{observe=false}), whose scales and zero "
          "points are the trained state");
  }

  FakeQuantConversion result;
  SmallVector<MatMulOp> matmuls;
  func.walk([&](MatMulOp mm) { matmuls.push_back(mm); });
  QuantizedOperands done;
  for (MatMulOp mm : matmuls) {
    std::string why;
    std::string where = describe(mm);
    if (succeeded(convertMatMul(mm, done, why)))
      ++result.converted;
    else if (!why.empty())
      result.left.push_back(where + ": " + why);
  }
  // Layers other than matmuls that read fake-quantized values stay in f32.
  llvm::SetVector<Operation *> others;
  for (FakeQuantOp fq : fakeQuants)
    for (Operation *user : fq->getUsers()) {
      Operation *layer = user;
      if (isa<SelectOp>(user) && user->hasOneUse())
        layer = *user->getUsers().begin();
      if (isa<Conv2DOp>(layer))
        others.insert(layer);
    }
  for (Operation *op : others)
    result.left.push_back(describe(op) +
                          ": convolutions stay fake-quantized in f32");
  if (result.converted == 0) {
    InFlightDiagnostic diag = func->emitOpError(
        "has no ds.matmul whose activation and weight are frozen integer "
        "fake-quantizations; nothing to convert");
    for (const std::string &l : result.left)
      diag.attachNote() << l;
    return diag;
  }
  // The fake-quantizers (and their schedule selects) that fed only
  // converted matmuls are dead now.
  for (FakeQuantOp fq : fakeQuants) {
    for (Operation *user : llvm::make_early_inc_range(fq->getUsers()))
      if (isa<SelectOp>(user) && user->use_empty())
        user->erase();
    if (fq->use_empty())
      fq->erase();
  }
  // So are the schedule's compares and the grids' constants.
  for (Block &block : func.getFunctionBody())
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (op.hasAttr(DSDialect::kQuantAttrName) && isOpTriviallyDead(&op))
        op.erase();
  return result;
}

namespace {
struct ConvertFakeQuantPass
    : public mlir::ds::impl::ConvertFakeQuantPassBase<ConvertFakeQuantPass> {
  using Base::Base;

  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    SmallVector<std::pair<FunctionOpInterface, FunctionOpInterface>> preps;
    if (failed(forEachTrainStep(
            getOperation(), getArgument(), [&](FunctionOpInterface func) {
              FailureOr<FakeQuantConversion> done = convertFakeQuant(func);
              if (failed(done))
                return failure();
              if (prepareWeights) {
                FailureOr<FunctionOpInterface> prep =
                    splitWeightPreparation(func);
                if (failed(prep))
                  return failure();
                if (*prep)
                  preps.push_back({func, *prep});
              }
              if (!done->left.empty()) {
                InFlightDiagnostic diag = func->emitWarning()
                                          << "converted " << done->converted
                                          << " matmuls to int8; left "
                                          << done->left.size()
                                          << " fake-quantized layers in f32";
                for (const std::string &l : done->left)
                  diag.attachNote() << l;
              }
              return success();
            })))
      return signalPassFailure();
    SymbolTable symbols(getOperation());
    for (auto [func, prep] : preps)
      symbols.insert(prep, std::next(Block::iterator(func)));
  }
};
} // namespace

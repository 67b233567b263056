//===- SparsifyMatMul.cpp - Block-sparse linear layers --------------------===//
//
// Implements ds-sparsify-matmul: on the forward, before ds-autodiff, every
// linear layer the policy's `sparsity:` section marks sparse (a ds.matmul
// whose right-hand side is a 2-D parameter) becomes a
// ds.block_sparse_matmul on a `sparsity.mask@<param>` state, and the step
// returns the `sparsity.mask_update` metric of the schedule. The masks'
// update needs the gradients and is ds-update-sparsity-masks'
// (UpdateMasks.cpp).
//
//===----------------------------------------------------------------------===//

#include "Sparsity.h"

#include "../StepUtils.h"

#include "ds/Analysis/RoleAnalysis.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "ds/Transforms/PrecisionPolicy.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_SPARSIFYMATMULPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;
using namespace mlir::ds::sparsity;

namespace {

/// The policy: the file's sparsity: section, or the default.
FailureOr<PrecisionPolicy> loadPolicy(FunctionOpInterface func,
                                      StringRef path) {
  if (path.empty())
    return PrecisionPolicy::parse(PrecisionPolicy::defaultSparsityText(),
                                  "<default sparsity policy>",
                                  func->getContext());
  FailureOr<PrecisionPolicy> policy =
      PrecisionPolicy::load(path, func.getLoc());
  if (succeeded(policy) && !policy->sparsity.enabled) {
    emitError(FileLineColLoc::get(func->getContext(), path, 1, 1))
        << "the policy has no 'sparsity:' section for ds-sparsify-matmul";
    return failure();
  }
  return policy;
}

} // namespace

LogicalResult
mlir::ds::validateSparsityOptions(const SparsifyMatMulPassOptions &options,
                                  std::string &error) {
  return SparsityConfig::fromOptions(options).validate(error);
}

LogicalResult mlir::ds::sparsifyMatMul(FunctionOpInterface func,
                                       const SparsifyMatMulPassOptions &options,
                                       bool rewriteLayers) {
  SparsityConfig config = SparsityConfig::fromOptions(options);
  FailureOr<TrainingContract> contract = TrainingContract::fromFunction(func);
  if (failed(contract))
    return failure();
  if (contract->hasGrads() || contract->hasParamUpdates())
    return func->emitOpError(
        "runs on the forward + loss step, before ds-autodiff; this step "
        "already has gradients or updates");
  if (hasStateWithPrefix(*contract, kMaskStateKind))
    return func->emitOpError("the step is already sparse (it has '")
           << kMaskStateKind << "' state)";
  if (hasStateWithPrefix(*contract, "qat."))
    return func->emitOpError(
        "the step is already fake-quantized; run ds-sparsify-matmul before "
        "ds-insert-fake-quant, so that weight observers see the masked "
        "weights");
  Region &region = func.getFunctionBody();
  if (!region.hasOneBlock())
    return func->emitOpError("expects a function with one block");
  FailureOr<PrecisionPolicy> policy = loadPolicy(func, options.policy);
  if (failed(policy))
    return failure();

  // The layers and the weight each makes sparse, checked before the IR
  // changes so that an error leaves the step as it was. A weight several
  // layers share has one mask.
  RoleAnalysis roles(func);
  SmallVector<MatMulOp> layers;
  llvm::MapVector<BlockArgument, MatMulOp> weights;
  for (Operation &op : region.front()) {
    auto mm = dyn_cast<MatMulOp>(op);
    if (!mm || !isForwardOp(mm))
      continue;
    BlockArgument w = traceToParam(mm.getRhs());
    if (!w)
      continue;
    StringRef name = getParamName(w);
    const SparsityRule *rule =
        policy->sparsity.match(mm, roles.roleOf(mm), {name});
    if (!rule || !rule->sparse)
      continue;
    if (mm.getRhs() != w || w.getType() != mm.getRhs().getType() ||
        cast<RankedTensorType>(w.getType()).getRank() != 2 ||
        mm.getTransposeLhs()) {
      mm->emitWarning("stays dense: its weight '")
          << name
          << "' is not a 2-D parameter read directly as the right-hand side "
             "(block masks are laid over the parameter itself)";
      continue;
    }
    Type et = cast<RankedTensorType>(w.getType()).getElementType();
    if (mm.getLhs().getType().getElementType() != et ||
        mm.getType().getElementType() != et) {
      mm->emitWarning("stays dense: it mixes element types (")
          << mm.getLhs().getType().getElementType() << " x " << et << " -> "
          << mm.getType().getElementType()
          << "); a block-sparse layer computes in one type";
      continue;
    }
    auto wt = cast<RankedTensorType>(w.getType());
    for (int64_t d = 0; d < 2; ++d)
      if (wt.getDimSize(d) % config.block != 0)
        return mm->emitOpError("block size ")
               << config.block << " does not divide dimension " << d << " ("
               << wt.getDimSize(d) << ") of the weight '" << name << "' " << wt
               << "; choose another block or keep the layer dense "
               << "with a policy rule 'param: " << name << ", sparse: false'";
    layers.push_back(mm);
    weights.insert({w, mm});
  }
  if (layers.empty()) {
    func->emitWarning("found no linear layer the sparsity policy makes "
                      "sparse; the step is unchanged");
    return success();
  }

  StepEditor ed(func);
  FailureOr<Value> iteration = getOrAddIteration(ed, *contract);
  if (failed(iteration))
    return failure();
  llvm::DenseMap<Value, Value> masks;
  for (auto [w, layer] : weights) {
    auto wt = cast<RankedTensorType>(w.getType());
    auto mt = RankedTensorType::get(
        {wt.getDimSize(0) / config.block, wt.getDimSize(1) / config.block},
        IntegerType::get(func->getContext(), 8));
    masks[w] = ed.addState(kMaskStateKind, getParamName(w), mt, InitKind::ones);
  }
  for (MatMulOp mm : rewriteLayers ? layers : SmallVector<MatMulOp>{}) {
    OpBuilder b(mm);
    auto sparse = BlockSparseMatMulOp::create(
        b, mm.getLoc(), mm.getType(), mm.getLhs(), mm.getRhs(),
        masks.lookup(mm.getRhs()), b.getI64IntegerAttr(config.block),
        mm.getTransposeRhs() ? b.getUnitAttr() : UnitAttr());
    for (NamedAttribute a : mm->getDiscardableAttrs())
      sparse->setAttr(a.getName(), a.getValue());
    mm.replaceAllUsesWith(sparse.getResult());
    mm.erase();
  }
  OpBuilder b(ed.terminator);
  ScalarBuilder s(b, func.getLoc());
  Value update = isMaskUpdate(s, config, s.extractRaw(*iteration));
  Value metric = s.tensor(
      arith::UIToFPOp::create(b, func.getLoc(), b.getF32Type(), update),
      b.getF32Type());
  ed.addMetric(kMaskUpdateMetric, metric);
  ed.finish();
  recordConfig(func, config);
  return success();
}

namespace {
struct SparsifyMatMulPass
    : public mlir::ds::impl::SparsifyMatMulPassBase<SparsifyMatMulPass> {
  using Base::Base;

  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (failed(checkOptionsGivenOnce(module, getArgument(),
                                     {&policy, &block, &schedule, &initial,
                                      &final, &hold, &totalSteps, &updateEvery,
                                      &regrow, &dropFraction, &regrowEnd,
                                      &score, &distribution})))
      return signalPassFailure();
    SparsifyMatMulPassOptions options;
    options.policy = policy;
    options.block = block;
    options.schedule = schedule;
    options.initial = initial;
    options.final = final;
    options.hold = hold;
    options.totalSteps = totalSteps;
    options.updateEvery = updateEvery;
    options.regrow = regrow;
    options.dropFraction = dropFraction;
    options.regrowEnd = regrowEnd;
    options.score = score;
    options.distribution = distribution;
    std::string error;
    if (failed(validateSparsityOptions(options, error))) {
      module.emitError(error);
      return signalPassFailure();
    }
    if (failed(forEachTrainStep(module, getArgument(),
                                [&](FunctionOpInterface func) {
                                  return sparsifyMatMul(func, options);
                                })))
      signalPassFailure();
  }
};
} // namespace

//===- UpdateMasks.cpp - The mask updates of dynamic block sparsity -------===//
//
// Implements ds-update-sparsity-masks: after ds-autodiff (and everything
// that makes the gradients final), before ds-insert-optimizer. Per weight
// with a `sparsity.mask@<param>` state, on a mask-update iteration:
//
//   A     target active blocks (uniform, ERK or global, from s(t))
//   g     regrown blocks: floor(d(t) A) while regrowing, else 0
//   keep  the A - g active blocks of largest |W| score (inactive: -1)
//   grow  the g blocks of largest |dW| score among the others
//
// and the mask's update is keep + grow (the old mask otherwise). All of it
// is computed every step and selected, since the step has no control flow;
// the top-k is O(blocks) in the runtime. On regrow iterations the weight
// gradient's sampled product runs on an all-ones mask, which makes it the
// dense gradient RigL scores (the optimizer skips that iteration).
//
//===----------------------------------------------------------------------===//

#include "Sparsity.h"

#include "../StepUtils.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <algorithm>
#include <numeric>

namespace mlir::ds {
#define GEN_PASS_DEF_UPDATESPARSITYMASKSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;
using namespace mlir::ds::sparsity;

namespace {

/// One sparse weight.
struct Site {
  std::string name;
  BlockArgument weight, mask;
  Value grad;
  int64_t rows, cols, blocks;
  /// Its target active blocks and regrown blocks (i64 scalars).
  Value active, grown;
};

/// A rank-0 tensor<i64> of the scalar `x`.
Value i64Tensor(ScalarBuilder &s, Value x) {
  return s.tensor(x, s.b.getI64Type());
}

/// `x` (f64 >= 0) rounded to the nearest integer, as i64.
Value roundToI64(ScalarBuilder &s, Value x) {
  return arith::FPToSIOp::create(s.b, s.loc, s.b.getI64Type(),
                                 s.add(x, s.f64(0.5)));
}

/// The per-layer targets of ERK at sparsity `sp`: RigL's densities
/// proportional to (R + C) / (R C), solved so that the active weights are
/// (1 - sp) of all, with the layers that would exceed density 1 dense and
/// the others re-solved.
void erkTargets(ScalarBuilder &s, MutableArrayRef<Site> sites, Value sp) {
  size_t n = sites.size();
  SmallVector<double> raw(n), size(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    size[i] = double(sites[i].rows) * double(sites[i].cols);
    raw[i] = double(sites[i].rows + sites[i].cols) / size[i];
    total += size[i];
  }
  SmallVector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  llvm::stable_sort(order, [&](size_t a, size_t b) { return raw[a] > raw[b]; });
  // With the first j (largest raw) dense: eps_j = ((1 - sp) total -
  // sum_{i<j} size) / sum_{i>=j} raw size; the smallest j where the next
  // layer stays below density 1 is the solution.
  Value target = s.mul(s.sub(s.f64(1.0), sp), s.f64(total));
  Value eps;
  for (size_t j = n; j-- > 0;) {
    double dense = 0, weighted = 0;
    for (size_t i = 0; i < n; ++i)
      (i < j ? dense : weighted) +=
          i < j ? size[order[i]] : raw[order[i]] * size[order[i]];
    Value e = s.div(s.sub(target, s.f64(dense)), s.f64(weighted));
    if (!eps) {
      eps = e;
      continue;
    }
    Value valid = s.cmpf(arith::CmpFPredicate::OLE,
                         s.mul(e, s.f64(raw[order[j]])), s.f64(1.0));
    eps = s.select(valid, e, eps);
  }
  for (size_t i = 0; i < n; ++i) {
    Value density = s.minf(s.mul(eps, s.f64(raw[i])), s.f64(1.0));
    density = s.maxf(density, s.f64(0.0));
    sites[i].active =
        roundToI64(s, s.mul(density, s.f64(double(sites[i].blocks))));
  }
}

/// The scores `scores` with the inactive blocks of `mask` at -1 (below
/// every real score).
Value onlyActive(OpBuilder &b, Location loc, Value scores, Value mask,
                 bool inactive) {
  auto st = cast<RankedTensorType>(scores.getType());
  Value cond = CompareOp::create(
      b, loc, inactive ? ComparePredicate::eq : ComparePredicate::ne, mask,
      maskZero(b, loc));
  Value minusOne = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          st.clone(ArrayRef<int64_t>{}),
          FloatAttr::get(cast<FloatType>(st.getElementType()), -1.0)));
  return SelectOp::create(b, loc, cond, scores, minusOne);
}

/// Top-k over the scores of every site jointly (global) or per site.
SmallVector<Value> selectTopK(OpBuilder &b, Location loc,
                              ArrayRef<Value> scores, ArrayRef<Value> counts,
                              ScalarBuilder &s, bool global) {
  SmallVector<Value> masks;
  if (!global) {
    for (auto [sc, k] : llvm::zip_equal(scores, counts))
      masks.push_back(TopKMaskOp::create(
          b, loc, cast<RankedTensorType>(sc.getType()).clone(b.getI8Type()), sc,
          i64Tensor(s, k)));
    return masks;
  }
  // One ranking needs one type: f64 if any layer's scores are f64.
  Type common = b.getF32Type();
  for (Value sc : scores)
    if (cast<RankedTensorType>(sc.getType()).getElementType().isF64())
      common = b.getF64Type();
  SmallVector<Value> flat;
  Value total = s.i64(0);
  for (auto [sc, k] : llvm::zip_equal(scores, counts)) {
    auto t = cast<RankedTensorType>(sc.getType());
    auto flatType = RankedTensorType::get({t.getNumElements()}, common);
    Value v = ReshapeOp::create(b, loc, t.clone(flatType.getShape()), sc);
    if (t.getElementType() != common)
      v = CastOp::create(b, loc, flatType, v);
    flat.push_back(v);
    total = s.add(total, k);
  }
  Value all = ConcatOp::create(b, loc, flat, b.getI64IntegerAttr(0));
  auto at = cast<RankedTensorType>(all.getType());
  Value mask = TopKMaskOp::create(b, loc, at.clone(b.getI8Type()), all,
                                  i64Tensor(s, total));
  int64_t offset = 0;
  for (Value sc : scores) {
    auto t = cast<RankedTensorType>(sc.getType());
    int64_t n = t.getNumElements();
    Value part =
        SliceOp::create(b, loc, RankedTensorType::get({n}, b.getI8Type()), mask,
                        b.getDenseI64ArrayAttr({offset}), DenseI64ArrayAttr());
    masks.push_back(ReshapeOp::create(b, loc, t.clone(b.getI8Type()), part));
    offset += n;
  }
  return masks;
}

} // namespace

LogicalResult mlir::ds::updateSparsityMasks(FunctionOpInterface func) {
  FailureOr<TrainingContract> contract =
      requireGradientStep(func, "ds-update-sparsity-masks");
  if (failed(contract))
    return failure();
  Block &body = func.getFunctionBody().front();
  SmallVector<Site> sites;
  for (auto [i, arg] : llvm::enumerate(contract->args)) {
    if (arg.role != ArgRole::State || !arg.state ||
        arg.state.getKind() != kMaskStateKind)
      continue;
    StringRef of = arg.state.getOf();
    if (contract->findUpdateOf(i))
      return func->emitOpError("the mask of '")
             << of << "' is already updated (ds-update-sparsity-masks ran)";
    std::optional<unsigned> param = contract->findArg(ArgRole::Param, of);
    std::optional<unsigned> grad =
        param ? contract->findGradOf(*param) : std::nullopt;
    if (!grad)
      return func->emitOpError("the mask '")
             << arg.name << "' belongs to no trained parameter '" << of << "'";
    auto wt = cast<RankedTensorType>(body.getArgument(*param).getType());
    auto mt = cast<RankedTensorType>(arg.type);
    sites.push_back({of.str(), body.getArgument(*param), body.getArgument(i),
                     body.getTerminator()->getOperand(*grad), wt.getDimSize(0),
                     wt.getDimSize(1), mt.getNumElements(), Value(), Value()});
  }
  if (sites.empty())
    return success();
  FailureOr<SparsityConfig> config = lookupConfig(func);
  if (failed(config))
    return failure();
  std::optional<unsigned> iterIndex =
      contract->findArg(ArgRole::State, kIterationStateKind);
  if (!iterIndex)
    return func->emitOpError("has sparsity masks but no '")
           << kIterationStateKind << "' counter";
  Value iteration = body.getArgument(*iterIndex);
  int64_t block = config->block;
  Location loc = func.getLoc();

  // The weight gradients are dense on regrow iterations: the sampled
  // products read an all-ones mask then. Built at the top of the body, so
  // that it dominates the backward.
  {
    OpBuilder b(&body, body.begin());
    ScalarBuilder s(b, loc);
    Value ti = s.extractRaw(iteration);
    Value t = arith::SIToFPOp::create(b, loc, b.getF64Type(), ti);
    Value dense =
        s.andi(isMaskUpdate(s, *config, ti), isRegrowing(s, *config, t));
    Value denseT = tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, b.getI1Type()), ValueRange{dense});
    for (Site &site : sites) {
      auto mt = cast<RankedTensorType>(site.mask.getType());
      Value ones = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(mt,
                                 ArrayRef<Attribute>{b.getI8IntegerAttr(1)}));
      Value gradMask = SelectOp::create(b, loc, denseT, ones, site.mask);
      for (OpOperand &use : llvm::make_early_inc_range(site.mask.getUses()))
        if (isa<BlockSampledMatMulOp>(use.getOwner()))
          use.set(gradMask);
    }
  }

  StepEditor ed(func);
  OpBuilder b(ed.terminator);
  ScalarBuilder s(b, loc);
  Value ti = s.extractRaw(iteration);
  Value t = arith::SIToFPOp::create(b, loc, b.getF64Type(), ti);
  Value update = isMaskUpdate(s, *config, ti);
  // On a step loss scaling skips, the gradients are not finite: the masks
  // are still updated by weight magnitude (so an overflow on iteration 0,
  // common while the loss scale settles, does not postpone the initial
  // pruning by a whole period), but nothing regrows.
  Value regrowing = isRegrowing(s, *config, t);
  if (Value found = findMetric(func, *contract, "found_inf"))
    regrowing = s.andi(regrowing, s.noti(s.cmpf(arith::CmpFPredicate::OGT,
                                                s.extract(found), s.f64(0.5))));
  Value sp = scheduledSparsity(s, *config, t);
  Value df = dropFraction(s, *config, t);
  Value zero = s.i64(0);

  // Targets.
  bool global = config->distribution == SparsityDistribution::Global;
  if (config->distribution == SparsityDistribution::ERK) {
    erkTargets(s, sites, sp);
  } else if (!global) {
    for (Site &site : sites) {
      Value n = s.f64(double(site.blocks));
      site.active = s.sub(s.i64(site.blocks), roundToI64(s, s.mul(sp, n)));
    }
  }
  auto growCount = [&](Value active) {
    Value g = arith::FPToSIOp::create(
        b, loc, b.getI64Type(),
        s.mul(df, arith::SIToFPOp::create(b, loc, b.getF64Type(), active)));
    return s.select(regrowing, g, zero);
  };
  SmallVector<Value> keepCounts, growCounts;
  if (global) {
    int64_t all = 0;
    for (Site &site : sites)
      all += site.blocks;
    Value active =
        s.sub(s.i64(all), roundToI64(s, s.mul(sp, s.f64(double(all)))));
    Value g = growCount(active);
    keepCounts.push_back(s.sub(active, g));
    growCounts.push_back(g);
    // selectTopK sums the per-site counts: the joint count goes first.
    for (size_t i = 1; i < sites.size(); ++i)
      keepCounts.push_back(zero), growCounts.push_back(zero);
  } else {
    for (Site &site : sites) {
      Value g = growCount(site.active);
      keepCounts.push_back(s.sub(site.active, g));
      growCounts.push_back(g);
    }
  }

  // Keep by weight score among the active blocks, grow by gradient score
  // among the rest.
  SmallVector<Value> weightScores, gradScores;
  for (Site &site : sites) {
    weightScores.push_back(onlyActive(
        b, loc, blockScores(b, loc, site.weight, block, config->score),
        site.mask, /*inactive=*/false));
    gradScores.push_back(blockScores(b, loc, site.grad, block, config->score));
  }
  SmallVector<Value> keep =
      selectTopK(b, loc, weightScores, keepCounts, s, global);
  for (auto [i, site] : llvm::enumerate(sites))
    gradScores[i] =
        onlyActive(b, loc, gradScores[i], keep[i], /*inactive=*/true);
  SmallVector<Value> grown =
      selectTopK(b, loc, gradScores, growCounts, s, global);

  ed.addMetric(kScheduledMetric, s.tensor(sp, b.getF64Type()));
  Value updateT = tensor::FromElementsOp::create(
      b, loc, RankedTensorType::get({}, b.getI1Type()), ValueRange{update});
  for (auto [i, site] : llvm::enumerate(sites)) {
    // keep or grown (disjoint unless a NaN gradient score ranked a kept
    // block): one per active block, never 2.
    Value fresh =
        SelectOp::create(b, loc, isActive(b, loc, keep[i]), keep[i], grown[i]);
    Value next = SelectOp::create(b, loc, updateT, fresh, site.mask);
    ed.addUpdate(site.mask, next);
    // Metrics: the sparsity after the step, and what this update changed.
    Value zeroMask = maskZero(b, loc);
    auto inactive = [&](Value m) {
      return CompareOp::create(b, loc, ComparePredicate::eq, m, zeroMask);
    };
    Value dropped =
        SelectOp::create(b, loc, inactive(next), site.mask, zeroMask);
    Value added = SelectOp::create(b, loc, inactive(site.mask), next, zeroMask);
    Value activeAfter = s.extract(countActive(b, loc, next));
    Value sparsity =
        s.sub(s.f64(1.0), s.div(activeAfter, s.f64(double(site.blocks))));
    ed.addMetric((Twine(kSparsityMetric) + "@" + site.name).str(),
                 s.tensor(sparsity, b.getF32Type()));
    ed.addMetric((Twine(kDroppedMetric) + "@" + site.name).str(),
                 countActive(b, loc, dropped));
    ed.addMetric((Twine(kGrownMetric) + "@" + site.name).str(),
                 countActive(b, loc, added));
  }
  ed.finish();
  return success();
}

namespace {
struct UpdateSparsityMasksPass
    : public mlir::ds::impl::UpdateSparsityMasksPassBase<
          UpdateSparsityMasksPass> {
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    if (failed(forEachTrainStep(getOperation(), getArgument(),
                                updateSparsityMasks)))
      signalPassFailure();
  }
};
} // namespace

//===- Sparsity.cpp - Block sparsity shared by its passes -----------------===//

#include "Sparsity.h"

#include "../StepUtils.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::sparsity;

static constexpr llvm::StringLiteral kSparsityAttrName =
    DSDialect::kSparsityAttrName;

//===----------------------------------------------------------------------===//
// SparsityConfig
//===----------------------------------------------------------------------===//

SparsityConfig SparsityConfig::fromOptions(const SparsifyMatMulPassOptions &o) {
  SparsityConfig c;
  c.block = o.block;
  c.schedule = o.schedule;
  c.initial = o.initial;
  c.final = o.final;
  c.hold = o.hold;
  c.totalSteps = o.totalSteps;
  c.updateEvery = o.updateEvery;
  c.regrow = o.regrow;
  c.dropFraction = o.dropFraction;
  c.regrowEnd = o.regrowEnd;
  c.score = o.score;
  c.distribution = o.distribution;
  return c;
}

LogicalResult SparsityConfig::validate(std::string &error) const {
  auto fail = [&](StringRef option, const Twine &why) {
    error = detail::optionError("ds-sparsify-matmul", option, why);
    return failure();
  };
  auto got = [](double v) { return ", got " + std::to_string(v); };
  if (block <= 0)
    return fail("block", "must be positive, got " + Twine(block));
  if (!(initial >= 0 && initial < 1))
    return fail("initial", "must be in [0, 1)" + got(initial));
  if (!(final >= 0 && final < 1))
    return fail("final", "must be in [0, 1)" + got(final));
  if (schedule != SparsitySchedule::Constant && final < initial)
    return fail("final", "is below initial (" + std::to_string(initial) +
                             "): the schedule only raises the sparsity" +
                             got(final));
  if (!(hold >= 0 && hold < 1))
    return fail("hold", "must be in [0, 1)" + got(hold));
  if (updateEvery <= 0)
    return fail("update-every", "must be positive, got " + Twine(updateEvery));
  if (totalSteps < 0)
    return fail("total-steps", "must be >= 0, got " + Twine(totalSteps));
  if (schedule != SparsitySchedule::Constant && totalSteps == 0)
    return fail(
        "total-steps",
        Twine("is needed by the ") +
            (schedule == SparsitySchedule::Cosine ? "cosine" : "cubic") +
            " schedule (the training length it is "
            "laid over); give total-steps=T or "
            "schedule=constant");
  if (regrow && totalSteps == 0)
    return fail("total-steps", "is needed by regrow (the drop fraction "
                               "decays to 0 at regrow-end * total-steps)");
  if (!(dropFraction >= 0 && dropFraction <= 1))
    return fail("drop-fraction", "must be in [0, 1]" + got(dropFraction));
  if (!(regrowEnd > 0 && regrowEnd <= 1))
    return fail("regrow-end", "must be in (0, 1]" + got(regrowEnd));
  return success();
}

static StringRef scheduleName(SparsitySchedule s) {
  switch (s) {
  case SparsitySchedule::Cosine:
    return "cosine";
  case SparsitySchedule::Constant:
    return "constant";
  case SparsitySchedule::Cubic:
    return "cubic";
  }
  llvm_unreachable("schedule");
}

static StringRef distributionName(SparsityDistribution d) {
  switch (d) {
  case SparsityDistribution::Uniform:
    return "uniform";
  case SparsityDistribution::ERK:
    return "erk";
  case SparsityDistribution::Global:
    return "global";
  }
  llvm_unreachable("distribution");
}

DictionaryAttr SparsityConfig::toAttr(MLIRContext *ctx) const {
  Builder b(ctx);
  return b.getDictionaryAttr({
      b.getNamedAttr("block", b.getI64IntegerAttr(block)),
      b.getNamedAttr("schedule", b.getStringAttr(scheduleName(schedule))),
      b.getNamedAttr("initial", b.getF64FloatAttr(initial)),
      b.getNamedAttr("final", b.getF64FloatAttr(final)),
      b.getNamedAttr("hold", b.getF64FloatAttr(hold)),
      b.getNamedAttr("total_steps", b.getI64IntegerAttr(totalSteps)),
      b.getNamedAttr("update_every", b.getI64IntegerAttr(updateEvery)),
      b.getNamedAttr("regrow", b.getBoolAttr(regrow)),
      b.getNamedAttr("drop_fraction", b.getF64FloatAttr(dropFraction)),
      b.getNamedAttr("regrow_end", b.getF64FloatAttr(regrowEnd)),
      b.getNamedAttr("score",
                     b.getStringAttr(score == BlockScore::L1 ? "l1" : "l2")),
      b.getNamedAttr("distribution",
                     b.getStringAttr(distributionName(distribution))),
  });
}

FailureOr<SparsityConfig> SparsityConfig::fromAttr(DictionaryAttr attr,
                                                   std::string &error) {
  SparsityConfig c;
  bool ok = true;
  auto i64 = [&](StringRef key, int64_t &field) {
    if (auto a = attr.getAs<IntegerAttr>(key))
      field = a.getInt();
    else
      ok = false, error = "'" + key.str() + "' is missing";
  };
  auto f64 = [&](StringRef key, double &field) {
    if (auto a = attr.getAs<FloatAttr>(key))
      field = a.getValueAsDouble();
    else
      ok = false, error = "'" + key.str() + "' is missing";
  };
  auto str = [&](StringRef key) -> StringRef {
    if (auto a = attr.getAs<StringAttr>(key))
      return a.getValue();
    ok = false, error = "'" + key.str() + "' is missing";
    return "";
  };
  i64("block", c.block);
  f64("initial", c.initial);
  f64("final", c.final);
  f64("hold", c.hold);
  i64("total_steps", c.totalSteps);
  i64("update_every", c.updateEvery);
  f64("drop_fraction", c.dropFraction);
  f64("regrow_end", c.regrowEnd);
  if (auto r = attr.getAs<BoolAttr>("regrow"))
    c.regrow = r.getValue();
  StringRef sched = str("schedule"), score = str("score"),
            dist = str("distribution");
  if (!ok)
    return failure();
  if (sched == "cosine")
    c.schedule = SparsitySchedule::Cosine;
  else if (sched == "constant")
    c.schedule = SparsitySchedule::Constant;
  else if (sched == "cubic")
    c.schedule = SparsitySchedule::Cubic;
  else
    return error = "unknown schedule '" + sched.str() + "'", failure();
  c.score = score == "l2" ? BlockScore::L2 : BlockScore::L1;
  if (dist == "uniform")
    c.distribution = SparsityDistribution::Uniform;
  else if (dist == "erk")
    c.distribution = SparsityDistribution::ERK;
  else if (dist == "global")
    c.distribution = SparsityDistribution::Global;
  else
    return error = "unknown distribution '" + dist.str() + "'", failure();
  if (failed(c.validate(error)))
    return failure();
  return c;
}

std::string SparsityConfig::describe() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << scheduleName(schedule) << " ";
  if (schedule == SparsitySchedule::Constant)
    os << llvm::format("%g", final);
  else
    os << llvm::format("%g -> %g hold %g over %lld steps", initial, final, hold,
                       static_cast<long long>(totalSteps));
  os << ", " << block << "x" << block << " blocks, update every " << updateEvery
     << ", " << distributionName(distribution);
  if (regrow)
    os << llvm::format(", regrow %g until %g", dropFraction, regrowEnd);
  return text;
}

void mlir::ds::sparsity::recordConfig(FunctionOpInterface func,
                                      const SparsityConfig &config) {
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return;
  NamedAttrList entries;
  if (auto old = module->getAttrOfType<DictionaryAttr>(kSparsityAttrName))
    entries.append(old.getValue());
  entries.set(func.getName(), config.toAttr(func->getContext()));
  module->setAttr(kSparsityAttrName, entries.getDictionary(func->getContext()));
}

FailureOr<SparsityConfig>
mlir::ds::sparsity::lookupConfig(FunctionOpInterface func) {
  auto module = func->getParentOfType<ModuleOp>();
  DictionaryAttr table =
      module ? module->getAttrOfType<DictionaryAttr>(kSparsityAttrName)
             : DictionaryAttr();
  auto entry =
      table ? table.getAs<DictionaryAttr>(func.getName()) : DictionaryAttr();
  if (!entry)
    return func->emitOpError("has '")
           << kMaskStateKind << "' state but no '" << kSparsityAttrName
           << "' settings for it in the module; run ds-sparsify-matmul to "
              "make a step sparse";
  std::string error;
  FailureOr<SparsityConfig> c = SparsityConfig::fromAttr(entry, error);
  if (failed(c))
    return func->emitOpError("bad '") << kSparsityAttrName << "': " << error;
  return c;
}

//===----------------------------------------------------------------------===//
// Schedule
//===----------------------------------------------------------------------===//

Value mlir::ds::sparsity::scheduledSparsity(ScalarBuilder &s,
                                            const SparsityConfig &c, Value t) {
  if (c.schedule == SparsitySchedule::Constant)
    return s.f64(c.final);
  double T = double(c.totalSteps);
  // The phase p in [0, 1] after the hold.
  Value p = s.div(s.sub(t, s.f64(c.hold * T)), s.f64((1.0 - c.hold) * T));
  p = s.minf(s.maxf(p, s.f64(0.0)), s.f64(1.0));
  if (c.schedule == SparsitySchedule::Cubic) {
    Value q = s.sub(s.f64(1.0), p);
    return s.add(s.f64(c.final),
                 s.mul(s.f64(c.initial - c.final), s.mul(q, s.mul(q, q))));
  }
  Value cosine = s.cos(s.mul(p, s.f64(llvm::numbers::pi)));
  Value half = s.mul(s.add(s.f64(1.0), cosine), s.f64(0.5));
  return s.sub(s.f64(c.final), s.mul(s.f64(c.final - c.initial), half));
}

Value mlir::ds::sparsity::isRegrowing(ScalarBuilder &s, const SparsityConfig &c,
                                      Value t) {
  if (!c.regrow)
    return arith::ConstantOp::create(s.b, s.loc, s.b.getBoolAttr(false));
  double end = c.regrowEnd * double(c.totalSteps);
  return s.andi(s.cmpf(arith::CmpFPredicate::OGT, t, s.f64(0.0)),
                s.cmpf(arith::CmpFPredicate::OLT, t, s.f64(end)));
}

Value mlir::ds::sparsity::dropFraction(ScalarBuilder &s,
                                       const SparsityConfig &c, Value t) {
  double end = c.regrowEnd * double(c.totalSteps);
  Value p = s.minf(s.div(t, s.f64(end)), s.f64(1.0));
  Value cosine = s.cos(s.mul(p, s.f64(llvm::numbers::pi)));
  return s.mul(s.f64(c.dropFraction / 2.0), s.add(s.f64(1.0), cosine));
}

Value mlir::ds::sparsity::isMaskUpdate(ScalarBuilder &s,
                                       const SparsityConfig &c, Value ti) {
  using P = arith::CmpIPredicate;
  Value multiple = s.cmpi(
      P::eq, arith::RemSIOp::create(s.b, s.loc, ti, s.i64(c.updateEvery)),
      s.i64(0));
  Value first = s.cmpi(P::eq, ti, s.i64(0));
  Value t = arith::SIToFPOp::create(s.b, s.loc, s.b.getF64Type(), ti);
  Value prev = s.sub(t, s.f64(double(c.updateEvery)));
  Value moved = s.cmpf(arith::CmpFPredicate::ONE, scheduledSparsity(s, c, t),
                       scheduledSparsity(s, c, prev));
  Value why = s.ori(first, s.ori(moved, isRegrowing(s, c, t)));
  return s.andi(multiple, why);
}

//===----------------------------------------------------------------------===//
// Blocks
//===----------------------------------------------------------------------===//

/// `x` ([R, C]) seen as [R/b, b, C/b, b].
static Value asBlocks(OpBuilder &b, Location loc, Value x, int64_t block) {
  auto t = cast<RankedTensorType>(x.getType());
  int64_t r = t.getDimSize(0), c = t.getDimSize(1);
  return ReshapeOp::create(b, loc,
                           t.clone({r / block, block, c / block, block}), x);
}

Value mlir::ds::sparsity::blockScores(OpBuilder &b, Location loc, Value x,
                                      int64_t block, BlockScore score) {
  // Scores of narrow weights in f32: sums of squares overflow f16, and the
  // runtime's top-k takes f32 and f64.
  auto t = cast<RankedTensorType>(x.getType());
  if (t.getElementType().getIntOrFloatBitWidth() < 32)
    x = CastOp::create(b, loc, t.clone(b.getF32Type()), x);
  Value blocks = asBlocks(b, loc, x, block);
  Value mag = score == BlockScore::L1
                  ? Value(AbsOp::create(b, loc, blocks))
                  : Value(MulOp::create(b, loc, blocks, blocks));
  return ReduceSumOp::create(b, loc, mag, b.getDenseI64ArrayAttr({1, 3}),
                             /*keepDims=*/false);
}

Value mlir::ds::sparsity::applyMask(OpBuilder &b, Location loc, Value x,
                                    Value mask, int64_t block) {
  auto t = cast<RankedTensorType>(x.getType());
  auto mt = cast<RankedTensorType>(mask.getType());
  int64_t br = mt.getDimSize(0), bc = mt.getDimSize(1);
  // The mask expanded to x's shape, and the select on x itself: its result
  // is x's shape, so the kernel that computes it (fused with the optimizer
  // update before it) writes the step's result buffer directly. A select
  // on x's [R/b, b, C/b, b] view would need a copy back out of the view.
  Value active = isActive(b, loc, mask);
  Value expanded = BroadcastOp::create(
      b, loc, RankedTensorType::get({br, block, bc, block}, b.getI1Type()),
      active, b.getDenseI64ArrayAttr({0, 2}));
  Value active2 = ReshapeOp::create(b, loc, t.clone(b.getI1Type()), expanded);
  auto st = RankedTensorType::get({}, t.getElementType());
  Value zero = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          st, FloatAttr::get(cast<FloatType>(t.getElementType()), 0.0)));
  return SelectOp::create(b, loc, active2, x, zero);
}

Value mlir::ds::sparsity::maskZero(OpBuilder &b, Location loc) {
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({}, b.getI8Type()),
                             ArrayRef<Attribute>{b.getI8IntegerAttr(0)}));
}

Value mlir::ds::sparsity::isActive(OpBuilder &b, Location loc, Value mask) {
  return CompareOp::create(b, loc, ComparePredicate::ne, mask,
                           maskZero(b, loc));
}

Value mlir::ds::sparsity::countActive(OpBuilder &b, Location loc, Value mask) {
  auto mt = cast<RankedTensorType>(mask.getType());
  Value f = CastOp::create(b, loc, mt.clone(b.getF32Type()), mask);
  return detail::reduceAll(b, loc, f);
}

//===- PipelineSplit.cpp - A step cut into pipeline stages ----------------===//
//
// How a step becomes stage functions (PipelineSplit.h):
//
//  - ownership: every Forward op runs in the forward function of its
//    layer's stage, every Backward op in the backward function of its
//    forward op's stage; Free ops (pure, no per-micro-batch data) are cloned
//    into whichever function needs them;
//  - a value one function needs and another computes is an argument of the
//    first and a result of the second; the driver connects them: within a
//    stage through SSA values (the stash of a micro-batch's activations),
//    across stages through ds.send / ds.recv (one channel per value and
//    receiving stage);
//  - values of the micro-batches that the update reads (gradients, the
//    loss) are averaged over the micro-batches in the driver;
//  - the update is labelled op by op: Local to one stage (the optimizer of
//    its parameters), Free / Global (the same on every stage: the loss
//    scale, the step counter), or Partial: an associative combine (sum,
//    max) of values of several stages, which each stage computes over its
//    own values and a ds.all_reduce across_stages completes where a
//    non-combining op first reads it. Every stage walks the same ops in the
//    same order, so the cross-stage reductions match up.
//
//===----------------------------------------------------------------------===//

#include "PipelineSplit.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <limits>
#include <map>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::pipeline;

SmallVector<Slot> mlir::ds::pipeline::stageSchedule(const SplitOptions &options,
                                                    unsigned stage) {
  unsigned m = options.microBatches, s = options.stages;
  SmallVector<Slot> slots;
  if (options.schedule == ScheduleKind::GPipe) {
    for (unsigned i = 0; i < m; ++i)
      slots.push_back({true, i});
    for (unsigned i = 0; i < m; ++i)
      slots.push_back({false, i});
    return slots;
  }
  unsigned warmup = std::min(s - 1 - stage, m);
  for (unsigned i = 0; i < warmup; ++i)
    slots.push_back({true, i});
  for (unsigned i = 0; i + warmup < m; ++i) {
    slots.push_back({true, warmup + i});
    slots.push_back({false, i});
  }
  for (unsigned i = m - warmup; i < m; ++i)
    slots.push_back({false, i});
  return slots;
}

namespace {

/// A micro-batch function: stage k's forward or backward.
struct MicroFn {
  unsigned stage = 0;
  bool forward = true;
  func::FuncOp func;
  IRMapping map;
  /// The step value behind each argument.
  SmallVector<Value> args;
  /// The step values it returns (set once every consumer is known).
  llvm::SetVector<Value> outputs;
  /// Those of its values the update reads: each comes in as the running
  /// sum over the earlier micro-batches and goes out with this one's added
  /// (after `outputs`), so the sums are compiled once, here.
  llvm::SetVector<Value> summed;
};

/// The label of a value of the update (see the file comment).
struct Label {
  enum Kind { Free, Local, Partial, Global } kind = Free;
  unsigned stage = 0;                         ///< Local
  ReductionKind combine = ReductionKind::sum; ///< Partial
};

/// What every stage does with one op of the update.
struct UpdatePlan {
  Label label;
  bool combine = false;
  /// Operands to complete (all-reduce across stages) before the op, with
  /// the reduction they continue.
  SmallVector<std::pair<Value, ReductionKind>> complete;
};

class Splitter {
public:
  Splitter(func::FuncOp step, const StepLayers &layers,
           ArrayRef<unsigned> stageOfLayer, const SplitOptions &options,
           int64_t &nextTag)
      : step(step), layers(layers), stageOfLayer(stageOfLayer),
        options(options), nextTag(nextTag), body(step.getBody().front()),
        b(step) {}

  LogicalResult run();

private:
  // Ownership of the per-micro-batch ops.
  MicroFn *ownerFn(Operation *op);
  bool isMicroValue(Value v);
  LogicalResult buildMicroFns();
  Value materializeIn(MicroFn &fn, Value v, OpBuilder &ob);

  // The update.
  Label labelOf(Value v);
  LogicalResult planUpdate();
  LogicalResult buildUpdate(unsigned stage);

  // The driver.
  LogicalResult buildDriver(unsigned stage);

  InFlightDiagnostic error(Operation *at, const Twine &what) {
    return at->emitOpError("not supported by ds-partition-pipeline: ") << what;
  }

  func::FuncOp step;
  const StepLayers &layers;
  ArrayRef<unsigned> stageOfLayer;
  SplitOptions options;
  int64_t &nextTag;
  Block &body;
  OpBuilder b;
  FailureOr<TrainingContract> contract;

  SmallVector<MicroFn> fns; // fwd_0, bwd_0, fwd_1, bwd_1, ...
  MicroFn &fwd(unsigned k) { return fns[2 * k]; }
  MicroFn &bwd(unsigned k) { return fns[2 * k + 1]; }
  llvm::DenseMap<Operation *, bool> microMemo;
  /// The stage whose functions read each parameter.
  llvm::DenseMap<Value, unsigned> paramStage;
  /// Per-micro-batch values the update or the results read: averaged.
  llvm::SetVector<Value> averaged;

  llvm::DenseMap<Value, Label> labels;
  llvm::DenseMap<Operation *, UpdatePlan> plans;
  /// Per result of the step: complete it across stages first.
  SmallVector<bool> completeResult;
  /// State the forward or backward of every micro-batch updates (running
  /// statistics, observers, amax histories): by step result, the state
  /// argument and the function computing its new value. The driver threads
  /// it through the micro-batches, as M calls of a PyTorch module would.
  llvm::DenseMap<unsigned, std::pair<Value, MicroFn *>> threaded;
  LogicalResult findThreadedState();

  /// Channel tag of each (value, receiving stage).
  std::map<std::pair<const void *, unsigned>, int64_t> channels;

  struct UpdateFn {
    func::FuncOp func;
    SmallVector<Value> args;       ///< step value behind each argument
    SmallVector<unsigned> results; ///< step result index of each result
    /// Per entry of `results`: where the driver finds it. >= 0: that
    /// result of the function; < 0: argument -1 - source, passed through
    /// unchanged. The function returns each value once and no argument:
    /// upstream's buffer-results-to-out-params (hoisting static allocations)
    /// crashes on a buffer returned twice.
    SmallVector<int> source;
  };
  SmallVector<UpdateFn> updates;
};

} // namespace

MicroFn *Splitter::ownerFn(Operation *op) {
  OpPhase phase = layers.phases.of(op);
  if (phase == OpPhase::Forward)
    return &fwd(stageOfLayer[layers.layerOf.lookup(op)]);
  if (phase == OpPhase::Backward) {
    Operation *f = layers.phases.ownerOf.lookup(op);
    return &bwd(stageOfLayer[layers.layerOf.lookup(f)]);
  }
  return nullptr;
}

/// Whether `v` is computed per micro-batch: by an owned op, or by a free op
/// reading such a value.
bool Splitter::isMicroValue(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  auto it = microMemo.find(def);
  if (it != microMemo.end())
    return it->second;
  bool micro = ownerFn(def) != nullptr;
  if (!micro && layers.phases.of(def) == OpPhase::Free)
    micro = llvm::any_of(def->getOperands(),
                         [&](Value o) { return isMicroValue(o); });
  return microMemo[def] = micro;
}

/// The value `v` inside `fn`: already there, a free op cloned in, or a new
/// argument.
Value Splitter::materializeIn(MicroFn &fn, Value v, OpBuilder &ob) {
  if (Value m = fn.map.lookupOrNull(v))
    return m;
  Operation *def = v.getDefiningOp();
  if (def && layers.phases.of(def) == OpPhase::Free) {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(def->getRegions(), captured);
    for (Value o : llvm::concat<Value>(def->getOperands(), captured))
      (void)materializeIn(fn, o, ob);
    ob.clone(*def, fn.map);
    return fn.map.lookup(v);
  }
  Value arg = fn.func.getBody().front().addArgument(v.getType(), v.getLoc());
  fn.map.map(v, arg);
  fn.args.push_back(v);
  return arg;
}

LogicalResult Splitter::buildMicroFns() {
  MLIRContext *ctx = step.getContext();
  StringRef name = step.getSymName();
  for (unsigned k = 0; k < options.stages; ++k)
    for (bool forward : {true, false}) {
      MicroFn fn;
      fn.stage = k;
      fn.forward = forward;
      std::string fnName =
          (name + "_s" + Twine(k) + (forward ? "_fwd" : "_bwd")).str();
      fn.func = func::FuncOp::create(b, step.getLoc(), fnName,
                                     FunctionType::get(ctx, {}, {}));
      fn.func.setPrivate();
      fn.func.addEntryBlock();
      fns.push_back(std::move(fn));
    }
  // Clone each owned op into its function, in block order.
  for (Operation &op : body.without_terminator()) {
    MicroFn *fn = ownerFn(&op);
    if (!fn)
      continue;
    OpBuilder ob = OpBuilder::atBlockEnd(&fn->func.getBody().front());
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op.getRegions(), captured);
    for (Value o : llvm::concat<Value>(op.getOperands(), captured))
      (void)materializeIn(*fn, o, ob);
    ob.clone(op, fn->map);
  }

  // Who reads what: outputs and the direction of every transfer.
  llvm::DenseMap<Value, MicroFn *> producer;
  for (Operation &op : body.without_terminator())
    if (MicroFn *fn = ownerFn(&op))
      for (Value r : op.getResults())
        producer[r] = fn;
  for (MicroFn &fn : fns)
    for (Value v : fn.args) {
      if (isa<BlockArgument>(v)) {
        auto arg = cast<BlockArgument>(v);
        if (contract->args[arg.getArgNumber()].role != ArgRole::Param)
          continue;
        auto [it, inserted] = paramStage.try_emplace(v, fn.stage);
        if (!inserted && it->second != fn.stage)
          return step.emitOpError("not supported by ds-partition-pipeline: "
                                  "parameter '")
                 << contract->args[arg.getArgNumber()].name
                 << "' is read by stages " << it->second << " and " << fn.stage
                 << " (tied weights must lie in one stage)";
        continue;
      }
      MicroFn *from = producer.lookup(v);
      if (!from)
        return error(v.getDefiningOp(), "a per-micro-batch value no stage "
                                        "computes feeds stage ")
               << fn.stage;
      if (from == &fn)
        continue;
      // Forward values flow to the same or later stages, backward values to
      // the same or earlier ones: anything else would wait on itself.
      bool ok = from->forward ? from->stage <= fn.stage
                              : (!fn.forward && from->stage >= fn.stage);
      if (!ok)
        return error(v.getDefiningOp(), "a value of stage ")
               << from->stage << "'s "
               << (from->forward ? "forward" : "backward") << " feeds stage "
               << fn.stage << "'s " << (fn.forward ? "forward" : "backward")
               << "; move the cut so that it does not";
      from->outputs.insert(v);
    }
  return success();
}

//===----------------------------------------------------------------------===//
// The update
//===----------------------------------------------------------------------===//

Label Splitter::labelOf(Value v) {
  auto it = labels.find(v);
  if (it != labels.end())
    return it->second;
  Label l;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    const ContractArg &c = contract->args[arg.getArgNumber()];
    if (c.role == ArgRole::Param) {
      l = {Label::Local, paramStage.lookup(v)};
    } else if (c.role == ArgRole::State && c.state &&
               !c.state.getOf().empty()) {
      for (auto [i, a] : llvm::enumerate(contract->args))
        if (a.role == ArgRole::Param && a.name == c.state.getOf())
          l = {Label::Local, paramStage.lookup(body.getArgument(i))};
    }
  } else if (MicroFn *fn = ownerFn(v.getDefiningOp())) {
    l = {Label::Local, fn->stage};
  } else {
    // A free op: the join of its operands (never a combine across stages).
    for (Value o : v.getDefiningOp()->getOperands()) {
      Label lo = labelOf(o);
      if (lo.kind == Label::Local)
        l = lo;
      else if (lo.kind == Label::Global && l.kind == Label::Free)
        l.kind = Label::Global;
    }
  }
  return labels[v] = l;
}

/// The cross-stage reduction an op continues, if it is a binary combine.
static std::optional<ReductionKind> combineKind(Operation *op) {
  if (op->getNumOperands() != 2 || op->getNumResults() != 1 ||
      op->getOperand(0).getType() != op->getResult(0).getType() ||
      op->getOperand(1).getType() != op->getResult(0).getType())
    return std::nullopt;
  if (isa<arith::AddFOp, arith::AddIOp, AddOp>(op))
    return ReductionKind::sum;
  if (isa<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp, arith::OrIOp,
          MaximumOp>(op))
    return ReductionKind::max;
  if (isa<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp, MinimumOp>(op))
    return ReductionKind::min;
  return std::nullopt;
}

LogicalResult Splitter::planUpdate() {
  Operation *terminator = body.getTerminator();
  for (Operation &op : body.without_terminator()) {
    if (layers.phases.of(&op) != OpPhase::Update)
      continue;
    UpdatePlan plan;
    SmallVector<Label> in;
    for (Value o : op.getOperands())
      in.push_back(labelOf(o));
    std::optional<ReductionKind> kind = combineKind(&op);
    // A combine of values of different stages, or continuing a partial one.
    if (kind) {
      bool mixes = in[0].kind == Label::Local && in[1].kind == Label::Local &&
                   in[0].stage != in[1].stage;
      bool continues = llvm::all_of(in,
                                    [&](const Label &l) {
                                      return l.kind == Label::Local ||
                                             (l.kind == Label::Partial &&
                                              l.combine == *kind);
                                    }) &&
                       llvm::any_of(in, [](const Label &l) {
                         return l.kind == Label::Partial;
                       });
      if (mixes || continues) {
        plan.combine = true;
        plan.label = {Label::Partial, 0, *kind};
        labels[op.getResult(0)] = plan.label;
        plans[&op] = plan;
        continue;
      }
    }
    // Anything else completes its partial operands first.
    for (auto [o, l] : llvm::zip(op.getOperands(), in))
      if (l.kind == Label::Partial) {
        plan.complete.push_back({o, l.combine});
        l = {Label::Global};
        labels[o] = l;
      }
    for (const Label &l : in) {
      if (l.kind == Label::Local) {
        if (plan.label.kind == Label::Local && plan.label.stage != l.stage)
          return error(&op, "it reads values of stages ")
                 << plan.label.stage << " and " << l.stage
                 << " and is not a sum, max or min of them";
        plan.label = l;
      } else if (l.kind == Label::Global && plan.label.kind == Label::Free) {
        plan.label.kind = Label::Global;
      }
    }
    // An op with side effects (a collective over the data-parallel
    // replicas) on no stage's values runs on every stage.
    for (Value r : op.getResults())
      labels[r] = plan.label;
    plans[&op] = plan;
  }
  // Results: updates of a stage's parameters and state stay there; the
  // loss, metrics and shared state are completed so that every stage has
  // them.
  for (auto [i, res] : llvm::enumerate(contract->results)) {
    Value v = terminator->getOperand(i);
    if (threaded.count(i)) {
      completeResult.push_back(false);
      continue;
    }
    Label l = labelOf(v);
    bool owned = false;
    if (res.role == ResultRole::Update) {
      Label target = labelOf(body.getArgument(res.argIndex));
      owned = target.kind == Label::Local;
      if (owned && l.kind == Label::Local && l.stage != target.stage)
        return error(terminator, "the update of '")
               << contract->args[res.argIndex].name << "' is computed on stage "
               << l.stage << " but it lives on stage " << target.stage;
      if (owned && l.kind == Label::Partial)
        owned = false;
    }
    // With one stage there is nothing to complete.
    completeResult.push_back(
        options.stages > 1 && !owned &&
        (l.kind == Label::Local || l.kind == Label::Partial));
  }
  return success();
}

namespace {

/// The neutral element of `kind` for values of `type`.
Value identityOf(OpBuilder &ob, Location loc, Type type, ReductionKind kind) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  Type et = tensor ? tensor.getElementType() : type;
  TypedAttr scalar;
  if (auto ft = dyn_cast<FloatType>(et)) {
    double v = kind == ReductionKind::sum ? 0.0
               : kind == ReductionKind::max
                   ? -std::numeric_limits<double>::infinity()
                   : std::numeric_limits<double>::infinity();
    scalar = FloatAttr::get(ft, v);
  } else {
    auto it = cast<IntegerType>(et);
    unsigned w = it.getWidth();
    APInt v =
        kind == ReductionKind::sum ? APInt::getZero(w)
        : kind == ReductionKind::max
            ? (w == 1 ? APInt::getZero(1) : APInt::getSignedMinValue(w))
            : (w == 1 ? APInt::getAllOnes(1) : APInt::getSignedMaxValue(w));
    scalar = IntegerAttr::get(it, v);
  }
  TypedAttr value =
      tensor ? TypedAttr(DenseElementsAttr::get(tensor, Attribute(scalar)))
             : scalar;
  return arith::ConstantOp::create(ob, loc, value);
}

/// The reduction of `v` over the stages. f32/f64 tensors go as they are;
/// other scalars through f64 (exact for flags and counters).
Value reduceAcrossStages(OpBuilder &ob, Location loc, Value v,
                         ReductionKind kind) {
  auto tensor = dyn_cast<RankedTensorType>(v.getType());
  if (tensor &&
      (tensor.getElementType().isF32() || tensor.getElementType().isF64())) {
    auto op = AllReduceOp::create(ob, loc, v, kind);
    op.setAcrossStages(true);
    return op.getResult();
  }
  Type et = tensor ? tensor.getElementType() : v.getType();
  Value scalar =
      tensor ? Value(tensor::ExtractOp::create(ob, loc, v, ValueRange{})) : v;
  Type f64 = ob.getF64Type();
  Value wide;
  if (isa<FloatType>(et))
    wide = et.isF64() ? scalar : arith::ExtFOp::create(ob, loc, f64, scalar);
  else if (et.isInteger(1))
    wide = arith::UIToFPOp::create(ob, loc, f64, scalar);
  else
    wide = arith::SIToFPOp::create(ob, loc, f64, scalar);
  auto t64 = RankedTensorType::get({}, f64);
  Value packed = tensor::FromElementsOp::create(ob, loc, t64, wide);
  auto op = AllReduceOp::create(ob, loc, packed, kind);
  op.setAcrossStages(true);
  Value reduced =
      tensor::ExtractOp::create(ob, loc, op.getResult(), ValueRange{});
  Value back;
  if (isa<FloatType>(et))
    back = et.isF64() ? reduced : arith::TruncFOp::create(ob, loc, et, reduced);
  else if (et.isInteger(1))
    back = arith::CmpFOp::create(
        ob, loc, arith::CmpFPredicate::ONE, reduced,
        arith::ConstantOp::create(ob, loc, ob.getF64FloatAttr(0.0)));
  else
    back = arith::FPToSIOp::create(ob, loc, et, reduced);
  if (!tensor)
    return back;
  return tensor::FromElementsOp::create(ob, loc, tensor, back);
}

} // namespace

LogicalResult Splitter::buildUpdate(unsigned stage) {
  MLIRContext *ctx = step.getContext();
  UpdateFn fn;
  fn.func = func::FuncOp::create(
      b, step.getLoc(),
      (step.getSymName() + "_s" + Twine(stage) + "_update").str(),
      FunctionType::get(ctx, {}, {}));
  fn.func.setPrivate();
  Block *block = fn.func.addEntryBlock();
  OpBuilder ob = OpBuilder::atBlockEnd(block);
  IRMapping map;
  llvm::DenseMap<Value, Value> partial; // this stage's share of a Partial
  LogicalResult status = success();

  std::function<Value(Value)> get = [&](Value v) -> Value {
    if (Value m = map.lookupOrNull(v))
      return m;
    Operation *def = v.getDefiningOp();
    if (def && layers.phases.of(def) == OpPhase::Free && !isMicroValue(v)) {
      for (Value o : def->getOperands())
        (void)get(o);
      ob.clone(*def, map);
      return map.lookup(v);
    }
    if (def && !isa<BlockArgument>(v)) {
      if (!ownerFn(def) && layers.phases.of(def) != OpPhase::Update) {
        status = error(def, "the update reads this per-micro-batch value, "
                            "which no stage's forward or backward computes");
      } else if (ownerFn(def)) {
        averaged.insert(v);
        ownerFn(def)->summed.insert(v);
      }
    }
    Value arg = block->addArgument(v.getType(), v.getLoc());
    fn.args.push_back(v);
    // The sum over the micro-batches comes in: the mean is the value.
    auto tensor = dyn_cast<RankedTensorType>(v.getType());
    if (averaged.contains(v) && options.microBatches > 1) {
      if (!tensor || !isa<FloatType>(tensor.getElementType())) {
        status = error(def, "the update reads a per-micro-batch value that "
                            "is not a float tensor, which cannot be averaged");
      } else {
        auto scalar = RankedTensorType::get({}, tensor.getElementType());
        Value inv = arith::ConstantOp::create(
            ob, v.getLoc(),
            DenseElementsAttr::get(
                scalar, FloatAttr::get(tensor.getElementType(),
                                       1.0 / double(options.microBatches))));
        Value mean = MulOp::create(ob, v.getLoc(), tensor, arg, inv);
        map.map(v, mean);
        return mean;
      }
    }
    map.map(v, arg);
    return arg;
  };
  // This stage's share of a value being combined across stages.
  auto share = [&](Value v, ReductionKind kind) -> Value {
    Label l = labelOf(v);
    if (Value p = partial.lookup(v))
      return p;
    if (l.kind == Label::Local && l.stage != stage)
      return identityOf(ob, v.getLoc(), v.getType(), kind);
    return get(v);
  };
  auto complete = [&](Value v, ReductionKind kind) {
    Value mine = share(v, kind);
    map.map(v, reduceAcrossStages(ob, v.getLoc(), mine, kind));
  };

  for (Operation &op : body.without_terminator()) {
    auto it = plans.find(&op);
    if (it == plans.end())
      continue;
    const UpdatePlan &plan = it->second;
    for (auto [o, kind] : plan.complete)
      if (!map.contains(o))
        complete(o, kind);
    if (plan.combine) {
      ReductionKind kind = plan.label.combine;
      Value lhs = share(op.getOperand(0), kind);
      Value rhs = share(op.getOperand(1), kind);
      Operation *c = ob.clone(op);
      c->setOperands({lhs, rhs});
      partial[op.getResult(0)] = c->getResult(0);
      continue;
    }
    if (plan.label.kind == Label::Local && plan.label.stage != stage)
      continue;
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(op.getRegions(), captured);
    for (Value o : llvm::concat<Value>(op.getOperands(), captured))
      (void)get(o);
    ob.clone(op, map);
  }
  if (failed(status))
    return failure();

  // The results this stage returns.
  Operation *terminator = body.getTerminator();
  SmallVector<Value> results;
  for (auto [i, res] : llvm::enumerate(contract->results)) {
    Value v = terminator->getOperand(i);
    if (threaded.count(i))
      continue;
    if (completeResult[i]) {
      Label l = labelOf(v);
      ReductionKind kind =
          l.kind == Label::Partial ? l.combine : ReductionKind::sum;
      Value mine = share(v, kind);
      results.push_back(reduceAcrossStages(ob, v.getLoc(), mine, kind));
      fn.results.push_back(i);
      continue;
    }
    Label l = labelOf(v);
    if (res.role == ResultRole::Update) {
      Label target = labelOf(body.getArgument(res.argIndex));
      if (target.kind == Label::Local && target.stage != stage)
        continue;
    } else if (l.kind == Label::Local && l.stage != stage) {
      continue;
    }
    results.push_back(get(v));
    fn.results.push_back(i);
  }
  if (failed(status))
    return failure();
  SmallVector<Value> returned;
  llvm::DenseMap<Value, int> position;
  for (Value r : results) {
    auto arg = dyn_cast<BlockArgument>(r);
    if (arg && arg.getOwner() == block) {
      fn.source.push_back(-1 - int(arg.getArgNumber()));
      continue;
    }
    auto [it, inserted] = position.try_emplace(r, returned.size());
    if (inserted)
      returned.push_back(r);
    fn.source.push_back(it->second);
  }
  func::ReturnOp::create(ob, step.getLoc(), returned);
  fn.func.setFunctionType(
      FunctionType::get(ctx, block->getArgumentTypes(), TypeRange(returned)));
  updates.push_back(std::move(fn));
  return success();
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

LogicalResult Splitter::buildDriver(unsigned stage) {
  MLIRContext *ctx = step.getContext();
  UpdateFn &update = updates[stage];
  MicroFn &f = fwd(stage), &g = bwd(stage);
  unsigned m = options.microBatches;

  // Arguments: every input (the feed is the same on every stage), and the
  // parameters and state this stage's functions read or update.
  llvm::SetVector<unsigned> argIndices;
  for (auto [i, a] : llvm::enumerate(contract->args))
    if (a.role == ArgRole::Input)
      argIndices.insert(i);
  for (ArrayRef<Value> used : {ArrayRef<Value>(f.args), ArrayRef<Value>(g.args),
                               ArrayRef<Value>(update.args)})
    for (Value v : used)
      if (auto arg = dyn_cast<BlockArgument>(v))
        argIndices.insert(arg.getArgNumber());
  // This stage's results: the update's, and the state it threads.
  SmallVector<unsigned> stageResults(update.results);
  for (auto &[r, t] : threaded)
    if (t.second->stage == stage)
      stageResults.push_back(r);
  llvm::sort(stageResults);
  for (unsigned r : stageResults)
    if (contract->results[r].role == ResultRole::Update)
      argIndices.insert(contract->results[r].argIndex);
  SmallVector<unsigned> order(argIndices.begin(), argIndices.end());
  llvm::sort(order);
  llvm::DenseMap<unsigned, unsigned> newIndex;
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i : order) {
    newIndex[i] = argTypes.size();
    Type t = body.getArgument(i).getType();
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (contract->args[i].role == ArgRole::Input && tensor &&
        tensor.getRank() > 0) {
      SmallVector<int64_t> shape(tensor.getShape());
      shape[0] *= m;
      t = RankedTensorType::get(shape, tensor.getElementType());
    }
    argTypes.push_back(t);
    NamedAttrList attrs(step.getArgAttrDict(i));
    if (int64_t range = contract->args[i].range)
      attrs.set(kRangeAttrName,
                IntegerAttr::get(IntegerType::get(ctx, 64), range));
    argAttrs.push_back(attrs.getDictionary(ctx));
  }
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned r : stageResults) {
    resultTypes.push_back(body.getTerminator()->getOperand(r).getType());
    NamedAttrList attrs(step.getResultAttrDict(r));
    if (contract->results[r].role == ResultRole::Update)
      attrs.set(
          DSDialect::kUpdateAttrName,
          IntegerAttr::get(IntegerType::get(ctx, 64),
                           newIndex.lookup(contract->results[r].argIndex)));
    resultAttrs.push_back(attrs.getDictionary(ctx));
  }
  auto driver = func::FuncOp::create(
      b, step.getLoc(), (step.getSymName() + "_s" + Twine(stage)).str(),
      FunctionType::get(ctx, argTypes, resultTypes));
  for (NamedAttribute a : step->getAttrs())
    if (a.getName() != step.getSymNameAttrName() &&
        a.getName() != step.getFunctionTypeAttrName() &&
        a.getName() != step.getArgAttrsAttrName() &&
        a.getName() != step.getResAttrsAttrName())
      driver->setAttr(a.getName(), a.getValue());
  driver->setAttr(DSDialect::kPipelineStageAttrName,
                  IntegerAttr::get(IntegerType::get(ctx, 64), stage));
  for (auto [i, d] : llvm::enumerate(argAttrs))
    if (d)
      driver.setArgAttrs(i, d);
  for (auto [i, d] : llvm::enumerate(resultAttrs))
    driver.setResultAttrs(i, d);
  Block *block = driver.addEntryBlock();
  OpBuilder ob = OpBuilder::atBlockEnd(block);
  Location loc = step.getLoc();

  // Micro-batch m of an input: rows [m b, (m + 1) b).
  auto argValue = [&](Value v, std::optional<unsigned> micro) -> Value {
    unsigned i = cast<BlockArgument>(v).getArgNumber();
    Value whole = block->getArgument(newIndex.lookup(i));
    auto tensor = dyn_cast<RankedTensorType>(v.getType());
    if (!micro || m == 1 || contract->args[i].role != ArgRole::Input ||
        !tensor || tensor.getRank() == 0)
      return whole;
    SmallVector<OpFoldResult> offsets(tensor.getRank(), ob.getIndexAttr(0)),
        sizes, strides(tensor.getRank(), ob.getIndexAttr(1));
    offsets[0] = ob.getIndexAttr(int64_t(*micro) * tensor.getDimSize(0));
    for (int64_t d : tensor.getShape())
      sizes.push_back(ob.getIndexAttr(d));
    return tensor::ExtractSliceOp::create(ob, loc, tensor, whole, offsets,
                                          sizes, strides);
  };

  // Channels: one per (value, receiving stage).
  auto channelOf = [&](Value v, unsigned to) -> int64_t {
    auto key = std::make_pair(v.getAsOpaquePointer(), to);
    auto it = channels.find(key);
    if (it != channels.end())
      return it->second;
    return channels[key] = nextTag++;
  };
  // What this stage receives in the forward (for its forward or backward)
  // and in the backward, and what each of its outputs is sent to.
  auto producerOf = [&](Value v) -> MicroFn * {
    Operation *def = v.getDefiningOp();
    return def ? ownerFn(def) : nullptr;
  };
  llvm::SetVector<Value> recvInForward, recvInBackward;
  for (MicroFn *fn : {&f, &g})
    for (Value v : fn->args)
      if (MicroFn *p = producerOf(v); p && p->stage != stage)
        (p->forward ? recvInForward : recvInBackward).insert(v);
  // Received in the order each producer sends them (its outputs' order):
  // NCCL matches a link's transfers by their order, not by channel.
  auto sendOrder = [&](Value v) {
    MicroFn *p = producerOf(v);
    return std::make_pair(
        p->stage, std::distance(p->outputs.begin(), llvm::find(p->outputs, v)));
  };
  SmallVector<Value> forwardOrder(recvInForward.begin(), recvInForward.end()),
      backwardOrder(recvInBackward.begin(), recvInBackward.end());
  for (SmallVector<Value> *order : {&forwardOrder, &backwardOrder})
    llvm::sort(*order, [&](Value a, Value b) { // (stage, index): unique
      return sendOrder(a) < sendOrder(b);
    });
  auto consumersOf = [&](Value v) {
    SmallVector<unsigned> to;
    for (MicroFn &c : fns)
      if (c.stage != stage && llvm::is_contained(c.args, v) &&
          !llvm::is_contained(to, c.stage))
        to.push_back(c.stage);
    return to;
  };

  SmallVector<llvm::DenseMap<Value, Value>> env(m);
  // The running sums of what the update reads, from zero.
  llvm::DenseMap<Value, Value> sums;
  for (MicroFn *fn : {&f, &g})
    for (Value v : fn->summed) {
      auto type = cast<RankedTensorType>(v.getType());
      sums[v] = arith::ConstantOp::create(
          ob, loc, cast<TypedAttr>(ob.getZeroAttr(type)));
    }
  // Threaded state: its value after the micro-batches so far. A
  // micro-batch's backward reads what its forward read.
  llvm::DenseMap<Value, Value> current;
  llvm::DenseMap<Value, Value> newStateOf; // update value -> state argument
  for (auto &[r, t] : threaded)
    if (t.second->stage == stage) {
      current[t.first] = argValue(t.first, std::nullopt);
      newStateOf[body.getTerminator()->getOperand(r)] = t.first;
    }
  auto call = [&](MicroFn &fn, unsigned micro) -> LogicalResult {
    SmallVector<Value> operands;
    for (Value v : fn.args) {
      if (isa<BlockArgument>(v)) {
        if (Value cur = current.lookup(v)) {
          Value &seen = env[micro][v];
          if (!seen)
            seen = cur;
          operands.push_back(seen);
          continue;
        }
        operands.push_back(argValue(v, micro));
        continue;
      }
      Value x = env[micro].lookup(v);
      if (!x)
        return error(v.getDefiningOp(), "stage ")
               << stage << " needs this value before it is available";
      operands.push_back(x);
    }
    for (Value v : fn.summed)
      operands.push_back(sums.lookup(v));
    auto c = func::CallOp::create(ob, loc, fn.func, operands);
    for (auto [v, r] : llvm::zip(fn.outputs, c.getResults())) {
      env[micro][v] = r;
      for (unsigned to : consumersOf(v))
        SendOp::create(ob, loc, r, to, channelOf(v, to));
      if (Value state = newStateOf.lookup(v))
        current[state] = r;
    }
    for (auto [v, r] :
         llvm::zip(fn.summed, c.getResults().drop_front(fn.outputs.size())))
      sums[v] = r;
    return success();
  };
  auto receive = [&](ArrayRef<Value> values, unsigned micro) {
    for (Value v : values) {
      MicroFn *p = producerOf(v);
      env[micro][v] =
          RecvOp::create(ob, loc, v.getType(), p->stage, channelOf(v, stage));
    }
  };
  for (Slot slot : stageSchedule(options, stage)) {
    if (slot.forward) {
      receive(forwardOrder, slot.micro);
      if (failed(call(f, slot.micro)))
        return failure();
    } else {
      receive(backwardOrder, slot.micro);
      if (failed(call(g, slot.micro)))
        return failure();
    }
  }

  // The update, on the micro-batches' means.
  SmallVector<Value> operands;
  for (Value v : update.args) {
    if (isa<BlockArgument>(v)) {
      operands.push_back(argValue(v, std::nullopt));
      continue;
    }
    Value sum = sums.lookup(v);
    if (!sum)
      return error(v.getDefiningOp(), "the update of stage ")
             << stage << " reads a per-micro-batch value of another stage";
    operands.push_back(sum);
  }
  auto c = func::CallOp::create(ob, loc, update.func, operands);
  SmallVector<Value> results;
  for (unsigned r : stageResults) {
    auto it = threaded.find(r);
    if (it != threaded.end()) {
      results.push_back(current.lookup(it->second.first));
      continue;
    }
    size_t k = llvm::find(update.results, r) - update.results.begin();
    int source = update.source[k];
    results.push_back(source >= 0 ? c.getResult(source)
                                  : operands[-1 - source]);
  }
  func::ReturnOp::create(ob, loc, results);
  return success();
}

LogicalResult Splitter::findThreadedState() {
  Operation *terminator = body.getTerminator();
  for (auto [i, res] : llvm::enumerate(contract->results)) {
    Value v = terminator->getOperand(i);
    if (res.role != ResultRole::Update ||
        contract->args[res.argIndex].role != ArgRole::State)
      continue;
    if (!isMicroValue(v)) {
      // ds-data-parallel computes the dropout generator's next value once
      // per step from the rank count: every micro-batch would then draw
      // the same masks. (Without it, each dropout returns its next value
      // and the generator is threaded like any per-micro-batch state.)
      Value arg = body.getArgument(res.argIndex);
      bool feedsDropout = false;
      step.walk([&](DropoutOp d) {
        Value rng = d.getRng();
        while (Operation *def = rng.getDefiningOp())
          rng = def->getNumOperands() ? def->getOperand(0) : Value();
        feedsDropout |= rng == arg;
      });
      if (feedsDropout && options.microBatches > 1)
        return error(v.getDefiningOp() ? v.getDefiningOp()
                                       : step.getOperation(),
                     "dropout under ds-data-parallel with several "
                     "micro-batches: every micro-batch would draw the same "
                     "masks; use micro-batches=1 or one replica");
      continue;
    }
    MicroFn *producer = ownerFn(v.getDefiningOp());
    if (!producer)
      return error(v.getDefiningOp(), "state '")
             << contract->args[res.argIndex].name
             << "' gets a per-micro-batch value no stage's forward or "
                "backward computes";
    Value arg = body.getArgument(res.argIndex);
    for (MicroFn &fn : fns)
      if (fn.stage != producer->stage && llvm::is_contained(fn.args, arg))
        return error(v.getDefiningOp(), "state '")
               << contract->args[res.argIndex].name << "' is read by stage "
               << fn.stage << " and updated by stage " << producer->stage;
    producer->outputs.insert(v);
    threaded[i] = {arg, producer};
  }
  return success();
}

LogicalResult Splitter::run() {
  contract = TrainingContract::fromFunction(step);
  if (failed(contract))
    return failure();
  b.setInsertionPoint(step);
  if (failed(buildMicroFns()) || failed(findThreadedState()) ||
      failed(planUpdate()))
    return failure();
  for (unsigned k = 0; k < options.stages; ++k)
    if (failed(buildUpdate(k)))
      return failure();
  // Now every output is known: give the micro functions their returns.
  for (MicroFn &fn : fns) {
    Block &blk = fn.func.getBody().front();
    OpBuilder ob = OpBuilder::atBlockEnd(&blk);
    SmallVector<Value> results;
    for (Value v : fn.outputs)
      results.push_back(fn.map.lookup(v));
    for (Value v : fn.summed) {
      if (!isa<RankedTensorType>(v.getType()))
        return error(v.getDefiningOp(), "the update reads a per-micro-batch "
                                        "value that is not a tensor");
      Value sum = blk.addArgument(v.getType(), v.getLoc());
      results.push_back(
          AddOp::create(ob, v.getLoc(), v.getType(), sum, fn.map.lookup(v)));
    }
    func::ReturnOp::create(ob, step.getLoc(), results);
    fn.func.setFunctionType(FunctionType::get(
        step.getContext(), blk.getArgumentTypes(), TypeRange(results)));
  }
  for (unsigned k = 0; k < options.stages; ++k)
    if (failed(buildDriver(k)))
      return failure();
  step.erase();
  return success();
}

LogicalResult mlir::ds::pipeline::splitStep(func::FuncOp step,
                                            const StepLayers &layers,
                                            ArrayRef<unsigned> stageOfLayer,
                                            const SplitOptions &options,
                                            int64_t &nextTag) {
  Splitter splitter(step, layers, stageOfLayer, options, nextTag);
  return splitter.run();
}

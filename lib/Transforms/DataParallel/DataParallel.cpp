//===- DataParallel.cpp - Gradient averaging over the ranks ---------------===//
//
// Implements ds-data-parallel on a gradient step (after
// ds-insert-loss-scaling, before clipping and the optimizer). Every rank
// runs the same step on its own rows of the global batch; the pass makes
// what must agree across the ranks agree:
//
//  - gradients: the mean over the ranks, one start/wait pair per gradient,
//    started right after the gradient exists and waited for right before
//    its first use (ds-fuse-allreduce then buckets the pairs);
//  - found_inf: MAX-reduced where it is computed, so every later use (the
//    loss scale, the optimizer's skip) sees one decision. The local check
//    itself keeps reading the local gradients: a rank with an overflow
//    sends zeros (the runtime never sends inf or NaN), so the averaged
//    gradients would hide it;
//  - the loss (mean) and metrics computed from this rank's data (max);
//  - state updated from this rank's data: rank 0's value (DDP's
//    broadcast_buffers);
//  - dropout: this rank's rows of the global batch draw the counters they
//    would draw in a single-process run of the global batch.
//
//===----------------------------------------------------------------------===//

#include "DataParallel.h"

#include "../StepUtils.h"

#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DATAPARALLELPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

//===----------------------------------------------------------------------===//
// Shared helpers (DataParallel.h)
//===----------------------------------------------------------------------===//

void dp::setModuleEntry(ModuleOp module, StringRef name, Attribute value) {
  NamedAttrList entries;
  if (auto dict = module->getAttrOfType<DictionaryAttr>(kModuleAttr))
    entries.append(dict.getValue());
  entries.set(name, value);
  module->setAttr(kModuleAttr, entries.getDictionary(module.getContext()));
}

SmallVector<AllReduceStartOp> dp::gradientStarts(FunctionOpInterface func) {
  SmallVector<AllReduceStartOp> starts;
  func->walk([&](AllReduceStartOp op) {
    if (op->hasAttr(kGradsAttr))
      starts.push_back(op);
  });
  return starts;
}

AllReduceWaitOp dp::waitOf(AllReduceStartOp start) {
  for (Operation *user : start.getRequest().getUsers())
    if (auto wait = dyn_cast<AllReduceWaitOp>(user))
      return wait;
  return {};
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

/// `v` viewed as a 1-D tensor (a ds.reshape unless it already is one).
Value flatten(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 1)
    return v;
  auto flat =
      RankedTensorType::get({type.getNumElements()}, type.getElementType());
  return ReshapeOp::create(b, loc, flat, v);
}

/// The state results one step synchronises: a tensor computed from this
/// rank's data that becomes the next step's state.
struct StateSync {
  unsigned resultIndex;
  Value value;
};

/// Whether the state named `name` is an FP8 amax history, which the ranks
/// MAX-reduce (Transformer Engine's amax reduction over the data-parallel
/// group: every rank then scales by the amax of the global batch) where
/// other state takes rank 0's value.
bool isAmaxHistory(StringRef name) {
  return name.starts_with("fp8.amax_history.");
}

/// Synchronises `states` (of one element type) at `terminator` with one
/// collective: a MAX all-reduce or rank 0's broadcast of their flattened
/// concatenation, sliced back. Under an FP8 policy two amax histories per
/// GEMM come from the rank's data (its input's and its cotangent's), so one
/// collective replaces hundreds of small ones (each a blocking round trip,
/// and on a GPU a wait for the stream).
void syncStates(Operation *terminator, ArrayRef<StateSync> states, bool max) {
  OpBuilder b(terminator);
  Location loc = states.front().value.getLoc();
  auto collective = [&](Value v) -> Value {
    if (max)
      return AllReduceOp::create(b, loc, v, ReductionKind::max);
    return CommBroadcastOp::create(b, loc, v);
  };
  if (states.size() == 1) {
    terminator->setOperand(states.front().resultIndex,
                           collective(states.front().value));
    return;
  }
  SmallVector<Value> parts;
  int64_t total = 0;
  for (const StateSync &state : states) {
    parts.push_back(flatten(b, loc, state.value));
    total += cast<RankedTensorType>(state.value.getType()).getNumElements();
  }
  Type element =
      cast<RankedTensorType>(states.front().value.getType()).getElementType();
  Value all = collective(ConcatOp::create(
      b, loc, RankedTensorType::get({total}, element), parts, /*axis=*/0));
  int64_t offset = 0;
  for (const StateSync &state : states) {
    auto type = cast<RankedTensorType>(state.value.getType());
    auto flat =
        RankedTensorType::get({type.getNumElements()}, type.getElementType());
    Value part =
        SliceOp::create(b, loc, flat, all, b.getDenseI64ArrayAttr({offset}),
                        DenseI64ArrayAttr());
    offset += type.getNumElements();
    if (flat != type)
      part = ReshapeOp::create(b, loc, type, part);
    terminator->setOperand(state.resultIndex, part);
  }
}

/// The op of `block` that is or contains `op`.
Operation *ancestorIn(Block &block, Operation *op) {
  return block.findAncestorOpInBlock(*op);
}

/// Values computed from this rank's data: forward from the `ds.input`
/// arguments, stopping at the collectives (their results are the same on
/// every rank).
DenseSet<Value> rankLocalValues(FunctionOpInterface func,
                                const TrainingContract &contract) {
  DenseSet<Value> local;
  Block &body = func.getFunctionBody().front();
  for (unsigned i : contract.getArgIndices(ArgRole::Input))
    local.insert(body.getArgument(i));
  func->walk([&](Operation *op) {
    if (isa<AllReduceOp, CommBroadcastOp, AllReduceWaitOp, AllReduceStartOp>(
            op))
      return;
    bool any = llvm::any_of(op->getOperands(),
                            [&](Value v) { return local.contains(v); });
    if (any)
      local.insert(op->result_begin(), op->result_end());
  });
  return local;
}

/// Gives every `ds.dropout` the counters of this rank's rows: element i of
/// rank r's batch is element r * numel + i of the global batch, so the op
/// reads `rng + [0, r * numel]`, and the state advances by the global
/// `N * numel`. The backward's dropouts read the same generator value as
/// their forward (the same mask), so they get the same offset.
LogicalResult offsetDropouts(FunctionOpInterface func) {
  SmallVector<DropoutOp> forward;
  func->walk([&](DropoutOp op) {
    if (isForwardOp(op))
      forward.push_back(op);
  });
  if (forward.empty())
    return success();
  Block &body = func.getFunctionBody().front();
  OpBuilder b(&body, body.begin());
  Location loc = func.getLoc();
  auto i64 = RankedTensorType::get({}, b.getI64Type());
  auto comm = CommRankOp::create(b, loc, i64, i64);
  ScalarBuilder s(b, loc);
  Value rank = s.extractRaw(comm.getRank());
  Value size = s.extractRaw(comm.getSize());
  auto rngType = RankedTensorType::get({2}, b.getI64Type());
  auto counterOffset = [&](OpBuilder &at, Value count) -> Value {
    Value zero = arith::ConstantOp::create(at, loc, at.getI64IntegerAttr(0));
    return tensor::FromElementsOp::create(at, loc, rngType,
                                          ValueRange{zero, count});
  };
  DenseMap<Value, Value> shifted; // generator value -> this rank's
  for (DropoutOp op : forward) {
    Value rng = op.getRng();
    int64_t numel = op.getInput().getType().getNumElements();
    auto [it, inserted] = shifted.try_emplace(rng, Value());
    if (inserted) {
      OpBuilder at(op);
      ScalarBuilder sa(at, loc);
      Value off = counterOffset(at, sa.mul(rank, sa.i64(numel)));
      it->second = AddOp::create(at, loc, rng, off);
    }
    // The next generator value: the global batch's elements consumed.
    OpBuilder after(op->getBlock(), std::next(op->getIterator()));
    ScalarBuilder sa(after, loc);
    Value next = AddOp::create(
        after, loc, rng, counterOffset(after, sa.mul(size, sa.i64(numel))));
    op.getNewRng().replaceAllUsesWith(next);
  }
  // Every dropout that reads a shifted generator value (the forward and
  // its backward) reads this rank's.
  func->walk([&](DropoutOp op) {
    auto it = shifted.find(op.getRng());
    if (it != shifted.end())
      op.getRngMutable().assign(it->second);
  });
  return success();
}

} // namespace

LogicalResult mlir::ds::dataParallel(FunctionOpInterface func) {
  FailureOr<TrainingContract> contract =
      requireGradientStep(func, "ds-data-parallel");
  if (failed(contract))
    return failure();
  // Collectives of the forward (ds-sync-batch-norm) are expected; gradient
  // all-reduces mean the pass ran already.
  if (!dp::gradientStarts(func).empty())
    return func->emitOpError("already averages its gradients "
                             "(ds-data-parallel ran twice?)");
  Block &body = func.getFunctionBody().front();
  Operation *terminator = body.getTerminator();
  MLIRContext *ctx = func->getContext();

  // Dropout first: the rank-local analysis below must see the final graph.
  if (failed(offsetDropouts(func)))
    return failure();

  // The local overflow check and everything it reads keep the local
  // gradients.
  Value localFound = findMetric(func, *contract, "found_inf");
  SetVector<Operation *> probe;
  if (localFound && localFound.getDefiningOp()) {
    BackwardSliceOptions options;
    options.inclusive = true;
    (void)getBackwardSlice(localFound.getDefiningOp(), &probe, options);
  }

  // Gradients: one start/wait pair each.
  for (auto [resultIndex, result] : llvm::enumerate(contract->results)) {
    if (result.role != ResultRole::Grad)
      continue;
    Value grad = terminator->getOperand(resultIndex);
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : grad.getUses())
      if (!probe.contains(ancestorIn(body, use.getOwner())))
        uses.push_back(&use);
    OpBuilder b(ctx);
    if (Operation *def = grad.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&body);
    Location loc = grad.getLoc();
    Value flat = flatten(b, loc, grad);
    auto start = AllReduceStartOp::create(
        b, loc, b.getI64Type(), /*new_residual=*/Type(), flat,
        /*residual=*/Value(), /*params=*/Value(), /*shapes=*/Value(),
        CompressionScheme::none);
    std::string name = contract->args[result.argIndex].name;
    start->setAttr(dp::kGradsAttr, b.getArrayAttr({b.getStringAttr(name)}));
    // The wait goes right before the first use that needs the mean.
    Operation *first = terminator;
    for (OpOperand *use : uses) {
      Operation *user = ancestorIn(body, use->getOwner());
      if (user->isBeforeInBlock(first))
        first = user;
    }
    b.setInsertionPoint(first);
    Value mean =
        AllReduceWaitOp::create(b, loc, flat.getType(), start.getRequest());
    if (mean.getType() != grad.getType())
      mean = ReshapeOp::create(b, loc, grad.getType(), mean);
    for (OpOperand *use : uses)
      use->set(mean);
  }

  // found_inf: one decision for all ranks.
  if (localFound) {
    OpBuilder b(ctx);
    b.setInsertionPointAfterValue(localFound);
    auto global = AllReduceOp::create(b, localFound.getLoc(), localFound,
                                      ReductionKind::max);
    localFound.replaceAllUsesExcept(global, global);
  }

  // The loss of the global batch, and metrics / state from this rank's data.
  DenseSet<Value> local = rankLocalValues(func, *contract);
  OpBuilder b(terminator);
  // State to synchronise, by element type and collective, in result order.
  llvm::MapVector<std::pair<Type, unsigned>, SmallVector<StateSync>> states;
  for (auto [i, result] : llvm::enumerate(contract->results)) {
    Value v = terminator->getOperand(i);
    Location loc = v.getLoc();
    if (result.role == ResultRole::Loss) {
      terminator->setOperand(
          i, AllReduceOp::create(b, loc, v, ReductionKind::mean));
      continue;
    }
    if (!local.contains(v) || result.role == ResultRole::Grad)
      continue;
    bool isFloat = isFloatTensor(v);
    if (result.role == ResultRole::Metric) {
      if (!isFloat)
        return func->emitOpError("metric '")
               << result.name
               << "' is computed from this rank's data but is not a float "
                  "tensor: ds-data-parallel cannot reduce it";
      terminator->setOperand(
          i, AllReduceOp::create(b, loc, v, ReductionKind::max));
      continue;
    }
    if (result.role == ResultRole::Update) {
      const ContractArg &arg = contract->args[result.argIndex];
      if (!isFloat)
        return func->emitOpError("state '")
               << arg.name
               << "' is updated from this rank's data but is not a float "
                  "tensor: ds-data-parallel cannot broadcast it";
      Type element = cast<RankedTensorType>(v.getType()).getElementType();
      states[{element, unsigned(isAmaxHistory(arg.name))}].push_back(
          {unsigned(i), v});
    }
  }
  for (auto &[key, members] : states)
    syncStates(terminator, members, /*max=*/key.second != 0);
  return success();
}

namespace {
struct DataParallelPass
    : public mlir::ds::impl::DataParallelPassBase<DataParallelPass> {
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (failed(forEachTrainStep(
            module, "ds-data-parallel",
            [&](FunctionOpInterface func) { return dataParallel(func); })))
      return signalPassFailure();
    dp::setModuleEntry(module, "bucket_bytes",
                       Builder(module).getI64IntegerAttr(0));
  }
};
} // namespace

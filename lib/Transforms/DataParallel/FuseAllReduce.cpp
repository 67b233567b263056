//===- FuseAllReduce.cpp - Gradient buckets (DDP) -------------------------===//
//
// Implements ds-fuse-allreduce: the per-gradient all-reduces of
// ds-data-parallel become a few bucket all-reduces, as PyTorch DDP's
// Reducer packs gradients into 25 MiB buckets (the first one 1 MiB) in the
// order the backward produces them. A bucket's start goes right after its
// last gradient exists (the place of its last member's start) and its wait
// right before the first use of any member (the earliest member wait), so
// each bucket overlaps the backward that is still to run. A gradient is
// only added to a bucket whose members are all still unused when it is
// produced; otherwise the bucket is closed first.
//
//===----------------------------------------------------------------------===//

#include "DataParallel.h"

#include "../StepUtils.h"

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSEALLREDUCEPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

struct Bucket {
  SmallVector<AllReduceStartOp> members;
  int64_t bytes = 0;
  Type elementType;
  /// The earliest wait of a member.
  Operation *firstWait = nullptr;
};

int64_t bytesOf(AllReduceStartOp start) {
  RankedTensorType type = start.getBucket().getType();
  return type.getNumElements() *
         int64_t(type.getElementType().getIntOrFloatBitWidth() / 8);
}

/// Replaces the members' pairs by one start (at the last member's start)
/// and one wait (at the earliest member wait), with slices of the mean.
void fuse(Bucket &bucket) {
  if (bucket.members.size() < 2)
    return;
  AllReduceStartOp last = bucket.members.back();
  OpBuilder b(last);
  b.setInsertionPointAfter(last);
  Location loc = last.getLoc();
  SmallVector<Value> parts;
  SmallVector<Attribute> names;
  int64_t total = 0;
  for (AllReduceStartOp m : bucket.members) {
    parts.push_back(m.getBucket());
    total += m.getBucket().getType().getNumElements();
    llvm::append_range(names, m->getAttrOfType<ArrayAttr>(dp::kGradsAttr));
  }
  auto type = RankedTensorType::get({total}, bucket.elementType);
  Value flat = ConcatOp::create(b, loc, type, parts, /*axis=*/0);
  auto start =
      AllReduceStartOp::create(b, loc, b.getI64Type(), Type(), flat, Value(),
                               Value(), Value(), CompressionScheme::none);
  start->setAttr(dp::kGradsAttr, b.getArrayAttr(names));
  b.setInsertionPoint(bucket.firstWait);
  Value mean = AllReduceWaitOp::create(b, loc, type, start.getRequest());
  int64_t offset = 0;
  SmallVector<Operation *> dead;
  for (AllReduceStartOp m : bucket.members) {
    AllReduceWaitOp wait = dp::waitOf(m);
    RankedTensorType partType = m.getBucket().getType();
    Value part =
        SliceOp::create(b, wait.getLoc(), partType, mean,
                        b.getDenseI64ArrayAttr({offset}), DenseI64ArrayAttr());
    offset += partType.getNumElements();
    wait.getResult().replaceAllUsesWith(part);
    dead.append({wait, m});
  }
  // Only now: the builder inserts before the first member wait.
  for (Operation *op : dead)
    op->erase();
}

} // namespace

LogicalResult mlir::ds::fuseAllReduce(FunctionOpInterface func,
                                      int64_t bucketBytes,
                                      int64_t firstBucketBytes) {
  SmallVector<Bucket> buckets;
  Bucket current;
  auto close = [&]() {
    if (!current.members.empty())
      buckets.push_back(std::move(current));
    current = Bucket();
  };
  for (AllReduceStartOp start : dp::gradientStarts(func)) {
    if (start.getScheme() != CompressionScheme::none || start.getResidual())
      return start.emitOpError("is already compressed: run ds-fuse-allreduce "
                               "before ds-compress-allreduce");
    AllReduceWaitOp wait = dp::waitOf(start);
    if (!wait || wait->getBlock() != start->getBlock())
      return start.emitOpError("has no ds.all_reduce_wait in its block");
    int64_t cap = buckets.empty() ? firstBucketBytes : bucketBytes;
    int64_t bytes = bytesOf(start);
    Type elementType = start.getBucket().getType().getElementType();
    if (!current.members.empty() &&
        (current.elementType != elementType || current.bytes + bytes > cap ||
         current.firstWait->isBeforeInBlock(start)))
      close();
    current.members.push_back(start);
    current.bytes += bytes;
    current.elementType = elementType;
    if (!current.firstWait || wait->isBeforeInBlock(current.firstWait))
      current.firstWait = wait;
  }
  close();
  for (Bucket &bucket : buckets)
    fuse(bucket);
  return success();
}

namespace {
struct FuseAllReducePass
    : public mlir::ds::impl::FuseAllReducePassBase<FuseAllReducePass> {
  using Base::Base;
  void runOnOperation() override {
    ScopedPassNamePrefix named(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (failed(checkOptionsGivenOnce(module, getArgument(),
                                     {&bucketBytes, &firstBucketBytes})))
      return signalPassFailure();
    if (bucketBytes <= 0 || firstBucketBytes <= 0) {
      module.emitError(optionError(
          getArgument(),
          bucketBytes <= 0 ? "bucket-bytes" : "first-bucket-bytes",
          "must be > 0, got " +
              std::to_string(bucketBytes <= 0 ? int64_t(bucketBytes)
                                              : int64_t(firstBucketBytes))));
      return signalPassFailure();
    }
    if (!dp::isDataParallel(module)) {
      module.emitError("ds-fuse-allreduce: the module is not data parallel: "
                       "run ds-data-parallel first");
      return signalPassFailure();
    }
    if (failed(forEachTrainStep(
            module, getArgument(), [&](FunctionOpInterface func) {
              return fuseAllReduce(func, bucketBytes, firstBucketBytes);
            })))
      return signalPassFailure();
    dp::setModuleEntry(module, "bucket_bytes",
                       Builder(module).getI64IntegerAttr(bucketBytes));
  }
};
} // namespace

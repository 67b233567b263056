//===- DSToRuntime.cpp - ds ops with runtime kernels to calls -------------===//
//
// Implements convert-ds-to-runtime. Some ds ops have no good linalg form:
// the block-sparse products (a loop nest cannot skip blocks a run-time mask
// turns off) and the top-k of mask updates (a selection). Their kernels live
// in the runtime (include/ds/Runtime/ds_runtime.h), and this pass, run on
// tensors right before one-shot bufferization, makes each such op a call:
//
//   %xb = bufferization.to_buffer %x read_only    (operands, flattened)
//   %yb = memref.alloc()                          (the result)
//   func.call @dsrt_...(%xb', ..., %yb', flags)   (fully dynamic 2-D views)
//   %y  = bufferization.to_tensor %yb restrict writable
//
// One-shot bufferization then hands the call the operands' own buffers. No
// CSE may run in between: it would merge the `to_buffer` of one tensor
// read by two calls, so that the second call reads a buffer an in-place
// write has reused since (the tensor's last use seemed earlier).
// The calls use the C interface (`llvm.emit_c_interface`), so the runtime
// receives MLIR's strided memref descriptors.
//
// Collectives always become calls to the runtime's MPI layer. With
// target=cuda (ds-gpu-pipeline) only they are converted, to the runtime's
// host-staged dsrt_cuda_* forms, which take the same buffers in device
// memory; a start's scalar parameters, computed by the step on the device,
// then go as a buffer. A bucket that concatenates gradients is built in a
// buffer of its own whose slices the gradients' producers write
// (ConcatenationInBuffer.h, bucket-views).
//
//===----------------------------------------------------------------------===//

#include "../DSToLinalg/LoweringUtils.h"
#include "ConcatenationInBuffer.h"
#include "DeviceEncoders.h"
#include "WidenInReaders.h"

#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

namespace mlir::ds {
#define GEN_PASS_DEF_CONVERTDSTORUNTIMEPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Builds the calls of one module, declaring each runtime function once.
class RuntimeCallBuilder {
public:
  RuntimeCallBuilder(ModuleOp module, bool cuda, bool bucketViews,
                     bool deviceEncoders, int64_t deviceEncodersMin)
      : module(module), cuda(cuda), views(bucketViews),
        encoders(deviceEncoders), encodersMin(deviceEncodersMin) {}

  /// Whether the calls are for ds-gpu-pipeline's device buffers.
  bool targetsCuda() const { return cuda; }

  /// Whether a bucket's gradients are computed in it (bucket-views).
  bool bucketViews() const { return views; }

  /// Whether a compressed bucket of n elements is encoded on the device
  /// (CUDA only).
  bool encodesOnDevice(int64_t n) const {
    return cuda && encoders && n >= std::max<int64_t>(1, encodersMin);
  }

  /// A start's `params` (f64) as a 1-D buffer, empty when it has none: on
  /// CUDA they are device data, which the host-staged call reads itself.
  Value paramsBuffer(OpBuilder &b, Location loc, Value params) {
    if (!params)
      return alloc(b, loc, RankedTensorType::get({0}, b.getF64Type())).second;
    int64_t n = cast<RankedTensorType>(params.getType()).getNumElements();
    return input(b, loc, reshape(b, loc, params, {n}));
  }

  /// The function that runs the collective `cpuName` ("dsrt_allreduce_f32")
  /// on this target's buffers: on CUDA the host-staged wrapper
  /// ("dsrt_cuda_allreduce_f32"), which takes the same arguments in device
  /// memory.
  std::string collective(StringRef cpuName) const {
    if (!cuda)
      return cpuName.str();
    return ("dsrt_cuda_" + cpuName.drop_front(StringRef("dsrt_").size())).str();
  }

  /// `value` reshaped to `shape` (same element count): a collapse or an
  /// expansion, which bufferize to views (a tensor.reshape's shape operand
  /// would be a buffer the host reads, which on a GPU is device memory).
  static Value reshape(OpBuilder &b, Location loc, Value value,
                       ArrayRef<int64_t> shape) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getShape() == shape)
      return value;
    auto to = RankedTensorType::get(shape, type.getElementType());
    if (auto map = getReassociationIndicesForReshape(type, to)) {
      if (to.getRank() < type.getRank())
        return tensor::CollapseShapeOp::create(b, loc, to, value, *map);
      return tensor::ExpandShapeOp::create(b, loc, to, value, *map);
    }
    Value shapeValue =
        arith::ConstantOp::create(b, loc, b.getI64TensorAttr(shape));
    return tensor::ReshapeOp::create(b, loc, to, value, shapeValue);
  }

  /// `value` (rank >= 1) viewed as `[M, last]`.
  static Value flattenRows(OpBuilder &b, Location loc, Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    int64_t last = type.getShape().back();
    return reshape(b, loc, value, {type.getNumElements() / last, last});
  }

  /// The fully dynamic strided memref type of `rank` and `elementType`.
  static MemRefType dynamicMemRef(MLIRContext *ctx, int64_t rank,
                                  Type elementType) {
    int64_t dyn = ShapedType::kDynamic;
    SmallVector<int64_t> shape(rank, dyn), strides(rank, dyn);
    return MemRefType::get(shape, elementType,
                           StridedLayoutAttr::get(ctx, dyn, strides));
  }

  /// A read-only buffer of the tensor `value`, as a fully dynamic view.
  Value input(OpBuilder &b, Location loc, Value value) {
    auto type = cast<RankedTensorType>(value.getType());
    auto buffer = bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType()), value,
        /*read_only=*/true);
    return memref::CastOp::create(
        b, loc,
        dynamicMemRef(b.getContext(), type.getRank(), type.getElementType()),
        buffer);
  }

  /// Calls `name(operands...)`, declaring it on first use (with the C
  /// interface, `_mlir_ciface_<name>`, when it takes memrefs).
  Value call(OpBuilder &b, Location loc, StringRef name, ValueRange operands,
             TypeRange results = {}) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      fn =
          func::FuncOp::create(b, module.getLoc(), name,
                               b.getFunctionType(TypeRange(operands), results));
      fn.setPrivate();
      if (llvm::any_of(operands,
                       [](Value v) { return isa<MemRefType>(v.getType()); }))
        fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    }
    auto call = func::CallOp::create(b, loc, fn, operands);
    return results.empty() ? Value() : call.getResult(0);
  }

  /// `buffer` (a memref) as a fully dynamic view.
  static Value dynamicView(OpBuilder &b, Location loc, Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    return memref::CastOp::create(
        b, loc,
        dynamicMemRef(b.getContext(), type.getRank(), type.getElementType()),
        buffer);
  }

  /// A fresh buffer of `type` and its fully dynamic view.
  static std::pair<Value, Value> alloc(OpBuilder &b, Location loc,
                                       RankedTensorType type) {
    auto memref = MemRefType::get(type.getShape(), type.getElementType());
    Value buffer = memref::AllocOp::create(b, loc, memref);
    return {buffer, dynamicView(b, loc, buffer)};
  }

  /// Allocates the result buffer of `type`, calls `name` with `operands`
  /// followed by the result view and `flags`, and returns the result as a
  /// tensor.
  Value callWithResult(OpBuilder &b, Location loc, StringRef name,
                       SmallVector<Value> operands, RankedTensorType type,
                       ArrayRef<int64_t> flags) {
    auto memref = MemRefType::get(type.getShape(), type.getElementType());
    Value out = memref::AllocOp::create(b, loc, memref);
    operands.push_back(memref::CastOp::create(
        b, loc,
        dynamicMemRef(b.getContext(), type.getRank(), type.getElementType()),
        out));
    for (int64_t flag : flags)
      operands.push_back(
          arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(flag)));
    call(b, loc, name, operands);
    return bufferization::ToTensorOp::create(b, loc, type, out,
                                             /*restrict=*/true,
                                             /*writable=*/true);
  }

private:
  ModuleOp module;
  bool cuda;
  bool views;
  bool encoders;
  int64_t encodersMin;
};

void lowerBlockSparseMatMul(RuntimeCallBuilder &rt, BlockSparseMatMulOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  RankedTensorType resultType = op.getType();
  Value x = RuntimeCallBuilder::flattenRows(b, loc, op.getInput());
  int64_t m = cast<RankedTensorType>(x.getType()).getDimSize(0);
  auto out2 = RankedTensorType::get({m, resultType.getShape().back()},
                                    resultType.getElementType());
  Value y = rt.callWithResult(
      b, loc, "dsrt_block_sparse_matmul_f32",
      {rt.input(b, loc, x), rt.input(b, loc, op.getWeight()),
       rt.input(b, loc, op.getMask())},
      out2, {op.getTransposeWeight() ? 1 : 0, int64_t(op.getBlock())});
  op.replaceAllUsesWith(
      RuntimeCallBuilder::reshape(b, loc, y, resultType.getShape()));
  op.erase();
}

void lowerBlockSampledMatMul(RuntimeCallBuilder &rt, BlockSampledMatMulOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value lhs = RuntimeCallBuilder::flattenRows(b, loc, op.getLhs());
  Value rhs = RuntimeCallBuilder::flattenRows(b, loc, op.getRhs());
  Value d = rt.callWithResult(b, loc, "dsrt_block_sparse_sddmm_f32",
                              {rt.input(b, loc, lhs), rt.input(b, loc, rhs),
                               rt.input(b, loc, op.getMask())},
                              op.getType(), {int64_t(op.getBlock())});
  op.replaceAllUsesWith(d);
  op.erase();
}

void lowerTopKMask(RuntimeCallBuilder &rt, TopKMaskOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  RankedTensorType type = op.getType();
  int64_t n = type.getNumElements();
  Value scores = RuntimeCallBuilder::reshape(b, loc, op.getScores(), {n});
  Value k = tensor::ExtractOp::create(b, loc, op.getK(), ValueRange{});
  bool f64 = op.getScores().getType().getElementType().isF64();
  auto out = RankedTensorType::get({n}, b.getI8Type());
  // k goes before the result: (scores, k, out).
  auto memref = MemRefType::get({n}, b.getI8Type());
  Value outBuffer = memref::AllocOp::create(b, loc, memref);
  Value outView = memref::CastOp::create(
      b, loc,
      RuntimeCallBuilder::dynamicMemRef(b.getContext(), 1, b.getI8Type()),
      outBuffer);
  rt.call(b, loc, f64 ? "dsrt_top_k_mask_f64" : "dsrt_top_k_mask_f32",
          {rt.input(b, loc, scores), k, outView});
  Value mask = bufferization::ToTensorOp::create(b, loc, out, outBuffer,
                                                 /*restrict=*/true,
                                                 /*writable=*/true);
  op.replaceAllUsesWith(
      RuntimeCallBuilder::reshape(b, loc, mask, type.getShape()));
  op.erase();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// "f32" or "f64", or failure with an error on `op`.
FailureOr<StringRef> collectiveSuffix(Operation *op, Type elementType) {
  if (elementType.isF32())
    return StringRef("f32");
  if (elementType.isF64())
    return StringRef("f64");
  return op->emitOpError("runs on f32 and f64 tensors only, got ")
         << elementType;
}

/// ds.all_reduce and ds.broadcast: a blocking call on the flattened tensor.
LogicalResult lowerBlockingCollective(RuntimeCallBuilder &rt, Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  Value input = op->getOperand(0);
  auto type = cast<RankedTensorType>(input.getType());
  FailureOr<StringRef> suffix = collectiveSuffix(op, type.getElementType());
  if (failed(suffix))
    return failure();
  int64_t n = type.getNumElements();
  Value flat = RuntimeCallBuilder::reshape(b, loc, input, {n});
  auto flatType = RankedTensorType::get({n}, type.getElementType());
  Value out;
  if (auto ar = dyn_cast<AllReduceOp>(op))
    out = rt.callWithResult(
        b, loc,
        rt.collective(((ar.getAcrossStages() ? "dsrt_stage_allreduce_"
                                             : "dsrt_allreduce_") +
                       *suffix)
                          .str()),
        {rt.input(b, loc, flat)}, flatType, {int64_t(ar.getReduction())});
  else
    out = rt.callWithResult(b, loc,
                            rt.collective(("dsrt_broadcast_" + *suffix).str()),
                            {rt.input(b, loc, flat)}, flatType, {});
  op->getResult(0).replaceAllUsesWith(
      RuntimeCallBuilder::reshape(b, loc, out, type.getShape()));
  op->erase();
  return success();
}

/// Replaces `result` of a start (a state its runtime call writes into
/// `buffer`) by `buffer`'s tensor taken right after the start's wait, for a
/// runtime that writes it when the wait returns: PowerSGD's state, whose
/// exchange completes it, and on CUDA every staged start's residual
/// (lib/Runtime/CommStaging.h: the host encodes while the GPU goes on).
/// Readers between the start and the wait that have no memory effects
/// (DGC's momentum masking compares the residual) move after the wait.
LogicalResult takeAfterWait(AllReduceStartOp start, Value result,
                            Value buffer) {
  Operation *wait = nullptr;
  for (Operation *user : start.getRequest().getUsers())
    if (isa<AllReduceWaitOp>(user))
      wait = user;
  if (!wait || wait->getBlock() != start->getBlock() ||
      wait->isBeforeInBlock(start))
    return start.emitOpError("needs its ds.all_reduce_wait after it in the "
                             "same block");
  SetVector<Operation *> readers;
  auto reads = [&](Operation *op) {
    return op
        ->walk([&](Operation *nested) {
          for (Value v : nested->getOperands())
            if (v == result || readers.contains(v.getDefiningOp()))
              return WalkResult::interrupt();
          return WalkResult::advance();
        })
        .wasInterrupted();
  };
  for (Operation *op = start->getNextNode(); op != wait;
       op = op->getNextNode()) {
    if (!reads(op))
      continue;
    if (!isMemoryEffectFree(op))
      return op->emitOpError("reads the state of the ds.all_reduce_start at ")
             << start.getLoc()
             << " before its wait, where the runtime writes it";
    readers.insert(op);
  }
  Operation *after = wait;
  for (Operation *op : readers) {
    op->moveAfter(after);
    after = op;
  }
  OpBuilder b(wait);
  b.setInsertionPointAfter(wait);
  result.replaceAllUsesWith(bufferization::ToTensorOp::create(
      b, start.getLoc(), result.getType(), buffer, /*restrict=*/true,
      /*writable=*/true));
  return success();
}

/// ds.all_reduce_start with PowerSGD: (bucket, state in, state out,
/// shapes, rank, active) -> handle; on CUDA (..., shapes, params). The
/// runtime writes the new state when the wait returns, so the state's
/// tensor is taken after the wait.
LogicalResult lowerPowerSgdStart(RuntimeCallBuilder &rt, AllReduceStartOp op,
                                 StringRef suffix) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  RankedTensorType stateType = op.getResidual().getType();
  auto [stateOut, stateOutView] = RuntimeCallBuilder::alloc(b, loc, stateType);
  auto toI64 = [&](int64_t i) -> Value {
    Value index = arith::ConstantIndexOp::create(b, loc, i);
    Value v = tensor::ExtractOp::create(b, loc, op.getParams(), index);
    return arith::FPToSIOp::create(b, loc, b.getI64Type(), v);
  };
  SmallVector<Value> operands{rt.input(b, loc, op.getBucket()),
                              rt.input(b, loc, op.getResidual()), stateOutView,
                              rt.input(b, loc, op.getShapes())};
  if (rt.targetsCuda()) {
    operands.push_back(rt.paramsBuffer(b, loc, op.getParams()));
  } else {
    operands.push_back(toI64(0));
    operands.push_back(toI64(1));
  }
  Value handle = rt.call(
      b, loc, rt.collective(("dsrt_allreduce_start_powersgd_" + suffix).str()),
      operands, {b.getI64Type()});
  if (failed(takeAfterWait(op, op.getNewResidual(), stateOut)))
    return failure();
  op.getRequest().replaceAllUsesWith(handle);
  op.erase();
  return success();
}

/// On CUDA, an uncompressed bucket as it may leave the step: zeros when any
/// element is non-finite (what the CPU's start sends instead), and the
/// start's one parameter, the bucket's probe (sum of x - x, NaN exactly
/// then), from which the runtime counts such buckets. The CPU's start
/// checks the values on the host; NCCL's all-reduce never brings them
/// there, so the step checks them itself.
///
/// `into` (a buffer's tensor), when given, is where the masked bucket is
/// written; with `inPlace`, `bucket` is already `into`'s content (built in
/// the buffer, buildConcatenationInBuffer), and the mask rewrites it where it
/// lies with only the probe as input: select(probe is NaN, 0, bucket), which
/// the kernel builders run under one test of the probe (a finite bucket,
/// the common case, is then neither read nor written again). `probe`, when
/// given, is the bucket's, computed by the caller.
std::pair<Value, Value> maskNonFinite(OpBuilder &b, Location loc, Value bucket,
                                      Value into, bool inPlace = false,
                                      Value probe = Value()) {
  auto type = cast<RankedTensorType>(bucket.getType());
  Type et = type.getElementType();
  MLIRContext *ctx = b.getContext();
  AffineMap identity = b.getMultiDimIdentityMap(1);
  AffineMap scalar = AffineMap::get(1, 0, ctx);
  Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(et, 0.0));
  if (!probe)
    probe = lowering::buildReduction(
                b, loc, type.getShape(), {0}, bucket, identity, zero,
                [](OpBuilder &nb, Location nl, ValueRange args) {
                  Value diff = arith::SubFOp::create(nb, nl, args[0], args[0]);
                  return SmallVector<Value>{
                      lowering::addReassoc(nb, nl, args[1], diff)};
                })
                .front();
  // Written into `into` (a buffer's tensor) when given, so that the buffer
  // is the mask's output itself, not a copy of it.
  Value init = inPlace ? bucket
               : into  ? into
                       : tensor::EmptyOp::create(b, loc, type, ValueRange());
  SmallVector<Value> inputs{probe};
  SmallVector<AffineMap> maps{scalar, identity};
  if (!inPlace) {
    inputs.insert(inputs.begin(), bucket);
    maps.insert(maps.begin(), identity);
  }
  Value masked =
      linalg::GenericOp::create(
          b, loc, TypeRange{type}, inputs, ValueRange{init}, maps,
          ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            // (bucket element, probe, out), or in place (probe, element).
            Value p = inPlace ? args[0] : args[1];
            Value x = inPlace ? args[1] : args[0];
            Value bad =
                arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::UNO, p, p);
            Value zeroHere =
                arith::ConstantOp::create(nb, nl, nb.getFloatAttr(et, 0.0));
            linalg::YieldOp::create(
                nb, nl,
                ValueRange{arith::SelectOp::create(nb, nl, bad, zeroHere, x)});
          })
          .getResult(0);
  Value params = lowering::buildParallel(
      b, loc, RankedTensorType::get({1}, b.getF64Type()), probe, scalar,
      [](OpBuilder &nb, Location nl, ValueRange args) -> Value {
        return lowering::convertFloat(nb, nl, args[0], nb.getF64Type());
      });
  return {masked, params};
}

/// Keeps `value`, computed in place in `buffer`, there: costs nothing (a
/// copy only if bufferization could not write it in place).
void keepInBuffer(OpBuilder &b, Location loc, Value value, Value buffer) {
  auto materialize = bufferization::MaterializeInDestinationOp::create(
      b, loc, TypeRange(), value, buffer);
  materialize.setRestrict(true);
  materialize.setWritable(true);
}

/// The wait of `start` when the all-reduce may run in place: its one user,
/// a wait in the same block (the bucket's buffer then lives until it).
AllReduceWaitOp inPlaceWait(AllReduceStartOp start) {
  if (!start.getRequest().hasOneUse())
    return nullptr;
  auto wait = dyn_cast<AllReduceWaitOp>(*start.getRequest().user_begin());
  if (!wait || wait->getBlock() != start->getBlock() ||
      wait.getType() != start.getBucket().getType())
    return nullptr;
  return wait;
}

/// DDP's fp16/bf16 hooks on CUDA, when the wait follows in the block: the
/// step divides the bucket by the group's size (a division, as the CPU's
/// start does) and rounds it to the 16-bit type into a buffer of its own,
/// masks that with its probe (zeros when a value, or its rounding, is not
/// finite; the probe rounds the f32 bucket itself, so that it and the
/// rounding read the same tensor and run as one launch, "Reductions with a
/// sibling") and keeps it for the wait, which gets the ranks' sum there:
/// dsrt_cuda_allreduce_start_half_*(bucket, encoded, params) sums it on
/// NCCL in place, or stages the f32 bucket through the CPU's start with
/// the scheme. The wait's result is the sum widened (lowerAllReduceWait).
void lowerHalfStart(RuntimeCallBuilder &rt, AllReduceStartOp op,
                    AllReduceWaitOp wait,
                    DenseMap<Operation *, Value> &inPlace) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  RankedTensorType type = op.getBucket().getType();
  bool bf16 = op.getScheme() == CompressionScheme::bf16;
  Type half = bf16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
  auto halfType = RankedTensorType::get(type.getShape(), half);
  Value size = rt.call(b, loc, "dsrt_comm_size_i64", {}, {b.getI64Type()});
  Value sizeF = tensor::FromElementsOp::create(
      b, loc, RankedTensorType::get({}, b.getF32Type()),
      ValueRange{arith::SIToFPOp::create(b, loc, b.getF32Type(), size)});
  auto [buffer, view] = RuntimeCallBuilder::alloc(b, loc, halfType);
  Value into = bufferization::ToTensorOp::create(b, loc, halfType, buffer,
                                                 /*restrict=*/true,
                                                 /*writable=*/true);
  AffineMap identity = b.getMultiDimIdentityMap(1);
  AffineMap scalar = AffineMap::get(1, 0, b.getContext());
  // A generic over the bucket's elements x, with N, into `init`:
  // body(x, N, out).
  auto overBucket = [&](Value init, AffineMap outMap, utils::IteratorType kind,
                        auto body) {
    return linalg::GenericOp::create(
               b, loc, TypeRange{init.getType()},
               ValueRange{op.getBucket(), sizeF}, ValueRange{init},
               ArrayRef<AffineMap>{identity, scalar, outMap},
               ArrayRef<utils::IteratorType>{kind},
               [&](OpBuilder &nb, Location nl, ValueRange args) {
                 linalg::YieldOp::create(
                     nb, nl,
                     ValueRange{body(nb, nl, args[0], args[1], args[2])});
               })
        .getResult(0);
  };
  auto round = [&](OpBuilder &nb, Location nl, Value x, Value n) -> Value {
    return arith::TruncFOp::create(nb, nl, half,
                                   arith::DivFOp::create(nb, nl, x, n));
  };
  // In f32: the kernel builders' parallel reductions combine f32 and f64.
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  auto scalarF32 = RankedTensorType::get({}, b.getF32Type());
  Value acc =
      linalg::FillOp::create(
          b, loc, zero,
          ValueRange{tensor::EmptyOp::create(b, loc, scalarF32, ValueRange())})
          .getResult(0);
  Value probe =
      overBucket(acc, scalar, utils::IteratorType::reduction,
                 [&](OpBuilder &nb, Location nl, Value x, Value n, Value sum) {
                   Value h = arith::ExtFOp::create(nb, nl, nb.getF32Type(),
                                                   round(nb, nl, x, n));
                   Value diff = arith::SubFOp::create(nb, nl, h, h);
                   return lowering::addReassoc(nb, nl, sum, diff);
                 });
  Value encoded = overBucket(into, identity, utils::IteratorType::parallel,
                             [&](OpBuilder &nb, Location nl, Value x, Value n,
                                 Value) { return round(nb, nl, x, n); });
  auto [masked, params] =
      maskNonFinite(b, loc, encoded, Value(), /*inPlace=*/true, probe);
  keepInBuffer(b, loc, masked, buffer);
  inPlace[wait] = buffer;
  Value handle = rt.call(
      b, loc,
      bf16 ? "dsrt_cuda_allreduce_start_half_bf16"
           : "dsrt_cuda_allreduce_start_half_f16",
      {rt.input(b, loc, op.getBucket()), view, rt.paramsBuffer(b, loc, params)},
      {b.getI64Type()});
  op.getRequest().replaceAllUsesWith(handle);
  op.erase();
}

/// A compressed start on CUDA whose parameters the step fixes (top-k's p0
/// may be one of several constants, DGC's warm-up), of a bucket of at
/// least device-encoders-min elements, encoded on the device
/// (DeviceEncoders.h); the new residual is the step's own, written before
/// the call as on the CPU:
/// - three tiers: codes, scalars -> handle;
/// - top-k: indices, values, count, scalars, n, fixed fraction -> handle.
/// A top-k start's waits join `topKWaits`: they take the mean sparse
/// (lowerTopKWait).
bool lowerStartOnDevice(RuntimeCallBuilder &rt, AllReduceStartOp op,
                        DenseMap<Operation *, int64_t> &topKWaits) {
  RankedTensorType type = op.getBucket().getType();
  if (!type.hasStaticShape() || !rt.encodesOnDevice(type.getNumElements()) ||
      !type.getElementType().isF32() || !op.getResidual() ||
      !op.getNewResidual())
    return false;
  int64_t n = type.getNumElements();
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value handle, residual;
  if (op.getScheme() == CompressionScheme::three_tier) {
    std::optional<ThreeTierParams> params =
        constantThreeTierParams(op.getParams());
    if (!params)
      return false;
    DeviceThreeTier encoded = buildThreeTierOnDevice(b, loc, op.getBucket(),
                                                     op.getResidual(), *params);
    handle = rt.call(
        b, loc, "dsrt_cuda_allreduce_start_three_tier_f32",
        {rt.input(b, loc, encoded.codes), rt.input(b, loc, encoded.scalars)},
        {b.getI64Type()});
    residual = encoded.residual;
  } else if (op.getScheme() == CompressionScheme::topk) {
    // The slots' indices are i32.
    std::optional<TopKRatio> ratio = topKRatio(op.getParams());
    if (!ratio || n > std::numeric_limits<int32_t>::max())
      return false;
    DeviceTopK encoded =
        buildTopKOnDevice(b, loc, op.getBucket(), op.getResidual(), *ratio);
    int64_t slots =
        cast<RankedTensorType>(encoded.indices.getType()).getDimSize(0);
    for (Operation *user : op.getRequest().getUsers())
      if (isa<AllReduceWaitOp>(user))
        topKWaits[user] = slots;
    handle = rt.call(
        b, loc, "dsrt_cuda_allreduce_start_topk_f32",
        {rt.input(b, loc, encoded.indices), rt.input(b, loc, encoded.values),
         rt.input(b, loc, encoded.count), rt.input(b, loc, encoded.scalars),
         arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(n)),
         // Slots of DGC's warm-up (its 25 %'s) are not worth gathering.
         arith::ConstantOp::create(b, loc,
                                   b.getI64IntegerAttr(ratio->fixed()))},
        {b.getI64Type()});
    residual = encoded.residual;
  } else {
    return false;
  }
  op.getNewResidual().replaceAllUsesWith(residual);
  op.getRequest().replaceAllUsesWith(handle);
  op.erase();
  return true;
}

/// ds.all_reduce_start: (bucket, residual in, residual out, scheme, p0, p1,
/// p2) -> handle; on CUDA (..., scheme, params), empty without params, and
/// an uncompressed bucket masked (maskNonFinite). A scheme without a
/// residual gets empty residual buffers. On CUDA an uncompressed bucket
/// whose wait follows in the block is masked into a buffer that the wait
/// gets as its output (recorded in `inPlace`), and the start is
/// dsrt_cuda_allreduce_start_in_place_*(bucket, params): NCCL then
/// all-reduces the bucket where it lies, with no copy in or out.
LogicalResult lowerAllReduceStart(RuntimeCallBuilder &rt, AllReduceStartOp op,
                                  DenseMap<Operation *, Value> &inPlace,
                                  DenseMap<Operation *, int64_t> &topKWaits) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  RankedTensorType type = op.getBucket().getType();
  FailureOr<StringRef> suffix = collectiveSuffix(op, type.getElementType());
  if (failed(suffix))
    return failure();
  // A bucket that joins gradients is built in a buffer of its own, which
  // the gradients' kernels and GEMMs write in place where they can
  // (gradient-as-bucket-view); NCCL then reduces that buffer.
  Value built = buildConcatenationInBuffer(op.getBucket(), rt.bucketViews());
  if (op.getScheme() == CompressionScheme::powersgd)
    return lowerPowerSgdStart(rt, op, *suffix);
  if (lowerStartOnDevice(rt, op, topKWaits))
    return success();
  Value bucket = op.getBucket(), params = op.getParams();
  if (rt.targetsCuda() && op.getScheme() == CompressionScheme::none) {
    if (AllReduceWaitOp wait = inPlaceWait(op)) {
      // (bucket, params) -> handle, the bucket's buffer the wait's output:
      // the concatenation's own when it can be (the mask in place),
      // otherwise a fresh one the mask writes.
      bool concatenatedInPlace = built != nullptr;
      Value buffer = built, view;
      if (concatenatedInPlace) {
        view = RuntimeCallBuilder::dynamicView(b, loc, buffer);
      } else {
        std::tie(buffer, view) = RuntimeCallBuilder::alloc(b, loc, type);
      }
      Value into = concatenatedInPlace
                       ? Value()
                       : bufferization::ToTensorOp::create(b, loc, type, buffer,
                                                           /*restrict=*/true,
                                                           /*writable=*/true)
                             .getResult();
      std::tie(bucket, params) =
          maskNonFinite(b, loc, bucket, into, concatenatedInPlace);
      // The mask wrote the buffer in place: this keeps its result alive.
      keepInBuffer(b, loc, bucket, buffer);
      inPlace[wait] = buffer;
      Value handle = rt.call(
          b, loc,
          rt.collective(("dsrt_allreduce_start_in_place_" + *suffix).str()),
          {view, rt.paramsBuffer(b, loc, params)}, {b.getI64Type()});
      op.getRequest().replaceAllUsesWith(handle);
      op.erase();
      return success();
    }
    std::tie(bucket, params) = maskNonFinite(b, loc, bucket, Value());
  }
  bool halves = op.getScheme() == CompressionScheme::fp16 ||
                op.getScheme() == CompressionScheme::bf16;
  if (rt.targetsCuda() && halves && type.getElementType().isF32())
    if (AllReduceWaitOp wait = inPlaceWait(op)) {
      lowerHalfStart(rt, op, wait, inPlace);
      return success();
    }
  auto empty = RankedTensorType::get({0}, type.getElementType());
  Value residualIn = op.getResidual()
                         ? rt.input(b, loc, op.getResidual())
                         : RuntimeCallBuilder::alloc(b, loc, empty).second;
  auto [residualOut, residualOutView] =
      RuntimeCallBuilder::alloc(b, loc, op.getResidual() ? type : empty);
  SmallVector<Value> operands{rt.input(b, loc, bucket), residualIn,
                              residualOutView};
  operands.push_back(arith::ConstantOp::create(
      b, loc, b.getI64IntegerAttr(int64_t(op.getScheme()))));
  if (rt.targetsCuda())
    operands.push_back(rt.paramsBuffer(b, loc, params));
  for (int64_t i = 0; i < 3 && !rt.targetsCuda(); ++i) {
    if (op.getParams()) {
      Value index = arith::ConstantIndexOp::create(b, loc, i);
      operands.push_back(
          tensor::ExtractOp::create(b, loc, op.getParams(), index));
    } else {
      operands.push_back(
          arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0)));
    }
  }
  Value handle =
      rt.call(b, loc, rt.collective(("dsrt_allreduce_start_" + *suffix).str()),
              operands, {b.getI64Type()});
  // A top-k mean is sparse, whoever encoded the payloads.
  if (rt.targetsCuda() && op.getScheme() == CompressionScheme::topk &&
      type.getElementType().isF32())
    for (Operation *user : op.getRequest().getUsers())
      if (isa<AllReduceWaitOp>(user))
        topKWaits[user] = 0;
  if (Value next = op.getNewResidual()) {
    if (rt.targetsCuda()) {
      if (failed(takeAfterWait(op, next, residualOut)))
        return failure();
    } else {
      // The CPU's start writes the residual before it returns.
      next.replaceAllUsesWith(bufferization::ToTensorOp::create(
          b, loc, type, residualOut, /*restrict=*/true, /*writable=*/true));
    }
  }
  op.getRequest().replaceAllUsesWith(handle);
  op.erase();
  return success();
}

/// The wait of a top-k start on CUDA (encoded on the device or by the
/// host): at most the ranks' selections of the mean are not zero, so it
/// comes back sparse, or as the ranks' slots.
/// - Staged: dsrt_cuda_allreduce_wait_topk_f32 returns how many elements
///   are not +0 (U), or -1 when more than half are; the step zero-fills
///   the output, dsrt_cuda_allreduce_take_topk_f32 copies the U indices
///   and values into buffers of U (or the whole mean into the output), and
///   the step scatters them (one kernel each): 8 U bytes cross PCIe
///   instead of the bucket's 4 n, never more, and the output is the dense
///   wait's bit for bit.
/// - Gathered on NCCL (a start encoded on the device into `slots` slots;
///   dsrt_cuda_allreduce_ranks_topk_f32 says how many ranks' slots, 0 when
///   staged): the wait returns 0, and the step decodes: for each rank in
///   order, its slots copied into buffers of the step's and added into the
///   output (one kernel: a rank's indices are distinct), then the sums
///   divided by the ranks, the host decoder's operations in its order.
/// Buckets of other shapes are decoded flat and reshaped.
void lowerTopKWait(RuntimeCallBuilder &rt, AllReduceWaitOp op, int64_t slots) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  RankedTensorType type = op.getType();
  int64_t n = type.getNumElements();
  Type f32 = b.getF32Type(), i32 = b.getI32Type(), i64 = b.getI64Type();
  Value request = op.getRequest();
  Value ranks = slots > 0
                    ? rt.call(b, loc, "dsrt_cuda_allreduce_ranks_topk_f32",
                              {request}, {i64})
                    : Value();
  // Where each gathered rank's slots are copied (unused when staged).
  Value slotIndices, slotValues;
  if (slots > 0) {
    slotIndices =
        memref::AllocOp::create(b, loc, MemRefType::get({slots}, i32));
    slotValues = memref::AllocOp::create(b, loc, MemRefType::get({slots}, f32));
  }
  Value count =
      rt.call(b, loc, "dsrt_cuda_allreduce_wait_topk_f32", {request}, {i64});
  Value sparse = arith::MaxSIOp::create(
      b, loc, count, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
  Value size = arith::IndexCastOp::create(b, loc, b.getIndexType(), sparse);
  auto vector = [&](Type elementType) -> Value {
    return memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, elementType),
        ValueRange{size});
  };
  Value indices = vector(i32), values = vector(f32);
  Value out = memref::AllocOp::create(b, loc, MemRefType::get({n}, f32));
  Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, 0.0));
  linalg::FillOp::create(b, loc, zero, out);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  if (slots > 0) {
    // Each rank's slots, in rank order: empty ones (the unused, or all of
    // a non-finite bucket's) are skipped.
    Value rankCount =
        arith::IndexCastOp::create(b, loc, b.getIndexType(), ranks);
    scf::ForOp::create(
        b, loc, c0, rankCount, c1, ValueRange{},
        [&](OpBuilder &fb, Location fl, Value rank, ValueRange) {
          rt.call(fb, fl, "dsrt_cuda_allreduce_slots_topk_f32",
                  {request, arith::IndexCastOp::create(fb, fl, i64, rank),
                   RuntimeCallBuilder::dynamicView(fb, fl, slotIndices),
                   RuntimeCallBuilder::dynamicView(fb, fl, slotValues)});
          Value count = arith::ConstantIndexOp::create(fb, fl, slots);
          scf::ParallelOp::create(
              fb, fl, ValueRange{c0}, ValueRange{count}, ValueRange{c1},
              [&](OpBuilder &nb, Location nl, ValueRange ivs) {
                Value index = memref::LoadOp::create(nb, nl, slotIndices, ivs);
                Value used = arith::CmpIOp::create(
                    nb, nl, arith::CmpIPredicate::ne, index,
                    arith::ConstantOp::create(
                        nb, nl, nb.getI32IntegerAttr(int32_t(-1))));
                scf::IfOp::create(
                    nb, nl, used, [&](OpBuilder &ib, Location il) {
                      Value at = arith::IndexCastUIOp::create(
                          ib, il, ib.getIndexType(), index);
                      Value sum = arith::AddFOp::create(
                          ib, il, memref::LoadOp::create(ib, il, out, at),
                          memref::LoadOp::create(ib, il, slotValues, ivs));
                      memref::StoreOp::create(ib, il, sum, out, ValueRange{at});
                      scf::YieldOp::create(ib, il);
                    });
              });
          scf::YieldOp::create(fb, fl);
        });
  }
  rt.call(b, loc, "dsrt_cuda_allreduce_take_topk_f32",
          {request, RuntimeCallBuilder::dynamicView(b, loc, indices),
           RuntimeCallBuilder::dynamicView(b, loc, values),
           RuntimeCallBuilder::dynamicView(b, loc, out)});
  // Kernels take static shapes (bare pointers): the U elements seen as the
  // first of n (U <= n), of which the loop reads only those.
  auto asBucket = [&](Value buffer) -> Value {
    auto t = cast<MemRefType>(buffer.getType());
    return memref::ReinterpretCastOp::create(
        b, loc, MemRefType::get({n}, t.getElementType()), buffer,
        /*offset=*/0, /*sizes=*/ArrayRef<int64_t>{n},
        /*strides=*/ArrayRef<int64_t>{1});
  };
  indices = asBucket(indices);
  values = asBucket(values);
  // One grid-stride kernel (convert-linalg-to-ds-gpu): the indices are
  // distinct, so no two threads store to one element.
  scf::ParallelOp::create(
      b, loc, ValueRange{c0}, ValueRange{size}, ValueRange{c1},
      [&](OpBuilder &nb, Location nl, ValueRange ivs) {
        Value index = memref::LoadOp::create(nb, nl, indices, ivs);
        Value at =
            arith::IndexCastUIOp::create(nb, nl, nb.getIndexType(), index);
        Value value = memref::LoadOp::create(nb, nl, values, ivs);
        memref::StoreOp::create(nb, nl, value, out, ValueRange{at});
      });
  if (slots > 0) {
    // The gathered sums become the mean, as the host's decoder divides.
    Value gathered = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::sgt, ranks,
        arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
    scf::IfOp::create(b, loc, gathered, [&](OpBuilder &ib, Location il) {
      Value divisor = arith::SIToFPOp::create(ib, il, f32, ranks);
      Value all = arith::ConstantIndexOp::create(ib, il, n);
      scf::ParallelOp::create(
          ib, il, ValueRange{c0}, ValueRange{all}, ValueRange{c1},
          [&](OpBuilder &nb, Location nl, ValueRange ivs) {
            Value sum = memref::LoadOp::create(nb, nl, out, ivs);
            memref::StoreOp::create(
                nb, nl, arith::DivFOp::create(nb, nl, sum, divisor), out, ivs);
          });
      scf::YieldOp::create(ib, il);
    });
  }
  Value result = bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get({n}, f32), out, /*restrict=*/true,
      /*writable=*/true);
  if (type.getRank() != 1)
    result = RuntimeCallBuilder::reshape(b, loc, result, type.getShape());
  op.getResult().replaceAllUsesWith(result);
  op.erase();
}

/// ds.all_reduce_wait: (handle, out).
LogicalResult
lowerAllReduceWait(RuntimeCallBuilder &rt, AllReduceWaitOp op,
                   const DenseMap<Operation *, Value> &inPlace,
                   const DenseMap<Operation *, int64_t> &topKWaits) {
  // Buckets are flat (ds-data-parallel); another shape takes the dense wait.
  auto topK = topKWaits.find(op);
  if (topK != topKWaits.end() && op.getType().hasStaticShape()) {
    lowerTopKWait(rt, op, topK->second);
    return success();
  }
  OpBuilder b(op);
  Location loc = op.getLoc();
  RankedTensorType type = op.getType();
  FailureOr<StringRef> suffix = collectiveSuffix(op, type.getElementType());
  if (failed(suffix))
    return failure();
  Value out, view;
  if (Value buffer = inPlace.lookup(op)) {
    out = buffer;
    Type et = cast<MemRefType>(buffer.getType()).getElementType();
    view = memref::CastOp::create(
        b, loc, RuntimeCallBuilder::dynamicMemRef(b.getContext(), 1, et),
        buffer);
    if (et != type.getElementType()) {
      // DDP's fp16/bf16 hooks (lowerHalfStart): the 16-bit sum, widened.
      rt.call(b, loc,
              et.isBF16() ? "dsrt_cuda_allreduce_wait_half_bf16"
                          : "dsrt_cuda_allreduce_wait_half_f16",
              {op.getRequest(), view});
      Value sums = bufferization::ToTensorOp::create(
          b, loc, RankedTensorType::get(type.getShape(), et), buffer,
          /*restrict=*/true, /*writable=*/true);
      Value widened = lowering::buildParallel(
          b, loc, type, sums, b.getMultiDimIdentityMap(1),
          [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
            return lowering::convertFloat(nb, nl, args[0],
                                          type.getElementType());
          });
      op.getResult().replaceAllUsesWith(widened);
      op.erase();
      // The readers (the optimizer's update, the clipping norm) load the
      // 16-bit values and widen them themselves: no f32 copy of the bucket.
      if (widenInReaders(b, sums, widened))
        widened.getDefiningOp()->erase();
      return success();
    }
  } else {
    std::tie(out, view) = RuntimeCallBuilder::alloc(b, loc, type);
  }
  rt.call(b, loc, rt.collective(("dsrt_allreduce_wait_" + *suffix).str()),
          {op.getRequest(), view});
  Value result = bufferization::ToTensorOp::create(
      b, loc, type, out, /*restrict=*/true, /*writable=*/true);
  op.getResult().replaceAllUsesWith(result);
  op.erase();
  return success();
}

/// ds.send: (flattened input, peer, tag); ds.recv: (out, peer, tag).
LogicalResult lowerTransfer(RuntimeCallBuilder &rt, Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  auto send = dyn_cast<SendOp>(op);
  auto recv = dyn_cast<RecvOp>(op);
  auto type =
      cast<RankedTensorType>(send ? send.getInput().getType() : recv.getType());
  FailureOr<StringRef> suffix = collectiveSuffix(op, type.getElementType());
  if (failed(suffix))
    return failure();
  int64_t n = type.getNumElements();
  auto constant = [&](int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  };
  if (send) {
    Value flat = RuntimeCallBuilder::reshape(b, loc, send.getInput(), {n});
    rt.call(b, loc, rt.collective(("dsrt_send_" + *suffix).str()),
            {rt.input(b, loc, flat), constant(send.getPeer()),
             constant(send.getTag())});
    op->erase();
    return success();
  }
  auto flatType = RankedTensorType::get({n}, type.getElementType());
  auto [out, view] = RuntimeCallBuilder::alloc(b, loc, flatType);
  rt.call(b, loc, rt.collective(("dsrt_recv_" + *suffix).str()),
          {view, constant(recv.getPeer()), constant(recv.getTag())});
  Value result = bufferization::ToTensorOp::create(
      b, loc, flatType, out, /*restrict=*/true, /*writable=*/true);
  recv.getResult().replaceAllUsesWith(
      RuntimeCallBuilder::reshape(b, loc, result, type.getShape()));
  op->erase();
  return success();
}

void lowerCommRank(RuntimeCallBuilder &rt, CommRankOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto scalar = [&](StringRef name) -> Value {
    Value v = rt.call(b, loc, name, {}, {b.getI64Type()});
    return tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, b.getI64Type()), v);
  };
  op.getRank().replaceAllUsesWith(scalar("dsrt_comm_rank_i64"));
  op.getSize().replaceAllUsesWith(scalar("dsrt_comm_size_i64"));
  op.erase();
}

struct ConvertDSToRuntimePass
    : public mlir::ds::impl::ConvertDSToRuntimePassBase<
          ConvertDSToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (target != "cpu" && target != "cuda") {
      module.emitError() << "convert-ds-to-runtime: unknown target '" << target
                         << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    if (deviceEncodersMin < 0) {
      module.emitError() << "convert-ds-to-runtime: device-encoders-min is a "
                            "number of elements, not "
                         << static_cast<int64_t>(deviceEncodersMin);
      return signalPassFailure();
    }
    bool cuda = target == "cuda";
    RuntimeCallBuilder rt(module, cuda, bucketViews, deviceEncoders,
                          deviceEncodersMin);
    DenseMap<Operation *, Value> inPlace; // wait -> its start's buffer
    // Waits of f32 top-k starts: the slots per rank of a start encoded on
    // the device, 0 for one the host encodes.
    DenseMap<Operation *, int64_t> topKWaits;
    // On CUDA the block-sparse products and the top-k have no runtime
    // kernels (convert-ds-to-linalg lowered them); collectives are staged.
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (cuda ? isCollective(op) : hasRuntimeKernel(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      LogicalResult result = success();
      if (isa<AllReduceOp, CommBroadcastOp>(op))
        result = lowerBlockingCollective(rt, op);
      else if (auto start = dyn_cast<AllReduceStartOp>(op))
        result = lowerAllReduceStart(rt, start, inPlace, topKWaits);
      else if (auto wait = dyn_cast<AllReduceWaitOp>(op))
        result = lowerAllReduceWait(rt, wait, inPlace, topKWaits);
      else if (auto comm = dyn_cast<CommRankOp>(op))
        lowerCommRank(rt, comm);
      else if (isa<SendOp, RecvOp>(op))
        result = lowerTransfer(rt, op);
      else if (auto mm = dyn_cast<BlockSparseMatMulOp>(op))
        lowerBlockSparseMatMul(rt, mm);
      else if (auto s = dyn_cast<BlockSampledMatMulOp>(op))
        lowerBlockSampledMatMul(rt, s);
      else
        lowerTopKMask(rt, cast<TopKMaskOp>(op));
      if (failed(result))
        return signalPassFailure();
    }
  }
};

} // namespace

//===- DSCommOps.cpp - Verifiers of the ds collective ops -----------------===//
//
// The checks that keep a gradient all-reduce well formed: a flat bucket, a
// residual exactly when the compression scheme keeps one, the scheme's
// parameters, and a wait whose request comes from a start of its type.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::ds;

LogicalResult AllReduceStartOp::verify() {
  RankedTensorType bucket = getBucket().getType();
  if (bucket.getRank() != 1)
    return emitOpError() << "expects a 1-D bucket, got " << bucket;
  CompressionScheme scheme = getScheme();
  bool wantsResidual = hasResidual(scheme);
  if (wantsResidual != bool(getResidual()) ||
      wantsResidual != bool(getNewResidual()))
    return emitOpError() << "scheme '" << stringifyCompressionScheme(scheme)
                         << "' " << (wantsResidual ? "needs" : "takes no")
                         << " error-feedback residual operand and result";
  bool powerSgd = scheme == CompressionScheme::powersgd;
  if (getResidual() && getResidual().getType() != getNewResidual().getType())
    return emitOpError() << "expects the new residual of the residual's type "
                         << getResidual().getType();
  if (getResidual() && !powerSgd && getResidual().getType() != bucket)
    return emitOpError() << "expects the residual and its new value of the "
                            "bucket's type "
                         << bucket;
  if (getResidual() && powerSgd &&
      (getResidual().getType().getRank() != 1 ||
       getResidual().getType().getElementType() != bucket.getElementType()))
    return emitOpError() << "expects a 1-D PowerSGD state of the bucket's "
                            "element type, got "
                         << getResidual().getType();
  if (powerSgd != bool(getShapes()))
    return emitOpError() << "scheme '" << stringifyCompressionScheme(scheme)
                         << "' " << (powerSgd ? "needs" : "takes no")
                         << " shapes";
  if (getShapes()) {
    RankedTensorType st = getShapes().getType();
    if (st.getRank() != 1 || st.getDimSize(0) % 2 != 0)
      return emitOpError() << "expects shapes of type tensor<2Kxi64>, got "
                           << st;
  }
  bool wantsParams = scheme == CompressionScheme::three_tier ||
                     scheme == CompressionScheme::topk || powerSgd;
  if (wantsParams != bool(getParams()))
    return emitOpError() << "scheme '" << stringifyCompressionScheme(scheme)
                         << "' " << (wantsParams ? "needs" : "takes no")
                         << " params";
  if (getParams() && getParams().getType().getShape() != ArrayRef<int64_t>{3})
    return emitOpError() << "expects params of type tensor<3xf64>, got "
                         << getParams().getType();
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  auto start = getRequest().getDefiningOp<AllReduceStartOp>();
  if (!start)
    return emitOpError() << "expects a request made by ds.all_reduce_start";
  if (start.getBucket().getType() != getType())
    return emitOpError() << "expects a result of the bucket's type "
                         << start.getBucket().getType() << ", got "
                         << getType();
  return success();
}

LogicalResult AllReduceOp::buildVJP(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.assign(1, Value());
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  ReductionKind kind = getReduction();
  if (kind != ReductionKind::sum && kind != ReductionKind::mean)
    return emitOpError() << "a " << stringifyReductionKind(kind)
                         << " reduction is not differentiable";
  operandGrads[0] = AllReduceOp::create(builder, getLoc(), dy, kind);
  return success();
}

/// Sends and receives live in a pipeline stage's function; the module's
/// ds.pipeline verifier matches them up.
static LogicalResult verifyStageTransfer(Operation *op, int64_t peer) {
  auto func = op->getParentOfType<FunctionOpInterface>();
  auto stage =
      func ? func->getAttrOfType<IntegerAttr>(DSDialect::kPipelineStageAttrName)
           : IntegerAttr();
  if (!stage)
    return op->emitOpError("must be in a function marked '")
           << DSDialect::kPipelineStageAttrName << "'";
  auto module = op->getParentOfType<ModuleOp>();
  if (!module || !module->hasAttr(DSDialect::kPipelineAttrName))
    return op->emitOpError("needs a module with '")
           << DSDialect::kPipelineAttrName << "'";
  if (peer < 0 || peer == stage.getInt())
    return op->emitOpError("peer ")
           << peer << " must be another stage than this function's ("
           << stage.getInt() << ")";
  return success();
}

LogicalResult SendOp::verify() {
  if (getTag() < 0 || getTag() > 32767)
    return emitOpError("tag ") << getTag() << " must lie in [0, 32767]";
  return verifyStageTransfer(*this, getPeer());
}

LogicalResult RecvOp::verify() {
  if (getTag() < 0 || getTag() > 32767)
    return emitOpError("tag ") << getTag() << " must lie in [0, 32767]";
  return verifyStageTransfer(*this, getPeer());
}

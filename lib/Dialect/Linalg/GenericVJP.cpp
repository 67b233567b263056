//===- GenericVJP.cpp - Differentiating linalg.generic from its body ------===//
//
// Implements GenericVJP.h. For an elementwise generic
//   out_r[o_r(d)] = f_r(x_1[m_1(d)], ..., x_n[m_n(d)])
// the gradient of input x_i is
//   dx_i[m_i(d)] += sum_r dy_r[o_r(d)] * (d f_r / d x_i)(...)
// over the iteration space d: one generic per input, whose loops are
// parallel where x_i varies and reductions where it is broadcast, whose
// body is a clone of the forward body followed by its forward-mode
// derivative with respect to x_i's block argument. A map result that is a
// constant 0 (torch-mlir's size-1 broadcast dimension) is dropped from the
// gradient's indexing and restored by a ds.reshape.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/Linalg/GenericVJP.h"
#include "ds/Dialect/Linalg/IndexingMaps.h"

#include "ScalarDerivatives.h"

#include "ds/Dialect/DS/IR/DSInterfaces.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Utils/ScalarBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

bool isFloatTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// Whether `o`, or an op nested in its regions, reads one of `values`.
bool readsAny(Operation *o, const llvm::SmallPtrSetImpl<Value> &values) {
  WalkResult r = o->walk([&](Operation *inner) {
    return llvm::any_of(inner->getOperands(),
                        [&](Value v) { return values.contains(v); })
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  return r.wasInterrupted();
}

/// The body values that depend on the block argument of input `input`
/// (all float inputs when `input` is negative).
llvm::SmallPtrSet<Value, 16> dependentValues(linalg::GenericOp op,
                                             int64_t input) {
  llvm::SmallPtrSet<Value, 16> dependent;
  Block *body = op.getBody();
  for (OpOperand *in : op.getDpsInputOperands()) {
    unsigned i = in->getOperandNumber();
    if ((input < 0 && isFloatTensor(in->get().getType())) || input == i)
      dependent.insert(body->getArgument(i));
  }
  for (Operation &o : body->without_terminator())
    if (readsAny(&o, dependent))
      dependent.insert(o.result_begin(), o.result_end());
  return dependent;
}

/// Builds the gradient of input `input` of `op` given the cotangents of its
/// results (null: none), or returns null when no result depends on it.
Value buildInputGradient(OpBuilder &b, linalg::GenericOp op, unsigned input,
                         ValueRange resultGrads) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  llvm::SmallPtrSet<Value, 16> dependent = dependentValues(op, input);
  SmallVector<unsigned> results;
  for (auto [r, g] : llvm::enumerate(resultGrads))
    if (g && dependent.contains(yield.getOperand(r)))
      results.push_back(r);
  if (results.empty())
    return Value();

  SmallVector<int64_t> loops = op.getStaticLoopRanges();
  unsigned numLoops = loops.size();
  auto inputType = cast<RankedTensorType>(op->getOperand(input).getType());
  SmallVector<AffineMap> forwardMaps = op.getIndexingMapsArray();
  SmallVector<int64_t> dims = *getMapResultDims(forwardMaps[input]);

  // The gradient varies along the loops the input varies along.
  SmallVector<AffineExpr> kept;
  SmallVector<int64_t> gradShape;
  SmallVector<utils::IteratorType> iterators(numLoops,
                                             utils::IteratorType::reduction);
  for (int64_t d : dims)
    if (d >= 0) {
      kept.push_back(getAffineDimExpr(d, ctx));
      gradShape.push_back(loops[d]);
      iterators[d] = utils::IteratorType::parallel;
    }
  bool reduces = kept.size() < numLoops;
  auto gradType = RankedTensorType::get(gradShape, inputType.getElementType());

  SmallVector<Value> inputs(op.getDpsInputs());
  SmallVector<AffineMap> maps(forwardMaps.begin(),
                              forwardMaps.begin() + op.getNumDpsInputs());
  for (unsigned r : results) {
    inputs.push_back(resultGrads[r]);
    maps.push_back(forwardMaps[op.getNumDpsInputs() + r]);
  }
  maps.push_back(AffineMap::get(numLoops, 0, kept, ctx));

  Value init =
      tensor::EmptyOp::create(b, loc, gradShape, inputType.getElementType());
  if (reduces) {
    Value zero = arith::ConstantOp::create(
        b, loc, b.getFloatAttr(inputType.getElementType(), 0.0));
    init = linalg::FillOp::create(b, loc, zero, init).getResult(0);
  }

  unsigned numInputs = op.getNumDpsInputs();
  auto buildBody = [&](OpBuilder &nested, Location bodyLoc, ValueRange args) {
    // A builder without the caller's listener: the body's ops are part of
    // the generic, not separate ops of the step.
    OpBuilder ib(nested.getContext());
    ib.setInsertionPoint(nested.getInsertionBlock(),
                         nested.getInsertionPoint());
    IRMapping mapping;
    llvm::DenseMap<Value, Value> tangents;
    for (unsigned i = 0; i < numInputs; ++i)
      mapping.map(body->getArgument(i), args[i]);
    Value arg = body->getArgument(input);
    tangents[arg] = arith::ConstantOp::create(
        ib, bodyLoc, ib.getFloatAttr(arg.getType(), 1.0));
    for (Operation &o : body->without_terminator()) {
      Operation *clone = ib.clone(o, mapping);
      SmallVector<Value> operandTangents;
      for (Value v : o.getOperands())
        operandTangents.push_back(tangents.lookup(v));
      // whyNotDifferentiable has checked every op a float input reaches.
      FailureOr<Value> tangent = buildScalarTangent(ib, clone, operandTangents);
      if (succeeded(tangent) && *tangent)
        tangents[o.getResult(0)] = *tangent;
    }
    Value sum;
    for (auto [k, r] : llvm::enumerate(results)) {
      Value tangent = tangents.lookup(yield.getOperand(r));
      if (!tangent)
        continue;
      Value contribution =
          arith::MulFOp::create(ib, bodyLoc, args[numInputs + k], tangent);
      ScalarBuilder s(ib, bodyLoc);
      contribution = s.convert(contribution, gradType.getElementType());
      sum = sum ? s.add(sum, contribution) : contribution;
    }
    if (!sum)
      sum = arith::ConstantOp::create(
          ib, bodyLoc, ib.getFloatAttr(gradType.getElementType(), 0.0));
    if (reduces)
      sum = arith::AddFOp::create(ib, bodyLoc, args.back(), sum);
    linalg::YieldOp::create(ib, bodyLoc, sum);
  };
  Value grad =
      linalg::GenericOp::create(b, loc, TypeRange{gradType}, inputs,
                                ValueRange{init}, maps, iterators, buildBody)
          .getResult(0);
  if (gradType != inputType)
    grad = ReshapeOp::create(b, loc, inputType, grad);
  return grad;
}

struct GenericVJPModel
    : public DifferentiableOpInterface::ExternalModel<GenericVJPModel,
                                                      linalg::GenericOp> {
  bool isDifferentiableOperand(Operation *op, unsigned index) const {
    auto generic = cast<linalg::GenericOp>(op);
    return index < generic.getNumDpsInputs() &&
           isFloatTensor(op->getOperand(index).getType());
  }

  LogicalResult buildVJP(Operation *op, OpBuilder &b, ValueRange resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto generic = cast<linalg::GenericOp>(op);
    std::string why = whyNotDifferentiable(generic);
    if (!why.empty())
      return op->emitOpError("cannot be differentiated: ") << why;
    for (unsigned i = 0, e = op->getNumOperands(); i < e; ++i)
      operandGrads.push_back(
          isDifferentiableOperand(op, i)
              ? buildInputGradient(b, generic, i, resultGrads)
              : Value());
    return success();
  }
};

} // namespace

std::string mlir::ds::whyNotDifferentiable(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics())
    return "it works on buffers, not tensors";
  if (op.getNumReductionLoops() != 0)
    return "it has reduction loops (only elementwise generics are "
           "differentiated from their body)";
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        !t || !t.hasStaticShape())
      return "an operand has a dynamic shape";
  for (OpResult r : op->getResults())
    if (!isFloatTensor(r.getType()))
      return "a result is not a float tensor";
  Block *body = op.getBody();
  for (OpOperand &init : op.getDpsInitsMutable())
    if (!op.getMatchingBlockArgument(&init).use_empty())
      return "its body reads its output operand";
  for (auto [k, map] : llvm::enumerate(op.getIndexingMapsArray())) {
    bool isInput = k < op.getNumDpsInputs();
    if (isInput ? failed(getMapResultDims(map)) : !map.isPermutation())
      return isInput ? "an input's indexing map is not a projection of the "
                       "loops"
                     : "an output's indexing map is not a permutation of "
                       "the loops";
  }
  // A constant 0 in an input's map is a broadcast only on a size-1
  // dimension (a gradient cannot be scattered into one element of more).
  for (OpOperand *in : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(in);
    auto type = dyn_cast<RankedTensorType>(in->get().getType());
    if (!type)
      continue;
    for (auto [k, e] : llvm::enumerate(map.getResults()))
      if (isa<AffineConstantExpr>(e) && type.getDimSize(k) != 1)
        return "an input is read at index 0 of a dimension of size " +
               std::to_string(type.getDimSize(k)) +
               " (only size-1 broadcasts are differentiated)";
  }
  llvm::SmallPtrSet<Value, 16> dependent = dependentValues(op, -1);
  for (Operation &o : body->without_terminator()) {
    bool reached = readsAny(&o, dependent);
    if (reached && !hasScalarDerivative(&o))
      return ("its body's '" + o.getName().getStringRef() +
              "' has no derivative rule")
          .str();
  }
  return "";
}

void mlir::ds::registerLinalgGenericVJPModel(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, linalg::LinalgDialect *) {
    linalg::GenericOp::attachInterface<GenericVJPModel>(*ctx);
  });
}

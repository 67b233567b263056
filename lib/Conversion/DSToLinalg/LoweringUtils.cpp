//===- LoweringUtils.cpp - Helpers shared by the ds-to-linalg patterns ----===//
//
// Builders for the recurring pieces of the lowering (see LoweringUtils.h).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "ds/Dialect/DS/Utils/ScalarBuilder.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

//===----------------------------------------------------------------------===//
// Tensors and constants
//===----------------------------------------------------------------------===//

Value lowering::createEmpty(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                            Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

Value lowering::createFilled(OpBuilder &b, Location loc,
                             ArrayRef<int64_t> shape, Value value) {
  Value empty = createEmpty(b, loc, shape, value.getType());
  return linalg::FillOp::create(b, loc, ValueRange{value}, ValueRange{empty})
      .getResult(0);
}

Value lowering::createZeros(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                            Type elementType) {
  return createFilled(b, loc, shape, createScalar(b, loc, elementType, 0.0));
}

Value lowering::createScalar(OpBuilder &b, Location loc, Type type,
                             double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, value));
  if (isa<IndexType>(type))
    return arith::ConstantIndexOp::create(b, loc, static_cast<int64_t>(value));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value lowering::createNegInf(OpBuilder &b, Location loc, Type type) {
  auto floatType = cast<FloatType>(type);
  const llvm::fltSemantics &sem = floatType.getFloatSemantics();
  APFloat value = llvm::APFloat::semanticsHasInf(sem)
                      ? APFloat::getInf(sem, /*Negative=*/true)
                      : APFloat::getLargest(sem, /*Negative=*/true);
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, value));
}

Value lowering::createIndex(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value lowering::createI64(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), value);
}

//===----------------------------------------------------------------------===//
// Affine maps
//===----------------------------------------------------------------------===//

AffineMap lowering::getBroadcastMap(MLIRContext *ctx, ArrayRef<int64_t> operand,
                                    ArrayRef<int64_t> result) {
  unsigned rank = result.size();
  if (operand.empty())
    return AffineMap::get(rank, 0, {}, ctx);
  SmallVector<AffineExpr> exprs;
  for (unsigned i = 0; i < rank; ++i) {
    if (operand[i] == 1 && result[i] != 1)
      exprs.push_back(getAffineConstantExpr(0, ctx));
    else
      exprs.push_back(getAffineDimExpr(i, ctx));
  }
  return AffineMap::get(rank, 0, exprs, ctx);
}

AffineMap lowering::getDropDimsMap(MLIRContext *ctx, unsigned rank,
                                   ArrayRef<int64_t> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned i = 0; i < rank; ++i)
    if (!llvm::is_contained(dims, static_cast<int64_t>(i)))
      exprs.push_back(getAffineDimExpr(i, ctx));
  return AffineMap::get(rank, 0, exprs, ctx);
}

AffineMap lowering::getTrailingMap(MLIRContext *ctx, unsigned rank,
                                   unsigned count) {
  SmallVector<AffineExpr> exprs;
  for (unsigned i = rank - count; i < rank; ++i)
    exprs.push_back(getAffineDimExpr(i, ctx));
  return AffineMap::get(rank, 0, exprs, ctx);
}

SmallVector<int64_t> lowering::dropDims(ArrayRef<int64_t> shape,
                                        ArrayRef<int64_t> dims) {
  SmallVector<int64_t> out;
  for (auto [i, size] : llvm::enumerate(shape))
    if (!llvm::is_contained(dims, static_cast<int64_t>(i)))
      out.push_back(size);
  return out;
}

//===----------------------------------------------------------------------===//
// linalg.generic builders
//===----------------------------------------------------------------------===//

Value lowering::buildParallel(OpBuilder &b, Location loc,
                              RankedTensorType resultType, ValueRange inputs,
                              ArrayRef<AffineMap> inputMaps, ScalarFn body) {
  unsigned rank = resultType.getRank();
  Value init =
      createEmpty(b, loc, resultType.getShape(), resultType.getElementType());
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value v = body(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, v);
      });
  return generic.getResult(0);
}

Value lowering::buildElementwise(OpBuilder &b, Location loc,
                                 RankedTensorType resultType, ValueRange inputs,
                                 ScalarFn body) {
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(getBroadcastMap(
        b.getContext(), cast<RankedTensorType>(input.getType()).getShape(),
        resultType.getShape()));
  return buildParallel(b, loc, resultType, inputs, maps, body);
}

SmallVector<Value> lowering::buildReduction(OpBuilder &b, Location loc,
                                            ArrayRef<int64_t> loopShape,
                                            ArrayRef<int64_t> reducedDims,
                                            ValueRange inputs,
                                            ArrayRef<AffineMap> inputMaps,
                                            ValueRange inits, BodyFn body) {
  unsigned rank = loopShape.size();
  SmallVector<int64_t> outShape = dropDims(loopShape, reducedDims);
  AffineMap outMap = getDropDimsMap(b.getContext(), rank, reducedDims);
  SmallVector<Value> outs;
  SmallVector<Type> outTypes;
  SmallVector<AffineMap> maps(inputMaps);
  for (Value init : inits) {
    outs.push_back(createFilled(b, loc, outShape, init));
    outTypes.push_back(outs.back().getType());
    maps.push_back(outMap);
  }
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  for (int64_t d : reducedDims)
    iterators[d] = utils::IteratorType::reduction;
  auto generic = linalg::GenericOp::create(
      b, loc, outTypes, inputs, outs, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return SmallVector<Value>(generic.getResults());
}

//===----------------------------------------------------------------------===//
// Scalar arithmetic
//===----------------------------------------------------------------------===//

Type lowering::getComputeType(Type elementType) {
  auto floatType = dyn_cast<FloatType>(elementType);
  if (floatType && floatType.getWidth() < 32)
    return Float32Type::get(elementType.getContext());
  return elementType;
}

// The scalar rules live in ScalarBuilder, shared with the passes.
Value lowering::convertFloat(OpBuilder &b, Location loc, Value value, Type to) {
  return ScalarBuilder(b, loc).convert(value, to);
}
Value lowering::add(OpBuilder &b, Location loc, Value x, Value y) {
  return ScalarBuilder(b, loc).add(x, y);
}
Value lowering::sub(OpBuilder &b, Location loc, Value x, Value y) {
  return ScalarBuilder(b, loc).sub(x, y);
}
Value lowering::mul(OpBuilder &b, Location loc, Value x, Value y) {
  return ScalarBuilder(b, loc).mul(x, y);
}

Value lowering::addReassoc(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::AddFOp::create(b, loc, x, y, arith::FastMathFlags::reassoc);
}

Value lowering::maxNaN(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MaximumFOp::create(b, loc, x, y);
}

Value lowering::clampIndex(OpBuilder &b, Location loc, Value index,
                           int64_t size) {
  Value i = index;
  if (!i.getType().isIndex())
    i = arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
  i = arith::MaxSIOp::create(b, loc, i, createIndex(b, loc, 0));
  return arith::MinSIOp::create(b, loc, i, createIndex(b, loc, size - 1));
}

Value lowering::reshapeTo(OpBuilder &b, Location loc, Value value,
                          ArrayRef<int64_t> shape) {
  auto srcType = cast<RankedTensorType>(value.getType());
  ArrayRef<int64_t> src = srcType.getShape();
  if (src == shape)
    return value;
  auto dstType = RankedTensorType::get(shape, srcType.getElementType());
  // Rank-0 on either side: the empty reassociation.
  if (shape.empty())
    return tensor::CollapseShapeOp::create(b, loc, dstType, value,
                                           ArrayRef<ReassociationIndices>{});
  if (src.empty())
    return tensor::ExpandShapeOp::create(b, loc, dstType, value,
                                         ArrayRef<ReassociationIndices>{});
  if (src.size() > shape.size()) {
    if (auto re = getReassociationIndicesForCollapse(src, shape))
      return tensor::CollapseShapeOp::create(b, loc, dstType, value, *re);
  } else if (src.size() < shape.size()) {
    if (auto re = getReassociationIndicesForCollapse(shape, src))
      return tensor::ExpandShapeOp::create(b, loc, dstType, value, *re);
  }
  // No direct reassociation: collapse to 1-D, then expand.
  int64_t n = 1;
  for (int64_t s : src)
    n *= s;
  Value flat = value;
  if (src.size() != 1) {
    ReassociationIndices all =
        llvm::to_vector(llvm::seq<int64_t>(0, src.size()));
    flat = tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get({n}, srcType.getElementType()), value,
        ArrayRef<ReassociationIndices>{all});
  }
  if (shape.size() == 1)
    return flat;
  ReassociationIndices all =
      llvm::to_vector(llvm::seq<int64_t>(0, shape.size()));
  return tensor::ExpandShapeOp::create(b, loc, dstType, flat,
                                       ArrayRef<ReassociationIndices>{all});
}

Value lowering::padWith(OpBuilder &b, Location loc, Value value,
                        ArrayRef<int64_t> low, ArrayRef<int64_t> high,
                        Value padValue) {
  if (llvm::all_of(low, [](int64_t v) { return v == 0; }) &&
      llvm::all_of(high, [](int64_t v) { return v == 0; }))
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  for (size_t i = 0; i < shape.size(); ++i)
    shape[i] += low[i] + high[i];
  return tensor::PadOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), value,
      getAsIndexOpFoldResult(b.getContext(), low),
      getAsIndexOpFoldResult(b.getContext(), high), padValue);
}

DenseIntElementsAttr lowering::getPairAttr(OpBuilder &b,
                                           ArrayRef<int64_t> pair) {
  return b.getI64TensorAttr(pair);
}

SmallVector<OpFoldResult> lowering::foldResults(OpBuilder &b,
                                                ArrayRef<int64_t> v) {
  return getAsIndexOpFoldResult(b.getContext(), v);
}

SmallVector<AffineExpr> lowering::dimExprs(MLIRContext *ctx, unsigned count) {
  SmallVector<AffineExpr> e;
  for (unsigned i = 0; i < count; ++i)
    e.push_back(getAffineDimExpr(i, ctx));
  return e;
}

//===- RaiseUtils.cpp - Helpers shared by the linalg raisers --------------===//
//
// Layout changes between a linalg op's iteration space and its operands.
// Operands are first stripped of the size-1 dimensions their map pins to 0,
// then transposed so that their loop dimensions are in increasing order, and
// finally reshaped to full rank with size-1 dimensions where the loop does
// not index them: a row-major reshape that only inserts unit dimensions
// keeps the element order, so one transpose at most is ever needed.
//
//===----------------------------------------------------------------------===//

#include "RaiseUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Matchers.h"

#include <numeric>

using namespace mlir;
using namespace mlir::ds;

Value raise::reshapeTo(OpBuilder &b, Location loc, Value v,
                       ArrayRef<int64_t> shape) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape)
    return v;
  return ReshapeOp::create(b, loc, t.clone(shape), v);
}

Value raise::transposeBy(OpBuilder &b, Location loc, Value v,
                         ArrayRef<int64_t> perm) {
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity &= static_cast<int64_t>(i) == p;
  if (identity)
    return v;
  return TransposeOp::create(b, loc, v, b.getDenseI64ArrayAttr(perm));
}

Value raise::broadcastTo(OpBuilder &b, Location loc, Value v,
                         ArrayRef<int64_t> shape) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getShape() == shape)
    return v;
  SmallVector<int64_t> dims;
  if (t.getRank() != 0) {
    dims.resize(t.getRank());
    std::iota(dims.begin(), dims.end(), 0);
  }
  return BroadcastOp::create(b, loc, t.clone(shape), v,
                             b.getDenseI64ArrayAttr(dims));
}

/// The permutation that sorts `dims` (result k = input position perm[k]).
static SmallVector<int64_t> sortingPermutation(ArrayRef<int64_t> dims) {
  SmallVector<int64_t> perm(dims.size());
  std::iota(perm.begin(), perm.end(), 0);
  llvm::sort(perm, [&](int64_t a, int64_t b) { return dims[a] < dims[b]; });
  return perm;
}

FailureOr<Value> raise::placeInLoops(OpBuilder &b, Location loc, Value v,
                                     ArrayRef<int64_t> dims,
                                     ArrayRef<int64_t> loops) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape() ||
      t.getRank() != static_cast<int64_t>(dims.size()))
    return failure();
  if (t.getRank() == 0)
    return v;
  // 1. Drop the dimensions pinned to 0.
  SmallVector<int64_t> kept, keptShape;
  for (auto [k, d] : llvm::enumerate(dims)) {
    if (d < 0) {
      if (t.getDimSize(k) != 1)
        return failure();
      continue;
    }
    if (t.getDimSize(k) != loops[d])
      return failure();
    kept.push_back(d);
    keptShape.push_back(t.getDimSize(k));
  }
  // 2. Loop dimensions in increasing order (when they are, one reshape
  // does steps 1 and 3).
  SmallVector<int64_t> perm = sortingPermutation(kept);
  if (!llvm::is_sorted(kept)) {
    v = reshapeTo(b, loc, v, keptShape);
    v = transposeBy(b, loc, v, perm);
  }
  // 3. Full rank, size 1 where the operand does not vary.
  SmallVector<int64_t> target(loops.size(), 1);
  for (int64_t d : kept)
    target[d] = loops[d];
  return reshapeTo(b, loc, v, target);
}

FailureOr<Value> raise::extractFromLoops(OpBuilder &b, Location loc, Value w,
                                         ArrayRef<int64_t> dims,
                                         ArrayRef<int64_t> loops,
                                         RankedTensorType resultType) {
  auto t = cast<RankedTensorType>(w.getType());
  int64_t n = loops.size();
  if (t.getRank() != 0 && t.getRank() != n)
    return failure();
  if (resultType.getRank() != static_cast<int64_t>(dims.size()) ||
      resultType.getElementType() != t.getElementType())
    return failure();
  SmallVector<int64_t> kept;
  for (auto [k, d] : llvm::enumerate(dims)) {
    if (resultType.getDimSize(k) != (d < 0 ? 1 : loops[d]))
      return failure();
    if (d >= 0)
      kept.push_back(d);
  }
  // Broadcast where the result varies but the value does not.
  SmallVector<int64_t> shape(n, 1);
  if (t.getRank() == n)
    shape.assign(t.getShape().begin(), t.getShape().end());
  for (int64_t d : kept)
    shape[d] = loops[d];
  w = broadcastTo(b, loc, w, shape);
  // Every other dimension has size 1: drop them, keeping loop order.
  SmallVector<int64_t> sorted(kept), sortedShape;
  llvm::sort(sorted);
  for (int64_t d = 0; d < n; ++d)
    if (!llvm::is_contained(kept, d) && shape[d] != 1)
      return failure();
  if (llvm::is_sorted(kept))
    return reshapeTo(b, loc, w, resultType.getShape());
  for (int64_t d : sorted)
    sortedShape.push_back(loops[d]);
  w = reshapeTo(b, loc, w, sortedShape);
  // Into the result's dimension order, then its unit dimensions.
  SmallVector<int64_t> perm;
  for (int64_t d : kept)
    perm.push_back(llvm::find(sorted, d) - sorted.begin());
  w = transposeBy(b, loc, w, perm);
  return reshapeTo(b, loc, w, resultType.getShape());
}

std::optional<double> raise::getScalarConstant(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  if (auto splat = dyn_cast<SplatElementsAttr>(attr))
    attr = splat.getSplatValue<Attribute>();
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return static_cast<double>(i.getValue().getSExtValue());
  return std::nullopt;
}

bool raise::isFilledWith(Value v, double value) {
  if (auto fill = v.getDefiningOp<linalg::FillOp>()) {
    std::optional<double> c = getScalarConstant(fill.getInputs()[0]);
    return c && *c == value;
  }
  if (isa<RankedTensorType>(v.getType())) {
    std::optional<double> c = getScalarConstant(v);
    return c && *c == value;
  }
  return false;
}

Value raise::scalarTensorConstant(OpBuilder &b, Location loc, TypedAttr attr) {
  auto type = RankedTensorType::get({}, attr.getType());
  return arith::ConstantOp::create(b, loc, type,
                                   DenseElementsAttr::get(type, attr));
}

bool raise::isDSCompatible(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || !rt.hasStaticShape())
    return false;
  Type e = rt.getElementType();
  return isa<FloatType>(e) || e.isSignlessInteger();
}

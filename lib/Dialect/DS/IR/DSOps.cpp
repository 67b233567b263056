//===- DSOps.cpp - ds dialect ops -----------------------------------------===//
//
// Verifiers and result type inference of the ds ops. Verifiers check local
// facts and say exactly what mismatched; the shape rules themselves live in
// ShapeUtils so that passes and tests share them.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/ShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::ds;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Prints `value` the way it appears in the IR (`%arg0`, `%3`), so an error
/// can name it.
static std::string nameOf(Value value) {
  std::string s;
  llvm::raw_string_ostream os(s);
  // assumeVerified: the op is being verified right now; verifying it again
  // from the printer would recurse.
  value.printAsOperand(os, OpPrintingFlags().assumeVerified());
  return s;
}

LogicalResult mlir::ds::verifyStaticShapes(Operation *op) {
  auto check = [&](Value v, StringRef kind, unsigned i) -> LogicalResult {
    // Unranked tensors never get here: the ODS constraints of every ds op
    // ask for ranked tensors and are checked first.
    auto shaped = dyn_cast<ShapedType>(v.getType());
    if (!shaped || !shaped.hasRank())
      return success();
    for (auto [d, size] : llvm::enumerate(shaped.getShape()))
      if (ShapedType::isDynamic(size))
        return op->emitOpError()
               << kind << " #" << i << " (" << nameOf(v)
               << ") has a dynamic dimension " << d << " in " << v.getType()
               << "; ds requires static shapes";
    return success();
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (failed(check(v, "operand", i)))
      return failure();
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    if (failed(check(v, "result", i)))
      return failure();
  return success();
}

static RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Fails with `message` at `loc` (when given) during type inference.
static LogicalResult inferError(std::optional<Location> loc,
                                const Twine &message) {
  return emitOptionalError(loc, message);
}

/// Checks that a rank-2 attribute list has exactly two entries, each at
/// least `min`.
static LogicalResult checkPair(std::optional<Location> loc, StringRef opName,
                               StringRef attr, ArrayRef<int64_t> values,
                               int64_t min) {
  if (values.size() != 2)
    return inferError(loc, "'" + opName + "' op '" + attr +
                               "' needs 2 entries (height, width), got " +
                               std::to_string(values.size()));
  for (int64_t v : values)
    if (v < min)
      return inferError(loc, "'" + opName + "' op '" + attr + "' entries " +
                                 "must be >= " + std::to_string(min) +
                                 ", got " + formatShape(values));
  return success();
}

/// Checks that two values share an element type.
static LogicalResult checkSameElementType(Operation *op, Value a, StringRef an,
                                          Value b, StringRef bn) {
  Type ea = getElementTypeOrSelf(a.getType());
  Type eb = getElementTypeOrSelf(b.getType());
  if (ea != eb)
    return op->emitOpError()
           << an << " and " << bn << " must share an element type, got " << ea
           << " and " << eb;
  return success();
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>>
MatMulOp::inferResultShape(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs,
                           bool transposeLhs, bool transposeRhs,
                           std::string &error) {
  if (lhs.size() < 2 || rhs.size() < 2) {
    error = "operands need rank >= 2, got lhs " + formatShape(lhs) +
            " and rhs " + formatShape(rhs);
    return failure();
  }
  size_t lr = lhs.size(), rr = rhs.size();
  int64_t m = transposeLhs ? lhs[lr - 1] : lhs[lr - 2];
  int64_t kl = transposeLhs ? lhs[lr - 2] : lhs[lr - 1];
  int64_t kr = transposeRhs ? rhs[rr - 1] : rhs[rr - 2];
  int64_t n = transposeRhs ? rhs[rr - 2] : rhs[rr - 1];
  if (kl != kr) {
    error = "contraction sizes differ: lhs " + formatShape(lhs) +
            " gives K = " + std::to_string(kl) + ", rhs " + formatShape(rhs) +
            " gives K = " + std::to_string(kr);
    return failure();
  }
  ArrayRef<int64_t> batch = lhs.drop_back(2);
  if (rr != 2 && (lr != rr || batch != rhs.drop_back(2))) {
    error = "batch dimensions of lhs " + formatShape(lhs) + " and rhs " +
            formatShape(rhs) +
            " must be equal, or rhs must be a rank-2 matrix shared by "
            "every batch";
    return failure();
  }
  SmallVector<int64_t> result(batch);
  result.push_back(m);
  result.push_back(n);
  return result;
}

void MatMulOp::build(OpBuilder &builder, OperationState &state, Value lhs,
                     Value rhs, bool transposeLhs, bool transposeRhs) {
  std::string error;
  RankedTensorType lt = tensorOf(lhs);
  FailureOr<SmallVector<int64_t>> shape =
      inferResultShape(lt.getShape(), tensorOf(rhs).getShape(), transposeLhs,
                       transposeRhs, error);
  assert(succeeded(shape) && "invalid matmul operands");
  build(builder, state, RankedTensorType::get(*shape, lt.getElementType()), lhs,
        rhs, transposeLhs, transposeRhs);
}

LogicalResult MatMulOp::verify() {
  // Two FP8 formats may meet (E5M2 gradients times E4M3 weights), as in
  // Hopper's FP8 GEMMs.
  bool fp8Pair = isa<Float8E4M3FNType, Float8E5M2Type>(
                     getLhs().getType().getElementType()) &&
                 isa<Float8E4M3FNType, Float8E5M2Type>(
                     getRhs().getType().getElementType());
  if (!fp8Pair &&
      failed(checkSameElementType(*this, getLhs(), "lhs", getRhs(), "rhs")))
    return failure();
  std::string error;
  FailureOr<SmallVector<int64_t>> shape = inferResultShape(
      getLhs().getType().getShape(), getRhs().getType().getShape(),
      getTransposeLhs(), getTransposeRhs(), error);
  if (failed(shape))
    return emitOpError() << error;
  if (getResult().getType().getShape() != ArrayRef<int64_t>(*shape))
    return emitOpError() << "result shape "
                         << formatShape(getResult().getType().getShape())
                         << " does not match the product's shape "
                         << formatShape(*shape);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

template <typename Adaptor>
static LogicalResult inferBinary(std::optional<Location> loc, StringRef opName,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  auto lhs = dyn_cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = dyn_cast<RankedTensorType>(adaptor.getRhs().getType());
  if (!lhs || !rhs)
    return inferError(loc, "'" + opName + "' op expects ranked tensors");
  if (lhs.getElementType() != rhs.getElementType()) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "'" << opName << "' op operands must share an element type, got "
       << lhs.getElementType() << " and " << rhs.getElementType();
    return inferError(loc, s);
  }
  std::string error;
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(lhs.getShape(), rhs.getShape(), error);
  if (failed(shape))
    return inferError(loc, "'" + opName + "' op " + error);
  inferred.push_back(RankedTensorType::get(*shape, lhs.getElementType()));
  return success();
}

#define DS_BINARY_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferBinary(loc, getOperationName(), adaptor, inferred);            \
  }
DS_BINARY_INFER(AddOp)
DS_BINARY_INFER(SubOp)
DS_BINARY_INFER(MulOp)
DS_BINARY_INFER(DivOp)
DS_BINARY_INFER(MaximumOp)
DS_BINARY_INFER(MinimumOp)
#undef DS_BINARY_INFER

//===----------------------------------------------------------------------===//
// BroadcastOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  if (failed(checkSameElementType(*this, getInput(), "input", getResult(),
                                  "result")))
    return failure();
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getResult().getType().getShape();
  ArrayRef<int64_t> dims = getDims();
  if (dims.size() != in.size())
    return emitOpError() << "'dims' has " << dims.size()
                         << " entries, but the input has rank " << in.size();
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= static_cast<int64_t>(out.size()))
      return emitOpError() << "'dims' entry " << d
                           << " is out of range for result rank " << out.size();
    if (i > 0 && d <= dims[i - 1])
      return emitOpError() << "'dims' " << formatShape(dims)
                           << " must be strictly increasing";
    if (in[i] != out[d] && in[i] != 1)
      return emitOpError() << "input dimension " << i << " (size " << in[i]
                           << ") cannot broadcast to result dimension " << d
                           << " (size " << out[d] << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  if (getSaturate() &&
      !(isa<FloatType>(getInput().getType().getElementType()) &&
        isa<FloatType>(getResult().getType().getElementType())))
    return emitOpError("'saturate' applies to float-to-float casts only");
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax, normalisations
//===----------------------------------------------------------------------===//

static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < 0 || axis >= rank)
    return op->emitOpError()
           << "axis " << axis << " is out of range for rank " << rank
           << " (expected 0 <= axis < " << rank << ")";
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getInput().getType().getRank());
}

/// The weight of a layer or RMS norm spans the trailing dimensions of the
/// input.
static LogicalResult verifyNormWeight(Operation *op, Value input, Value weight,
                                      double eps) {
  if (failed(checkSameElementType(op, input, "input", weight, "weight")))
    return failure();
  ArrayRef<int64_t> in = tensorOf(input).getShape();
  ArrayRef<int64_t> w = tensorOf(weight).getShape();
  if (w.empty() || w.size() > in.size() || in.take_back(w.size()) != w)
    return op->emitOpError() << "weight shape " << formatShape(w)
                             << " must equal the trailing dimensions of the "
                                "input shape "
                             << formatShape(in);
  if (!(eps >= 0))
    return op->emitOpError() << "eps must be non-negative, got " << eps;
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyNormWeight(*this, getInput(), getWeight(),
                          getEps().convertToDouble());
}

LogicalResult RmsNormOp::verify() {
  return verifyNormWeight(*this, getInput(), getWeight(),
                          getEps().convertToDouble());
}

LogicalResult BatchNormOp::verify() {
  if (failed(checkSameElementType(*this, getInput(), "input", getWeight(),
                                  "weight")))
    return failure();
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> w = getWeight().getType().getShape();
  if (in.size() < 2)
    return emitOpError() << "input must have rank >= 2 ([N, C, ...]), got "
                         << formatShape(in);
  if (w.size() != 1 || w[0] != in[1])
    return emitOpError() << "weight, bias and running statistics must have "
                            "shape ["
                         << in[1] << "] (the channels), got " << formatShape(w);
  int64_t perChannel = numElements(in) / in[1];
  if (perChannel < 2)
    return emitOpError() << "needs more than one value per channel in "
                            "training mode, got "
                         << perChannel;
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0 && momentum <= 1))
    return emitOpError() << "momentum must be in [0, 1], got " << momentum;
  if (!(getEps().convertToDouble() >= 0))
    return emitOpError() << "eps must be non-negative";
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename Adaptor>
static LogicalResult inferReduce(std::optional<Location> loc, StringRef opName,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  auto in = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!in)
    return inferError(loc, "'" + opName + "' op expects a ranked tensor");
  std::string error;
  if (failed(checkReductionDims(adaptor.getDims(), in.getRank(), error)))
    return inferError(loc, "'" + opName + "' op " + error);
  inferred.push_back(RankedTensorType::get(
      reducedShape(in.getShape(), adaptor.getDims(),
                   static_cast<bool>(adaptor.getKeepDims())),
      in.getElementType()));
  return success();
}

#define DS_REDUCE_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferReduce(loc, getOperationName(), adaptor, inferred);            \
  }
DS_REDUCE_INFER(ReduceSumOp)
DS_REDUCE_INFER(ReduceMeanOp)
DS_REDUCE_INFER(ReduceMaxOp)
#undef DS_REDUCE_INFER

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto in = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!in)
    return inferError(loc, "'ds.transpose' op expects a ranked tensor");
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  std::string error;
  if (failed(checkPermutation(perm, in.getRank(), error)))
    return inferError(loc, "'ds.transpose' op " + error);
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(in.getDimSize(p));
  inferred.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(checkSameElementType(*this, getInput(), "input", getResult(),
                                  "result")))
    return failure();
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getResult().getType().getShape();
  if (numElements(in) != numElements(out))
    return emitOpError() << "cannot reshape " << formatShape(in) << " ("
                         << numElements(in) << " elements) into "
                         << formatShape(out) << " (" << numElements(out)
                         << " elements)";
  return success();
}

SmallVector<int64_t> SliceOp::getStridesOrOnes() {
  if (auto strides = getStrides())
    return SmallVector<int64_t>(*strides);
  return SmallVector<int64_t>(getInput().getType().getRank(), 1);
}

/// Checks a strided box of `box` shape at `offsets` inside `full`; shared by
/// ds.slice (the box is the result) and ds.insert_slice (the box is the
/// source).
static LogicalResult
verifyStridedBox(Operation *op, ArrayRef<int64_t> full, ArrayRef<int64_t> box,
                 ArrayRef<int64_t> offsets,
                 std::optional<ArrayRef<int64_t>> strideAttr, StringRef boxName,
                 StringRef fullName) {
  if (box.size() != full.size())
    return op->emitOpError()
           << boxName << " rank " << box.size() << " differs from " << fullName
           << " rank " << full.size();
  if (offsets.size() != full.size())
    return op->emitOpError() << "'offsets' has " << offsets.size()
                             << " entries, expected " << full.size();
  if (strideAttr && strideAttr->size() != full.size())
    return op->emitOpError() << "'strides' has " << strideAttr->size()
                             << " entries, expected " << full.size();
  for (size_t d = 0; d < full.size(); ++d) {
    int64_t stride = strideAttr ? (*strideAttr)[d] : 1;
    if (stride < 1)
      return op->emitOpError()
             << "stride " << stride << " in dimension " << d << " must be >= 1";
    if (offsets[d] < 0)
      return op->emitOpError() << "offset " << offsets[d] << " in dimension "
                               << d << " must be >= 0";
    if (box[d] > 0 && offsets[d] + (box[d] - 1) * stride >= full[d])
      return op->emitOpError()
             << "slice of dimension " << d << " (offset " << offsets[d]
             << ", size " << box[d] << ", stride " << stride
             << ") reads past its size " << full[d];
  }
  return success();
}

LogicalResult SliceOp::verify() {
  if (failed(checkSameElementType(*this, getInput(), "input", getResult(),
                                  "result")))
    return failure();
  return verifyStridedBox(*this, getInput().getType().getShape(),
                          getResult().getType().getShape(), getOffsets(),
                          getStrides(), "result", "input");
}

SmallVector<int64_t> InsertSliceOp::getStridesOrOnes() {
  if (auto strides = getStrides())
    return SmallVector<int64_t>(*strides);
  return SmallVector<int64_t>(getDest().getType().getRank(), 1);
}

LogicalResult InsertSliceOp::verify() {
  if (failed(checkSameElementType(*this, getSource(), "source", getDest(),
                                  "dest")))
    return failure();
  return verifyStridedBox(*this, getDest().getType().getShape(),
                          getSource().getType().getShape(), getOffsets(),
                          getStrides(), "source", "dest");
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return inferError(loc, "'ds.concat' op needs at least one input");
  auto first = dyn_cast<RankedTensorType>(inputs.front().getType());
  if (!first)
    return inferError(loc, "'ds.concat' op expects ranked tensors");
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return inferError(loc, "'ds.concat' op axis " + std::to_string(axis) +
                               " is out of range for rank " +
                               std::to_string(first.getRank()));
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(inputs.drop_front())) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getElementType() != first.getElementType() ||
        t.getRank() != first.getRank())
      return inferError(loc, "'ds.concat' op input #" + std::to_string(i + 1) +
                                 " must have the rank and element type of "
                                 "input #0");
    for (int64_t d = 0; d < t.getRank(); ++d) {
      if (d == axis)
        continue;
      if (t.getDimSize(d) != first.getDimSize(d))
        return inferError(
            loc, "'ds.concat' op input #" + std::to_string(i + 1) +
                     " has shape " + formatShape(t.getShape()) +
                     ", which differs from input #0 " +
                     formatShape(first.getShape()) + " outside the axis");
    }
    shape[axis] += t.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Transformer pieces
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto table = dyn_cast<RankedTensorType>(adaptor.getTable().getType());
  auto indices = dyn_cast<RankedTensorType>(adaptor.getIndices().getType());
  if (!table || !indices)
    return inferError(loc, "'ds.embedding' op expects ranked tensors");
  if (table.getRank() != 2)
    return inferError(loc, "'ds.embedding' op table must have rank 2 "
                           "([num_embeddings, dim]), got " +
                               formatShape(table.getShape()));
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult CausalMaskOp::verify() {
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  if (shape.size() < 2)
    return emitOpError() << "scores must have rank >= 2 ([..., T, S]), got "
                         << formatShape(shape);
  int64_t t = shape[shape.size() - 2], s = shape.back();
  if (t > s)
    return emitOpError() << "more queries (" << t << ") than keys (" << s
                         << ")";
  return success();
}

LogicalResult DropoutOp::verify() {
  if (getRng().getType().getShape() != ArrayRef<int64_t>{2})
    return emitOpError() << "rng state must be a tensor<2xi64> (key, "
                            "counter), got "
                         << getRng().getType();
  double p = getP().convertToDouble();
  if (!(p >= 0 && p < 1))
    return emitOpError() << "drop probability p must be in [0, 1), got " << p;
  return success();
}

LogicalResult RandomNormalOp::verify() {
  if (getRng().getType().getShape() != ArrayRef<int64_t>{2})
    return emitOpError() << "rng state must be a tensor<2xi64> (key, "
                            "counter), got "
                         << getRng().getType();
  double std = getStd().convertToDouble();
  if (!(std >= 0) || !std::isfinite(std))
    return emitOpError() << "std must be finite and >= 0, got " << std;
  if (!getResult().getType().hasStaticShape())
    return emitOpError() << "expects a static result shape, got "
                         << getResult().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// The output shape of a convolution, or failure with a message naming
/// what does not fit. Shared by ds.conv2d and its gradient ops.
static FailureOr<SmallVector<int64_t>>
inferConv2DShape(std::optional<Location> loc, StringRef name,
                 RankedTensorType in, RankedTensorType w,
                 ArrayRef<int64_t> strides, ArrayRef<int64_t> padding,
                 ArrayRef<int64_t> dilation, int64_t groups) {
  std::string prefix = ("'" + name + "' op ").str();
  if (in.getRank() != 4 || w.getRank() != 4)
    return inferError(loc, prefix +
                               "input [N, C, H, W] and weight "
                               "[O, C/groups, KH, KW] must have rank 4, "
                               "got " +
                               formatShape(in.getShape()) + " and " +
                               formatShape(w.getShape()));
  if (in.getElementType() != w.getElementType())
    return inferError(loc, prefix + "input and weight must share an element "
                                    "type");
  if (failed(checkPair(loc, name, "strides", strides, 1)) ||
      failed(checkPair(loc, name, "padding", padding, 0)) ||
      failed(checkPair(loc, name, "dilation", dilation, 1)))
    return failure();
  int64_t c = in.getDimSize(1), o = w.getDimSize(0);
  if (groups < 1 || c % groups != 0 || o % groups != 0)
    return inferError(loc, prefix + "groups = " + std::to_string(groups) +
                               " must be >= 1 and divide the input channels (" +
                               std::to_string(c) + ") and output channels (" +
                               std::to_string(o) + ")");
  if (w.getDimSize(1) != c / groups)
    return inferError(loc, prefix + "weight has " +
                               std::to_string(w.getDimSize(1)) +
                               " input channels per group, expected " +
                               std::to_string(c / groups));
  SmallVector<int64_t> shape = {in.getDimSize(0), o};
  for (int d = 0; d < 2; ++d) {
    FailureOr<int64_t> size =
        windowOutputSize(in.getDimSize(2 + d), w.getDimSize(2 + d), strides[d],
                         padding[d], dilation[d]);
    if (failed(size))
      return inferError(loc, prefix +
                                 "the kernel does not fit the padded "
                                 "input " +
                                 formatShape(in.getShape()));
    shape.push_back(*size);
  }
  return shape;
}

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto in = cast<RankedTensorType>(adaptor.getInput().getType());
  auto w = cast<RankedTensorType>(adaptor.getWeight().getType());
  FailureOr<SmallVector<int64_t>> shape = inferConv2DShape(
      loc, getOperationName(), in, w, adaptor.getStrides(),
      adaptor.getPadding(), adaptor.getDilation(), adaptor.getGroups());
  if (failed(shape))
    return failure();
  if (Value bias = adaptor.getBias()) {
    auto b = cast<RankedTensorType>(bias.getType());
    int64_t o = w.getDimSize(0);
    if (b.getShape() != ArrayRef<int64_t>{o} ||
        b.getElementType() != in.getElementType())
      return inferError(loc, "'ds.conv2d' op bias must be a tensor of shape [" +
                                 std::to_string(o) +
                                 "] with the input's element type");
  }
  inferred.push_back(RankedTensorType::get(*shape, in.getElementType()));
  return success();
}

/// Both gradient ops check that a convolution of the (input, weight) pair
/// they stand for produces the shape of `grad`.
template <typename OpTy>
static LogicalResult verifyConvGrad(OpTy op, RankedTensorType in,
                                    RankedTensorType w) {
  FailureOr<SmallVector<int64_t>> shape = inferConv2DShape(
      op.getLoc(), op.getOperationName(), in, w, op.getStrides(),
      op.getPadding(), op.getDilation(), op.getGroups());
  if (failed(shape))
    return failure();
  if (op.getGrad().getType().getShape() != ArrayRef<int64_t>(*shape) ||
      op.getGrad().getType().getElementType() != in.getElementType())
    return op.emitOpError()
           << "grad has type " << op.getGrad().getType()
           << ", but the convolution produces " << formatShape(*shape) << " of "
           << in.getElementType();
  return success();
}

LogicalResult Conv2DGradInputOp::verify() {
  return verifyConvGrad(*this, getResult().getType(), getOther().getType());
}

LogicalResult Conv2DGradWeightOp::verify() {
  return verifyConvGrad(*this, getOther().getType(), getResult().getType());
}

/// The output shape of a 2-D pooling, or failure with a message.
static FailureOr<SmallVector<int64_t>>
inferPoolShape(std::optional<Location> loc, StringRef opName,
               RankedTensorType in, ArrayRef<int64_t> kernel,
               std::optional<ArrayRef<int64_t>> stridesAttr,
               ArrayRef<int64_t> padding) {
  if (in.getRank() != 4)
    return inferError(loc, "'" + opName +
                               "' op input must be a rank-4 [N, C, H, W] "
                               "tensor");
  SmallVector<int64_t> strides(kernel);
  if (stridesAttr)
    strides.assign(stridesAttr->begin(), stridesAttr->end());
  if (failed(checkPair(loc, opName, "kernel", kernel, 1)) ||
      failed(checkPair(loc, opName, "strides", strides, 1)) ||
      failed(checkPair(loc, opName, "padding", padding, 0)))
    return failure();
  SmallVector<int64_t> shape = {in.getDimSize(0), in.getDimSize(1)};
  for (int d = 0; d < 2; ++d) {
    if (padding[d] > kernel[d] / 2)
      return inferError(
          loc, "'" + opName + "' op padding " + formatShape(padding) +
                   " must be at most half the kernel " + formatShape(kernel));
    FailureOr<int64_t> size = windowOutputSize(in.getDimSize(2 + d), kernel[d],
                                               strides[d], padding[d], 1);
    if (failed(size))
      return inferError(loc, "'" + opName + "' op the window " +
                                 formatShape(kernel) +
                                 " does not fit the padded input " +
                                 formatShape(in.getShape()));
    shape.push_back(*size);
  }
  return shape;
}

template <typename Adaptor>
static LogicalResult inferPool(std::optional<Location> loc, StringRef opName,
                               Adaptor adaptor,
                               SmallVectorImpl<Type> &inferred) {
  auto in = cast<RankedTensorType>(adaptor.getInput().getType());
  FailureOr<SmallVector<int64_t>> shape =
      inferPoolShape(loc, opName, in, adaptor.getKernel(), adaptor.getStrides(),
                     adaptor.getPadding());
  if (failed(shape))
    return failure();
  inferred.push_back(RankedTensorType::get(*shape, in.getElementType()));
  return success();
}

template <typename OpTy> static LogicalResult verifyPoolGrad(OpTy op) {
  RankedTensorType in = op.getInput().getType();
  FailureOr<SmallVector<int64_t>> shape =
      inferPoolShape(op.getLoc(), op.getOperationName(), in, op.getKernel(),
                     op.getStrides(), op.getPadding());
  if (failed(shape))
    return failure();
  if (op.getGrad().getType() !=
      RankedTensorType::get(*shape, in.getElementType()))
    return op.emitOpError()
           << "grad has type " << op.getGrad().getType()
           << ", but the pooling produces " << formatShape(*shape);
  return success();
}

LogicalResult MaxPool2DGradOp::verify() { return verifyPoolGrad(*this); }
LogicalResult AvgPool2DGradOp::verify() { return verifyPoolGrad(*this); }

LogicalResult MaxPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferPool(loc, getOperationName(), adaptor, inferred);
}

LogicalResult AvgPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferPool(loc, getOperationName(), adaptor, inferred);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult
CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  auto logits = dyn_cast<RankedTensorType>(adaptor.getLogits().getType());
  auto labels = dyn_cast<RankedTensorType>(adaptor.getLabels().getType());
  if (!logits || !labels)
    return inferError(loc, "'ds.cross_entropy' op expects ranked tensors");
  if (logits.getRank() != 2 || labels.getRank() != 1 ||
      logits.getDimSize(0) != labels.getDimSize(0))
    return inferError(loc, "'ds.cross_entropy' op expects logits [N, C] and "
                           "labels [N], got " +
                               formatShape(logits.getShape()) + " and " +
                               formatShape(labels.getShape()));
  // Labels are signed class indices: their type must hold C - 1 (an i1
  // label is 0 or -1, and i8 stops at 127).
  unsigned width = labels.getElementType().getIntOrFloatBitWidth();
  int64_t classes = logits.getDimSize(1);
  if (width < 2 ||
      (width < 64 && classes - 1 > (int64_t(1) << (width - 1)) - 1))
    return inferError(
        loc, "'ds.cross_entropy' op labels of type " + std::to_string(width) +
                 "-bit integer cannot "
                 "index " +
                 std::to_string(classes) + " classes; use i32 or i64 labels");
  inferred.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

LogicalResult MseLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto in = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!in)
    return inferError(loc, "'ds.mse_loss' op expects ranked tensors");
  inferred.push_back(RankedTensorType::get({}, in.getElementType()));
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  ArrayRef<int64_t> logits = getLogits().getType().getShape();
  ArrayRef<int64_t> labels = getLabels().getType().getShape();
  if (logits.size() != 2 || labels.size() != 1 || logits[0] != labels[0])
    return emitOpError() << "expects logits [N, C] and labels [N], got "
                         << formatShape(logits) << " and "
                         << formatShape(labels);
  if (getGrad().getType() !=
      RankedTensorType::get({}, getLogits().getType().getElementType()))
    return emitOpError() << "grad must be a rank-0 tensor of the logits' "
                            "element type, got "
                         << getGrad().getType();
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(checkSameElementType(*this, getGrad(), "grad", getResult(),
                                  "result")))
    return failure();
  ArrayRef<int64_t> table = getResult().getType().getShape();
  if (table.size() != 2)
    return emitOpError() << "result (the table) must have rank 2, got "
                         << formatShape(table);
  SmallVector<int64_t> expected(getIndices().getType().getShape());
  expected.push_back(table[1]);
  if (getGrad().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "grad shape "
                         << formatShape(getGrad().getType().getShape())
                         << " must be the indices' shape plus the row size "
                         << formatShape(expected);
  return success();
}

//===----------------------------------------------------------------------===//
// Comparison and selection
//===----------------------------------------------------------------------===//

LogicalResult CompareOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  SmallVector<Type> same;
  if (failed(inferBinary(loc, getOperationName(), adaptor, same)))
    return failure();
  inferred.push_back(
      RankedTensorType::get(cast<RankedTensorType>(same.front()).getShape(),
                            IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto cond = cast<RankedTensorType>(adaptor.getCond().getType());
  auto t = cast<RankedTensorType>(adaptor.getOnTrue().getType());
  auto f = cast<RankedTensorType>(adaptor.getOnFalse().getType());
  if (t.getElementType() != f.getElementType()) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "'ds.select' op on_true and on_false must share an element type, "
          "got "
       << t.getElementType() << " and " << f.getElementType();
    return inferError(loc, s);
  }
  std::string error;
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(t.getShape(), f.getShape(), error);
  if (succeeded(shape))
    shape = broadcastShapes(cond.getShape(), *shape, error);
  if (failed(shape))
    return inferError(loc, "'ds.select' op " + error);
  inferred.push_back(RankedTensorType::get(*shape, t.getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "ds/Dialect/DS/IR/DSOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

/// The checks ds.fake_quant and ds.fake_quant_grad share: the parameter
/// types, the format and the granularity that `scale`'s shape must match.
static LogicalResult verifyFakeQuant(Operation *op, RankedTensorType input,
                                     RankedTensorType scale,
                                     RankedTensorType qmin,
                                     std::optional<int64_t> axis,
                                     std::optional<int64_t> groupSize,
                                     std::optional<Type> format, bool learned) {
  if (qmin.getRank() != 0)
    return op->emitOpError() << "expects rank-0 qmin and qmax, got " << qmin;
  if (qmin.getElementType() != scale.getElementType())
    return op->emitOpError()
           << "expects qmin and qmax of the scale's element type "
           << scale.getElementType() << ", got " << qmin.getElementType();
  if (format) {
    if (!isa<Float8E4M3FNType, Float8E5M2Type>(*format))
      return op->emitOpError()
             << "format must be f8E4M3FN or f8E5M2, got " << *format;
    if (learned)
      return op->emitOpError() << "a learned scale needs an integer grid; "
                                  "drop 'learned' or 'format'";
  }
  int64_t rank = input.getRank();
  if (groupSize && !axis)
    return op->emitOpError() << "group_size needs the axis it groups along";
  if (!axis) {
    if (scale.getRank() != 0)
      return op->emitOpError()
             << "per-tensor quantization (no axis) expects a rank-0 scale, "
                "got "
             << scale;
    return success();
  }
  if (*axis < 0 || *axis >= rank)
    return op->emitOpError()
           << "axis " << *axis << " is out of range for " << input;
  int64_t size = input.getDimSize(*axis);
  SmallVector<int64_t> expected{size};
  if (groupSize) {
    if (*groupSize <= 0 || size % *groupSize != 0)
      return op->emitOpError()
             << "group_size " << *groupSize << " does not divide dimension "
             << *axis << " of " << input << " (size " << size << ")";
    expected.assign(input.getShape().begin(), input.getShape().end());
    expected[*axis] = size / *groupSize;
  }
  if (scale.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << "expects a scale of shape " << formatShape(expected) << " for "
           << (groupSize ? "groups of " + std::to_string(*groupSize) + " along"
                         : std::string("channels of"))
           << " axis " << *axis << ", got " << scale;
  return success();
}

LogicalResult FakeQuantOp::verify() {
  return verifyFakeQuant(*this, getInput().getType(), getScale().getType(),
                         getQmin().getType(), getAxis(), getGroupSize(),
                         getFormat(), getLearned());
}

LogicalResult QuantizeOp::verify() {
  if (failed(verifyFakeQuant(*this, getInput().getType(), getScale().getType(),
                             getQmin().getType(), getAxis(), std::nullopt,
                             std::nullopt, false)))
    return failure();
  unsigned width = getType().getElementType().getIntOrFloatBitWidth();
  if (width < 2 || width > 32)
    return emitOpError() << "expects an integer result of 2 to 32 bits, got "
                         << getType().getElementType();
  // A constant grid must fit the (signed) result type.
  int64_t lo = -(int64_t(1) << (width - 1)),
          hi = (int64_t(1) << (width - 1)) - 1;
  for (auto [name, v] : {std::pair<const char *, Value>{"qmin", getQmin()},
                         {"qmax", getQmax()}}) {
    DenseElementsAttr attr;
    if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
        !isa<FloatType>(attr.getElementType()))
      continue;
    double q = attr.getSplatValue<APFloat>().convertToDouble();
    if (q < double(lo) || q > double(hi))
      return emitOpError() << name << " " << q << " does not fit the result "
                           << getType().getElementType() << " ([" << lo << ", "
                           << hi << "]; store an unsigned grid shifted)";
  }
  return success();
}

LogicalResult QuantizedMatMulOp::verify() {
  RankedTensorType lhs = getLhs().getType(), rhs = getRhs().getType();
  RankedTensorType out = getType();
  if (!lhs.getElementType().isInteger(8) || !rhs.getElementType().isInteger(8))
    return emitOpError() << "expects i8 operands, got " << lhs.getElementType()
                         << " and " << rhs.getElementType();
  if (lhs.getRank() < 2 || rhs.getRank() != 2)
    return emitOpError() << "expects lhs of rank >= 2 and a 2-D rhs, got "
                         << lhs << " and " << rhs;
  int64_t k = lhs.getShape().back();
  int64_t rk = getTransposeRhs() ? rhs.getDimSize(1) : rhs.getDimSize(0);
  int64_t n = getTransposeRhs() ? rhs.getDimSize(0) : rhs.getDimSize(1);
  if (k != rk)
    return emitOpError() << "contracts lhs dimension of size " << k
                         << " with rhs dimension of size " << rk;
  SmallVector<int64_t> expected(lhs.getShape());
  expected.back() = n;
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "expects a result of shape "
                         << formatShape(expected) << ", got " << out;
  if (getLhsScale().getType().getRank() != 0 ||
      getLhsZeroPoint().getType().getRank() != 0)
    return emitOpError()
           << "expects rank-0 lhs_scale and lhs_zero_point (per tensor)";
  RankedTensorType rs = getRhsScale().getType();
  if (rs.getRank() != 0 && rs.getShape() != ArrayRef<int64_t>{n})
    return emitOpError() << "expects a rank-0 rhs_scale and rhs_zero_point "
                            "or ones of shape ["
                         << n << "] (per output channel), got " << rs;
  return success();
}

LogicalResult FakeQuantGradOp::verify() {
  if (getOf() != FakeQuantGradOf::input && !getLearned())
    return emitOpError() << "the gradient of '"
                         << stringifyFakeQuantGradOf(getOf())
                         << "' exists only for a learned scale";
  return verifyFakeQuant(*this, getInput().getType(), getScale().getType(),
                         getQmin().getType(), getAxis(), getGroupSize(),
                         getFormat(), getLearned());
}

//===----------------------------------------------------------------------===//
// Block sparsity
//===----------------------------------------------------------------------===//

/// Checks that `mask` is the block mask of a 2-D `weight` for `block`:
/// `[R / block, C / block]` with `block` dividing both dimensions.
static LogicalResult verifyBlockMask(Operation *op, RankedTensorType weight,
                                     RankedTensorType mask, int64_t block) {
  if (weight.getRank() != 2)
    return op->emitOpError() << "expects a 2-D weight, got " << weight;
  if (block <= 0)
    return op->emitOpError() << "expects a positive block size, got " << block;
  for (int64_t d = 0; d < 2; ++d)
    if (weight.getDimSize(d) % block != 0)
      return op->emitOpError()
             << "block size " << block << " does not divide dimension " << d
             << " (" << weight.getDimSize(d) << ") of the weight " << weight;
  SmallVector<int64_t> expected = {weight.getDimSize(0) / block,
                                   weight.getDimSize(1) / block};
  if (mask.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError()
           << "expects a mask of shape " << formatShape(expected)
           << " (one element per " << block << "x" << block << " block), got "
           << mask;
  return success();
}

void BlockSparseMatMulOp::build(OpBuilder &builder, OperationState &state,
                                Value input, Value weight, Value mask,
                                int64_t block, bool transposeWeight) {
  RankedTensorType in = tensorOf(input), w = tensorOf(weight);
  SmallVector<int64_t> shape(in.getShape());
  shape.back() = w.getDimSize(transposeWeight ? 0 : 1);
  build(builder, state, RankedTensorType::get(shape, in.getElementType()),
        input, weight, mask, builder.getI64IntegerAttr(block),
        transposeWeight ? builder.getUnitAttr() : UnitAttr());
}

LogicalResult BlockSparseMatMulOp::verify() {
  RankedTensorType in = getInput().getType(), w = getWeight().getType();
  if (failed(verifyBlockMask(*this, w, getMask().getType(), getBlock())))
    return failure();
  if (in.getElementType() != w.getElementType() ||
      getType().getElementType() != w.getElementType())
    return emitOpError() << "expects input, weight and result of one element "
                            "type, got "
                         << in.getElementType() << ", " << w.getElementType()
                         << " and " << getType().getElementType();
  if (in.getRank() < 2)
    return emitOpError() << "expects an input of rank >= 2, got " << in;
  bool t = getTransposeWeight();
  int64_t k = w.getDimSize(t ? 1 : 0), n = w.getDimSize(t ? 0 : 1);
  if (in.getShape().back() != k)
    return emitOpError() << "contracts input dimension of size "
                         << in.getShape().back() << " with weight dimension "
                         << (t ? 1 : 0) << " of size " << k;
  SmallVector<int64_t> expected(in.getShape());
  expected.back() = n;
  if (getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "expects a result of shape "
                         << formatShape(expected) << ", got " << getType();
  return success();
}

LogicalResult BlockSampledMatMulOp::verify() {
  RankedTensorType l = getLhs().getType(), r = getRhs().getType();
  RankedTensorType out = getType();
  if (failed(verifyBlockMask(*this, out, getMask().getType(), getBlock())))
    return failure();
  if (l.getElementType() != out.getElementType() ||
      r.getElementType() != out.getElementType())
    return emitOpError() << "expects lhs, rhs and result of one element type";
  if (l.getRank() < 2 || l.getRank() != r.getRank() ||
      l.getShape().drop_back() != r.getShape().drop_back())
    return emitOpError() << "expects lhs and rhs of rank >= 2 with the same "
                            "leading dimensions, got "
                         << l << " and " << r;
  if (out.getDimSize(0) != l.getShape().back() ||
      out.getDimSize(1) != r.getShape().back())
    return emitOpError() << "expects a result of shape "
                         << formatShape(
                                {l.getShape().back(), r.getShape().back()})
                         << ", got " << out;
  return success();
}

LogicalResult TopKMaskOp::verify() {
  if (getK().getType().getRank() != 0)
    return emitOpError() << "expects a rank-0 k, got " << getK().getType();
  if (getType().getShape() != getScores().getType().getShape())
    return emitOpError() << "expects a result of the scores' shape "
                         << formatShape(getScores().getType().getShape())
                         << ", got " << getType();
  return success();
}

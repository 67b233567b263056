//===- LoweringUtils.h - Shared ds-to-linalg helpers ------------*- C++ -*-===//
//
// Internal to lib/Conversion/DSToLinalg. The lowering builds the same few
// shapes of IR again and again: `tensor.empty` + `linalg.fill`, an
// elementwise `linalg.generic` whose operands broadcast by affine maps with
// constant-0 results, a reduction `linalg.generic` over some dimensions, and
// scalar arithmetic that must work for every float (and often integer)
// element type. These helpers keep each pattern down to its semantics.
//
// Every helper expects static shapes (the ds verifier guarantees them).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_DSTOLINALG_LOWERINGUTILS_H
#define DS_LIB_CONVERSION_DSTOLINALG_LOWERINGUTILS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::ds::lowering {

/// Builds the scalar body of a `linalg.generic`: receives the block
/// arguments (inputs, then outputs) and returns the values to yield.
using BodyFn =
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>;
/// Builds a single yielded value.
using ScalarFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

//===----------------------------------------------------------------------===//
// Tensors and constants
//===----------------------------------------------------------------------===//

/// `tensor.empty` of a static shape.
Value createEmpty(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                  Type elementType);
/// A tensor of `shape` filled with the scalar `value` (`linalg.fill`).
Value createFilled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                   Value value);
/// A zero-filled tensor of `shape` and `elementType`.
Value createZeros(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                  Type elementType);

/// A scalar constant of a float or integer type, rounded from a double.
Value createScalar(OpBuilder &b, Location loc, Type type, double value);
/// The scalar -inf of a float type (the largest negative value for types
/// without infinity).
Value createNegInf(OpBuilder &b, Location loc, Type type);
Value createIndex(OpBuilder &b, Location loc, int64_t value);
Value createI64(OpBuilder &b, Location loc, int64_t value);

//===----------------------------------------------------------------------===//
// Affine maps
//===----------------------------------------------------------------------===//

/// The map from a loop nest over `result` to an operand of shape `operand`
/// broadcast to it under ds's rule: equal ranks with size-1 dimensions
/// mapped to the constant 0, or a rank-0 operand (no results).
AffineMap getBroadcastMap(MLIRContext *ctx, ArrayRef<int64_t> operand,
                          ArrayRef<int64_t> result);
/// `(d0, ..., dn-1) -> (d_i for i not in dims)`: a reduced operand.
AffineMap getDropDimsMap(MLIRContext *ctx, unsigned rank,
                         ArrayRef<int64_t> dims);
/// `(d0, ..., dn-1) -> (d_k, ..., d_n-1)`: an operand over the trailing
/// `n - k` dimensions.
AffineMap getTrailingMap(MLIRContext *ctx, unsigned rank, unsigned count);
/// `d0, ..., d(count-1)`: the dimensions of a loop nest, to build its maps.
SmallVector<AffineExpr> dimExprs(MLIRContext *ctx, unsigned count);
/// `shape` with the entries at `dims` removed.
SmallVector<int64_t> dropDims(ArrayRef<int64_t> shape, ArrayRef<int64_t> dims);

//===----------------------------------------------------------------------===//
// linalg.generic builders
//===----------------------------------------------------------------------===//

/// A parallel `linalg.generic` over `resultType`'s shape writing a fresh
/// `tensor.empty`; `inputs` are read through `inputMaps`.
Value buildParallel(OpBuilder &b, Location loc, RankedTensorType resultType,
                    ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                    ScalarFn body);
/// `buildParallel` with ds broadcasting maps derived from the input shapes.
Value buildElementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                       ValueRange inputs, ScalarFn body);

/// A `linalg.generic` over the loop nest `loopShape` that reduces the loop
/// dimensions `reducedDims` into outputs of the remaining dimensions
/// (dropped, not kept as 1), each initialised with the scalar in `inits`.
/// The body receives the inputs then the accumulators and returns the new
/// accumulators.
SmallVector<Value>
buildReduction(OpBuilder &b, Location loc, ArrayRef<int64_t> loopShape,
               ArrayRef<int64_t> reducedDims, ValueRange inputs,
               ArrayRef<AffineMap> inputMaps, ValueRange inits, BodyFn body);

/// ds.top_k_mask's i8 mask over the 1-D float `scores`: 1 on the `k` (a
/// rank-0 i64 tensor, clamped to [0, n]) largest, ties to the higher index,
/// NaN lowest. A radix select over (score, index) keys (TopKMask.cpp).
Value buildTopKMask(OpBuilder &b, Location loc, Value scores, Value k);

/// The `k`-th largest (a rank-0 i64 tensor, clamped to [1, n]) of the 1-D
/// float `scores` as a rank-0 tensor (f32, or f64 for wider scores): the
/// same radix select over the scores' digits alone, -0 as +0, NaN lowest.
Value buildKthLargest(OpBuilder &b, Location loc, Value scores, Value k);

//===----------------------------------------------------------------------===//
// Scalar arithmetic on any float or integer element type
//===----------------------------------------------------------------------===//

/// The type in which elementwise float math is evaluated: f32 for narrower
/// floats (f16, bf16, FP8), the type itself otherwise.
Type getComputeType(Type elementType);
/// Converts a float scalar to another float type (extf, truncf, or both
/// through f32 for equal widths such as f16 <-> bf16).
Value convertFloat(OpBuilder &b, Location loc, Value value, Type to);

Value add(OpBuilder &b, Location loc, Value x, Value y);
Value sub(OpBuilder &b, Location loc, Value x, Value y);
Value mul(OpBuilder &b, Location loc, Value x, Value y);
/// Float `x + y` flagged `reassoc` so that reductions can be vectorized.
Value addReassoc(OpBuilder &b, Location loc, Value x, Value y);
/// Float max that propagates NaN (torch.maximum).
Value maxNaN(OpBuilder &b, Location loc, Value x, Value y);

/// Clamps an integer index scalar into `[0, size - 1]` and converts it to
/// `index`.
Value clampIndex(OpBuilder &b, Location loc, Value index, int64_t size);

/// Pads a static tensor with the scalar `padValue` (`tensor.pad`), `low`
/// and `high` elements per dimension; returns `value` when all are 0.
Value padWith(OpBuilder &b, Location loc, Value value, ArrayRef<int64_t> low,
              ArrayRef<int64_t> high, Value padValue);

/// The `DenseIntElementsAttr` (`tensor<2xi64>`) that convolution and pooling
/// ops take for strides and dilations.
DenseIntElementsAttr getPairAttr(OpBuilder &b, ArrayRef<int64_t> pair);

/// Static sizes, offsets or strides as the `OpFoldResult`s tensor slices
/// take.
SmallVector<OpFoldResult> foldResults(OpBuilder &b, ArrayRef<int64_t> v);

/// Reshapes a static tensor to `shape` (same element count) with
/// tensor.collapse_shape / tensor.expand_shape, through 1-D when no direct
/// reassociation exists. Returns `value` unchanged when the shape matches.
Value reshapeTo(OpBuilder &b, Location loc, Value value,
                ArrayRef<int64_t> shape);

//===----------------------------------------------------------------------===//
// Pattern registration, one function per file
//===----------------------------------------------------------------------===//

void populateElementwisePatterns(RewritePatternSet &patterns);
void populateMatMulPatterns(RewritePatternSet &patterns,
                            bool narrowGemms = false, bool fp8Gemms = false);
void populateReductionPatterns(RewritePatternSet &patterns);
void populateShapePatterns(RewritePatternSet &patterns);
void populateNNPatterns(RewritePatternSet &patterns);
/// conv2d and its gradients; with `asGemm`, the ungrouped f32/bf16/f16 ones
/// as im2col + ds.matmul (preferred, benefit 2), for a library GEMM.
void populateConvPatterns(RewritePatternSet &patterns, bool asGemm = false);
void populateBackwardKernelPatterns(RewritePatternSet &patterns);
/// Parallel forms of the scatters (embedding_grad), preferred over the
/// serial loops of populateBackwardKernelPatterns (the GPU path).
void populateParallelScatterPatterns(RewritePatternSet &patterns);
void populateQuantPatterns(RewritePatternSet &patterns);
void populateSparsePatterns(RewritePatternSet &patterns);

} // namespace mlir::ds::lowering

#endif // DS_LIB_CONVERSION_DSTOLINALG_LOWERINGUTILS_H

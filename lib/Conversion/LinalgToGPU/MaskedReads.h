//===- MaskedReads.h - Elements a generic never uses ------------*- C++ -*-===//
//
// A causal mask selects a constant above the diagonal: softmax(select(j > i,
// -inf, s)). Where the select takes the constant, the element of `s` is
// loaded and thrown away, half of the attention scores in a causal
// softmax and in its gradient. A load whose element only reaches the
// results through the arm of an arith.select that a condition on the loop
// indices does not take can be skipped where that condition says so: the
// kernel builders then load under an scf.if, and the skipped element reads
// as zero (which the select discards). Exact: the select's result does not
// depend on the arm it does not take. Internal to lib/Conversion/LinalgToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_MASKEDREADS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_MASKEDREADS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::ds::gpu_kernels {

/// Where an input element of a generic is unused: at the loop indices where
/// every select it flows into takes its other arm.
struct ReadMask {
  linalg::GenericOp op;
  /// Each select's condition (computed from linalg.index values and
  /// constants alone) and whether the element flows into its true arm: the
  /// element is unused where every condition takes the other one.
  SmallVector<std::pair<Value, bool>> selects;
};

/// The mask of `input` (an input of `op` whose indexing map is a
/// permutation: each element read at one iteration), if its element
/// reaches `op`'s results only through selects on the loop indices: every
/// value computed from it is used by pure ops of the body, and leaves the
/// body only as an arm of such a select.
std::optional<ReadMask> readMask(linalg::GenericOp op, OpOperand *input);

/// An i1 that holds where the element is unused at loop indices `ivs`, and
/// at the `width` - 1 positions after them along loop `innermost` (a
/// vector's lanes; 1: one element).
Value emitUnused(OpBuilder &b, Location loc, const ReadMask &mask,
                 ArrayRef<Value> ivs, unsigned innermost = 0,
                 int64_t width = 1);

/// The fraction of the iterations at which some mask of `masks` (of ops
/// over the same loops) uses its element, estimated on a grid of at most
/// 4096 points over the loops the masks depend on (midpoints of equal
/// parts where a loop is longer than its share); none when a condition
/// uses an op it cannot evaluate.
std::optional<double> usedFraction(ArrayRef<ReadMask> masks);

/// Whether `mask`'s element is unused at every iteration whose loop
/// `colLoop` index lies in a row's tail [tailStart(i), cols), i being loop
/// `rowLoop`'s index, for every i in [0, rows), whatever the other loops'
/// indices. Decided exactly, or not at all (false): the conditions may
/// read those two loops only, and each one that reads `colLoop` must be
/// monotone along it (then a tail's two ends decide for all of it).
bool unusedOnRowTails(const ReadMask &mask, unsigned rowLoop, unsigned colLoop,
                      int64_t rows, int64_t cols,
                      function_ref<int64_t(int64_t)> tailStart);

/// `load()`'s value where `unused` is false, zeros of `type` where it holds
/// (the load skipped); `fraction` (if known) is put on the load for the
/// launch report (DSDialect::kReadFractionAttrName).
Value loadUnlessUnused(OpBuilder &b, Location loc, Value unused, Type type,
                       std::optional<double> fraction,
                       function_ref<Value(OpBuilder &, Location)> load);

/// `load()`'s value for input `input` of its generic at loop indices `ivs`
/// (a vector's first lane when `width` > 1, lanes along loop `innermost`),
/// or zeros of `type` where no lane uses its element (readMask): the load
/// as is when the input has no mask.
Value loadIfUsed(OpBuilder &b, Location loc, OpOperand &input,
                 ArrayRef<Value> ivs, Type type,
                 function_ref<Value(OpBuilder &, Location)> load,
                 unsigned innermost = 0, int64_t width = 1);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_MASKEDREADS_H

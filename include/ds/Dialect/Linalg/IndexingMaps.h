//===- IndexingMaps.h - Reading linalg indexing maps ------------*- C++ -*-===//
//
// Readings of linalg indexing maps and permutations shared by the import
// (raising a generic into ds ops), the generic's gradient rule and the GPU
// path's kernels: which loop dimension each operand dimension follows.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_LINALG_INDEXINGMAPS_H
#define DS_DIALECT_LINALG_INDEXINGMAPS_H

#include "mlir/IR/AffineMap.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::ds {

/// The loop dimension of each result of `map`, -1 for a constant 0 (a
/// broadcast dimension); fails for any other expression or a repeated
/// dimension.
FailureOr<SmallVector<int64_t>> getMapResultDims(AffineMap map);

/// The loop dimension `map`'s last result (an operand's innermost
/// dimension) follows; nullopt when there is none or it is not a plain
/// loop dimension.
std::optional<unsigned> getInnermostLoop(AffineMap map);

/// Whether `permutation` swaps the two innermost dimensions and keeps the
/// others (a batched matrix transpose).
bool swapsInnermostTwo(ArrayRef<int64_t> permutation);

} // namespace mlir::ds

#endif // DS_DIALECT_LINALG_INDEXINGMAPS_H

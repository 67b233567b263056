//===- IndexingMaps.h - Reading linalg indexing maps ------------*- C++ -*-===//
//
// The one reading of a linalg indexing map that the import (raising a
// generic into ds ops) and the generic's gradient rule share: which loop
// dimension each operand dimension follows.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_LINALG_INDEXINGMAPS_H
#define DS_DIALECT_LINALG_INDEXINGMAPS_H

#include "mlir/IR/AffineMap.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::ds {

/// The loop dimension of each result of `map`, -1 for a constant 0 (a
/// broadcast dimension); fails for any other expression or a repeated
/// dimension.
FailureOr<SmallVector<int64_t>> getMapResultDims(AffineMap map);

} // namespace mlir::ds

#endif // DS_DIALECT_LINALG_INDEXINGMAPS_H

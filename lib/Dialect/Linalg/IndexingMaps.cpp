//===- IndexingMaps.cpp - Reading linalg indexing maps --------------------===//
//
// Implements IndexingMaps.h.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/Linalg/IndexingMaps.h"

#include "mlir/IR/AffineExpr.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

FailureOr<SmallVector<int64_t>> mlir::ds::getMapResultDims(AffineMap map) {
  SmallVector<int64_t> dims;
  llvm::SmallDenseSet<int64_t> seen;
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      if (!seen.insert(d.getPosition()).second)
        return failure();
      dims.push_back(d.getPosition());
    } else if (auto c = dyn_cast<AffineConstantExpr>(e);
               c && c.getValue() == 0) {
      dims.push_back(-1);
    } else {
      return failure();
    }
  }
  return dims;
}

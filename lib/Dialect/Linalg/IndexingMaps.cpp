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

std::optional<unsigned> mlir::ds::getInnermostLoop(AffineMap map) {
  if (map.getNumResults() == 0)
    return std::nullopt;
  auto dim = dyn_cast<AffineDimExpr>(map.getResults().back());
  if (!dim)
    return std::nullopt;
  return dim.getPosition();
}

bool mlir::ds::swapsInnermostTwo(ArrayRef<int64_t> permutation) {
  int64_t n = permutation.size();
  if (n < 2 || permutation[n - 2] != n - 1 || permutation[n - 1] != n - 2)
    return false;
  for (int64_t i = 0; i + 2 < n; ++i)
    if (permutation[i] != i)
      return false;
  return true;
}

//===- ShapeUtils.cpp - Static shape rules of ds ops ----------------------===//

#include "ds/Dialect/DS/IR/ShapeUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::ds;

std::string mlir::ds::formatShape(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return s;
}

FailureOr<SmallVector<int64_t>> mlir::ds::broadcastShapes(ArrayRef<int64_t> lhs,
                                                          ArrayRef<int64_t> rhs,
                                                          std::string &error) {
  if (lhs.empty())
    return SmallVector<int64_t>(rhs);
  if (rhs.empty())
    return SmallVector<int64_t>(lhs);
  if (lhs.size() != rhs.size()) {
    error = "operand ranks differ (" + formatShape(lhs) + " vs " +
            formatShape(rhs) +
            "); broadcasting keeps the rank, reshape an operand first";
    return failure();
  }
  SmallVector<int64_t> result;
  for (auto [i, dims] : llvm::enumerate(llvm::zip_equal(lhs, rhs))) {
    auto [l, r] = dims;
    if (l != r && l != 1 && r != 1) {
      error = "dimension " + std::to_string(i) + " is not broadcastable (" +
              std::to_string(l) + " vs " + std::to_string(r) + " in " +
              formatShape(lhs) + " and " + formatShape(rhs) + ")";
      return failure();
    }
    result.push_back(l == 1 ? r : l);
  }
  return result;
}

SmallVector<int64_t> mlir::ds::broadcastDims(ArrayRef<int64_t> operand,
                                             ArrayRef<int64_t> result) {
  SmallVector<int64_t> dims;
  for (auto [i, r] : llvm::enumerate(result)) {
    if (operand.empty() ? r != 1 : (operand[i] == 1 && r != 1))
      dims.push_back(i);
  }
  return dims;
}

LogicalResult mlir::ds::checkReductionDims(ArrayRef<int64_t> dims, int64_t rank,
                                           std::string &error) {
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= rank) {
      error = "reduction dimension " + std::to_string(d) +
              " is out of range for rank " + std::to_string(rank);
      return failure();
    }
    if (i > 0 && d <= dims[i - 1]) {
      error = "reduction dimensions " + formatShape(dims) +
              " must be strictly increasing";
      return failure();
    }
  }
  return success();
}

SmallVector<int64_t> mlir::ds::reducedShape(ArrayRef<int64_t> shape,
                                            ArrayRef<int64_t> dims,
                                            bool keepDims) {
  SmallVector<int64_t> result;
  for (auto [i, s] : llvm::enumerate(shape)) {
    if (!llvm::is_contained(dims, static_cast<int64_t>(i)))
      result.push_back(s);
    else if (keepDims)
      result.push_back(1);
  }
  return result;
}

LogicalResult mlir::ds::checkPermutation(ArrayRef<int64_t> perm, int64_t rank,
                                         std::string &error) {
  if (static_cast<int64_t>(perm.size()) != rank) {
    error = "permutation " + formatShape(perm) + " has " +
            std::to_string(perm.size()) + " entries, expected " +
            std::to_string(rank);
    return failure();
  }
  SmallVector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      error = formatShape(perm) + " is not a permutation of [0, " +
              std::to_string(rank) + ")";
      return failure();
    }
    seen[p] = true;
  }
  return success();
}

int64_t mlir::ds::numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

FailureOr<int64_t> mlir::ds::windowOutputSize(int64_t in, int64_t kernel,
                                              int64_t stride, int64_t pad,
                                              int64_t dilation) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t padded = in + 2 * pad;
  if (stride < 1 || span > padded)
    return failure();
  return (padded - span) / stride + 1;
}

//===- Hungarian.cpp - Minimum-cost and bottleneck assignment -------------===//
//
// solveAssignment is the shortest augmenting path form of the Hungarian
// algorithm with row and column potentials (Jonker & Volgenant 1987; the
// same family as SciPy's linear_sum_assignment, Crouse 2016): one Dijkstra
// over reduced costs per row, O(rows^2 cols). Forbidden (+inf) pairs are
// never relaxed, so no "large M" stands in for them and finite costs keep
// full precision. solveBottleneckAssignment searches the smallest threshold
// under which a complete matching exists, then runs the Hungarian algorithm
// on the pairs under it: the slowest stage is minimal and, among such
// assignments, the sum is.
//
//===----------------------------------------------------------------------===//

#include "ds/Partition/Planner.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>

using namespace ds::partition;
using llvm::ArrayRef;

static constexpr double kInf = std::numeric_limits<double>::infinity();

/// Rows <= cols. Returns rowToCol (-1 where a row found no finite path).
static std::vector<int> hungarianWide(ArrayRef<double> cost, unsigned rows,
                                      unsigned cols) {
  assert(rows <= cols);
  // 1-based rows and columns; column 0 is the virtual start of each search
  // and rowOf[0] the row being inserted.
  std::vector<double> u(rows + 1, 0), v(cols + 1, 0), minReduced(cols + 1);
  std::vector<unsigned> rowOf(cols + 1, 0), prevCol(cols + 1, 0);
  std::vector<char> inTree(cols + 1);
  for (unsigned row = 1; row <= rows; ++row) {
    rowOf[0] = row;
    unsigned col = 0;
    std::fill(minReduced.begin(), minReduced.end(), kInf);
    std::fill(inTree.begin(), inTree.end(), 0);
    bool found = true;
    // Dijkstra from `row` until it reaches a free column.
    do {
      inTree[col] = 1;
      unsigned r = rowOf[col], next = 0;
      double delta = kInf;
      const double *costRow = &cost[(r - 1) * cols];
      for (unsigned j = 1; j <= cols; ++j) {
        if (inTree[j])
          continue;
        double reduced = costRow[j - 1] - u[r] - v[j];
        if (reduced < minReduced[j]) {
          minReduced[j] = reduced;
          prevCol[j] = col;
        }
        if (minReduced[j] < delta) {
          delta = minReduced[j];
          next = j;
        }
      }
      if (std::isinf(delta)) {
        // Every column left is forbidden from the tree: the row stays out.
        // The potential updates made so far kept the duals feasible.
        found = false;
        break;
      }
      for (unsigned j = 0; j <= cols; ++j) {
        if (inTree[j]) {
          u[rowOf[j]] += delta;
          v[j] -= delta;
        } else {
          minReduced[j] -= delta;
        }
      }
      col = next;
    } while (rowOf[col] != 0);
    if (!found)
      continue;
    // Flip the augmenting path back to the start.
    while (col) {
      unsigned prev = prevCol[col];
      rowOf[col] = rowOf[prev];
      col = prev;
    }
  }
  std::vector<int> rowToCol(rows, -1);
  for (unsigned j = 1; j <= cols; ++j)
    if (rowOf[j])
      rowToCol[rowOf[j] - 1] = int(j - 1);
  return rowToCol;
}

/// Sum of the assigned costs; +inf if fewer than min(rows, cols) pairs.
static double assignedSum(ArrayRef<double> cost, unsigned rows, unsigned cols,
                          ArrayRef<int> rowToCol) {
  double sum = 0;
  unsigned pairs = 0;
  for (unsigned i = 0; i < rows; ++i) {
    if (rowToCol[i] < 0)
      continue;
    sum += cost[i * cols + rowToCol[i]];
    ++pairs;
  }
  return pairs == std::min(rows, cols) ? sum : kInf;
}

Assignment ds::partition::solveAssignment(ArrayRef<double> cost, unsigned rows,
                                          unsigned cols) {
  assert(cost.size() == size_t(rows) * cols && "rows x cols costs");
  assert(llvm::none_of(cost,
                       [](double c) { return std::isnan(c) || c == -kInf; }) &&
         "costs are numbers or +inf");
  Assignment result;
  result.rowToCol.assign(rows, -1);
  if (rows == 0 || cols == 0)
    return result;
  if (rows <= cols) {
    result.rowToCol = hungarianWide(cost, rows, cols);
  } else {
    // More rows than columns: assign every column a row on the transpose.
    std::vector<double> transposed(cost.size());
    for (unsigned i = 0; i < rows; ++i)
      for (unsigned j = 0; j < cols; ++j)
        transposed[j * rows + i] = cost[i * cols + j];
    std::vector<int> colToRow = hungarianWide(transposed, cols, rows);
    for (unsigned j = 0; j < cols; ++j)
      if (colToRow[j] >= 0)
        result.rowToCol[colToRow[j]] = int(j);
  }
  result.cost = assignedSum(cost, rows, cols, result.rowToCol);
  return result;
}

/// Whether the pairs with cost <= threshold hold a matching of
/// min(rows, cols) pairs (Kuhn's augmenting paths; the matrices are small).
static bool hasCompleteMatching(ArrayRef<double> cost, unsigned rows,
                                unsigned cols, double threshold) {
  bool byRow = rows <= cols;
  unsigned left = byRow ? rows : cols, right = byRow ? cols : rows;
  auto allowed = [&](unsigned a, unsigned b) {
    return (byRow ? cost[a * cols + b] : cost[b * cols + a]) <= threshold;
  };
  std::vector<int> match(right, -1);
  std::vector<char> seen(right);
  std::function<bool(unsigned)> augment = [&](unsigned a) {
    for (unsigned b = 0; b < right; ++b) {
      if (seen[b] || !allowed(a, b))
        continue;
      seen[b] = 1;
      if (match[b] < 0 || augment(unsigned(match[b]))) {
        match[b] = int(a);
        return true;
      }
    }
    return false;
  };
  for (unsigned a = 0; a < left; ++a) {
    std::fill(seen.begin(), seen.end(), 0);
    if (!augment(a))
      return false;
  }
  return true;
}

Assignment ds::partition::solveBottleneckAssignment(ArrayRef<double> cost,
                                                    unsigned rows,
                                                    unsigned cols) {
  assert(cost.size() == size_t(rows) * cols && "rows x cols costs");
  if (rows == 0 || cols == 0)
    return solveAssignment(cost, rows, cols);
  std::vector<double> values;
  for (double c : cost)
    if (!std::isinf(c))
      values.push_back(c);
  llvm::sort(values);
  values.erase(std::unique(values.begin(), values.end()), values.end());
  // The smallest threshold that admits a complete matching.
  if (values.empty() || !hasCompleteMatching(cost, rows, cols, values.back())) {
    Assignment result = solveAssignment(cost, rows, cols);
    result.cost = kInf;
    return result;
  }
  size_t lo = 0, hi = values.size() - 1;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (hasCompleteMatching(cost, rows, cols, values[mid]))
      hi = mid;
    else
      lo = mid + 1;
  }
  double threshold = values[lo];
  // Among the assignments under the threshold, the cheapest in sum.
  std::vector<double> capped(cost.begin(), cost.end());
  for (double &c : capped)
    if (c > threshold)
      c = kInf;
  Assignment result = solveAssignment(capped, rows, cols);
  result.cost = threshold;
  return result;
}

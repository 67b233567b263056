//===- AssignCheck.cpp - solveAssignment on matrices from stdin -----------===//
//
// Reads lines "rows cols c00 c01 ..." (row-major costs) and prints, per
// line, the optimal cost solveAssignment finds (%.17g), for
// test/Partition/check_hungarian.py to compare with SciPy's
// linear_sum_assignment.
//
//===----------------------------------------------------------------------===//

#include "ds/Partition/Planner.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

int main() {
  std::string line;
  unsigned lineNo = 0;
  while (std::getline(std::cin, line)) {
    ++lineNo;
    if (line.empty())
      continue;
    std::istringstream in(line);
    unsigned rows = 0, cols = 0;
    std::vector<double> cost;
    in >> rows >> cols;
    double c;
    while (in >> c)
      cost.push_back(c);
    if (!in.eof() || cost.size() != size_t(rows) * cols) {
      std::fprintf(stderr, "line %u: expected rows cols and %u x %u costs\n",
                   lineNo, rows, cols);
      return 1;
    }
    ds::partition::Assignment a =
        ds::partition::solveAssignment(cost, rows, cols);
    std::printf("%.17g\n", a.cost);
  }
  return 0;
}

#!/usr/bin/env python3
"""Checks the pipeline planner's Hungarian algorithm against SciPy.

Generates 1000 random cost matrices (fixed seeds; sizes 1..40, square,
wider and taller; uniform reals, small integers full of ties, log-normal
costs over nine decades, mixed signs up to 1e12), pipes them to
ds-assign-check (solveAssignment's optimal cost per matrix, %.17g) and
compares each cost with scipy.optimize.linear_sum_assignment's: relative
error <= 1e-9, relative to the larger of |optimum| and the largest |cost|
(mixed-sign optima may sit near zero). Prints the worst error seen.
Usage: check_hungarian.py path/to/ds-assign-check
"""

import subprocess
import sys

import numpy as np
from scipy.optimize import linear_sum_assignment

NUM_MATRICES = 1000
TOLERANCE = 1e-9


def random_matrix(index):
    rng = np.random.default_rng(1000 + index)
    rows, cols = (int(x) for x in rng.integers(1, 41, size=2))
    family = index % 5
    if family == 0:  # square, uniform reals
        cols = rows
        return "uniform", rng.random((rows, cols))
    if family == 1:  # wide, uniform reals
        rows, cols = min(rows, cols), max(rows, cols)
        return "wide", rng.random((rows, cols)) * 100
    if family == 2:  # tall, nine decades
        rows, cols = max(rows, cols), min(rows, cols)
        return "log-normal", np.exp(rng.normal(0, 5, (rows, cols)))
    if family == 3:  # small integers: ties everywhere
        return "ties", rng.integers(0, 5, (rows, cols)).astype(np.float64)
    scale = 1e12 if index % 10 == 4 else 1e3
    return "mixed sign", rng.uniform(-scale, scale, (rows, cols))


def main():
    matrices = [random_matrix(i) for i in range(NUM_MATRICES)]
    lines = []
    for _, cost in matrices:
        values = " ".join(format(float(x), ".17g") for x in cost.ravel())
        lines.append(f"{cost.shape[0]} {cost.shape[1]} {values}")
    run = subprocess.run([sys.argv[1]], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True)
    ours = [float(x) for x in run.stdout.split()]
    assert len(ours) == NUM_MATRICES, (len(ours), run.stderr)

    worst, worst_index, failed = 0.0, 0, 0
    for index, ((family, cost), got) in enumerate(zip(matrices, ours)):
        row, col = linear_sum_assignment(cost)
        expected = float(cost[row, col].sum())
        scale = max(abs(expected), float(np.abs(cost).max()), 1e-300)
        error = abs(got - expected) / scale
        if error > worst:
            worst, worst_index = error, index
        if not error <= TOLERANCE:
            failed += 1
            print(f"FAIL matrix {index} ({family}, {cost.shape[0]} x "
                  f"{cost.shape[1]}): {got!r} != SciPy's {expected!r}")
    family, cost = matrices[worst_index]
    print(f"worst relative error {worst:.3g} (matrix {worst_index}, {family}, "
          f"{cost.shape[0]} x {cost.shape[1]})")
    if failed:
        print(f"{failed} of {NUM_MATRICES} matrices differ from SciPy")
        return 1
    print(f"ok   {NUM_MATRICES} matrices: solveAssignment == SciPy's "
          f"linear_sum_assignment (relative error <= {TOLERANCE:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

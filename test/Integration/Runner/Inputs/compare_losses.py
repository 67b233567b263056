"""compare_losses.py A.json B.json TOL: every step's loss is finite in both
reports and they differ by at most TOL (relative)."""
import json
import math
import sys

a, b = (json.load(open(p))["steps"] for p in sys.argv[1:3])
tol = float(sys.argv[3])
assert len(a) == len(b) > 1, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    lx, ly = x["loss"], y["loss"]
    if lx is None or ly is None or not (math.isfinite(lx) and math.isfinite(ly)):
        sys.exit("step %d: a non-finite loss (%r, %r)" % (x["step"], lx, ly))
    worst = max(worst, abs(lx - ly) / max(abs(ly), 1e-30))
if worst > tol:
    sys.exit("losses differ by %.3g (relative), more than %g" % (worst, tol))
print("%d steps, finite, within %g (worst %.2g)" % (len(a), tol, worst))

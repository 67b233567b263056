"""ds-test-loss-ema's numerics test (test/Transforms/test-loss-ema.mlir).

  check_loss_ema.py data X.npy     writes a data set x: 32 f32 samples
  check_loss_ema.py REPORT DECAY   checks the metric `loss_ema` of every step
                                   against a plain loop over the losses
"""
import json
import struct
import sys

if sys.argv[1] == "data":
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (32,), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    values = [((7 * i) % 11) / 5.0 - 1.0 for i in range(32)]
    with open(sys.argv[2], "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode() + struct.pack("<32f", *values))
    sys.exit(0)

report, decay = json.load(open(sys.argv[1])), float(sys.argv[2])
steps = report["steps"]
assert len(steps) > 1, "the report has too few steps"
assert len({s["loss"] for s in steps}) > 1, "the loss never changed"
ema = 0.0
for n, s in enumerate(steps):
    ema = decay * ema + (1 - decay) * s["loss"]
    want = ema / (1 - decay ** (n + 1))
    got = s["metrics"]["loss_ema"]
    if abs(got - want) > 1e-12 * max(1.0, abs(want)):
        sys.exit("step %d: loss_ema %r, expected %r" % (n + 1, got, want))
print("loss_ema matches over %d steps" % len(steps))

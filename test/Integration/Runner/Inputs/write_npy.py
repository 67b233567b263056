"""Writes a small float32 .npy without numpy: write_npy.py OUT ROWS COLS
[ROW,COL=VALUE ...] (VALUE may be nan, inf or -inf)."""
import struct
import sys

out, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
values = [((7 * i) % 11) / 5.0 - 1.0 for i in range(rows * cols)]
for spec in sys.argv[4:]:
    where, value = spec.split("=")
    r, c = map(int, where.split(","))
    values[r * cols + c] = float(value)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (
    rows, cols)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
    f.write(header.encode() + struct.pack("<%df" % len(values), *values))

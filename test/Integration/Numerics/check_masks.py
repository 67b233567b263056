#!/usr/bin/env python3
"""Boolean masks reach memory and come back intact: a mask computed by a
vectorised compare, reshaped and broadcast along either dimension by a
select, against NumPy. (LLVM stores vectors of i1 bit-packed; scalar
accesses are a byte per element: ds-vectorize-cpu keeps i1 ops scalar.)
Usage: check_masks.py DS_RUN INPUTS_DIR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ds_run, inputs = sys.argv[1], sys.argv[2]
failures = 0
with tempfile.TemporaryDirectory() as work:
    v = np.array([1, -1, 1, 1, -1, -1], np.float32)
    os.makedirs(os.path.join(work, "p"))
    np.save(os.path.join(work, "p", "v.npy"), v)
    src = open(os.path.join(inputs, "mask-broadcast.mlir")).read()
    for name, shape, mask_shape in (("rows", (6, 4), "6x1"), ("columns", (4, 6), "1x6")):
        text = src.replace("tensor<6x1xi1>", "tensor<%sxi1>" % mask_shape).replace(
            "tensor<6x4xf32>", "tensor<%dx%dxf32>" % shape)
        model = os.path.join(work, name + ".mlir")
        open(model, "w").write(text)
        x = (np.arange(24, dtype=np.float32).reshape(shape) + 1)
        np.save(os.path.join(work, "x.npy"), x)
        out = os.path.join(work, name)
        subprocess.run([ds_run, model, "--as-is", "--steps", "1", "--quiet", "--params",
                        os.path.join(work, "p"), "--data", "x=" + os.path.join(work, "x.npy"),
                        "--save-results", out], check=True)
        y = np.load(os.path.join(out, "metric.y.npy"))
        m = (v > 0).reshape([int(d) for d in mask_shape.split("x")])
        ok = np.array_equal(y, np.where(m, x, 0))
        failures += not ok
        print("%s mask broadcast along %s" % ("ok  " if ok else "FAIL", name))
sys.exit(1 if failures else 0)

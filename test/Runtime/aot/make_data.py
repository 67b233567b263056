"""Writes one data set .npy per batch input of an exported step (step.json):
float inputs N(0, 1), integer inputs uniform in [0, range), STEPS batches of
rows each. Used by the ahead-of-time tests and scripts/gpu-check.sh.

usage: make_data.py STEP_DIR OUT_DIR STEPS [SEED]
prints one NAME=FILE per input, for --data.
"""
import json
import os
import sys

import numpy as np

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16,
          "i64": np.int64, "i32": np.int32, "i8": np.int8, "u8": np.uint8}


def main():
    step_dir, out_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    manifest = json.load(open(os.path.join(step_dir, "step.json")))
    rng = np.random.default_rng(seed)
    os.makedirs(out_dir, exist_ok=True)
    for arg in manifest["args"]:
        if arg["role"] != "input":
            continue
        shape = [steps * arg["shape"][0]] + arg["shape"][1:]
        dtype = DTYPES.get(arg["dtype"])
        if dtype is None:
            sys.exit("make_data.py: input '%s' has dtype %s, which this "
                     "script does not generate" % (arg["name"], arg["dtype"]))
        if np.issubdtype(dtype, np.integer):
            if not arg.get("range"):
                sys.exit("make_data.py: integer input '%s' has no range"
                         % arg["name"])
            data = rng.integers(0, arg["range"], shape).astype(dtype)
        else:
            data = rng.standard_normal(shape).astype(dtype)
        path = os.path.join(out_dir, arg["name"] + ".npy")
        np.save(path, data)
        print("%s=%s" % (arg["name"], path))


if __name__ == "__main__":
    main()

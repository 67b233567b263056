"""Writes one data set .npy per batch input of an exported step (step.json):
float inputs N(0, 1), integer inputs uniform in [0, range), STEPS batches of
rows each. Used by the ahead-of-time tests and scripts/gpu-check.sh.
With --pad F, the last fraction F of each row of the integer inputs of two
or more dimensions (token sequences) is 0, a padding token.

usage: make_data.py STEP_DIR OUT_DIR STEPS [SEED] [--pad F]
prints one NAME=FILE per input, for --data.
"""
import argparse
import json
import os
import sys

import numpy as np

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16,
          "i64": np.int64, "i32": np.int32, "i8": np.int8, "u8": np.uint8}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step_dir")
    ap.add_argument("out_dir")
    ap.add_argument("steps", type=int)
    ap.add_argument("seed", type=int, nargs="?", default=0)
    ap.add_argument("--pad", type=float, default=0.0,
                    help="the fraction of each token sequence, at its end, "
                         "that is the padding token 0")
    args = ap.parse_args()
    if not 0.0 <= args.pad <= 1.0:
        ap.error("--pad takes a fraction in [0, 1]")
    step_dir, out_dir, steps, seed, pad = (args.step_dir, args.out_dir,
                                           args.steps, args.seed, args.pad)
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
            if pad and data.ndim >= 2:
                data[..., data.shape[-1] - int(round(pad * data.shape[-1])):] = 0
        else:
            data = rng.standard_normal(shape).astype(dtype)
        path = os.path.join(out_dir, arg["name"] + ".npy")
        np.save(path, data)
        print("%s=%s" % (arg["name"], path))


if __name__ == "__main__":
    main()

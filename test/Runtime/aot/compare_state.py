"""Compares a ds-run checkpoint with ds-step-run --save-state: every tensor
of the checkpoint's manifest, bit for bit.

usage: compare_state.py CHECKPOINT_DIR STATE_DIR
"""
import json
import os
import sys

import numpy as np


def main():
    ckpt, state = sys.argv[1], sys.argv[2]
    manifest = json.load(open(os.path.join(ckpt, "runner.json")))
    bad = []
    for t in manifest["tensors"]:
        a = np.load(os.path.join(ckpt, t["file"]))
        path = os.path.join(state, t["file"])
        if not os.path.exists(path):
            bad.append("%s: missing" % t["key"])
            continue
        b = np.load(path)
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            bad.append("%s: differs" % t["key"])
    if bad:
        print("FAIL: " + "; ".join(bad))
        sys.exit(1)
    print("%d tensors identical" % len(manifest["tensors"]))


if __name__ == "__main__":
    main()

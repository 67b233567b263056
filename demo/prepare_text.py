#!/usr/bin/env python3
"""Turns Debian's fortune cookies (package `fortunes`) into a character-level
language-modelling data set for ds-run: tokens [S, T] and targets [S, T]
(the tokens shifted by one), bytes 0-127 as the vocabulary, and a held-out
split. The text is real English that a package ships; nothing is
downloaded.

Usage: prepare_text.py OUTDIR [--seq 64] [--source DIR]
"""
import argparse
import os

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("outdir")
ap.add_argument("--seq", type=int, default=64)
ap.add_argument("--source", default="/usr/share/games/fortunes")
ap.add_argument("--held-out", type=float, default=0.05)
a = ap.parse_args()

texts = []
for name in sorted(os.listdir(a.source)):
    path = os.path.join(a.source, name)
    if os.path.isfile(path) and not name.endswith(".dat") and "." not in name:
        with open(path, "rb") as f:
            texts.append(f.read())
if not texts:
    raise SystemExit("prepare_text.py: no fortune files in %s (install the "
                     "Debian package 'fortunes')" % a.source)
data = np.frombuffer(b"".join(texts), dtype=np.uint8)
data = data[data < 128].astype(np.int64)  # ASCII only: vocabulary of 128
n = (len(data) - 1) // a.seq
tokens = data[: n * a.seq].reshape(n, a.seq)
targets = data[1 : n * a.seq + 1].reshape(n, a.seq)
# Hold out the last sequences (a contiguous stretch of text).
k = max(1, int(n * a.held_out))
os.makedirs(a.outdir, exist_ok=True)
np.save(os.path.join(a.outdir, "tokens.npy"), tokens[:-k])
np.save(os.path.join(a.outdir, "targets.npy"), targets[:-k])
np.save(os.path.join(a.outdir, "eval_tokens.npy"), tokens[-k:])
np.save(os.path.join(a.outdir, "eval_targets.npy"), targets[-k:])
print("demo data: %.1f MB of fortune text, %d training and %d held-out "
      "sequences of %d characters" % (len(data) / 1e6, n - k, k, a.seq))

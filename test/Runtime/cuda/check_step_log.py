"""Checks the driver calls a compiled training step made on the stub libcuda
(test/lib/StubCuda), as logged by ds-run --device cuda: the host side of the
step in order, without synchronising inside a step, kernels looked up in
the driver once, nothing leaked.

usage: check_step_log.py LOG STEPS
"""
import collections
import re
import sys


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    lines = [l.split() for l in open(path) if l.strip()]
    if not lines:
        fail("the stub logged nothing")
    # A step: the argument uploads, the GEMMs and kernels, the result copies,
    # then the runner's one wait. Split the log at each wait that follows
    # device work.
    segments, current = [], []
    for words in lines:
        current.append(words)
        if words[0] == "cuStreamSynchronize":
            segments.append(current)
            current = []
    step_segments = [s for s in segments
                     if any(w[0] == "cuLaunchKernel" for w in s)]
    if len(step_segments) != steps:
        fail("expected %d steps of kernels separated by one wait each, found "
             "%d (a wait inside a step splits it)" % (steps, len(step_segments)))
    signatures = []
    for i, seg in enumerate(step_segments, 1):
        calls = collections.Counter(w[0] for w in seg)
        launches = [w for w in seg if w[0] == "cuLaunchKernel"]
        gemms = [w for w in seg if w[0] == "cublasLtMatmul"]
        if not gemms:
            fail("step %d ran no cuBLASLt GEMM" % i)
        if calls["cuMemAllocAsync"] != calls["cuMemFreeAsync"]:
            fail("step %d: %d stream-ordered allocations but %d frees" %
                 (i, calls["cuMemAllocAsync"], calls["cuMemFreeAsync"]))
        blocks = [tuple(int(x) for x in
                        dict(kv.split("=", 1) for kv in w[1:] if "=" in kv)
                        ["block"].split(",")) for w in launches]
        wide = sum(1 for b in blocks if b[0] * b[1] * b[2] >= 128)
        if wide * 2 < len(blocks):
            fail("step %d: only %d of %d kernels have >= 128 threads per block"
                 % (i, wide, len(blocks)))
        if any(b[0] * b[1] * b[2] > 1024 for b in blocks):
            fail("step %d: a block of more than 1024 threads" % i)
        # Every step enqueues the same work (in order, from the same host
        # code): the kernel names and launch shapes repeat exactly.
        signatures.append([" ".join(w[1:4]) for w in launches] +
                          [" ".join(w[1:4]) for w in gemms])
        print("step %d: %d uploads, %d GEMMs, %d kernels (%d with >= 128 "
              "threads per block), %d result copies, 1 wait" %
              (i, calls["cuMemcpyHtoDAsync"], len(gemms), len(launches), wide,
               calls["cuMemcpyAsync"]))
    if any(s != signatures[0] for s in signatures):
        fail("the steps enqueued different work")
    # The runtime caches mgpuModuleGetFunction's answers: only the first
    # step looks its kernels up in the driver.
    lookups = sum(1 for seg in step_segments[1:] for w in seg
                  if w[0] == "cuModuleGetFunction")
    if lookups:
        fail("%d driver kernel lookups after step 1 (mgpuModuleGetFunction "
             "should answer from its cache)" % lookups)
    print("kernel lookups after step 1: 0")
    # ds-merge-gpu-modules: every kernel of the step is in one cubin.
    loads = sum(1 for w in lines if w[0] == "cuModuleLoadData")
    if loads != 1:
        fail("%d cubins loaded; expected one for all the step's kernels" % loads)
    print("cubins loaded: 1")
    exits = [w for w in lines if w[0] == "stub-exit"]
    if not exits:
        fail("the stub's exit line is missing (did the process crash?)")
    leaks = {k: v for k, v in (kv.split("=") for kv in exits[-1][1:])
             if v != "0"}
    if leaks:
        fail("leaked at exit: %s" % leaks)
    print("exit: nothing leaked")


if __name__ == "__main__":
    main()

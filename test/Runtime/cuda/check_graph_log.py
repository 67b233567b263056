"""Checks the driver calls of a run with --cuda-graphs on the stub libcuda
(test/lib/StubCuda): the first step of each of the two buffer sets runs
directly, the next is captured (each capture holds exactly the work of a
direct step, with no wait inside) and launched, and every later step is one
graph launch, with no kernel launched directly; at exit nothing is leaked.
NCCL's collectives (the stub NCCL) count as work: a capture must hold the
direct step's, every stream that joined it must have joined back, and none
may run outside a graph after the first capture.

usage: check_graph_log.py LOG STEPS
"""
import sys

WORK = ("cuLaunchKernel", "cublasLtMatmul", "ncclAllReduce", "ncclBroadcast",
        "ncclSend", "ncclRecv")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def work_signature(calls):
    """The kernels (name and shape), GEMM shapes and NCCL collectives (count,
    type, operation) of a run of calls."""
    sig = []
    for words in calls:
        if words[0] in WORK:
            sig.append(" ".join([words[0]] + words[1:4]))
    return sig


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    lines = [l.split() for l in open(path) if l.strip()]
    captures, direct, current, in_capture = [], [], None, False
    launches = 0
    direct_after_capture = 0
    for words in lines:
        head = words[0]
        if head == "cuStreamBeginCapture":
            if in_capture:
                fail("a capture began inside a capture")
            in_capture, current = True, []
            continue
        if head == "cuStreamEndCapture":
            if not in_capture:
                fail("a capture ended that never began")
            if "invalidated" in words:
                fail("a capture was invalidated: " + " ".join(words))
            in_capture = False
            captures.append(current)
            continue
        if head == "capture":
            if not in_capture:
                fail("work recorded outside a capture: " + " ".join(words))
            current.append(words[2:])
            continue
        if in_capture and head == "cuStreamSynchronize":
            fail("a wait inside a capture")
        if in_capture and head.startswith("nccl"):
            continue  # the stub's line before its "capture" line
        if head == "cuGraphLaunch":
            launches += 1
        if head in WORK:
            if captures:
                direct_after_capture += 1
            direct.append(words)
        if head == "stub-exit":
            leaks = [kv for kv in words[1:]
                     if kv.split("=")[1] not in ("0",)]
            if leaks:
                fail("leaked at exit: " + " ".join(leaks))
    if len(captures) != 2:
        fail("expected 2 captures (one per buffer set), found %d"
             % len(captures))
    if launches != steps - 2:
        fail("expected %d graph launches (steps 3..%d), found %d"
             % (steps - 2, steps, launches))
    if direct_after_capture:
        fail("%d kernels or GEMMs launched directly after the first capture"
             % direct_after_capture)
    direct_sig = work_signature(direct)
    if not direct_sig or len(direct_sig) % 2:
        fail("expected the work of 2 direct steps before the captures")
    step_sig = direct_sig[:len(direct_sig) // 2]
    if direct_sig[len(direct_sig) // 2:] != step_sig:
        fail("the two direct steps differ")
    for i, capture in enumerate(captures, 1):
        if work_signature(capture) != step_sig:
            fail("capture %d does not hold a direct step's work" % i)
        if any(w[0] == "stream" and "not" in w for w in capture):
            fail("capture %d: a stream did not join back" % i)
        allocs = sum(1 for w in capture if w[0] == "cuMemAllocAsync")
        frees = sum(1 for w in capture if w[0] == "cuMemFreeAsync")
        if allocs != frees:
            fail("capture %d: %d allocations but %d frees" % (i, allocs, frees))
    kernels = sum(1 for s in step_sig if s.startswith("cuLaunchKernel"))
    gemms = sum(1 for s in step_sig if s.startswith("cublasLtMatmul"))
    nccl = len(step_sig) - kernels - gemms
    print("captures: 2, each %d kernels and %d GEMMs as a direct step"
          % (kernels, gemms))
    if nccl:
        joins = sum(1 for w in captures[0] if w[0] == "stream")
        print("NCCL: each capture %d collectives as a direct step, %d "
              "stream(s) joining" % (nccl, joins))
    print("graph launches: %d; kernels launched directly after capturing: 0"
          % launches)
    if nccl:
        print("NCCL: no collective outside a graph after capturing")
    print("exit: nothing leaked")


if __name__ == "__main__":
    main()

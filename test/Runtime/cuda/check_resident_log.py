"""Checks the driver calls of ds-step-run training an exported GPU step on
the stub libcuda (test/lib/StubCuda): the parameters and state go up once,
each step uploads only its batch, nothing comes back to the host inside the
run but the report ring's scalars, the host waits only after the first step
and at report steps, and nothing is leaked.

usage: check_resident_log.py LOG STEPS REPORT_EVERY STATE_TENSORS INPUTS [OUT]

With OUT (the runner's output), its "per step: N kernel launches, M
cuBLASLt GEMMs" line must match the log (every step enqueues the same work).
"""
import re
import sys


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    path = sys.argv[1]
    steps, every, state, inputs = map(int, sys.argv[2:6])
    lines = [l.split() for l in open(path) if l.strip()]
    work = [i for i, w in enumerate(lines)
            if w[0] in ("cuLaunchKernel", "cublasLtMatmul")]
    if not work:
        fail("no kernel or GEMM was launched")
    first, last = work[0], work[-1]
    uploads = [i for i, w in enumerate(lines) if w[0] == "cuMemcpyHtoDAsync"]
    before = sum(1 for i in uploads if i < first)
    if before != state + inputs:
        fail("%d uploads before the first step; expected the %d state "
             "tensors and the %d inputs" % (before, state, inputs))
    if len(uploads) != state + steps * inputs:
        fail("%d uploads in all; expected %d state + %d steps x %d inputs"
             % (len(uploads), state, steps, inputs))
    inside = lines[first:last + 1]
    if any(w[0] == "cuMemcpyDtoHAsync" for w in inside):
        fail("a tensor came back to the host inside the run")
    waits = sum(1 for w in inside if w[0] == "cuStreamSynchronize")
    expected = sum(1 for s in range(1, steps) if s == 1 or s % every == 0)
    if waits != expected:
        fail("%d waits inside the run; expected %d (after step 1 and at each "
             "report)" % (waits, expected))
    exits = [w for w in lines if w[0].startswith("stub-") and "exit" in w[0]]
    leaked = [kv for w in exits for kv in w[1:] if not kv.endswith("=0")]
    if not exits or leaked:
        fail("leaked at exit: " + (" ".join(leaked) or "no exit line"))
    if len(sys.argv) > 6:
        found = re.search(r"per step: (\d+) kernel launches, (\d+) cuBLASLt GEMMs",
                          open(sys.argv[6]).read())
        if not found:
            fail("no 'per step:' line in " + sys.argv[6])
        launches = sum(1 for w in lines if w[0] == "cuLaunchKernel")
        gemms = sum(1 for w in lines if w[0] == "cublasLtMatmul")
        said = tuple(int(x) for x in found.groups())
        if said != (launches / steps, gemms / steps):
            fail("the runner counted %d launches and %d GEMMs per step; the "
                 "driver saw %g and %g" % (said + (launches / steps, gemms / steps)))
        print("counted per step: %d kernel launches, %d GEMMs, as the driver saw"
              % said)
    print("state uploaded once: %d tensors; each step uploads its %d inputs"
          % (state, inputs))
    print("waits inside %d steps: %d (report every %d)" % (steps, waits, every))
    print("exit: nothing leaked")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A stopped rank: the others fail with the comm-timeout error, no hang.

Two ranks train with --comm-timeout 5 and a checkpoint every 20 steps. Once
the first checkpoint exists, rank 1 gets SIGSTOP (a hung or descheduled
process: alive, never answering). Checked:
  - mpirun ends within 30 s of the stop, with a non-zero status;
  - rank 0 reports the timeout error (naming the collective);
  - the checkpoint is intact: 2 ranks resume from it and train on.
Every process this test starts is killed at the end, whatever happens.
Usage: check_fault.py with DS_RUN, DS_MPIRUN and GEN set; DS_FAULT_ARGS adds
ds-run arguments to every run (e.g. the GPU path's), and DS_FAULT_EXPECT is
the regular expression the timeout error must match (default: the MPI
layer's or NCCL's, "did not complete within 5 s").
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

DS_RUN = os.environ["DS_RUN"]
MPIRUN = os.environ["DS_MPIRUN"]
GEN = os.environ["GEN"]
EXTRA = shlex.split(os.environ.get("DS_FAULT_ARGS", ""))
EXPECT = os.environ.get("DS_FAULT_EXPECT", "did not complete within 5 s")


def ranks_of(job):
    """PIDs of ds-run processes started by `job` (by environment), by rank."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0")
                           if b"=" in kv)
            with open("/proc/%s/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm.startswith("ds-run") and \
                env.get(b"DS_FAULT_TEST_TAG") == job.encode():
            found[int(env.get(b"OMPI_COMM_WORLD_RANK", b"-1"))] = int(pid)
    return found


def main():
    tag = "fault-%d" % os.getpid()
    env = dict(os.environ, DS_FAULT_TEST_TAG=tag)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "mlp.mlir")
        subprocess.run([sys.executable, GEN, "mlp", "--batch", "16", "-o",
                        model], check=True)
        ckpt = os.path.join(tmp, "ckpt")
        cmd = [MPIRUN, "-np", "2", DS_RUN, model, "--data-parallel",
               "--steps", "1000000", "--quiet", "--comm-timeout", "5",
               "--checkpoint", ckpt, "--checkpoint-every", "20"] + EXTRA
        job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        pids = {}
        try:
            deadline = time.time() + 120
            while not os.path.exists(os.path.join(ckpt, "runner.json")):
                if time.time() > deadline or job.poll() is not None:
                    print("FAIL no checkpoint appeared (status %s)" %
                          job.poll())
                    return 1
                time.sleep(0.2)
            pids = ranks_of(tag)
            if 1 not in pids:
                print("FAIL rank 1 not found: %s" % pids)
                return 1
            os.kill(pids[1], signal.SIGSTOP)
            stopped = time.time()
            try:
                out, err = job.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                print("FAIL the job still runs 30 s after rank 1 stopped")
                return 1
            elapsed = time.time() - stopped
            if job.returncode == 0:
                print("FAIL the job succeeded")
                return 1
            found = re.search(EXPECT, err)
            if not found:
                print("FAIL no timeout error matching '%s': %s" %
                      (EXPECT, err[-1500:]))
                return 1
            print("ok   %s" % found.group(0))
            print("ok   timeout error after %.0f s (limit 30 s)" %
                  min(elapsed, 30))
        finally:
            for pid in list(ranks_of(tag).values()) + list(pids.values()):
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
            if job.poll() is None:
                job.kill()
                job.wait()

        with open(os.path.join(ckpt, "runner.json")) as f:
            state = json.load(f)
        at = state.get("step", state.get("runner", {}).get("step"))
        p = subprocess.run([MPIRUN, "-np", "2", DS_RUN, model,
                            "--data-parallel", "--steps", str(at + 5),
                            "--quiet", "--resume", ckpt, "--comm-timeout",
                            "30"] + EXTRA, capture_output=True, text=True,
                           timeout=120)
        if p.returncode != 0:
            print("FAIL resume from the checkpoint: %s" % p.stderr[-1500:])
            return 1
        print("ok   the checkpoint of step %d resumes" % at)
    return 0


if __name__ == "__main__":
    sys.exit(main())

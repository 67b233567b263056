"""The kernels' resources as ptxas reports them: no spills, no local stack.

Usage: check_ptx_resources.py MODULE.mlir CHIP

Reads the PTX that ds-gpu-pipeline{format=isa} embeds in the module's
gpu.binary, assembles it with `ptxas -v` (found on PATH) and prints one
line: the number of kernels, the most registers any uses, and the bytes
they spill and keep on a stack. Exits 1 naming the kernels that spill or
use a stack frame: register pressure a new kernel shape caused, which
would slow every launch of it on a GPU without failing any test here.
"""
import re
import subprocess
import sys
import tempfile


def embedded_ptx(text):
    start = text.index('assembly = "') + len('assembly = "')
    out, i = [], start
    while text[i] != '"':
        if text[i] == "\\":
            hexpair = text[i + 1:i + 3]
            if re.fullmatch(r"[0-9A-Fa-f]{2}", hexpair):
                out.append(chr(int(hexpair, 16)))
                i += 3
            else:
                out.append(text[i + 1])
                i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def main():
    module, chip = sys.argv[1], sys.argv[2]
    ptx = embedded_ptx(open(module).read())
    with tempfile.TemporaryDirectory() as tmp:
        src = f"{tmp}/k.ptx"
        open(src, "w").write(ptx)
        run = subprocess.run(["ptxas", f"-arch={chip}", "-v", src, "-o", f"{tmp}/k.cubin"],
                             capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"ptxas failed:\n{run.stderr}")
    kernel, kernels, bad, max_regs = None, 0, [], 0
    for line in run.stderr.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            kernel, kernels = m.group(1), kernels + 1
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m and kernel and any(int(v) for v in m.groups()):
            bad.append(f"{kernel}: {line.strip()}")
        m = re.search(r"Used (\d+) registers", line)
        if m and kernel:
            max_regs = max(max_regs, int(m.group(1)))
    print(f"{kernels} kernels, at most {max_regs} registers, "
          f"{len(bad)} with spills or a stack frame")
    if bad:
        print("\n".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()

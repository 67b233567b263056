"""Checks that the host and the kernels of a step lowered by ds-gpu-pipeline
(format=isa: the PTX kept as text) agree on every kernel's parameters: for
each gpu.launch_func, the LLVM types of its arguments against the .param
list of the PTX .entry it launches, in number and in size. Host and device
calling conventions are set by two passes (convert-gpu-to-nvvm and
gpu-to-llvm); a mismatch assembles fine and fails only on a GPU.

usage: check_launch_abi.py FILE.mlir
"""
import re
import sys

HOST_BYTES = {"!llvm.ptr": 8, "i64": 8, "f64": 8, "index": 8, "i32": 4,
              "f32": 4, "i16": 2, "f16": 2, "bf16": 2, "i8": 1, "i1": 1}


def ptx_text(mlir):
    """Every PTX text embedded in the file's gpu.object attributes."""
    texts = []
    for m in re.finditer(r'assembly = "((?:[^"\\]|\\.)*)"', mlir):
        raw = re.sub(r"\\([0-9A-Fa-f]{2})", lambda h: chr(int(h.group(1), 16)),
                     m.group(1))
        texts.append(raw.replace('\\"', '"').replace("\\\\", "\\"))
    return "\n".join(texts)


def param_bytes(decl):
    """The size of one PTX parameter declaration."""
    array = re.search(r"\.b8\s+\w+\[(\d+)\]", decl)
    if array:
        return int(array.group(1))
    kind = re.search(r"\.(?:[usbf])(8|16|32|64)\b", decl)
    return int(kind.group(1)) // 8 if kind else None


def main():
    mlir = open(sys.argv[1]).read()
    ptx = ptx_text(mlir)
    entries = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\)", ptx, re.S):
        decls = [d.strip() for d in m.group(2).split(",") if d.strip()]
        entries[m.group(1)] = [param_bytes(d) for d in decls]
    if not entries:
        sys.exit("FAIL: no PTX .entry found (compile with format=isa)")
    launches = 0
    for m in re.finditer(r"gpu\.launch_func\s+(?:<[^>]*>\s+)?@\w+::@(\w+).*?"
                         r"args\(([^)]*)\)", mlir):
        kernel = m.group(1)
        types = [a.split(":")[-1].strip() for a in m.group(2).split(",")]
        host = [HOST_BYTES.get(t) for t in types]
        if kernel not in entries:
            sys.exit("FAIL: launch of %s, which the PTX does not define" % kernel)
        if host != entries[kernel]:
            sys.exit("FAIL: %s: the host passes %s bytes, the kernel takes %s"
                     % (kernel, host, entries[kernel]))
        launches += 1
    if not launches:
        sys.exit("FAIL: no gpu.launch_func found")
    params = sum(len(p) for p in entries.values())
    print("%d launches of %d kernels: host arguments match the PTX parameters "
          "(%.1f per kernel)" % (launches, len(entries), params / len(entries)))


if __name__ == "__main__":
    main()

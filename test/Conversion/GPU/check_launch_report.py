"""Checks a ds-gpu-launch-report against the module it describes.

Usage: check_launch_report.py REPORT MODULE.mlir

The report was written while the kernels were still gpu.launch regions;
MODULE is the pipeline's output. Independently of the pass:
- its kernel lines are as many as the module's gpu.launch_func ops, and
  its GEMM lines as many as its calls of the runtime's GEMMs;
- each GEMM's GFLOP is 2 x b x M x N x K from its own shape column;
- the totals are the sums of the lines (MB moved per kind, and the bound).
Prints one line; exits 1 on a mismatch.
"""
import re
import sys


def main():
    report, module = open(sys.argv[1]).read(), open(sys.argv[2]).read()
    rows = re.findall(
        r"^\s*\d+\s+(kernel|gemm|copy)\s+(.*?)\s{2,}([\d.]+)\s+([\d.]+)\s+"
        r"(\S+)\s+([\d.]+)", report, re.M)
    errors = []
    kinds = {k: [r for r in rows if r[0] == k] for k in ("kernel", "gemm", "copy")}
    launches = len(re.findall(r"\bgpu\.launch_func\b", module))
    gemms = len(re.findall(r"llvm\.call @dsrt_cuda_matmul", module))
    if len(kinds["kernel"]) != launches:
        errors.append(f"{len(kinds['kernel'])} kernel lines, {launches} launches")
    if len(kinds["gemm"]) != gemms:
        errors.append(f"{len(kinds['gemm'])} GEMM lines, {gemms} GEMM calls")
    for _, shape, _, _, gflop, _ in kinds["gemm"]:
        b, m, n, k = map(int, re.match(r"(\d+) x (\d+)x(\d+)x(\d+)", shape).groups())
        if abs(2 * b * m * n * k / 1e9 - float(gflop)) > 0.006:
            errors.append(f"GEMM {shape}: {gflop} GFLOP")
    for kind, label in (("kernel", "kernels"), ("gemm", "GEMMs"), ("copy", "copies")):
        total = re.search(rf"^  {label}: \d+, .*?([\d.]+) MB moved", report, re.M)
        moved = sum(float(r[2]) + float(r[3]) for r in kinds[kind])
        if not total or abs(float(total.group(1)) - moved) > 0.05 + 0.001 * len(kinds[kind]):
            errors.append(f"{label}: lines sum to {moved:.1f} MB")
    bound = re.search(r"^  bound: ([\d.]+) us", report, re.M)
    lines = sum(float(r[5]) for r in rows)
    if not bound or abs(float(bound.group(1)) - lines) > 0.05 + 0.005 * len(rows):
        errors.append(f"bound: lines sum to {lines:.1f} us")
    if errors:
        print("launch report: " + "; ".join(errors))
        return 1
    print(f"launch report: {len(kinds['kernel'])} kernels, {len(kinds['gemm'])} "
          f"GEMMs, {len(kinds['copy'])} copies, consistent with the module")
    return 0


if __name__ == "__main__":
    sys.exit(main())

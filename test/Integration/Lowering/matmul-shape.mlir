// Executes --convert-ds-to-linalg output for ds.matmul in every form (transposes, batches, shared rhs, mixed precision) and the shape ops
// and compares with NumPy / PyTorch; the cases are the "matmul-shape" group of
// check_ops.py, run through both the plain and the fused CPU pipeline.
//
// REQUIRES: python-venv
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group matmul-shape | FileCheck %s
// CHECK: PASSED
// The GPU path's lowering (bf16 and FP8 operands kept narrow, FP8 ones
// transposed into cuBLASLt's X * W^T), executed on the CPU:
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group matmul-shape --pipeline narrow | FileCheck %s --check-prefix=NARROW
// NARROW: PASSED: {{[0-9]+}} cases (matmul-shape; pipelines narrow)
// The GPU path's fusion rounds before a transpose and the reshape before it, and widens after them (ds-fuse-elementwise):
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group matmul-shape --only 'transpose' --pipeline gpu | FileCheck %s --check-prefix=GPU
// GPU: PASSED: 7 cases (matmul-shape; pipelines gpu)

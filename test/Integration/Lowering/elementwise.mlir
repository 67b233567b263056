// Executes --convert-ds-to-linalg output for binary/unary ops, gelu and gelu_grad, compare, select, broadcast, causal_mask and cast (f32, f64, bf16, f16, integers)
// and compares with NumPy / PyTorch; the cases are the "elementwise" group of
// check_ops.py, run through both the plain and the fused CPU pipeline.
//
// REQUIRES: python-venv
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group elementwise | FileCheck %s
// CHECK: PASSED

// Executes --convert-ds-to-linalg output for conv2d and its gradients, pooling and its gradients, embedding and its gradient, dropout (Philox)
// and compares with NumPy / PyTorch; the cases are the "nn" group of
// check_ops.py, run through both the plain and the fused CPU pipeline.
//
// REQUIRES: python-venv
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group nn | FileCheck %s
// CHECK: PASSED

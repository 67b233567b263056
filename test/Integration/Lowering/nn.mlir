// Executes --convert-ds-to-linalg output for conv2d and its gradients, pooling and its gradients, embedding and its gradient, dropout (Philox)
// and compares with NumPy / PyTorch; the cases are the "nn" group of
// check_ops.py, run through both the plain and the fused CPU pipeline.
//
// REQUIRES: python-venv
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group nn | FileCheck %s
// The GPU path's lowering of embedding_grad (linked rows), executed here,
// bit for bit as the CPU's loop:
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group nn --only embedding_grad \
// RUN:   --pipeline gpu | FileCheck %s --check-prefix=GPU
// GPU: PASSED: 3 cases (nn; pipelines gpu)
// CHECK: PASSED

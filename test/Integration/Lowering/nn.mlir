// Executes --convert-ds-to-linalg output for conv2d and its gradients, pooling and its gradients, embedding and its gradient, dropout (Philox)
// and compares with NumPy / PyTorch; the cases are the "nn" group of
// check_ops.py, run through both the plain and the fused CPU pipeline.
//
// REQUIRES: python-venv
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group nn | FileCheck %s
// The GPU path's own lowerings, executed here: embedding_grad (linked rows,
// bit for bit as the CPU's loop) and the convolutions and their gradients
// (im2col + matmul for f32, gemm-convs; the f64 cases keep the loop nests):
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group nn --only 'embedding_grad|conv' \
// RUN:   --pipeline gpu | FileCheck %s --check-prefix=GPU
// GPU: PASSED: 33 cases (nn; pipelines gpu)
// CHECK: PASSED

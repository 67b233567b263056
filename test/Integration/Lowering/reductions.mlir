// Executes --convert-ds-to-linalg output for reductions, softmax/log_softmax, layer/RMS/batch norm, cross-entropy (and its gradient) and MSE
// and compares with NumPy / PyTorch; the cases are the "reductions" group of
// check_ops.py, run through both the plain and the fused CPU pipeline.
//
// REQUIRES: python-venv
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group reductions | FileCheck %s
// CHECK: PASSED

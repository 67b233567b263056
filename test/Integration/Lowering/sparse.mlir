// Executes --convert-ds-to-linalg's dense reference lowering of the block
// sparsity ops (ds.block_sparse_matmul with NaN in inactive blocks, batched
// and with blocks of 4; ds.block_sampled_matmul; ds.top_k_mask with ties
// and NaN) and compares with NumPy: the "sparse" group of check_ops.py,
// through the plain and the fused CPU pipeline. The runtime's kernels have
// their own tests (unittests/Runtime/BlockSparseTest.cpp, TopKTest.cpp).
//
// REQUIRES: python-venv
// RUN: %ds_python %S/check_ops.py --ds-opt ds-opt --group sparse | FileCheck %s
// CHECK: PASSED

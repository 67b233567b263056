// RUN: ds-opt %ds_src_root/examples/mlp.mlir --ds-autodiff --ds-insert-optimizer --ds-cpu-pipeline | FileCheck %s
// RUN: ds-opt %ds_src_root/examples/gpt_block.mlir --ds-autodiff --ds-insert-optimizer --ds-cpu-pipeline | FileCheck %s --check-prefix=GPT

// The whole way to the LLVM dialect: the contract table survives, the step
// has the C interface the runner calls, and GEMMs call the runtime.
// CHECK: module attributes {ds.contract = {mlp_step =
// CHECK-DAG: llvm.func @_mlir_ciface_dsrt_matmul_f32
// CHECK-DAG: llvm.call @_mlir_ciface_dsrt_matmul_f32
// CHECK: llvm.func @mlp_step
// CHECK: llvm.call @dsrt_matmul_f32
// CHECK: llvm.func @_mlir_ciface_mlp_step
// CHECK-NOT: linalg.
// GPT-NOT: linalg.matmul
// GPT-NOT: linalg.batch_matmul
// GPT: llvm.func @gpt_step

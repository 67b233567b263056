// ds-name-gpu-kernels: each launch's kernel is named <function>_k<N> in the
// order of the function's launches (a name already given is kept), the
// launch report prints the names, and outlining gives the kernels them.
// RUN: ds-opt %s --pass-pipeline="builtin.module(func.func(ds-name-gpu-kernels),ds-gpu-launch-report,gpu-kernel-outlining)" 2> %t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t.report

// CHECK: gpu.launch_func @step_k0::@step_k0
// CHECK: gpu.launch_func @mine::@mine
// CHECK: gpu.launch_func @step_k2::@step_k2
// CHECK: gpu.func @step_k0() kernel
// CHECK: gpu.func @mine() kernel
// CHECK: gpu.func @step_k2() kernel
// CHECK: gpu.launch_func @other_k0::@other_k0
// CHECK: gpu.func @other_k0() kernel

// REPORT: ds-gpu-launch-report: @step: 3 kernel launches
// REPORT: location [kernel]
// REPORT: 1 kernel {{.*}} name-gpu-kernels.mlir:{{[0-9]+}} step_k0
// REPORT: 2 kernel {{.*}} name-gpu-kernels.mlir:{{[0-9]+}} mine
// REPORT: 3 kernel {{.*}} name-gpu-kernels.mlir:{{[0-9]+}} step_k2
// REPORT: ds-gpu-launch-report: @other: 1 kernel launches
// REPORT: 1 kernel {{.*}} other_k0

func.func @step() {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%a, %b, %c) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%d, %e, %f) in (%u = %c1, %v = %c1, %w = %c1) {
    gpu.terminator
  }
  gpu.launch blocks(%a, %b, %c) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%d, %e, %f) in (%u = %c1, %v = %c1, %w = %c1)
             function(@mine) {
    gpu.terminator
  }
  gpu.launch blocks(%a, %b, %c) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%d, %e, %f) in (%u = %c1, %v = %c1, %w = %c1) {
    gpu.terminator
  }
  return
}

func.func @other() {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%a, %b, %c) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%d, %e, %f) in (%u = %c1, %v = %c1, %w = %c1) {
    gpu.terminator
  }
  return
}

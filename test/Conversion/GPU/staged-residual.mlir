// On CUDA a staged start's new residual reaches the device at its wait
// (lib/Runtime/CommStaging.h: the host encodes on a staging thread while
// the GPU goes on), so convert-ds-to-runtime{target=cuda} takes it after
// the wait and moves the readers in between (DGC's momentum masking
// compares it) after the wait too. The CPU's start writes it before it
// returns: its readers stay where they are. A reader with memory effects
// cannot move: an error naming the start. The numbers (DGC with momentum
// against the CPU) are checked in ds-run-parallel-emulated.test.
// RUN: ds-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cuda})' | FileCheck %s
// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cpu})' | FileCheck %s --check-prefix=CPU

// A top-k mean comes back sparse (device-encoders.mlir): its wait is the
// runtime's count, take, and the step's zero fill and scatter, after
// which the residual is read.
// CHECK-LABEL: func.func @momentum_mask
// CHECK: %[[H:.*]] = call @dsrt_cuda_allreduce_start_f32
// CHECK-NOT: ds.compare
// CHECK: call @dsrt_cuda_allreduce_wait_topk_f32(%[[H]]
// CHECK-NOT: ds.compare
// CHECK: call @dsrt_cuda_allreduce_take_topk_f32(%[[H]]
// CHECK-NOT: ds.compare
// CHECK: scf.parallel
// CHECK: bufferization.to_tensor
// CHECK-NEXT: %[[NEW:.*]] = bufferization.to_tensor
// CHECK-NEXT: %[[SAME:.*]] = ds.compare eq, %[[NEW]]
// CHECK-NEXT: ds.select %[[SAME]]
// CHECK: return
// CPU-LABEL: func.func @momentum_mask
// CPU: call @dsrt_allreduce_start_f32
// CPU-NEXT: %[[NEW:.*]] = bufferization.to_tensor
// CPU-NEXT: ds.compare eq, %[[NEW]]
// CPU: call @dsrt_allreduce_wait_f32
func.func @momentum_mask(%g: tensor<64xf32>, %r: tensor<64xf32>,
                         %p: tensor<3xf64>, %kept: tensor<64xf32>,
                         %zero: tensor<64xf32>)
    -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<64xf32>)
      params(%p : tensor<3xf64>) scheme = topk
      : tensor<64xf32> -> i64, tensor<64xf32>
  %unsent = ds.compare eq, %r1, %kept : tensor<64xf32>, tensor<64xf32> -> tensor<64xi1>
  %m = ds.select %unsent, %g, %zero : tensor<64xi1>, tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<64xf32>
  return %avg, %r1, %m : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A blocking collective of the residual before the wait would read it
// before the runtime writes it.
func.func @impure_reader(%g: tensor<64xf32>, %r: tensor<64xf32>,
                         %p: tensor<3xf64>)
    -> (tensor<64xf32>, tensor<64xf32>) {
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<64xf32>)
      params(%p : tensor<3xf64>) scheme = three_tier
      : tensor<64xf32> -> i64, tensor<64xf32>
  // expected-error@+1 {{reads the state of the ds.all_reduce_start at}}
  %sum = ds.all_reduce %r1 sum : tensor<64xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<64xf32>
  return %avg, %sum : tensor<64xf32>, tensor<64xf32>
}

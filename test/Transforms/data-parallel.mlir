// RUN: ds-opt %s --ds-autodiff --ds-insert-loss-scaling --ds-data-parallel | FileCheck %s
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce="bucket-bytes=1024 first-bucket-bytes=1024" | FileCheck %s --check-prefix=FUSE
// RUN: ds-opt %s --ds-autodiff --ds-insert-loss-scaling --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="quantile-low=0.9 quantile-high=0.99" | FileCheck %s --check-prefix=TIER
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-compress-allreduce="scheme=topk ratio=0.01 warmup-iterations=5" | FileCheck %s --check-prefix=TOPK
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-compress-allreduce="scheme=fp16" --ds-insert-optimizer --ds-cpu-pipeline | FileCheck %s --check-prefix=LOWER
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=powersgd rank=2 start-iteration=10" | FileCheck %s --check-prefix=PSGD
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-compress-allreduce="scheme=topk momentum=0.9 local-clip=1" | FileCheck %s --check-prefix=DGC
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=powersgd" --ds-insert-optimizer --ds-cpu-pipeline | FileCheck %s --check-prefix=PSGDLOWER
// RUN: ds-opt %s --ds-training-pipeline="policy=%ds_src_root/scripts/gpu-check/fp8.yaml data-parallel" | FileCheck %s --check-prefix=AMAX
// RUN: ds-opt %s --ds-training-pipeline="fake-quant data-parallel" | FileCheck %s --check-prefix=OBS

// State computed from a rank's data is synchronised by one collective per
// kind at the end of the step: the FP8 amax histories of the input and the
// cotangent (not the weight's, the same on every rank) MAX-reduced as
// Transformer Engine reduces amaxes, the fake-quant observers' ranges
// (eight scalars) taken from rank 0, as DDP's broadcast_buffers.
// AMAX: %[[H:.*]] = ds.concat %{{.*}}, %{{.*}} axis = 0 : tensor<1024xf32>, tensor<1024xf32> -> tensor<2048xf32>
// AMAX-NEXT: ds.all_reduce %[[H]] max : tensor<2048xf32>
// AMAX-NOT: ds.comm_broadcast
// AMAX-NOT: ds.all_reduce {{.*}} max
// OBS: %[[R:.*]] = ds.concat {{.*}} -> tensor<8xf32>
// OBS-NEXT: ds.comm_broadcast %[[R]] : tensor<8xf32>
// OBS-NOT: ds.comm_broadcast

// Dropout draws this rank's rows of the global batch (the counter offset by
// rank * numel) and advances the generator by the global batch's N * numel;
// its backward reads the same shifted generator.
// CHECK: module attributes {ds.data_parallel = {bucket_bytes = 0 : i64}}
// CHECK: %[[RANK:.*]], %[[SIZE:.*]] = ds.comm_rank : tensor<i64>, tensor<i64>
// CHECK: %[[SHIFTED:.*]] = ds.add %[[RNG:arg2]], %{{.*}} : tensor<2xi64>
// CHECK: ds.dropout %{{.*}}, %[[SHIFTED]] p
// CHECK: %[[NEXT:.*]] = ds.add %[[RNG]], %{{.*}} : tensor<2xi64>
// CHECK: ds.dropout %{{.*}}, %[[SHIFTED]] p = {{.*}}ds.vjp_of = "ds.dropout"
// found_inf is MAX-reduced where it is computed; each gradient's all-reduce
// starts where it is computed and is waited for before its first use.
// CHECK: %[[FOUND:.*]] = ds.all_reduce %{{.*}} max : tensor<f32>
// CHECK: %[[R1:.*]] = ds.all_reduce_start %{{.*}} scheme = none {ds.grads = ["fc1.weight"]} : tensor<32xf32> -> i64
// CHECK: %[[R2:.*]] = ds.all_reduce_start %{{.*}} scheme = none {ds.grads = ["fc2.weight"]} : tensor<16xf32> -> i64
// CHECK: ds.all_reduce_wait %[[R1]] : i64 -> tensor<32xf32>
// CHECK: ds.all_reduce_wait %[[R2]] : i64 -> tensor<16xf32>
// The loss of the global batch.
// CHECK: %[[LOSS:.*]] = ds.all_reduce %{{.*}} mean : tensor<f32>
// CHECK: return %[[LOSS]], %[[NEXT]],

// One bucket: the gradients concatenated in backward order, one start, one
// wait, slices back.
// FUSE: module attributes {ds.data_parallel = {bucket_bytes = 1024 : i64}}
// FUSE: %[[FLAT:.*]] = ds.concat %{{.*}}, %{{.*}} axis = 0 : tensor<16xf32>, tensor<32xf32> -> tensor<48xf32>
// FUSE: %[[REQ:.*]] = ds.all_reduce_start %[[FLAT]] scheme = none {ds.grads = ["fc2.weight", "fc1.weight"]}
// FUSE: %[[MEAN:.*]] = ds.all_reduce_wait %[[REQ]] : i64 -> tensor<48xf32>
// FUSE: ds.slice %[[MEAN]] offsets [0] : tensor<48xf32> -> tensor<16xf32>
// FUSE: ds.slice %[[MEAN]] offsets [16] : tensor<48xf32> -> tensor<32xf32>
// FUSE-NOT: ds.all_reduce_start

// Three tiers: the bucket's error-feedback residual is state, updated with
// the start's new residual unless the step is skipped.
// TIER: module attributes {ds.data_parallel = {bucket_bytes = 26214400 : i64, compression = "three_tier"}}
// TIER: func.func @step({{.*}}%[[RES:[^:]+]]: tensor<48xf32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"comm.residual.bucket0">}
// TIER: %[[P:.*]] = arith.constant dense<[0.000000e+00, 9.000000e-01, 0.98999999999999999]> : tensor<3xf64>
// TIER: %[[REQ:.*]], %[[NEWRES:.*]] = ds.all_reduce_start %{{.*}} residual(%[[RES]] : tensor<48xf32>) params(%[[P]] : tensor<3xf64>) scheme = three_tier
// TIER: %[[KEPT:.*]] = ds.select %{{.*}}, %[[RES]], %[[NEWRES]] : tensor<i1>, tensor<48xf32>, tensor<48xf32> -> tensor<48xf32>
// TIER: return {{.*}}%[[KEPT]] :

// DGC's warm-up of the ratio follows the iteration counter.
// TOPK: ds.state = #ds.state<"iteration">
// TOPK: arith.divsi
// TOPK: %[[PARAMS:.*]] = tensor.from_elements %{{.*}}, %{{.*}}, %{{.*}} : tensor<3xf64>
// TOPK: ds.all_reduce_start %{{.*}} residual(%{{.*}} : tensor<16xf32>) params(%[[PARAMS]] : tensor<3xf64>) scheme = topk

// The collectives become runtime calls.
// LOWER-DAG: llvm.call @_mlir_ciface_dsrt_allreduce_start_f32
// LOWER-DAG: llvm.call @_mlir_ciface_dsrt_allreduce_wait_f32
// LOWER-DAG: llvm.call @_mlir_ciface_dsrt_allreduce_f32
// LOWER-DAG: llvm.call @dsrt_comm_rank_i64
func.func @step(%w1: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<uniform, 0.5>},
                %w2: tensor<2x8xf32> {ds.param = "fc2.weight", ds.init = #ds.init<uniform, 0.35>},
                %rng: tensor<2xi64> {ds.state = #ds.state<"rng">, ds.init = #ds.init<zeros>},
                %x: tensor<6x4xf32> {ds.input = "x"},
                %y: tensor<6x2xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}, tensor<2xi64> {ds.update = 2 : i64}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<6x4xf32>, tensor<8x4xf32> -> tensor<6x8xf32>
  %a = ds.relu %h : tensor<6x8xf32>
  %d, %rng1 = ds.dropout %a, %rng p = 1.0e-01 : tensor<6x8xf32>, tensor<2xi64>
  %q = ds.matmul %d, %w2 transpose_rhs : tensor<6x8xf32>, tensor<2x8xf32> -> tensor<6x2xf32>
  %l = ds.mse_loss %q, %y : tensor<6x2xf32> -> tensor<f32>
  return %l, %rng1 : tensor<f32>, tensor<2xi64>
}

// With PowerSGD: the bucket's tensors as [m, n] pairs; one state per bucket
// holding each matrix's error and Q (2x8: 16 + 8*2; 8x4: 32 + 4*2);
// uncompressed until iteration 10.
// PSGD: %[[IT:[^:]+]]: tensor<i64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"iteration">}, %[[ST:[^:]+]]: tensor<72xf32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"comm.powersgd.bucket0">}
// PSGD: arith.cmpi sge, %{{.*}}, %c10_i64
// PSGD: %[[SH:.*]] = arith.constant dense<[2, 8, 8, 4]> : tensor<4xi64>
// PSGD: ds.all_reduce_start %{{.*}} residual(%[[ST]] : tensor<72xf32>) params(%{{.*}} : tensor<3xf64>) shapes(%[[SH]] : tensor<4xi64>) scheme = powersgd {{.*}} : tensor<48xf32> -> i64, tensor<72xf32>
// The new state is read after the wait (the runtime writes it there).
// PSGDLOWER-DAG: llvm.call @_mlir_ciface_dsrt_allreduce_start_powersgd_f32
// PSGDLOWER-DAG: llvm.call @_mlir_ciface_dsrt_allreduce_wait_f32

// With DGC's options: local clipping by c / sqrt(N), the rank's momentum through the
// error feedback, and momentum-factor masking where an element went out.
// DGC: ds.state = #ds.state<"comm.residual.bucket0">}, %[[U:[^:]+]]: tensor<16xf32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"comm.momentum.bucket0">}
// DGC: %{{.*}}, %[[SIZE:.*]] = ds.comm_rank
// DGC: math.sqrt
// DGC: %[[MU:.*]] = ds.mul %[[U]], %{{.*}} : tensor<16xf32>, tensor<f32> -> tensor<16xf32>
// DGC: %[[CORR:.*]] = ds.add %[[MU]], %{{.*}} : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
// DGC: %{{.*}}, %[[NEWRES:.*]] = ds.all_reduce_start %[[CORR]] residual
// DGC: %[[KEPT:.*]] = ds.add %{{.*}}, %[[CORR]]
// DGC: %[[UNSENT:.*]] = ds.compare eq, %[[NEWRES]], %[[KEPT]]
// DGC: ds.select %[[UNSENT]], %[[CORR]], %{{.*}}

// The collectives of data and pipeline parallelism under ds-gpu-pipeline:
// convert-ds-to-runtime{target=cuda} makes each a call to the runtime's
// host-staged form (dsrt_cuda_*), on device buffers. A start's parameters
// (a three-tier step computes its thresholds on the device) and PowerSGD's
// rank and activity go as a buffer, where the CPU's calls take host
// scalars. The numbers are checked under MPI against the CPU path in
// test/Runtime/cuda/ds-run-parallel-emulated.test.
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=three-tier" --ds-insert-optimizer --ds-gpu-pipeline=format=isa | FileCheck %s --check-prefix=TIER --implicit-check-not=@_mlir_ciface_dsrt_allreduce
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=powersgd" --ds-insert-optimizer --ds-gpu-pipeline=format=isa | FileCheck %s --check-prefix=PSGD --implicit-check-not=@_mlir_ciface_dsrt_allreduce
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=three-tier" --ds-insert-optimizer --ds-gpu-pipeline="format=isa launch-report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=three-tier" --ds-insert-optimizer --ds-gpu-pipeline="format=isa launch-report=- device-encoders=false" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOSTTIER
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-insert-optimizer --ds-gpu-pipeline="format=isa launch-report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NCCLREPORT
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-insert-optimizer --ds-gpu-pipeline="format=isa launch-report=- launch-report-collectives=host" -o /dev/null 2>&1 | FileCheck %s --check-prefix=HOSTREPORT
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=topk ratio=0.01" --ds-insert-optimizer --ds-gpu-pipeline="format=isa launch-report=-" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TOPKREPORT
// RUN: not ds-opt %s --ds-gpu-launch-report=collectives=mpi -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADREPORT
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-insert-optimizer | ds-opt --pass-pipeline='builtin.module(func.func(convert-ds-to-linalg),convert-ds-to-runtime{target=cuda})' | FileCheck %s --check-prefix=DENSE
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-insert-optimizer --ds-gpu-pipeline=format=isa --mlir-print-ir-after=convert-linalg-to-ds-gpu -o /dev/null 2>&1 | FileCheck %s --check-prefix=GUARD
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=fp16" --ds-insert-optimizer | ds-opt --pass-pipeline='builtin.module(func.func(convert-ds-to-linalg),convert-ds-to-runtime{target=cuda})' | FileCheck %s --check-prefix=HALF
// RUN: ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce --ds-compress-allreduce="scheme=bf16" --ds-insert-optimizer --ds-gpu-pipeline="format=isa launch-report=-" 2>&1 | FileCheck %s --check-prefix=HALFREPORT
// RUN: ds-opt %s --ds-training-pipeline="clip=true pipeline-stages=2 pipeline-micro-batches=2" --ds-gpu-pipeline=format=isa | FileCheck %s --check-prefix=STAGES --implicit-check-not=@_mlir_ciface_dsrt_send --implicit-check-not=@_mlir_ciface_dsrt_recv --implicit-check-not=@_mlir_ciface_dsrt_stage

// TIER-DAG: llvm.call @_mlir_ciface_dsrt_cuda_allreduce_start_three_tier_f32({{.*}}) : (!llvm.ptr, !llvm.ptr) -> i64
// TIER-DAG: llvm.call @_mlir_ciface_dsrt_cuda_allreduce_wait_f32({{.*}}) : (i64, !llvm.ptr) -> ()
// TIER-DAG: llvm.call @_mlir_ciface_dsrt_cuda_allreduce_f32({{.*}}) : (!llvm.ptr, !llvm.ptr, i64) -> ()
// TIER-DAG: gpu.binary

// The launch report counts what the staging copies: the one bucket's
// (both weights' gradients, 131584 floats) 16-bit codes and 3 scalars to
// the host at the start (the step encodes it on the device), the mean back
// at the wait; at 25 GB/s. The loss's blocking all-reduce is NCCL's
// (nothing copied), or staged too with collectives=host.
// REPORT: ds-gpu-launch-report: @step: {{.*}} copies, 2 collectives staged on the host, 1 on NCCL
// REPORT: staged  allreduce_start_three_tier_f32       0.263       0.000          -      10.53
// REPORT: staged  allreduce_wait_f32                   0.000       0.526          -      21.05
// REPORT: nccl    allreduce_f32                        0.000       0.000          -       0.00
// REPORT: collectives: 2, 0.8 MB to and from the host: 31.6 us at 25 GB/s (the network not counted)
// REPORT: NCCL: 1, 0.0 MB copied on the device: 0.0 us (the network not counted)
// Top-k at 1 %: the step's slots (2632 of them, 8 bytes each) are copied
// on the device into the runtime's memory, and only the count and the
// probe cross PCIe on the step stream (8 bytes); the used slots follow on
// the staging thread's stream, beside the step's kernels. The mean comes
// back sparse, as many elements as are not zero (a size known at run
// time), where the dense wait copied 0.526 MB. Gathered on NCCL instead
// (the runtime's choice), each rank's slots are copied on the device,
// added into the output, and the sums divided: rows run as many times as
// the runtime decides, not counted.
// TOPKREPORT: staged  allreduce_start_topk_f32             0.000       0.000          -       0.00
// TOPKREPORT-NEXT: copy                                         0.021       0.021          -       0.01
// TOPKREPORT-NEXT: staged  allreduce_wait_topk_f32              0.000       0.000          -       0.00
// TOPKREPORT-NEXT: kernel
// TOPKREPORT-NEXT: copy                                         0.021       0.021          -       0.01  {{.*}} (as the runtime decides: not counted)
// TOPKREPORT-NEXT: kernel {{.*}} (as the runtime decides: not counted)
// TOPKREPORT: staged  allreduce_take_topk_f32              0.000       0.000          -       0.00  {{.*}} (a dynamic size: not counted)
// TOPKREPORT: collectives: 3, 0.0 MB to and from the host: 0.0 us at 25 GB/s (the network not counted)
// Encoded on the host (device-encoders=false): the bucket and its
// residual to the host, the mean and the new residual back.
// HOSTTIER: staged  allreduce_start_f32    1.053       0.526          -      63.16
// HOSTTIER: staged  allreduce_wait_f32     0.000       0.526          -      21.05
// HOSTTIER: collectives: 2, 2.1 MB to and from the host: 84.2 us at 25 GB/s (the network not counted)

// Uncompressed, all three are NCCL's, and the bucket is all-reduced where
// the mask wrote it: nothing copied, not even by bufferization.
// NCCLREPORT: ds-gpu-launch-report: @step: {{.*}} 0 copies, 3 on NCCL
// NCCLREPORT: nccl    allreduce_start_in_place_f32 0.000       0.000          -       0.00
// NCCLREPORT: nccl    allreduce_wait_f32     0.000       0.000          -       0.00
// NCCLREPORT: nccl    allreduce_f32          0.000       0.000          -       0.00
// NCCLREPORT: NCCL: 3, 0.0 MB copied on the device: 0.0 us (the network not counted)
// HOSTREPORT: ds-gpu-launch-report: @step: {{.*}} 0 copies, 3 collectives staged on the host
// HOSTREPORT-NOT: nccl
// HOSTREPORT: staged  allreduce_start_in_place_f32 0.526       0.000
// HOSTREPORT: staged  allreduce_wait_f32     0.000       0.526
// HOSTREPORT: collectives: 3, 1.1 MB to and from the host: 42.1 us at 25 GB/s
// BADREPORT: error: ds-gpu-launch-report: collectives='mpi' (expected nccl or host)

// DDP's fp16/bf16 hooks on the device: the step divides the bucket by the
// group's size and rounds it to 16 bits into a buffer of its own, probes
// and masks that (a value, or its rounding, not finite: zeros), and keeps
// it for the wait; NCCL sums it there (the staged fallback takes the f32
// bucket to the CPU's start), and the wait's result is the sum widened.
// HALF: %[[N:.*]] = call @dsrt_comm_size_i64() : () -> i64
// HALF: %[[NF:.*]] = arith.sitofp %[[N]] : i64 to f32
// HALF: %[[H:.*]] = memref.alloc() : memref<131584xf16>
// The probe rounds the f32 bucket too (in f32, a parallel reduction), so
// that it and the rounding read one tensor: one launch ("Reductions with a
// sibling"); the mask then rewrites the 16-bit buffer, in place.
// HALF: %[[P:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%{{.*}}, %{{.*}} : tensor<131584xf32>, tensor<f32>) outs(%{{.*}} : tensor<f32>)
// HALF: arith.divf
// HALF-NEXT: arith.truncf %{{.*}} : f32 to f16
// HALF-NEXT: arith.extf %{{.*}} : f16 to f32
// HALF-NEXT: arith.subf %{{.*}}, %{{.*}} : f32
// HALF: %[[E:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<131584xf32>, tensor<f32>) outs(%{{.*}} : tensor<131584xf16>)
// HALF: arith.divf
// HALF-NEXT: arith.truncf %{{.*}} : f32 to f16
// HALF: linalg.generic {{.*}} ins(%[[P]] : tensor<f32>) outs(%[[E]] : tensor<131584xf16>)
// HALF: arith.cmpf uno
// HALF: arith.select
// HALF: bufferization.materialize_in_destination {{.*}} in restrict writable %[[H]]
// HALF: %[[R:.*]] = call @dsrt_cuda_allreduce_start_half_f16(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<?xf32, {{.*}}>, memref<?xf16, {{.*}}>, memref<?xf64, {{.*}}>) -> i64
// HALF: call @dsrt_cuda_allreduce_wait_half_f16(%[[R]], %{{.*}}) : (i64, memref<?xf16, {{.*}}>) -> ()
// The readers (here the optimizer's) load the 16-bit sums through the
// bucket's slices and widen them in their bodies: no f32 copy of the
// bucket.
// HALF: %[[SUMS:.*]] = bufferization.to_tensor %[[H]] restrict writable
// HALF-NOT: arith.extf
// HALF: %[[W:.*]] = tensor.extract_slice %[[SUMS]][512] [131072] [1] : tensor<131584xf16> to tensor<131072xf16>
// HALF: %[[WV:.*]] = tensor.expand_shape %[[W]] {{.*}} into tensor<256x512xf16>
// HALF: linalg.generic {{.*}} ins(%[[WV]], %{{.*}} : tensor<256x512xf16>, tensor<256x512xf32>)
// HALF-NEXT: ^bb0(%[[G:.*]]: f16, %{{.*}}: f32, %{{.*}}: f32):
// HALF-NEXT: arith.extf %[[G]] : f16 to f32
// The launch report: the two on NCCL, nothing copied; the probe with the
// rounding (f32 read, bf16 written: one pass), its partial sums folded, and
// the mask (a finite bucket is neither read nor written again) before; the
// update after reads the bf16 sums (1.842 MB, 2.105 with the f32 mean).
// HALFREPORT: ds-gpu-launch-report: @step: 10 kernel launches, {{.*}} 0 copies, 3 on NCCL
// HALFREPORT: kernel  64,1,1 x 256,1,1 0.526 0.263
// HALFREPORT-NEXT: kernel 1,1,1 x 64,1,1 0.000 0.000
// HALFREPORT-NEXT: kernel 65,1,1 x 256,1,1 0.000 0.000
// HALFREPORT-NEXT: nccl allreduce_start_half_bf16 0.000 0.000
// HALFREPORT-NEXT: nccl allreduce_wait_half_bf16 0.000 0.000
// HALFREPORT-NEXT: nccl allreduce_f32
// HALFREPORT-NEXT: kernel
// HALFREPORT-NEXT: kernel 128,1,1 x 256,1,1 1.842 1.579
// HALFREPORT-DAG: llvm.call @_mlir_ciface_dsrt_cuda_allreduce_start_half_bf16({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i64
// HALFREPORT-DAG: llvm.call @_mlir_ciface_dsrt_cuda_allreduce_wait_half_bf16({{.*}}) : (i64, !llvm.ptr) -> ()
// HALFREPORT: gpu.binary

// An uncompressed bucket leaves the step masked, for NCCL as for the
// staging: its probe (the sum of x - x, NaN exactly when some x is not
// finite), zeros for the whole bucket then, and the probe as the start's
// one parameter, from which the runtime counts the non-finite buckets. Its
// wait follows in the block, so the bucket is a buffer of its own that the
// wait gets as its output: the two weight gradients' GEMMs write their
// slices of it, viewed in their shapes (DDP's gradient-as-bucket-view), so
// nothing is copied into it; the mask rewrites it in place, and NCCL
// all-reduces it where it lies.
// DENSE: %[[BUF:.*]] = memref.alloc() : memref<131584xf32>
// DENSE: %[[S0:.*]] = memref.subview %[[BUF]][0] [512] [1]
// DENSE: %[[V0:.*]] = memref.expand_shape %[[S0]] {{\[\[}}0, 1]] output_shape [2, 256]
// DENSE: %[[T0:.*]] = bufferization.to_tensor %[[V0]] restrict writable
// DENSE: %[[F0:.*]] = linalg.fill {{.*}} outs(%[[T0]] : tensor<2x256xf32>)
// DENSE: %[[G0:.*]] = linalg.matmul {{.*}} outs(%[[F0]] : tensor<2x256xf32>)
// DENSE: %[[S1:.*]] = memref.subview %[[BUF]][512] [131072] [1]
// DENSE: %[[V1:.*]] = memref.expand_shape %[[S1]] {{\[\[}}0, 1]] output_shape [256, 512]
// DENSE: %[[T1:.*]] = bufferization.to_tensor %[[V1]] restrict writable
// DENSE: %[[F1:.*]] = linalg.fill {{.*}} outs(%[[T1]] : tensor<256x512xf32>)
// DENSE: %[[G1:.*]] = linalg.matmul {{.*}} outs(%[[F1]] : tensor<256x512xf32>)
// DENSE: bufferization.materialize_in_destination %[[G0]] in restrict writable %[[V0]]
// DENSE: bufferization.materialize_in_destination %[[G1]] in restrict writable %[[V1]]
// DENSE-NOT: tensor.insert_slice
// DENSE: %[[BUCKET:.*]] = bufferization.to_tensor %[[BUF]] restrict writable
// DENSE: %[[VIEW:.*]] = memref.cast %[[BUF]]
// DENSE: %[[PROBE:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[BUCKET]] : tensor<131584xf32>) outs({{.*}} : tensor<f32>)
// DENSE: arith.subf %[[IN:.*]], %[[IN]] : f32
// DENSE: %[[MASKED:.*]] = linalg.generic {{.*}} ins(%[[PROBE]] : tensor<f32>) outs(%[[BUCKET]] : tensor<131584xf32>)
// DENSE: %[[BAD:.*]] = arith.cmpf uno
// DENSE: arith.select %[[BAD]], %{{.*}}, %{{.*}} : f32
// DENSE: %[[PARAMS:.*]] = linalg.generic {{.*}} ins(%[[PROBE]] : tensor<f32>) outs({{.*}} : tensor<1xf64>)
// DENSE: arith.extf
// DENSE: bufferization.materialize_in_destination %[[MASKED]] in restrict writable %[[BUF]]
// DENSE: bufferization.to_buffer %[[PARAMS]]
// DENSE: %[[H:.*]] = call @dsrt_cuda_allreduce_start_in_place_f32(%[[VIEW]], %{{.*}}) : (memref<?xf32, strided<[?], offset: ?>>, memref<?xf64, strided<[?], offset: ?>>) -> i64
// DENSE: %[[OUT:.*]] = memref.cast %[[BUF]]
// DENSE: call @dsrt_cuda_allreduce_wait_f32(%[[H]], %[[OUT]])
// DENSE: bufferization.to_tensor %[[BUF]] restrict writable

// The mask's kernel tests the probe once per thread and rewrites the
// bucket only when it is NaN (UniformGuards.h): a finite bucket is neither
// read nor written again, and the launch report counts it so.
// GUARD: %[[NAN:.*]] = arith.cmpf uno, %[[P:.*]], %[[P]] : f32
// GUARD-NEXT: scf.if %[[NAN]] {
// GUARD: vector.load {{.*}}ds.read_fraction = 0.0
// GUARD: vector.store {{.*}}ds.write_fraction = 0.0

// PSGD-DAG: llvm.call @_mlir_ciface_dsrt_cuda_allreduce_start_powersgd_f32({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i64
// PSGD-DAG: llvm.call @_mlir_ciface_dsrt_cuda_allreduce_wait_f32

// The stages' transfers, and clipping's norm summed over the stages.
// STAGES-DAG: llvm.call @_mlir_ciface_dsrt_cuda_recv_f32({{.*}}) : (!llvm.ptr, i64, i64) -> ()
// STAGES-DAG: llvm.call @_mlir_ciface_dsrt_cuda_send_f32({{.*}}) : (!llvm.ptr, i64, i64) -> ()
// STAGES-DAG: llvm.call @_mlir_ciface_dsrt_cuda_stage_allreduce_f64({{.*}}) : (!llvm.ptr, !llvm.ptr, i64) -> ()
// STAGES-DAG: llvm.func @step_s0(
// STAGES-DAG: llvm.func @step_s1(

func.func @step(%w1: tensor<256x512xf32> {ds.param = "fc1.weight", ds.init = #ds.init<uniform, 0.05>},
                %w2: tensor<2x256xf32> {ds.param = "fc2.weight", ds.init = #ds.init<uniform, 0.06>},
                %x: tensor<6x512xf32> {ds.input = "x"},
                %y: tensor<6x2xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<6x512xf32>, tensor<256x512xf32> -> tensor<6x256xf32>
  %a = ds.relu %h : tensor<6x256xf32>
  %q = ds.matmul %a, %w2 transpose_rhs : tensor<6x256xf32>, tensor<2x256xf32> -> tensor<6x2xf32>
  %l = ds.mse_loss %q, %y : tensor<6x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// On CUDA a compressed bucket whose parameters the step fixes (constant
// params; top-k's fraction may also be chosen among constants, DGC's
// warm-up) is encoded by the step on the device (DeviceEncoders.h), and the
// new residual is the step's own, before the wait. The emulated 2-rank
// runs check the numbers against the host encoder bit for bit
// (ds-run-parallel-emulated.test, three-tier and topk-dgc), and
// DeviceEncodersTest runs the top-k encoder on made-up vectors (ties).
//
// Three tiers: v = g + r, its probe, the two quantiles of |v| by radix
// select, the 8-bit tier's largest magnitude, [s8, t16, probe], then one
// generic writing each element's 16-bit code and its new residual. Only
// the codes and the scalars go to the runtime.
// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cuda device-encoders-min=1})' | FileCheck %s
// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cuda device-encoders=false})' | FileCheck %s --check-prefix=HOST
// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cpu})' | FileCheck %s --check-prefix=CPU
// By default only buckets of 65536 elements or more: smaller ones cost
// less to copy than the encoder's launches.
// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cuda})' | FileCheck %s --check-prefix=MIN
// RUN: not ds-opt %s --split-input-file --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cuda device-encoders-min=-1})' 2>&1 | FileCheck %s --check-prefix=BADMIN
// BADMIN: error: convert-ds-to-runtime: device-encoders-min is a number of elements, not -1

// CHECK-LABEL: func.func @quantiles
// CHECK: %[[V:.*]] = linalg.generic
// CHECK: arith.addf
// The quantiles: a radix select's histograms over |v|'s digits.
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: arith.shrui
// CHECK: tensor<3xf32>
// CHECK: %[[ENC:.*]]:2 = linalg.generic {{.*}} ins(%[[V]], %arg1,
// CHECK-SAME: outs({{.*}} : tensor<100xi16>, tensor<100xf32>)
// CHECK: math.roundeven
// CHECK: arith.truncf {{.*}} : f32 to f16
// CHECK: linalg.yield {{.*}} : i16, f32
// CHECK: %[[H:.*]] = call @dsrt_cuda_allreduce_start_three_tier_f32
// CHECK: call @dsrt_cuda_allreduce_wait_f32(%[[H]]
// CHECK: return {{.*}}, %[[ENC]]#1
// MIN-LABEL: func.func @quantiles
// MIN: call @dsrt_cuda_allreduce_start_f32
// MIN-NOT: call @dsrt_cuda_allreduce_start_three_tier_f32
// HOST-LABEL: func.func @quantiles
// HOST: call @dsrt_cuda_allreduce_start_f32
// HOST-NOT: three_tier
// CPU-LABEL: func.func @quantiles
// CPU: call @dsrt_allreduce_start_f32
// CPU-NOT: three_tier
func.func @quantiles(%g: tensor<100xf32>, %r: tensor<100xf32>)
    -> (tensor<100xf32>, tensor<100xf32>) {
  %p = arith.constant dense<[0.0, 0.9, 0.99]> : tensor<3xf64>
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<100xf32>)
      params(%p : tensor<3xf64>) scheme = three_tier
      : tensor<100xf32> -> i64, tensor<100xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<100xf32>
  return %avg, %r1 : tensor<100xf32>, tensor<100xf32>
}

// -----

// Fixed thresholds need no selection.
// CHECK-LABEL: func.func @fixed
// CHECK-NOT: arith.shrui {{.*}} : i32
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<f32>)
// CHECK: call @dsrt_cuda_allreduce_start_three_tier_f32
func.func @fixed(%g: tensor<64xf32>, %r: tensor<64xf32>)
    -> (tensor<64xf32>, tensor<64xf32>) {
  %p = arith.constant dense<[1.0, 0.001, 0.02]> : tensor<3xf64>
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<64xf32>)
      params(%p : tensor<3xf64>) scheme = three_tier
      : tensor<64xf32> -> i64, tensor<64xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<64xf32>
  return %avg, %r1 : tensor<64xf32>, tensor<64xf32>
}

// -----

// The host encodes what the step does not fix (parameters from an
// argument, a fraction chosen among constants one of which is out of
// range) and names bad parameters, and f64 buckets.
// CHECK-LABEL: func.func @left_to_the_host
// CHECK-COUNT-5: call @dsrt_cuda_allreduce_start_f
// CHECK-NOT: call @dsrt_cuda_allreduce_start_three_tier_f32
// CHECK-NOT: call @dsrt_cuda_allreduce_start_topk_f32
func.func @left_to_the_host(%g: tensor<64xf32>, %r: tensor<64xf32>,
                            %p: tensor<3xf64>, %g64: tensor<64xf64>,
                            %r64: tensor<64xf64>, %i0: index)
    -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf64>) {
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<64xf32>)
      params(%p : tensor<3xf64>) scheme = three_tier
      : tensor<64xf32> -> i64, tensor<64xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<64xf32>
  %bad = arith.constant dense<[2.0, 0.5, 0.9]> : tensor<3xf64>
  %req2, %r2 = ds.all_reduce_start %g residual(%r : tensor<64xf32>)
      params(%bad : tensor<3xf64>) scheme = three_tier
      : tensor<64xf32> -> i64, tensor<64xf32>
  %avg2 = ds.all_reduce_wait %req2 : i64 -> tensor<64xf32>
  %q = arith.constant dense<[0.0, 0.5, 0.9]> : tensor<3xf64>
  %req3, %r3 = ds.all_reduce_start %g64 residual(%r64 : tensor<64xf64>)
      params(%q : tensor<3xf64>) scheme = three_tier
      : tensor<64xf64> -> i64, tensor<64xf64>
  %avg3 = ds.all_reduce_wait %req3 : i64 -> tensor<64xf64>
  %req4, %r4 = ds.all_reduce_start %g residual(%r : tensor<64xf32>)
      params(%p : tensor<3xf64>) scheme = topk
      : tensor<64xf32> -> i64, tensor<64xf32>
  %avg4 = ds.all_reduce_wait %req4 : i64 -> tensor<64xf32>
  %c = arith.cmpf olt, %avg4, %avg4 : tensor<64xf32>
  %flag = tensor.extract %c[%i0] : tensor<64xi1>
  %low = arith.constant 0.001 : f64
  %over = arith.constant 1.5 : f64
  %zero = arith.constant 0.0 : f64
  %p0 = arith.select %flag, %over, %low : f64
  %chosen = tensor.from_elements %p0, %zero, %zero : tensor<3xf64>
  %req5, %r5 = ds.all_reduce_start %g residual(%r : tensor<64xf32>)
      params(%chosen : tensor<3xf64>) scheme = topk
      : tensor<64xf32> -> i64, tensor<64xf32>
  %avg5 = ds.all_reduce_wait %req5 : i64 -> tensor<64xf32>
  return %avg, %avg2, %avg5, %avg3 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf64>
}

// -----

// Top-k: DGC's threshold from a strided sample of 64 (the radix select's
// byte digits), the exact re-selection (0.1 % of 5000: k = 5, and more
// than 2k pass the sampled threshold): the k-th largest, the ties' count
// pyramid and the index that ends them. Then the sent elements' mask and
// the new residual in one generic, their count pyramid (blocks of 32:
// 5000 -> 157 -> 5 -> 1), and min(n, 2k) = 10 slots found by descending
// it (all empty when the probe is NaN: a non-finite bucket). The slots,
// their count (the pyramid's top), the probe and n go to the runtime,
// which copies only the used slots to the host, or all-gathers them on
// NCCL.
// CHECK-LABEL: func.func @dgc
// CHECK: %[[V:.*]] = linalg.generic
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<64xf32>)
// CHECK: tensor.extract
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]{{.*}}tensor<64xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]{{.*}}tensor<5000xf32>
// CHECK: tensor.expand_shape {{.*}} output_shape [157, 32] : tensor<5024xi8>
// CHECK: %[[SENT:.*]]:2 = linalg.generic {{.*}} ins(%[[V]], %arg1,
// CHECK-SAME: outs({{.*}} : tensor<5000xi8>, tensor<5000xf32>)
// CHECK: tensor.insert_slice %[[SENT]]#0 {{.*}} into tensor<5024xi8>
// CHECK: output_shape [5, 32]
// CHECK: output_shape [1, 32]
// CHECK: %[[TOTAL:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<1x32xi32>) outs(%{{.*}} : tensor<1xi32>)
// CHECK: %[[SLOTS:.*]]:2 = linalg.generic {{.*}} ins(%[[TOTAL]], %[[PROBE:.*]] : tensor<1xi32>, tensor<f32>)
// CHECK-SAME: outs({{.*}} : tensor<10xi32>, tensor<10xf32>)
// CHECK: ^bb0(%{{.*}}: i32, %[[P:.*]]: f32,
// CHECK-COUNT-96: tensor.extract
// CHECK: arith.cmpf ord, %[[P]], %[[P]] : f32
// CHECK: } -> (tensor<10xi32>, tensor<10xf32>)
// CHECK: %[[I:.*]] = bufferization.to_buffer %[[SLOTS]]#0
// CHECK: %[[VAL:.*]] = bufferization.to_buffer %[[SLOTS]]#1
// CHECK: %[[COUNT:.*]] = bufferization.to_buffer %[[TOTAL]] read_only : tensor<1xi32>
// CHECK: %[[COUNTCAST:.*]] = memref.cast %[[COUNT]]
// CHECK: %[[H:.*]] = call @dsrt_cuda_allreduce_start_topk_f32({{.*}}, {{.*}}, %[[COUNTCAST]], {{.*}}, %c5000_i64, %c1_i64)
// The mean comes back sparse: U = how many of its elements are not zero
// (-1: more than half, the whole mean instead), a zero fill, their indices
// and values into buffers of U (or the mean into the output), then a
// scatter, whose loop reads the first U of views of n. Or, gathered on
// NCCL (R ranks, 0 when staged), each rank's 10 slots in rank order
// copied into the step's buffers and added into the zeroed output (empty
// slots skipped), then the sums divided by R.
// CHECK: %[[R:.*]] = call @dsrt_cuda_allreduce_ranks_topk_f32(%[[H]]) : (i64) -> i64
// CHECK: %[[GI:.*]] = memref.alloc() : memref<10xi32>
// CHECK: %[[GV:.*]] = memref.alloc() : memref<10xf32>
// CHECK: %[[U:.*]] = call @dsrt_cuda_allreduce_wait_topk_f32(%[[H]]) : (i64) -> i64
// CHECK: %[[UPOS:.*]] = arith.maxsi %[[U]], %{{.*}} : i64
// CHECK: %[[USIZE:.*]] = arith.index_cast %[[UPOS]] : i64 to index
// CHECK: %[[IDX:.*]] = memref.alloc(%[[USIZE]]) : memref<?xi32>
// CHECK: %[[VALS:.*]] = memref.alloc(%[[USIZE]]) : memref<?xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<5000xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[OUT]] : memref<5000xf32>)
// CHECK: %[[RI:.*]] = arith.index_cast %[[R]] : i64 to index
// CHECK: scf.for %[[RANK:.*]] = %{{.*}} to %[[RI]]
// CHECK: call @dsrt_cuda_allreduce_slots_topk_f32(%[[H]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: scf.parallel (%[[S:.*]]) = (%{{.*}}) to (%c10)
// CHECK: %[[GIDX:.*]] = memref.load %[[GI]][%[[S]]]
// CHECK: %[[USED:.*]] = arith.cmpi ne, %[[GIDX]], %c-1_i32
// CHECK: scf.if %[[USED]]
// CHECK: %[[OLD:.*]] = memref.load %[[OUT]]
// CHECK: %[[ADD:.*]] = memref.load %[[GV]][%[[S]]]
// CHECK: arith.addf %[[OLD]], %[[ADD]] : f32
// CHECK: %[[OUTVIEW:.*]] = memref.cast %[[OUT]]
// CHECK: call @dsrt_cuda_allreduce_take_topk_f32(%[[H]], %{{.*}}, %{{.*}}, %[[OUTVIEW]])
// CHECK: %[[IDXN:.*]] = memref.reinterpret_cast %[[IDX]] to offset: [0], sizes: [5000], strides: [1]
// CHECK: %[[VALSN:.*]] = memref.reinterpret_cast %[[VALS]] to offset: [0], sizes: [5000], strides: [1]
// CHECK: scf.parallel (%[[J:.*]]) = (%{{.*}}) to (%[[USIZE]])
// CHECK: %[[I:.*]] = memref.load %[[IDXN]][%[[J]]]
// CHECK: %[[AT:.*]] = arith.index_castui %[[I]] : i32 to index
// CHECK: %[[V:.*]] = memref.load %[[VALSN]][%[[J]]]
// CHECK: memref.store %[[V]], %[[OUT]][%[[AT]]]
// CHECK: %[[GATHERED:.*]] = arith.cmpi sgt, %[[R]], %c0_i64
// CHECK: scf.if %[[GATHERED]]
// CHECK: %[[RF:.*]] = arith.sitofp %[[R]] : i64 to f32
// CHECK: scf.parallel
// CHECK: arith.divf %{{.*}}, %[[RF]] : f32
// CHECK: %[[MEAN:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: return %[[MEAN]], %[[SENT]]#1
// The host encodes the payload; the mean still comes back sparse.
// HOST-LABEL: func.func @dgc
// HOST: %[[H:.*]] = call @dsrt_cuda_allreduce_start_f32
// HOST-NOT: start_topk_f32
// HOST-NOT: ranks_topk_f32
// HOST: call @dsrt_cuda_allreduce_wait_topk_f32(%[[H]])
// HOST-NOT: slots_topk_f32
// HOST: call @dsrt_cuda_allreduce_take_topk_f32(%[[H]],
// CPU-LABEL: func.func @dgc
// CPU: call @dsrt_allreduce_start_f32
// CPU-NOT: topk_f32
func.func @dgc(%g: tensor<5000xf32>, %r: tensor<5000xf32>)
    -> (tensor<5000xf32>, tensor<5000xf32>) {
  %p = arith.constant dense<[0.001, 0.0, 0.0]> : tensor<3xf64>
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<5000xf32>)
      params(%p : tensor<3xf64>) scheme = topk
      : tensor<5000xf32> -> i64, tensor<5000xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<5000xf32>
  return %avg, %r1 : tensor<5000xf32>, tensor<5000xf32>
}

// -----

// DGC's warm-up: p0 is chosen by the iteration among constants (25 %,
// 6.25 %, then 0.1 %), so the step computes k, min(2k, n) and the
// sample's rank from it, in f64 as the runtime does, and the slots are
// those of the largest fraction: min(5000, 2 * 1250) = 2500.
// CHECK-LABEL: func.func @dgc_warm_up
// CHECK: %[[COUNTS:.*]]:4 = linalg.generic {{.*}} iterator_types = []} ins(%[[PARAMS:.*]] : tensor<3xf64>) outs({{.*}} : tensor<i32>, tensor<i32>, tensor<i64>, tensor<i64>)
// CHECK: math.ceil
// CHECK: math.floor
// CHECK: linalg.generic {{.*}} outs({{.*}} : tensor<2500xi32>, tensor<2500xf32>)
// CHECK: call @dsrt_cuda_allreduce_start_topk_f32({{.*}}, %c5000_i64, %c0_i64{{.*}})
func.func @dgc_warm_up(%g: tensor<5000xf32>, %r: tensor<5000xf32>,
                       %it: tensor<i64>)
    -> (tensor<5000xf32>, tensor<5000xf32>) {
  %i = tensor.extract %it[] : tensor<i64>
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %quarter = arith.constant 0.25 : f64
  %sixteenth = arith.constant 0.0625 : f64
  %final = arith.constant 0.001 : f64
  %zero = arith.constant 0.0 : f64
  %at1 = arith.cmpi eq, %i, %c1 : i64
  %s1 = arith.select %at1, %sixteenth, %final : f64
  %at0 = arith.cmpi eq, %i, %c0 : i64
  %p0 = arith.select %at0, %quarter, %s1 : f64
  %p = tensor.from_elements %p0, %zero, %zero : tensor<3xf64>
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<5000xf32>)
      params(%p : tensor<3xf64>) scheme = topk
      : tensor<5000xf32> -> i64, tensor<5000xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<5000xf32>
  return %avg, %r1 : tensor<5000xf32>, tensor<5000xf32>
}

// -----

// Half of 100: 2k = n, so the threshold's selection is never re-selected;
// one pyramid, 100 slots (padded to 128: 4 blocks, then 1).
// CHECK-LABEL: func.func @half
// CHECK-COUNT-1: tensor.expand_shape {{.*}} output_shape [4, 32]
// CHECK-NOT: output_shape [4, 32]
// CHECK: outs({{.*}} : tensor<100xi32>, tensor<100xf32>)
// CHECK: call @dsrt_cuda_allreduce_start_topk_f32({{.*}}, %c100_i64, %c1_i64)
func.func @half(%g: tensor<100xf32>, %r: tensor<100xf32>)
    -> (tensor<100xf32>, tensor<100xf32>) {
  %p = arith.constant dense<[0.5, 0.0, 0.0]> : tensor<3xf64>
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<100xf32>)
      params(%p : tensor<3xf64>) scheme = topk
      : tensor<100xf32> -> i64, tensor<100xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<100xf32>
  return %avg, %r1 : tensor<100xf32>, tensor<100xf32>
}

// -----

// MIN-LABEL: func.func @at_the_minimum
// MIN: call @dsrt_cuda_allreduce_start_topk_f32({{.*}}, %c65536_i64, %c1_i64)
// MIN: call @dsrt_cuda_allreduce_start_f32
// MIN-NOT: call @dsrt_cuda_allreduce_start_topk_f32
func.func @at_the_minimum(%g: tensor<65536xf32>, %r: tensor<65536xf32>,
                          %h: tensor<65535xf32>, %s: tensor<65535xf32>)
    -> (tensor<65536xf32>, tensor<65535xf32>) {
  %p = arith.constant dense<[0.001, 0.0, 0.0]> : tensor<3xf64>
  %req, %r1 = ds.all_reduce_start %g residual(%r : tensor<65536xf32>)
      params(%p : tensor<3xf64>) scheme = topk
      : tensor<65536xf32> -> i64, tensor<65536xf32>
  %avg = ds.all_reduce_wait %req : i64 -> tensor<65536xf32>
  %req2, %s1 = ds.all_reduce_start %h residual(%s : tensor<65535xf32>)
      params(%p : tensor<3xf64>) scheme = topk
      : tensor<65535xf32> -> i64, tensor<65535xf32>
  %avg2 = ds.all_reduce_wait %req2 : i64 -> tensor<65535xf32>
  return %avg, %avg2 : tensor<65536xf32>, tensor<65535xf32>
}

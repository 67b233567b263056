// RUN: ds-opt %s --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cuda})' | FileCheck %s
// RUN: ds-opt %s --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cpu})' | FileCheck %s --check-prefix=CPU
// RUN: ds-opt %s --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cuda},one-shot-bufferize{bufferize-function-boundaries},canonicalize,cse,canonicalize)' | FileCheck %s --check-prefix=BUF
// RUN: ds-opt %s --pass-pipeline='builtin.module(convert-ds-to-runtime{target=cuda bucket-views=false})' | FileCheck %s --check-prefix=COPIED

// A bucket of gradients (ds.concat's chain of insert_slice ops) is built in
// a buffer of its own, and the ops that compute the gradients write their
// slices of it in place (DDP's gradient-as-bucket-view), when each gradient
// is used only by its link and comes, through reshapes and ops each used
// once, from an init that is a tensor.empty or that a fill or an
// elementwise op does not read. The others are copied in as before: a
// reduction's output (the kernel builders fold column sums into the row
// kernels that read their operand only when the output is a buffer of its
// own), a gradient read by something else, a function argument.
// Numerics: the data-parallel runs (test/Integration/DataParallel,
// test/Runtime/cuda/ds-run-parallel-emulated.test) train through this
// against single-process references.

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
#vec = affine_map<(i) -> (i)>

// CHECK-LABEL: func.func @bucket
// CHECK: %[[BUCKET:.*]] = memref.alloc() : memref<1560xf32>
// The elementwise op's empty init becomes its slice, viewed as 8 x 64.
// CHECK: %[[S0:.*]] = memref.subview %[[BUCKET]][0] [512] [1]
// CHECK: %[[V0:.*]] = memref.expand_shape %[[S0]] {{\[\[}}0, 1]] output_shape [8, 64]
// CHECK: %[[T0:.*]] = bufferization.to_tensor %[[V0]] restrict writable
// CHECK: %[[SCALED:.*]] = linalg.generic {{.*}} outs(%[[T0]] : tensor<8x64xf32>)
// The GEMM's zero fill, shared with another GEMM, is its own fill now.
// CHECK: %[[S1:.*]] = memref.subview %[[BUCKET]][512] [1024] [1]
// CHECK: %[[V1:.*]] = memref.expand_shape %[[S1]] {{\[\[}}0, 1]] output_shape [16, 64]
// CHECK: %[[T1:.*]] = bufferization.to_tensor %[[V1]] restrict writable
// CHECK: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[T1]] : tensor<16x64xf32>)
// CHECK: %[[GEMM:.*]] = linalg.matmul ins({{.*}}) outs(%[[F1]] : tensor<16x64xf32>)
// CHECK: %[[BIAS:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]}
// CHECK: bufferization.materialize_in_destination %[[SCALED]] in restrict writable %[[V0]]
// CHECK: bufferization.materialize_in_destination %[[GEMM]] in restrict writable %[[V1]]
// The rest is copied into the buffer's tensor: the reduction, the gradient
// read twice, the argument.
// CHECK: %[[ALL:.*]] = bufferization.to_tensor %[[BUCKET]] restrict writable : memref<1560xf32>
// CHECK: %[[I0:.*]] = tensor.insert_slice %[[BIAS]] into %[[ALL]][1536] [8] [1]
// CHECK: %[[I1:.*]] = tensor.insert_slice %{{.*}} into %[[I0]][1544] [8] [1]
// CHECK: %[[I2:.*]] = tensor.insert_slice %{{.*}} into %[[I1]][1552] [8] [1]
// CHECK: linalg.generic {{.*}} ins(%[[I2]] : tensor<1560xf32>)
// CHECK: call @dsrt_cuda_allreduce_start_in_place_f32

// On the CPU the same buffer is what the start copies from.
// CPU-LABEL: func.func @bucket
// CPU: %[[BUCKET:.*]] = memref.alloc() : memref<1560xf32>
// CPU-COUNT-2: bufferization.materialize_in_destination
// CPU: %[[ALL:.*]] = bufferization.to_tensor %[[BUCKET]] restrict writable
// CPU-COUNT-3: tensor.insert_slice
// CPU: call @dsrt_allreduce_start_f32

// Bufferized, the two gradients are computed in the bucket and nothing
// copies them; the three others are copied.
// BUF-LABEL: func.func @bucket
// BUF: %[[BUCKET:.*]] = memref.alloc() {{.*}}: memref<1560xf32>
// BUF: %[[S0:.*]] = memref.subview %[[BUCKET]][0] [512] [1]
// BUF: %[[V0:.*]] = memref.expand_shape %[[S0]]
// BUF: linalg.generic {{.*}} outs(%[[V0]] : memref<8x64xf32>)
// BUF: %[[S1:.*]] = memref.subview %[[BUCKET]][512] [1024] [1]
// BUF: %[[V1:.*]] = memref.expand_shape %[[S1]]
// BUF: linalg.fill {{.*}} outs(%[[V1]] :
// BUF: linalg.matmul {{.*}} outs(%[[V1]] :
// BUF-COUNT-3: memref.copy
// BUF-NOT: memref.copy
// BUF: call @dsrt_cuda_allreduce_start_in_place_f32
// With bucket-views=false every part is copied into the buffer.
// COPIED-LABEL: func.func @bucket
// COPIED: %[[BUCKET:.*]] = memref.alloc() : memref<1560xf32>
// COPIED-NEXT: %[[ALL:.*]] = bufferization.to_tensor %[[BUCKET]] restrict writable
// COPIED-COUNT-5: tensor.insert_slice
// COPIED: call @dsrt_cuda_allreduce_start_in_place_f32
func.func @bucket(%x: tensor<8x64xf32>, %a: tensor<16x32xf32>,
                  %b: tensor<32x64xf32>, %r: tensor<4x8xf32>,
                  %arg: tensor<8xf32>, %s: f32)
    -> (tensor<1560xf32>, tensor<8xf32>, tensor<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x64xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x64xf32>) outs(%e0 : tensor<8x64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %s : f32
    linalg.yield %m : f32
  } -> tensor<8x64xf32>
  %e1 = tensor.empty() : tensor<16x64xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %gemm = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x64xf32>)
      outs(%fill : tensor<16x64xf32>) -> tensor<16x64xf32>
  %other = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x64xf32>)
      outs(%fill : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e3 = tensor.empty() : tensor<8xf32>
  %fill8 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8xf32>) -> tensor<8xf32>
  %bias = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["reduction", "parallel"]}
      ins(%r : tensor<4x8xf32>) outs(%fill8 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %sum = arith.addf %in, %out : f32
    linalg.yield %sum : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %twice = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]}
      ins(%arg : tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.addf %in, %in : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %flat0 = tensor.collapse_shape %scaled [[0, 1]] : tensor<8x64xf32> into tensor<512xf32>
  %flat1 = tensor.collapse_shape %gemm [[0, 1]] : tensor<16x64xf32> into tensor<1024xf32>
  %empty = tensor.empty() : tensor<1560xf32>
  %i0 = tensor.insert_slice %flat0 into %empty[0] [512] [1] : tensor<512xf32> into tensor<1560xf32>
  %i1 = tensor.insert_slice %flat1 into %i0[512] [1024] [1] : tensor<1024xf32> into tensor<1560xf32>
  %i2 = tensor.insert_slice %bias into %i1[1536] [8] [1] : tensor<8xf32> into tensor<1560xf32>
  %i3 = tensor.insert_slice %twice into %i2[1544] [8] [1] : tensor<8xf32> into tensor<1560xf32>
  %i4 = tensor.insert_slice %arg into %i3[1552] [8] [1] : tensor<8xf32> into tensor<1560xf32>
  %request = ds.all_reduce_start %i4 scheme = none : tensor<1560xf32> -> i64
  %mean = ds.all_reduce_wait %request : i64 -> tensor<1560xf32>
  return %mean, %twice, %other : tensor<1560xf32>, tensor<8xf32>, tensor<16x64xf32>
}

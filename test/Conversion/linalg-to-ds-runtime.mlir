// RUN: ds-opt %s --split-input-file --ds-prepare-library-gemms | FileCheck %s --check-prefix=PREP
// RUN: ds-opt %s --split-input-file --convert-linalg-to-ds-runtime | FileCheck %s

// Tensor level: the zero fill is detached and the matmul marked.
// PREP-LABEL: func.func @tensor_gemm
// PREP: linalg.fill
// PREP-NEXT: %[[E:.*]] = tensor.empty() : tensor<4x5xf32>
// PREP-NEXT: linalg.matmul {ds.gemm_overwrite} ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x5xf32>) outs(%[[E]] : tensor<4x5xf32>)
func.func @tensor_gemm(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>) -> tensor<4x5xf32> {
  %z = arith.constant 0.0 : f32
  %c0 = tensor.empty() : tensor<4x5xf32>
  %c = linalg.fill ins(%z : f32) outs(%c0 : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x5xf32>) outs(%c : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %r : tensor<4x5xf32>
}

// -----

// Buffer level: matmuls that overwrite their output become runtime calls,
// with transposes and a shared right-hand side as flags and a batch of one.
// CHECK: func.func private @dsrt_matmul_f32(memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @buffer_gemms
// CHECK: %[[SHARED:.*]] = memref.expand_shape %arg1 {{\[\[}}0, 1], [2]] output_shape [1, 3, 5]
// CHECK: call @dsrt_matmul_f32
// CHECK: %[[T1:.*]] = arith.constant 1 : i64
// CHECK: call @dsrt_matmul_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[T1]])
// A marked matmul needs no fill.
// CHECK: call @dsrt_matmul_f32
// A matmul that accumulates into unknown contents stays a loop nest.
// CHECK: linalg.matmul ins(%arg6, %arg6
// A marked one that cannot be called (integer) gets its zero fill back.
// CHECK: linalg.fill
// CHECK-NEXT: linalg.matmul ins(%arg7, %arg7
// CHECK-NOT: linalg.fill
func.func @buffer_gemms(%a: memref<2x4x3xf32>, %b: memref<3x5xf32>, %c: memref<2x4x5xf32>,
                        %x: memref<4x3xf32>, %y: memref<5x3xf32>, %z: memref<4x5xf32>,
                        %s: memref<3x3xf32>, %i: memref<3x3xi32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<2x4x5xf32>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>]
    ins(%a, %b : memref<2x4x3xf32>, memref<3x5xf32>) outs(%c : memref<2x4x5xf32>)
  linalg.fill ins(%zero : f32) outs(%z : memref<4x5xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%x, %y : memref<4x3xf32>, memref<5x3xf32>) outs(%z : memref<4x5xf32>)
  linalg.matmul {ds.gemm_overwrite} ins(%s, %s : memref<3x3xf32>, memref<3x3xf32>) outs(%s : memref<3x3xf32>)
  linalg.matmul ins(%s, %s : memref<3x3xf32>, memref<3x3xf32>) outs(%s : memref<3x3xf32>)
  linalg.matmul {ds.gemm_overwrite} ins(%i, %i : memref<3x3xi32>, memref<3x3xi32>) outs(%i : memref<3x3xi32>)
  return
}

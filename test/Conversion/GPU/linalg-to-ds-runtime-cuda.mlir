// RUN: ds-opt %s --split-input-file --convert-linalg-to-ds-runtime=target=cuda | FileCheck %s

// convert-linalg-to-ds-runtime{target=cuda}: buffer-level matmuls into the
// runtime's cuBLASLt GEMMs (ds_runtime_cuda.h): f32, bf16 into f32, and
// E4M3 x E4M3 into f32 where cuBLASLt's FP8 kernels take the layout
// (X * W^T) and the sizes (multiples of 16). Everything else stays a loop
// nest, for convert-linalg-to-ds-gpu's kernels.

// CHECK-LABEL: func.func @f32(
// CHECK:         call @dsrt_cuda_matmul_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64) -> ()
// CHECK-NOT:     linalg.matmul
func.func @f32(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @bf16(
// CHECK:         call @dsrt_cuda_matmul_bf16(
// CHECK-NOT:     linalg.matmul
func.func @bf16(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// X [32, 16] * W^T, W [64, 16]: both E4M3, no scales (null pointers).
// CHECK-LABEL: func.func @fp8_tn(
// CHECK-DAG:     %[[T0:.*]] = arith.constant 0 : i64
// CHECK-DAG:     %[[T1:.*]] = arith.constant 1 : i64
// CHECK-DAG:     %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK:         call @dsrt_cuda_matmul_f8(%{{.*}}, %{{.*}}, %{{.*}}, %[[T0]], %[[T1]], %{{.*}}, %{{.*}}, %[[NULL]], %[[NULL]]) : (memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
// CHECK-NOT:     linalg.matmul
func.func @fp8_tn(%a: memref<32x16xf8E4M3FN>, %b: memref<64x16xf8E4M3FN>, %c: memref<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<32x64xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<32x16xf8E4M3FN>, memref<64x16xf8E4M3FN>) outs(%c : memref<32x64xf32>)
  return
}

// -----

// W not transposed: cuBLASLt's FP8 path has no such layout.
// CHECK-LABEL: func.func @fp8_nn(
// CHECK-NOT:     call @dsrt_cuda_matmul_f8
// CHECK:         linalg.matmul
func.func @fp8_nn(%a: memref<32x16xf8E4M3FN>, %b: memref<16x64xf8E4M3FN>, %c: memref<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<32x64xf32>)
  linalg.matmul ins(%a, %b : memref<32x16xf8E4M3FN>, memref<16x64xf8E4M3FN>) outs(%c : memref<32x64xf32>)
  return
}

// -----

// K = 8 is not a multiple of 16.
// CHECK-LABEL: func.func @fp8_unaligned(
// CHECK-NOT:     call @dsrt_cuda_matmul_f8
// CHECK:         linalg.matmul
func.func @fp8_unaligned(%a: memref<32x8xf8E4M3FN>, %b: memref<64x8xf8E4M3FN>, %c: memref<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<32x64xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<32x8xf8E4M3FN>, memref<64x8xf8E4M3FN>) outs(%c : memref<32x64xf32>)
  return
}

// -----

// The backward's E5M2 gradient x E4M3 operand (already in X * W^T): the
// entry with the formats in its name.
// CHECK-LABEL: func.func @fp8_mixed(
// CHECK:         call @dsrt_cuda_matmul_e5m2_e4m3(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (memref<?x?x?xf8E5M2, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
func.func @fp8_mixed(%a: memref<64x32xf8E5M2>, %b: memref<16x32xf8E4M3FN>, %c: memref<64x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<64x16xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<64x32xf8E5M2>, memref<16x32xf8E4M3FN>) outs(%c : memref<64x16xf32>)
  return
}

// -----

// E5M2 x E5M2: cuBLASLt has no such kernel.
// CHECK-LABEL: func.func @fp8_e5m2_e5m2(
// CHECK-NOT:     call
// CHECK:         linalg.matmul
func.func @fp8_e5m2_e5m2(%a: memref<64x32xf8E5M2>, %b: memref<16x32xf8E5M2>, %c: memref<64x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<64x16xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<64x32xf8E5M2>, memref<16x32xf8E5M2>) outs(%c : memref<64x16xf32>)
  return
}

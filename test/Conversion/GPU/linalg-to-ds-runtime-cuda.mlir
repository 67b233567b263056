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

// -----

// A product every reader rounds to bf16 (here through a reshape, and in a
// reduction) is written as bf16 by cuBLASLt: the buffer becomes bf16 and
// the readers' truncf fold away.
// CHECK-LABEL: func.func @bf16_rounded(
// CHECK:         %[[C:.*]] = memref.alloc() : memref<2x4x16xbf16>
// CHECK:         call @dsrt_cuda_matmul_bf16_to_bf16({{.*}}) : (memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, i64, i64) -> ()
// CHECK:         %[[V:.*]] = memref.collapse_shape %[[C]] {{.*}} into memref<8x16xbf16>
// CHECK:         linalg.generic {{.*}} ins(%[[V]] : memref<8x16xbf16>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT:      %[[E:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT:      arith.mulf %[[E]], %[[E]] : f32
// CHECK:         linalg.generic {{.*}} ins(%[[C]] : memref<2x4x16xbf16>)
// CHECK-NEXT:    ^bb0(%[[IN2:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[E2:.*]] = arith.extf %[[IN2]] : bf16 to f32
// CHECK-NEXT:      arith.addf %[[ACC]], %[[E2]] : f32
// CHECK-NOT:     arith.truncf
func.func @bf16_rounded(%a: memref<2x4x8xbf16>, %b: memref<2x8x16xbf16>,
                        %sq: memref<8x16xf32>, %sum: memref<2x4xf32>) {
  %c = memref.alloc() : memref<2x4x16xf32>
  linalg.batch_matmul {ds.gemm_overwrite} ins(%a, %b : memref<2x4x8xbf16>, memref<2x8x16xbf16>) outs(%c : memref<2x4x16xf32>)
  %v = memref.collapse_shape %c [[0, 1], [2]] : memref<2x4x16xf32> into memref<8x16xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<8x16xf32>) outs(%sq : memref<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.truncf %in : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    %m = arith.mulf %e, %e : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c : memref<2x4x16xf32>) outs(%sum : memref<2x4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.truncf %in : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  }
  memref.dealloc %c : memref<2x4x16xf32>
  return
}

// -----

// A runtime call between the GEMM and its reader (a data-parallel step's
// collective between attention's forward and its backward) does not keep
// the product in f32: without a scale or a bias, nothing the readers add
// to the product can change in between.
// CHECK-LABEL: func.func @bf16_rounded_across_call(
// CHECK:         memref.alloc() : memref<4x16xbf16>
// CHECK:         call @dsrt_cuda_matmul_bf16_to_bf16(
// CHECK:         call @dsrt_cuda_allreduce_f32(
// CHECK-NOT:     arith.truncf
func.func private @dsrt_cuda_allreduce_f32(memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, i64)
func.func @bf16_rounded_across_call(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %d: memref<4x16xbf16>,
                                    %g: memref<?xf32, strided<[?], offset: ?>>, %m: memref<?xf32, strided<[?], offset: ?>>) {
  %mean = arith.constant 4 : i64
  %c = memref.alloc() : memref<4x16xf32>
  linalg.matmul {ds.gemm_overwrite} ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf32>)
  call @dsrt_cuda_allreduce_f32(%g, %m, %mean) : (memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, i64) -> ()
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x16xf32>) outs(%d : memref<4x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}


// But a runtime call that is handed the scale's buffer may write it: the
// scale stays in the reader (cuBLASLt would read it before the call).
// CHECK-LABEL: func.func @fp8_scale_across_call(
// CHECK:         call @dsrt_cuda_matmul_f8(
// CHECK:         call @dsrt_cuda_allreduce_f32(
// CHECK:         arith.mulf
func.func @fp8_scale_across_call(%a: memref<32x16xf8E4M3FN>, %b: memref<64x16xf8E4M3FN>,
                                 %s: memref<1xf32>, %g: memref<?xf32, strided<[?], offset: ?>>,
                                 %y: memref<32x64xbf16>) {
  %max = arith.constant 2 : i64
  %c = memref.alloc() : memref<32x64xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%a, %b : memref<32x16xf8E4M3FN>, memref<64x16xf8E4M3FN>) outs(%c : memref<32x64xf32>)
  %sv = memref.cast %s : memref<1xf32> to memref<?xf32, strided<[?], offset: ?>>
  call @dsrt_cuda_allreduce_f32(%g, %sv, %max) : (memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, i64) -> ()
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (0)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c, %s : memref<32x64xf32>, memref<1xf32>) outs(%y : memref<32x64xbf16>) {
  ^bb0(%in: f32, %sc: f32, %out: bf16):
    %d = arith.mulf %in, %sc : f32
    %r = arith.truncf %d : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// f16 operands rounded back to f16, after a zero fill.
// CHECK-LABEL: func.func @f16_rounded(
// CHECK:         memref.alloc() : memref<4x16xf16>
// CHECK-NOT:     linalg.fill
// CHECK:         call @dsrt_cuda_matmul_f16_to_f16(
func.func @f16_rounded(%a: memref<4x8xf16>, %b: memref<8x16xf16>, %d: memref<4x16xf16>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf16>, memref<8x16xf16>) outs(%c : memref<4x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<4x16xf32>) outs(%d : memref<4x16xf16>) {
  ^bb0(%in: f32, %out: f16):
    %r = arith.truncf %in : f32 to f16
    linalg.yield %r : f16
  }
  return
}

// -----

// The product stays f32 when any reader needs more than its rounding: a
// reader that uses the f32 value, one that rounds to another type, one
// that is not a linalg.generic, an output that is an argument (the
// caller's buffer), a non-default rounding mode.
// CHECK-LABEL: func.func @f32_needed(
// CHECK-COUNT-5: call @dsrt_cuda_matmul_bf16(
// CHECK-NOT:     call @dsrt_cuda_matmul_bf16_to_bf16
#id = affine_map<(i, j) -> (i, j)>
func.func @f32_needed(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %arg: memref<4x16xf32>,
                      %o: memref<4x16xf32>, %h: memref<4x16xf16>, %t: memref<16x4xf32>) {
  %c0 = memref.alloc() : memref<4x16xf32>
  linalg.matmul {ds.gemm_overwrite} ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c0 : memref<4x16xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c0 : memref<4x16xf32>) outs(%o : memref<4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.truncf %in : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    %s = arith.addf %e, %in : f32
    linalg.yield %s : f32
  }
  %c1 = memref.alloc() : memref<4x16xf32>
  linalg.matmul {ds.gemm_overwrite} ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c1 : memref<4x16xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c1 : memref<4x16xf32>) outs(%h : memref<4x16xf16>) {
  ^bb0(%in: f32, %out: f16):
    %r = arith.truncf %in : f32 to f16
    linalg.yield %r : f16
  }
  %c2 = memref.alloc() : memref<4x16xf32>
  linalg.matmul {ds.gemm_overwrite} ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c2 : memref<4x16xf32>)
  linalg.transpose ins(%c2 : memref<4x16xf32>) outs(%t : memref<16x4xf32>) permutation = [1, 0]
  linalg.matmul {ds.gemm_overwrite} ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%arg : memref<4x16xf32>)
  %c3 = memref.alloc() : memref<4x16xf32>
  linalg.matmul {ds.gemm_overwrite} ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c3 : memref<4x16xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c3 : memref<4x16xf32>) outs(%o : memref<4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.truncf %in to_nearest_away : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    linalg.yield %e : f32
  }
  return
}

// -----

// An FP8 product every reader multiplies by one dequantisation scale
// (computed in the payloads from rank-0 buffers: 1 / (sa * sb)) and rounds
// to bf16: the scale is computed once into a rank-0 buffer before the GEMM
// and handed to cuBLASLt as the A scale pointer; the product is written
// in bf16 and the readers' multiply and truncf fold away.
// CHECK-LABEL: func.func @fp8_scaled(
// CHECK-SAME:    %[[SA:[a-z0-9]+]]: memref<f32>, %[[SB:[a-z0-9]+]]: memref<f32>
// CHECK:         %[[C:.*]] = memref.alloc() : memref<32x64xbf16>
// CHECK:         %[[S:.*]] = memref.alloc() : memref<f32>
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = []} ins(%[[SA]], %[[SB]] : memref<f32>, memref<f32>) outs(%[[S]] : memref<f32>)
// CHECK:           %[[P:.*]] = arith.mulf
// CHECK:           %[[Q:.*]] = arith.divf %{{.*}}, %[[P]] : f32
// CHECK:           linalg.yield %[[Q]] : f32
// CHECK:         %[[A:.*]] = memref.extract_aligned_pointer_as_index %[[S]]
// CHECK:         %[[I:.*]] = arith.index_cast %[[A]] : index to i64
// CHECK:         %[[PTR:.*]] = llvm.inttoptr %[[I]] : i64 to !llvm.ptr
// CHECK:         call @dsrt_cuda_matmul_f8_to_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[PTR]], %{{.*}}) : (memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
// CHECK:         linalg.generic {{.*}} ins(%[[C]], %{{.*}}, %{{.*}}, %{{.*}} : memref<32x64xbf16>, memref<f32>, memref<f32>, memref<64xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: bf16, %{{.*}}: f32, %{{.*}}: f32, %[[BIAS:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[E:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT:      arith.addf %[[E]], %[[BIAS]] : f32
// CHECK-NEXT:      linalg.yield
#id2 = affine_map<(i, j) -> (i, j)>
#scalar = affine_map<(i, j) -> ()>
#row = affine_map<(i, j) -> (j)>
func.func @fp8_scaled(%a: memref<32x16xf8E4M3FN>, %b: memref<64x16xf8E4M3FN>,
                      %sa: memref<f32>, %sb: memref<f32>, %bias: memref<64xf32>,
                      %y: memref<32x64xf32>) {
  %c = memref.alloc() : memref<32x64xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%a, %b : memref<32x16xf8E4M3FN>, memref<64x16xf8E4M3FN>) outs(%c : memref<32x64xf32>)
  linalg.generic {indexing_maps = [#id2, #scalar, #scalar, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c, %sa, %sb, %bias : memref<32x64xf32>, memref<f32>, memref<f32>, memref<64xf32>) outs(%y : memref<32x64xf32>) {
  ^bb0(%in: f32, %s1: f32, %s2: f32, %bi: f32, %out: f32):
    %one = arith.constant 1.0 : f32
    %p = arith.mulf %s1, %s2 : f32
    %q = arith.divf %one, %p : f32
    %d = arith.mulf %in, %q : f32
    %r = arith.truncf %d : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    %o = arith.addf %e, %bi : f32
    linalg.yield %o : f32
  }
  return
}

// -----

// The scale stays in the readers when it cannot be computed before the
// GEMM: a scale buffer written between the GEMM and its reader, two
// readers with different scales, a scale that varies along the rows.
// CHECK-LABEL: func.func @fp8_scale_stays(
// CHECK-COUNT-3: call @dsrt_cuda_matmul_f8(
// CHECK-NOT:     _to_bf16
#id2b = affine_map<(i, j) -> (i, j)>
#scalarb = affine_map<(i, j) -> ()>
#rowb = affine_map<(i, j) -> (i)>
func.func @fp8_scale_stays(%a: memref<32x16xf8E4M3FN>, %b: memref<64x16xf8E4M3FN>,
                           %sa: memref<f32>, %sb: memref<f32>, %rows: memref<32xf32>,
                           %y: memref<32x64xbf16>, %z: memref<32x64xbf16>) {
  %cst = arith.constant 2.0 : f32
  %c0 = memref.alloc() : memref<32x64xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%a, %b : memref<32x16xf8E4M3FN>, memref<64x16xf8E4M3FN>) outs(%c0 : memref<32x64xf32>)
  linalg.fill ins(%cst : f32) outs(%sa : memref<f32>)
  linalg.generic {indexing_maps = [#id2b, #scalarb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c0, %sa : memref<32x64xf32>, memref<f32>) outs(%y : memref<32x64xbf16>) {
  ^bb0(%in: f32, %s: f32, %out: bf16):
    %d = arith.mulf %in, %s : f32
    %r = arith.truncf %d : f32 to bf16
    linalg.yield %r : bf16
  }
  %c1 = memref.alloc() : memref<32x64xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%a, %b : memref<32x16xf8E4M3FN>, memref<64x16xf8E4M3FN>) outs(%c1 : memref<32x64xf32>)
  linalg.generic {indexing_maps = [#id2b, #scalarb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c1, %sa : memref<32x64xf32>, memref<f32>) outs(%y : memref<32x64xbf16>) {
  ^bb0(%in: f32, %s: f32, %out: bf16):
    %d = arith.mulf %in, %s : f32
    %r = arith.truncf %d : f32 to bf16
    linalg.yield %r : bf16
  }
  linalg.generic {indexing_maps = [#id2b, #scalarb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c1, %sb : memref<32x64xf32>, memref<f32>) outs(%z : memref<32x64xbf16>) {
  ^bb0(%in: f32, %s: f32, %out: bf16):
    %d = arith.mulf %in, %s : f32
    %r = arith.truncf %d : f32 to bf16
    linalg.yield %r : bf16
  }
  %c2 = memref.alloc() : memref<32x64xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%a, %b : memref<32x16xf8E4M3FN>, memref<64x16xf8E4M3FN>) outs(%c2 : memref<32x64xf32>)
  linalg.generic {indexing_maps = [#id2b, #rowb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c2, %rows : memref<32x64xf32>, memref<32xf32>) outs(%y : memref<32x64xbf16>) {
  ^bb0(%in: f32, %s: f32, %out: bf16):
    %d = arith.mulf %in, %s : f32
    %r = arith.truncf %d : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

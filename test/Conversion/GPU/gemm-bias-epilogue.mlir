// RUN: ds-opt %s --split-input-file --convert-linalg-to-ds-runtime=target=cuda | FileCheck %s

// A linear layer kept in bf16 (its storage rounding after the bias, as
// autocast's F.linear rounds): every reader adds the bias of the product's
// column, itself rounded to bf16, then rounds. cuBLASLt does both in its
// epilogue: the bias is computed into a bf16 vector before the GEMM (the
// parameter's view, which bufferization put after the GEMM, moves before
// it), the product is written in bf16, and the readers' add and truncf fold
// away. Here the reader sees the product through a reshape to [2, 4, 16]
// and the bias as [1, 1, 16].
// CHECK:       #[[BMAP:map[0-9]*]] = affine_map<(d0) -> (0, 0, d0)>
// CHECK-LABEL: func.func @bf16_bias(
// CHECK-SAME:    %[[BIAS:[a-z0-9]+]]: memref<16xf32>
// CHECK:         %[[C:.*]] = memref.alloc() : memref<8x16xbf16>
// CHECK:         %[[BV:.*]] = memref.expand_shape %[[BIAS]] {{.*}} into memref<1x1x16xf32>
// CHECK:         %[[B:.*]] = memref.alloc() : memref<16xbf16>
// CHECK:         linalg.generic {indexing_maps = [#[[BMAP]], #{{.*}}], iterator_types = ["parallel"]} ins(%[[BV]] : memref<1x1x16xf32>) outs(%[[B]] : memref<16xbf16>)
// CHECK-NEXT:    ^bb0(%[[BI:.*]]: f32, %{{.*}}: bf16):
// CHECK-NEXT:      %[[BR:.*]] = arith.truncf %[[BI]] : f32 to bf16
// CHECK-NEXT:      linalg.yield %[[BR]] : bf16
// CHECK:         %[[B1:.*]] = memref.cast %[[B]] : memref<16xbf16> to memref<?xbf16, strided<[?], offset: ?>>
// CHECK:         call @dsrt_cuda_matmul_bf16_to_bf16_bias(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[B1]]) : (memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, i64, i64, memref<?xbf16, strided<[?], offset: ?>>) -> ()
// CHECK:         %[[V:.*]] = memref.expand_shape %[[C]] {{.*}} into memref<2x4x16xbf16>
// CHECK:         linalg.generic {{.*}} ins(%[[V]], %[[BV]] : memref<2x4x16xbf16>, memref<1x1x16xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:[a-z0-9_]+]]: bf16, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[E:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT:      %[[G:.*]] = math.tanh %[[E]] : f32
// CHECK-NEXT:      linalg.yield %[[G]] : f32
#id3 = affine_map<(b, t, n) -> (b, t, n)>
#col3 = affine_map<(b, t, n) -> (0, 0, n)>
func.func @bf16_bias(%x: memref<8x32xbf16>, %w: memref<16x32xbf16>,
                     %bias: memref<16xf32>, %y: memref<2x4x16xf32>) {
  %c = memref.alloc() : memref<8x16xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%x, %w : memref<8x32xbf16>, memref<16x32xbf16>) outs(%c : memref<8x16xf32>)
  %v = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 16] : memref<8x16xf32> into memref<2x4x16xf32>
  %bv = memref.expand_shape %bias [[0, 1, 2]] output_shape [1, 1, 16] : memref<16xf32> into memref<1x1x16xf32>
  linalg.generic {indexing_maps = [#id3, #col3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v, %bv : memref<2x4x16xf32>, memref<1x1x16xf32>) outs(%y : memref<2x4x16xf32>) {
  ^bb0(%in: f32, %bi: f32, %out: f32):
    %br = arith.truncf %bi : f32 to bf16
    %be = arith.extf %br : bf16 to f32
    %s = arith.addf %in, %be : f32
    %r = arith.truncf %s : f32 to bf16
    %e = arith.extf %r : bf16 to f32
    %g = math.tanh %e : f32
    linalg.yield %g : f32
  }
  return
}

// -----

// FP8: the dequantisation scale, then the bias (a bf16 buffer), then the
// rounding: cuBLASLt's scale pointer and bias epilogue, one call.
// CHECK-LABEL: func.func @fp8_scale_and_bias(
// CHECK-SAME:    %[[BIAS:[a-z0-9]+]]: memref<64xbf16>
// CHECK:         %[[S:.*]] = memref.alloc() : memref<f32>
// CHECK:         %[[B:.*]] = memref.alloc() : memref<64xbf16>
// CHECK:         linalg.generic {{.*}} ins(%[[BIAS]] : memref<64xbf16>) outs(%[[B]] : memref<64xbf16>)
// CHECK:         call @dsrt_cuda_matmul_f8_to_bf16_bias({{.*}}) : (memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, memref<?xbf16, strided<[?], offset: ?>>) -> ()
// CHECK:         linalg.generic
// CHECK-NEXT:    ^bb0(%[[IN:[a-z0-9_]+]]: bf16, %{{.*}}: f32, %{{.*}}: bf16, %{{.*}}: bf16):
// CHECK-NEXT:      linalg.yield %[[IN]] : bf16
#id2 = affine_map<(i, j) -> (i, j)>
#scalar = affine_map<(i, j) -> ()>
#col = affine_map<(i, j) -> (j)>
func.func @fp8_scale_and_bias(%a: memref<32x16xf8E4M3FN>, %b: memref<64x16xf8E4M3FN>,
                              %sa: memref<f32>, %bias: memref<64xbf16>,
                              %y: memref<32x64xbf16>) {
  %c = memref.alloc() : memref<32x64xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%a, %b : memref<32x16xf8E4M3FN>, memref<64x16xf8E4M3FN>) outs(%c : memref<32x64xf32>)
  linalg.generic {indexing_maps = [#id2, #scalar, #col, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c, %sa, %bias : memref<32x64xf32>, memref<f32>, memref<64xbf16>) outs(%y : memref<32x64xbf16>) {
  ^bb0(%in: f32, %s: f32, %bi: bf16, %out: bf16):
    %d = arith.mulf %in, %s : f32
    %be = arith.extf %bi : bf16 to f32
    %o = arith.addf %d, %be : f32
    %r = arith.truncf %o : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// The bias stays in the readers (the product f32, or only rounded) when
// the epilogue could not add it: a vector along the rows, a bias not
// rounded to the product's type, a reshape that splits the columns, two
// readers with different biases, a bias buffer written after the GEMM.
// CHECK-LABEL: func.func @bias_stays(
// CHECK-COUNT-5: call @dsrt_cuda_matmul_bf16(
// CHECK-NOT:     _bias
#id2b = affine_map<(i, j) -> (i, j)>
#rowb = affine_map<(i, j) -> (i)>
#colb = affine_map<(i, j) -> (j)>
#id3b = affine_map<(i, j, k) -> (i, j, k)>
#col3b = affine_map<(i, j, k) -> (k)>
func.func @bias_stays(%x: memref<8x32xbf16>, %w: memref<16x32xbf16>,
                      %rows: memref<8xbf16>, %cols: memref<16xbf16>,
                      %cols32: memref<16xf32>, %other: memref<16xbf16>,
                      %y: memref<8x16xbf16>, %z: memref<8x4x4xbf16>,
                      %quarter: memref<4xbf16>) {
  %cst = arith.constant 1.0 : bf16
  // Along the rows.
  %c0 = memref.alloc() : memref<8x16xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%x, %w : memref<8x32xbf16>, memref<16x32xbf16>) outs(%c0 : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#id2b, #rowb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c0, %rows : memref<8x16xf32>, memref<8xbf16>) outs(%y : memref<8x16xbf16>) {
  ^bb0(%in: f32, %bi: bf16, %out: bf16):
    %be = arith.extf %bi : bf16 to f32
    %o = arith.addf %in, %be : f32
    %r = arith.truncf %o : f32 to bf16
    linalg.yield %r : bf16
  }
  // An f32 bias.
  %c1 = memref.alloc() : memref<8x16xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%x, %w : memref<8x32xbf16>, memref<16x32xbf16>) outs(%c1 : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#id2b, #colb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c1, %cols32 : memref<8x16xf32>, memref<16xf32>) outs(%y : memref<8x16xbf16>) {
  ^bb0(%in: f32, %bi: f32, %out: bf16):
    %o = arith.addf %in, %bi : f32
    %r = arith.truncf %o : f32 to bf16
    linalg.yield %r : bf16
  }
  // The columns split by a reshape: the reader's last loop is not N.
  %c2 = memref.alloc() : memref<8x16xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%x, %w : memref<8x32xbf16>, memref<16x32xbf16>) outs(%c2 : memref<8x16xf32>)
  %v2 = memref.expand_shape %c2 [[0], [1, 2]] output_shape [8, 4, 4] : memref<8x16xf32> into memref<8x4x4xf32>
  linalg.generic {indexing_maps = [#id3b, #col3b, #id3b], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v2, %quarter : memref<8x4x4xf32>, memref<4xbf16>) outs(%z : memref<8x4x4xbf16>) {
  ^bb0(%in: f32, %bi: bf16, %out: bf16):
    %be = arith.extf %bi : bf16 to f32
    %o = arith.addf %in, %be : f32
    %r = arith.truncf %o : f32 to bf16
    linalg.yield %r : bf16
  }
  // Two readers, two biases.
  %c3 = memref.alloc() : memref<8x16xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%x, %w : memref<8x32xbf16>, memref<16x32xbf16>) outs(%c3 : memref<8x16xf32>)
  linalg.generic {indexing_maps = [#id2b, #colb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c3, %cols : memref<8x16xf32>, memref<16xbf16>) outs(%y : memref<8x16xbf16>) {
  ^bb0(%in: f32, %bi: bf16, %out: bf16):
    %be = arith.extf %bi : bf16 to f32
    %o = arith.addf %in, %be : f32
    %r = arith.truncf %o : f32 to bf16
    linalg.yield %r : bf16
  }
  linalg.generic {indexing_maps = [#id2b, #colb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c3, %other : memref<8x16xf32>, memref<16xbf16>) outs(%y : memref<8x16xbf16>) {
  ^bb0(%in: f32, %bi: bf16, %out: bf16):
    %be = arith.extf %bi : bf16 to f32
    %o = arith.addf %in, %be : f32
    %r = arith.truncf %o : f32 to bf16
    linalg.yield %r : bf16
  }
  // The bias written between the GEMM and its reader.
  %c4 = memref.alloc() : memref<8x16xf32>
  linalg.matmul
      indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      {ds.gemm_overwrite} ins(%x, %w : memref<8x32xbf16>, memref<16x32xbf16>) outs(%c4 : memref<8x16xf32>)
  linalg.fill ins(%cst : bf16) outs(%cols : memref<16xbf16>)
  linalg.generic {indexing_maps = [#id2b, #colb, #id2b], iterator_types = ["parallel", "parallel"]}
      ins(%c4, %cols : memref<8x16xf32>, memref<16xbf16>) outs(%y : memref<8x16xbf16>) {
  ^bb0(%in: f32, %bi: bf16, %out: bf16):
    %be = arith.extf %bi : bf16 to f32
    %o = arith.addf %in, %be : f32
    %r = arith.truncf %o : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

// RUN: ds-opt %s --pass-pipeline='builtin.module(func.func(ds-fuse-collapsed-transposes))' --split-input-file | FileCheck %s

// A head merge ([B, H, T, D] to [B, T, H*D]) read only by the bias
// gradient and the FP8 cast-transpose (as the q, k and v gradients are
// under the FP8 policy): both read the unmerged tensor through the
// permuted map over loops expanded through the collapse (H*D as H, D),
// their outputs expanded and collapsed back; the transpose goes, and the
// bias gradient's zeros are a fill of their own shape.
// CHECK-DAG: #[[HEADS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d1, d3)>
// CHECK-DAG: #[[HD:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[T:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d3, d0, d1)>
// CHECK-LABEL: func.func @readers
// CHECK-SAME:    (%[[DQ:.*]]: tensor<2x4x8x16xbf16>, %[[S:.*]]: tensor<f32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[Z:.*]] = linalg.fill {{.*}} -> tensor<4x16xf32>
// CHECK:         %[[DB:.*]] = linalg.generic {indexing_maps = [#[[HEADS]], #[[HD]]], iterator_types = ["reduction", "reduction", "parallel", "parallel"]}
// CHECK-SAME:      ins(%[[DQ]] : tensor<2x4x8x16xbf16>) outs(%[[Z]] : tensor<4x16xf32>)
// CHECK:         tensor.collapse_shape %[[DB]] {{\[}}[0, 1]] : tensor<4x16xf32> into tensor<64xf32>
// CHECK:         %[[Q:.*]]:2 = linalg.generic {indexing_maps = [#[[HEADS]], #{{.*}}, #[[ID]], #[[T]]]
// CHECK-SAME:      ins(%[[DQ]], %[[S]] :
// CHECK-SAME:      outs({{.*}} : tensor<2x8x4x16xf8E5M2>, tensor<4x16x2x8xf8E5M2>)
// CHECK:         tensor.collapse_shape %[[Q]]#0 {{\[}}[0], [1], [2, 3]]
// CHECK:         tensor.collapse_shape %[[Q]]#1 {{\[}}[0, 1], [2], [3]]
// CHECK-NOT:     linalg.transpose
#id3 = affine_map<(b, t, c) -> (b, t, c)>
#col3 = affine_map<(b, t, c) -> (c)>
#all3 = affine_map<(b, t, c) -> ()>
#tr3 = affine_map<(b, t, c) -> (c, b, t)>
func.func @readers(%dq: tensor<2x4x8x16xbf16>, %s: tensor<f32>) -> (tensor<64xf32>, tensor<2x8x64xf8E5M2>, tensor<64x2x8xf8E5M2>) {
  %e = tensor.empty() : tensor<2x8x4x16xbf16>
  %m = linalg.transpose ins(%dq : tensor<2x4x8x16xbf16>) outs(%e : tensor<2x8x4x16xbf16>) permutation = [0, 2, 1, 3]
  %v = tensor.collapse_shape %m [[0], [1], [2, 3]] : tensor<2x8x4x16xbf16> into tensor<2x8x64xbf16>
  %zero = arith.constant 0.0 : f32
  %ce = tensor.empty() : tensor<64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ce : tensor<64xf32>) -> tensor<64xf32>
  %db = linalg.generic {indexing_maps = [#id3, #col3], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%v : tensor<2x8x64xbf16>) outs(%z : tensor<64xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %x = arith.extf %a : bf16 to f32
    %r = arith.addf %o, %x : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %qe = tensor.empty() : tensor<2x8x64xf8E5M2>
  %te = tensor.empty() : tensor<64x2x8xf8E5M2>
  %q:2 = linalg.generic {indexing_maps = [#id3, #all3, #id3, #tr3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v, %s : tensor<2x8x64xbf16>, tensor<f32>) outs(%qe, %te : tensor<2x8x64xf8E5M2>, tensor<64x2x8xf8E5M2>) {
  ^bb0(%a: bf16, %sc: f32, %o: f8E5M2, %ot: f8E5M2):
    %x = arith.extf %a : bf16 to f32
    %y = arith.mulf %x, %sc : f32
    %t = arith.truncf %y : f32 to f8E5M2
    linalg.yield %t, %t : f8E5M2, f8E5M2
  } -> (tensor<2x8x64xf8E5M2>, tensor<64x2x8xf8E5M2>)
  return %db, %q#0, %q#1 : tensor<64xf32>, tensor<2x8x64xf8E5M2>, tensor<64x2x8xf8E5M2>
}

// -----

// Under BF16 a GEMM reads the merged tensor (the projection's gradient
// GEMMs): the copy stays, and so do its other readers.
// CHECK-LABEL: func.func @gemm_reader
// CHECK:         %[[M:.*]] = linalg.transpose
// CHECK:         %[[V:.*]] = tensor.collapse_shape %[[M]]
// CHECK:         linalg.matmul ins(%[[V]]
// CHECK:         linalg.generic {{.*}} ins(%[[V]] : tensor<16x64xbf16>)
func.func @gemm_reader(%dq: tensor<2x4x8x16xbf16>, %w: tensor<64x32xbf16>) -> (tensor<16x32xf32>, tensor<64xf32>) {
  %e = tensor.empty() : tensor<2x8x4x16xbf16>
  %m = linalg.transpose ins(%dq : tensor<2x4x8x16xbf16>) outs(%e : tensor<2x8x4x16xbf16>) permutation = [0, 2, 1, 3]
  %v = tensor.collapse_shape %m [[0, 1], [2, 3]] : tensor<2x8x4x16xbf16> into tensor<16x64xbf16>
  %zero = arith.constant 0.0 : f32
  %ge = tensor.empty() : tensor<16x32xf32>
  %gz = linalg.fill ins(%zero : f32) outs(%ge : tensor<16x32xf32>) -> tensor<16x32xf32>
  %g = linalg.matmul ins(%v, %w : tensor<16x64xbf16>, tensor<64x32xbf16>) outs(%gz : tensor<16x32xf32>) -> tensor<16x32xf32>
  %ce = tensor.empty() : tensor<64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ce : tensor<64xf32>) -> tensor<64xf32>
  %db = linalg.generic {indexing_maps = [affine_map<(t, c) -> (t, c)>, affine_map<(t, c) -> (c)>], iterator_types = ["reduction", "parallel"]}
      ins(%v : tensor<16x64xbf16>) outs(%z : tensor<64xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %x = arith.extf %a : bf16 to f32
    %r = arith.addf %o, %x : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  return %g, %db : tensor<16x32xf32>, tensor<64xf32>
}

// -----

// A transpose that moves the innermost dimension is a cast-transpose's
// business (ds-fuse-transposes), not this pass's.
// CHECK-LABEL: func.func @inner_moves
// CHECK:         linalg.transpose
func.func @inner_moves(%x: tensor<4x8x16xbf16>) -> tensor<64xf32> {
  %e = tensor.empty() : tensor<4x16x8xbf16>
  %m = linalg.transpose ins(%x : tensor<4x8x16xbf16>) outs(%e : tensor<4x16x8xbf16>) permutation = [0, 2, 1]
  %v = tensor.collapse_shape %m [[0, 1], [2]] : tensor<4x16x8xbf16> into tensor<64x8xbf16>
  %zero = arith.constant 0.0 : f32
  %ce = tensor.empty() : tensor<64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ce : tensor<64xf32>) -> tensor<64xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>], iterator_types = ["parallel", "reduction"]}
      ins(%v : tensor<64x8xbf16>) outs(%z : tensor<64xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %x1 = arith.extf %a : bf16 to f32
    %r = arith.addf %o, %x1 : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  return %s : tensor<64xf32>
}

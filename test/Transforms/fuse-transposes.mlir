// RUN: ds-opt %s --pass-pipeline='builtin.module(func.func(ds-fuse-transposes))' --split-input-file | FileCheck %s

// A scaled FP8 cast whose result a GEMM reads as is and, transposed, as
// another GEMM's TN operand: the cast writes both (Transformer Engine's
// cast-transpose), through the swapped map; the transpose goes.
// CHECK: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK: #[[SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK: #[[T:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func.func @weight
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<32x64xf8E4M3FN>
// CHECK:         %[[Q:.*]]:2 = linalg.generic {indexing_maps = [#[[ID]], #[[SCALAR]], #[[ID]], #[[T]]]
// CHECK-SAME:      outs(%{{.*}}, %[[E]] : tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>)
// CHECK:           %[[C:.*]] = arith.truncf
// CHECK-NEXT:      linalg.yield %[[C]], %[[C]]
// CHECK-NOT:     linalg.transpose
// CHECK:         return %[[Q]]#0, %[[Q]]#1
#id = affine_map<(i, j) -> (i, j)>
#sc = affine_map<(i, j) -> ()>
func.func @weight(%w: tensor<64x32xf32>, %s: tensor<f32>) -> (tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>) {
  %e = tensor.empty() : tensor<64x32xf8E4M3FN>
  %q = linalg.generic {indexing_maps = [#id, #sc, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w, %s : tensor<64x32xf32>, tensor<f32>) outs(%e : tensor<64x32xf8E4M3FN>) {
  ^bb0(%a: f32, %b: f32, %o: f8E4M3FN):
    %m = arith.mulf %a, %b : f32
    %t = arith.truncf %m : f32 to f8E4M3FN
    linalg.yield %t : f8E4M3FN
  } -> tensor<64x32xf8E4M3FN>
  %et = tensor.empty() : tensor<32x64xf8E4M3FN>
  %qt = linalg.transpose ins(%q : tensor<64x32xf8E4M3FN>) outs(%et : tensor<32x64xf8E4M3FN>) permutation = [1, 0]
  return %q, %qt : tensor<64x32xf8E4M3FN>, tensor<32x64xf8E4M3FN>
}

// -----

// A [B, T, K] input transposed as [K, B*T] (the weight gradient's TN
// operand): the copy is [K, B, T] in the cast's loops, collapsed after.
// CHECK: #[[KBT:.*]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// CHECK-LABEL: func.func @input
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<16x2x8xf8E4M3FN>
// CHECK:         %[[Q:.*]]:2 = linalg.generic {{.*}}#[[KBT]]]
// CHECK:         %[[C:.*]] = tensor.collapse_shape %[[Q]]#1 {{\[\[}}0], [1, 2]] : tensor<16x2x8xf8E4M3FN> into tensor<16x16xf8E4M3FN>
// CHECK-NOT:     linalg.transpose
// CHECK:         return %[[Q]]#0, %[[C]]
#id3 = affine_map<(b, t, k) -> (b, t, k)>
func.func @input(%x: tensor<2x8x16xf32>) -> (tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>) {
  %e = tensor.empty() : tensor<2x8x16xf8E4M3FN>
  %q = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x8x16xf32>) outs(%e : tensor<2x8x16xf8E4M3FN>) {
  ^bb0(%a: f32, %o: f8E4M3FN):
    %t = arith.truncf %a : f32 to f8E4M3FN
    linalg.yield %t : f8E4M3FN
  } -> tensor<2x8x16xf8E4M3FN>
  %c = tensor.collapse_shape %q [[0, 1], [2]] : tensor<2x8x16xf8E4M3FN> into tensor<16x16xf8E4M3FN>
  %et = tensor.empty() : tensor<16x16xf8E4M3FN>
  %qt = linalg.transpose ins(%c : tensor<16x16xf8E4M3FN>) outs(%et : tensor<16x16xf8E4M3FN>) permutation = [1, 0]
  return %q, %qt : tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN>
}

// -----

// Left alone: a permutation that moves more than the innermost two
// dimensions, a collapse that merges the innermost one, a producer that
// reads its own output, and a transpose of a function argument.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-4: linalg.transpose
#id3 = affine_map<(b, t, k) -> (b, t, k)>
#id = affine_map<(i, j) -> (i, j)>
func.func @left_alone(%x: tensor<2x8x16xf32>, %y: tensor<8x16xf32>)
    -> (tensor<16x2x8xf32>, tensor<128x2xf32>, tensor<16x8xf32>, tensor<16x8xf32>) {
  %e = tensor.empty() : tensor<2x8x16xf32>
  %n = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x8x16xf32>) outs(%e : tensor<2x8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.negf %a : f32
    linalg.yield %t : f32
  } -> tensor<2x8x16xf32>
  %e1 = tensor.empty() : tensor<16x2x8xf32>
  %t1 = linalg.transpose ins(%n : tensor<2x8x16xf32>) outs(%e1 : tensor<16x2x8xf32>) permutation = [2, 0, 1]
  %c = tensor.collapse_shape %n [[0], [1, 2]] : tensor<2x8x16xf32> into tensor<2x128xf32>
  %e2 = tensor.empty() : tensor<128x2xf32>
  %t2 = linalg.transpose ins(%c : tensor<2x128xf32>) outs(%e2 : tensor<128x2xf32>) permutation = [1, 0]
  %acc = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<8x16xf32>) outs(%y : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<8x16xf32>
  %e3 = tensor.empty() : tensor<16x8xf32>
  %t3 = linalg.transpose ins(%acc : tensor<8x16xf32>) outs(%e3 : tensor<16x8xf32>) permutation = [1, 0]
  %t4 = linalg.transpose ins(%y : tensor<8x16xf32>) outs(%e3 : tensor<16x8xf32>) permutation = [1, 0]
  return %t1, %t2, %t3, %t4 : tensor<16x2x8xf32>, tensor<128x2xf32>, tensor<16x8xf32>, tensor<16x8xf32>
}

// RUN: ds-opt %s --pass-pipeline="builtin.module(func.func(ds-fuse-elementwise))" | FileCheck %s

// Elementwise chains fuse; nothing fuses into (or out of) a matmul, which
// must stay a named op for the library GEMM.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @chain_around_matmul
func.func @chain_around_matmul(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>) -> tensor<4x5xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  // Two elementwise ops on the lhs become one generic...
  // CHECK: %[[LHS:.*]] = linalg.generic
  // CHECK: math.exp
  // CHECK: arith.mulf
  // CHECK-NOT: linalg.generic
  // ...which still feeds a named matmul.
  // CHECK: linalg.matmul ins(%[[LHS]], %{{.*}} : tensor<4x8xf32>, tensor<8x5xf32>)
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  } -> tensor<4x8xf32>
  %z = arith.constant 0.0 : f32
  %c0 = tensor.empty() : tensor<4x5xf32>
  %c = linalg.fill ins(%z : f32) outs(%c0 : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = linalg.matmul ins(%y, %b : tensor<4x8xf32>, tensor<8x5xf32>) outs(%c : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %r : tensor<4x5xf32>
}

// A producer whose body loops (the GPU path's embedding-gradient walk) is
// not fused into its consumer, here a reduction: the reduction keeps a
// straight-line body, which the GPU path needs to run it in parallel.
// CHECK-LABEL: func.func @loop_producer
// CHECK: %[[WALK:.*]] = linalg.generic
// CHECK: scf.while
// CHECK: linalg.generic {{.*}}iterator_types = ["reduction"]{{.*}} ins(%[[WALK]]
// CHECK-NOT: scf.while
func.func @loop_producer(%first: tensor<8xi64>, %vals: tensor<8xf32>) -> tensor<f32> {
  %e = tensor.empty() : tensor<8xf32>
  %walked = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%first : tensor<8xi64>) outs(%e : tensor<8xf32>) {
  ^bb0(%p0: i64, %out: f32):
    %zero = arith.constant 0.0 : f32
    %end = arith.constant 8 : i64
    %r:2 = scf.while (%p = %p0, %acc = %zero) : (i64, f32) -> (i64, f32) {
      %more = arith.cmpi slt, %p, %end : i64
      scf.condition(%more) %p, %acc : i64, f32
    } do {
    ^bb0(%p: i64, %acc: f32):
      %i = arith.index_cast %p : i64 to index
      %v = tensor.extract %vals[%i] : tensor<8xf32>
      %s = arith.addf %acc, %v : f32
      %one = arith.constant 1 : i64
      %n = arith.addi %p, %one : i64
      scf.yield %n, %s : i64, f32
    }
    linalg.yield %r#1 : f32
  } -> tensor<8xf32>
  %z = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<f32>
  %acc0 = linalg.fill ins(%z : f32) outs(%init : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%walked : tensor<8xf32>) outs(%acc0 : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %out, %sq : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %sum : tensor<f32>
}

// Rounding after a transpose (and a reshape) rounds before it: the
// transpose moves bf16, and the rounding fuses into the add that produced
// its input, so the f32 tensor is never kept. A transpose with another
// user keeps its place (it would be computed twice).
// CHECK-LABEL: func.func @narrow_before_transpose
// CHECK:      %[[N:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x4x3x5xf32>, tensor<2x4x3x5xf32>) outs(%{{.*}} : tensor<2x4x3x5xbf16>)
// CHECK:        arith.addf
// CHECK-NEXT:   arith.truncf {{.*}} : f32 to bf16
// CHECK:      %[[T:.*]] = linalg.transpose ins(%[[N]] : tensor<2x4x3x5xbf16>) outs(%{{.*}} : tensor<2x3x4x5xbf16>) permutation = [0, 2, 1, 3]
// CHECK:      %[[R:.*]] = tensor.collapse_shape %[[T]] {{.*}} into tensor<2x3x20xbf16>
// CHECK:      linalg.transpose ins(%{{.*}} : tensor<2x4x3x5xf32>) outs(%{{.*}} : tensor<2x3x4x5xf32>)
// CHECK:      return %[[R]], %{{.*}}, %{{.*}}
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @narrow_before_transpose(%a: tensor<2x4x3x5xf32>, %b: tensor<2x4x3x5xf32>)
    -> (tensor<2x3x20xbf16>, tensor<2x3x4x5xbf16>, tensor<2x3x4x5xf32>) {
  %e = tensor.empty() : tensor<2x4x3x5xf32>
  %s = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<2x4x3x5xf32>, tensor<2x4x3x5xf32>) outs(%e : tensor<2x4x3x5xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %0 = arith.addf %x, %y : f32
    linalg.yield %0 : f32
  } -> tensor<2x4x3x5xf32>
  %te = tensor.empty() : tensor<2x3x4x5xf32>
  %t = linalg.transpose ins(%s : tensor<2x4x3x5xf32>) outs(%te : tensor<2x3x4x5xf32>) permutation = [0, 2, 1, 3]
  %v = tensor.collapse_shape %t [[0], [1], [2, 3]] : tensor<2x3x4x5xf32> into tensor<2x3x20xf32>
  %ne = tensor.empty() : tensor<2x3x20xbf16>
  %r = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v : tensor<2x3x20xf32>) outs(%ne : tensor<2x3x20xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x3x20xbf16>
  // The transpose of %a is also returned in f32: it stays.
  %t2 = linalg.transpose ins(%a : tensor<2x4x3x5xf32>) outs(%te : tensor<2x3x4x5xf32>) permutation = [0, 2, 1, 3]
  %ne2 = tensor.empty() : tensor<2x3x4x5xbf16>
  %r2 = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%t2 : tensor<2x3x4x5xf32>) outs(%ne2 : tensor<2x3x4x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x3x4x5xbf16>
  return %r, %r2, %t2 : tensor<2x3x20xbf16>, tensor<2x3x4x5xbf16>, tensor<2x3x4x5xf32>
}

// The head split's order: the bias add's result is reshaped, then
// transposed, then rounded. The rounding moves before the transpose and
// then before the reshape, into the add: the add writes bf16. Where the
// reshaped tensor comes from something other than an elementwise op (a
// matmul), the cast stays after the reshape, free to fuse into its
// consumers instead.
// CHECK-LABEL: func.func @narrow_before_reshape
// CHECK:      %[[N:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x3x20xbf16>)
// CHECK:        arith.addf
// CHECK-NEXT:   arith.truncf {{.*}} : f32 to bf16
// CHECK:      %[[E:.*]] = tensor.expand_shape %[[N]] {{.*}} into tensor<2x3x4x5xbf16>
// CHECK:      %[[T:.*]] = linalg.transpose ins(%[[E]] : tensor<2x3x4x5xbf16>)
// CHECK:      %[[M:.*]] = linalg.matmul
// CHECK:      %[[ME:.*]] = tensor.expand_shape %[[M]] {{.*}} into tensor<2x3x4xf32>
// CHECK:      linalg.generic {{.*}} ins(%[[ME]] : tensor<2x3x4xf32>) outs(%{{.*}} : tensor<2x3x4xbf16>)
// CHECK:      return %[[T]]
func.func @narrow_before_reshape(%a: tensor<2x3x20xf32>, %b: tensor<2x3x20xf32>,
                                 %p: tensor<6x5xf32>, %q: tensor<5x4xf32>)
    -> (tensor<2x4x3x5xbf16>, tensor<2x3x4xbf16>) {
  %e = tensor.empty() : tensor<2x3x20xf32>
  %s = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<2x3x20xf32>, tensor<2x3x20xf32>) outs(%e : tensor<2x3x20xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %0 = arith.addf %x, %y : f32
    linalg.yield %0 : f32
  } -> tensor<2x3x20xf32>
  %h = tensor.expand_shape %s [[0], [1], [2, 3]] output_shape [2, 3, 4, 5] : tensor<2x3x20xf32> into tensor<2x3x4x5xf32>
  %te = tensor.empty() : tensor<2x4x3x5xf32>
  %t = linalg.transpose ins(%h : tensor<2x3x4x5xf32>) outs(%te : tensor<2x4x3x5xf32>) permutation = [0, 2, 1, 3]
  %ne = tensor.empty() : tensor<2x4x3x5xbf16>
  %r = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%t : tensor<2x4x3x5xf32>) outs(%ne : tensor<2x4x3x5xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x4x3x5xbf16>
  %z = arith.constant 0.0 : f32
  %me = tensor.empty() : tensor<6x4xf32>
  %mz = linalg.fill ins(%z : f32) outs(%me : tensor<6x4xf32>) -> tensor<6x4xf32>
  %m = linalg.matmul ins(%p, %q : tensor<6x5xf32>, tensor<5x4xf32>) outs(%mz : tensor<6x4xf32>) -> tensor<6x4xf32>
  %mv = tensor.expand_shape %m [[0, 1], [2]] output_shape [2, 3, 4] : tensor<6x4xf32> into tensor<2x3x4xf32>
  %ce = tensor.empty() : tensor<2x3x4xbf16>
  %c = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mv : tensor<2x3x4xf32>) outs(%ce : tensor<2x3x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x3x4xbf16>
  return %r, %c : tensor<2x4x3x5xbf16>, tensor<2x3x4xbf16>
}

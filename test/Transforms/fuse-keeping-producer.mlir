// RUN: ds-opt %s --pass-pipeline="builtin.module(func.func(ds-fuse-elementwise))" | FileCheck %s

// A producer whose result is kept (returned: a step's new state) and read
// by an elementwise consumer over the same elements is fused into it as one
// op with both results: one pass reads the producer's inputs and writes the
// kept result and the consumer's. AdamW's first moment and the parameter
// update: m' = m + g, p' = p - m'.

#id = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>

// CHECK-LABEL: func.func @moment_and_update
// CHECK-SAME: (%[[P:.*]]: tensor<4x8xf32>, %[[M:.*]]: tensor<4x8xf32>, %[[G:.*]]: tensor<4x8xf32>)
// CHECK:      %[[F:.*]]:2 = linalg.generic {{.*}} ins(%[[P]], %[[M]], %[[G]] : {{.*}}) outs({{.*}}) {
// CHECK:        %[[MN:.*]] = arith.addf
// CHECK:        %[[PN:.*]] = arith.subf %{{.*}}, %[[MN]]
// CHECK:        linalg.yield %[[MN]], %[[PN]]
// CHECK-NOT:  linalg.generic
// CHECK:      return %[[F]]#1, %[[F]]#0
func.func @moment_and_update(%p: tensor<4x8xf32>, %m: tensor<4x8xf32>, %g: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %m2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %g : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %p2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %m2 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %p2, %m2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// The consumer reads the kept result transposed: still one element per
// iteration, so the fused op writes it through the consumer's map.
// CHECK-LABEL: func.func @kept_result_transposed
// CHECK:      %[[F:.*]]:2 = linalg.generic
// CHECK-NOT:  linalg.generic
// CHECK:      return %[[F]]#1, %[[F]]#0
func.func @kept_result_transposed(%p: tensor<8x4xf32>, %m: tensor<4x8xf32>)
    -> (tensor<8x4xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %m2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %et = tensor.empty() : tensor<8x4xf32>
  %p2 = linalg.generic {indexing_maps = [#id, #t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %m2 : tensor<8x4xf32>, tensor<4x8xf32>) outs(%et : tensor<8x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  return %p2, %m2 : tensor<8x4xf32>, tensor<4x8xf32>
}

// A use of the producer before the consumer would keep the producer, and
// the fused op would compute it again: no fusion.
// CHECK-LABEL: func.func @used_before
// CHECK:      linalg.generic
// CHECK:      linalg.reduce
// CHECK:      linalg.generic
func.func @used_before(%p: tensor<4x8xf32>, %m: tensor<4x8xf32>, %g: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %m2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %g : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %r = tensor.empty() : tensor<4xf32>
  %rf = linalg.fill ins(%zero : f32) outs(%r : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.reduce ins(%m2 : tensor<4x8xf32>) outs(%rf : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %t = arith.addf %in, %acc : f32
      linalg.yield %t : f32
    }
  %p2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %m2 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %p2, %m2, %sum : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>
}

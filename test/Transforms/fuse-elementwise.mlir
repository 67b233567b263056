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

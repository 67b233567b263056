// Not a test on its own: plugin.mlir feeds it to the stock mlir-opt.
// RUN: true

func.func @f(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) {
  %0 = ds.matmul %a, %b : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
  return
}

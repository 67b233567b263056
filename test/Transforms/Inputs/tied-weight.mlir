// One weight and one input read by two matmuls (as a layer applied twice to
// one value), for convert-fake-quant.mlir: one fake-quantizer each, so one
// int8 weight.
func.func @step(%w: tensor<8x8xf32> {ds.param = "fc.weight", ds.init = #ds.init<uniform, 0.3>},
                %x: tensor<2x8xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w transpose_rhs : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %a = ds.matmul %x, %w transpose_rhs : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %p = ds.mul %h, %a : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %p [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

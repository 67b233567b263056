// Two linear layers and a loss: the forward convert-fake-quant tests
// fake-quantize and convert.
func.func @step(%w1: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<uniform, 0.5>},
                %w2: tensor<8x3xf32> {ds.param = "fc2.weight", ds.init = #ds.init<uniform, 0.5>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %a = ds.matmul %h, %w2 : tensor<2x8xf32>, tensor<8x3xf32> -> tensor<2x3xf32>
  %l = ds.reduce_sum %a [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

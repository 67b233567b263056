func.func @step(%w: f32 {ds.param = "w", ds.init = #ds.init<zeros>}, %x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

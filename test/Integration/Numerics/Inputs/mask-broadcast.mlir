func.func @step(%x: tensor<6x4xf32> {ds.input = "x"}, %v: tensor<6xf32> {ds.param = "v", ds.init = #ds.init<normal, 1.0>})
    -> (tensor<f32> {ds.loss}, tensor<6x4xf32> {ds.metric = "y"}) attributes {ds.train_step} {
  %c = arith.constant dense<0.0> : tensor<f32>
  %m = ds.compare gt, %v, %c : tensor<6xf32>, tensor<f32> -> tensor<6xi1>
  %mr = ds.reshape %m : tensor<6xi1> -> tensor<6x1xi1>
  %z = arith.constant dense<0.0> : tensor<f32>
  %y = ds.select %mr, %x, %z : tensor<6x1xi1>, tensor<6x4xf32>, tensor<f32> -> tensor<6x4xf32>
  %l = ds.reduce_sum %y [0, 1] : tensor<6x4xf32> -> tensor<f32>
  return %l, %y : tensor<f32>, tensor<6x4xf32>
}

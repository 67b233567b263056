// A parameter whose name is 300 characters: its checkpoint file name
// would be too long.
func.func @f(%w: tensor<4x3xf32> {ds.param = "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp", ds.init = #ds.init<normal, 0.1>},
             %x: tensor<8x3xf32> {ds.input = "x"}, %y: tensor<8xi64> {ds.input = "labels"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %z = ds.matmul %x, %w transpose_rhs : tensor<8x3xf32>, tensor<4x3xf32> -> tensor<8x4xf32>
  %l = ds.cross_entropy %z, %y : tensor<8x4xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

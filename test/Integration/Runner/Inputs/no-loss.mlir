func.func @step(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<4xf32> {ds.metric = "w"}) attributes {ds.train_step} {
  return %w : tensor<4xf32>
}

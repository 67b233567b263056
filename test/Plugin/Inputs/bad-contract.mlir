// RUN: true

func.func @f(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<4xf32> {ds.metric = "m"}) attributes {ds.train_step} {
  return %x : tensor<4xf32>
}

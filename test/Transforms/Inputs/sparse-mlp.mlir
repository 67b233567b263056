// A two-layer MLP whose weights have dims divisible by 8 (block-sparse
// tests): 32 features, 64 hidden units, 16 classes, batch 24.
func.func @step(
    %w1: tensor<64x32xf32> {ds.param = "fc1.weight", ds.init = #ds.init<uniform, 0.2>},
    %b1: tensor<64xf32> {ds.param = "fc1.bias", ds.init = #ds.init<uniform, 0.2>},
    %w2: tensor<16x64xf32> {ds.param = "fc2.weight", ds.init = #ds.init<uniform, 0.15>},
    %x: tensor<24x32xf32> {ds.input = "x"},
    %labels: tensor<24xi64> {ds.input = "labels"})
    -> (tensor<f32> {ds.loss})
    attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<24x32xf32>, tensor<64x32xf32> -> tensor<24x64xf32>
  %bb = ds.reshape %b1 : tensor<64xf32> -> tensor<1x64xf32>
  %hb = ds.add %h, %bb : tensor<24x64xf32>, tensor<1x64xf32> -> tensor<24x64xf32>
  %a = ds.tanh %hb : tensor<24x64xf32>
  %y = ds.matmul %a, %w2 transpose_rhs : tensor<24x64xf32>, tensor<16x64xf32> -> tensor<24x16xf32>
  %loss = ds.cross_entropy %y, %labels : tensor<24x16xf32>, tensor<24xi64> -> tensor<f32>
  return %loss : tensor<f32>
}

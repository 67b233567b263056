// RUN: ds-opt %s --ds-autodiff --verify-diagnostics -o /dev/null

#id = affine_map<(d0) -> (d0)>
// A body op without a derivative rule, reached from the parameter.
func.func @no_rule(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                   %x: tensor<4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error@+2 {{ds-autodiff: cannot be differentiated: its body's 'arith.remf' has no derivative rule}}
  // expected-error@+1 {{ds-autodiff: building the gradient failed}}
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.remf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %l = ds.reduce_sum %y [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

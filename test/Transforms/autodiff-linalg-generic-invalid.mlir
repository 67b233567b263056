// RUN: ds-opt %s --ds-autodiff -split-input-file --verify-diagnostics -o /dev/null

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

// -----

#id = affine_map<(d0) -> (d0)>
// An op with a region that reads the input (its dependence is inside the
// region): refused, not given a zero gradient.
func.func @region(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                  %ct: tensor<i1> {ds.input = "c"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %e = tensor.empty() : tensor<4xf32>
  %c = tensor.extract %ct[] : tensor<i1>
  // expected-error@+2 {{ds-autodiff: cannot be differentiated: its body's 'scf.if' has no derivative rule}}
  // expected-error@+1 {{ds-autodiff: building the gradient failed}}
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = scf.if %c -> f32 {
      %s = math.sin %a : f32
      scf.yield %s : f32
    } else {
      scf.yield %a : f32
    }
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %l = ds.reduce_sum %y [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

#id = affine_map<(d0) -> (d0)>
#row0 = affine_map<(d0) -> (0, d0)>
// Index 0 of a dimension of size 3 is a slice, not a broadcast.
func.func @slice0(%w: tensor<3x4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error@+2 {{ds-autodiff: cannot be differentiated: an input is read at index 0 of a dimension of size 3 (only size-1 broadcasts are differentiated)}}
  // expected-error@+1 {{ds-autodiff: building the gradient failed}}
  %y = linalg.generic {indexing_maps = [#row0, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<3x4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.sin %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %l = ds.reduce_sum %y [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// RUN: ds-opt %s --ds-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// The structure of the backward; numerics are checked against finite
// differences in test/Integration/Gradients.

// CHECK-LABEL: func.func @linear_tanh
// CHECK-SAME: -> (tensor<f32> {ds.loss}, tensor<4x3xf32> {ds.grad = 0 : i64}, tensor<4xf32> {ds.grad = 1 : i64})
// Each differentiated forward op gets a number its backward ops share.
// CHECK: ds.matmul %arg2, %arg0 transpose_rhs {ds.module = "fc", ds.op_id = 3 : i64}
// CHECK: ds.tanh %{{.*}} {ds.op_id = 2 : i64}
// CHECK: %[[SEED:.*]] = arith.constant {ds.seed} dense<1.000000e+00> : tensor<f32>
// The fan-out of %p (into tanh and mul) is summed.
// CHECK: %[[ACC:.*]] = ds.add %{{.*}}, %{{.*}} {ds.op_id = 2 : i64, ds.vjp_of = "ds.tanh"}
// The weight gradient is a transposed matmul of the cotangent and the input,
// numbered like the forward matmul.
// CHECK: %[[GW:.*]] = ds.matmul %[[ACC]], %{{.*}} transpose_lhs {ds.module = "fc", ds.op_id = 3 : i64, ds.vjp_of = "ds.matmul"}
// The input's gradient is not needed and not computed.
// CHECK-NOT: ds.matmul %[[ACC]], %arg0
// An unused parameter gets zeros.
// CHECK: %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: return %{{.*}}, %[[GW]], %[[Z]]
func.func @linear_tanh(%w: tensor<4x3xf32> {ds.param = "w", ds.init = #ds.init<normal, 0.02>},
                       %u: tensor<4xf32> {ds.param = "unused", ds.init = #ds.init<zeros>},
                       %x: tensor<2x3xf32> {ds.input = "x"}, %y: tensor<2x4xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %p = ds.matmul %x, %w transpose_rhs {ds.module = "fc"} : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %t = ds.tanh %p : tensor<2x4xf32>
  %q = ds.mul %t, %p : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %l = ds.mse_loss %q, %y : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A softmax of causally masked scores (fill -inf, through a cast) is 0
// above the diagonal: its gradient masks the cotangent there (fill 0), and
// the product p * dy its row sum reads, so that neither is read there, as
// flash attention never computes them. A finite fill keeps the plain rule.
// CHECK-LABEL: func.func @causal_softmax
// CHECK: %[[P:.*]] = ds.softmax
// CHECK: %[[T:.*]] = ds.mul %[[COT:.*]], %[[P]] {{.*}}ds.vjp_of = "ds.softmax"
// CHECK: %[[TM:.*]] = ds.causal_mask %[[T]] fill = 0.000000e+00 {{.*}}ds.vjp_of = "ds.softmax"
// CHECK: %[[DY:.*]] = ds.causal_mask %[[COT]] fill = 0.000000e+00 {{.*}}ds.vjp_of = "ds.softmax"
// CHECK: ds.reduce_sum %[[TM]]
// CHECK: ds.sub %[[DY]], %{{.*}}
// CHECK: ds.causal_mask %{{.*}} fill = 0.000000e+00 {{.*}}ds.vjp_of = "ds.causal_mask"
// CHECK-LABEL: func.func @finite_fill_softmax
// CHECK: ds.softmax
// CHECK-NOT: ds.causal_mask %{{.*}} fill = 0.000000e+00 {{.*}}ds.vjp_of = "ds.softmax"
// CHECK: ds.causal_mask %{{.*}} fill = 0.000000e+00 {{.*}}ds.vjp_of = "ds.causal_mask"
func.func @causal_softmax(%w: tensor<2x4x4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                          %y: tensor<2x4x4xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %m = ds.causal_mask %w : tensor<2x4x4xf32>
  %b = ds.cast %m : tensor<2x4x4xf32> -> tensor<2x4x4xbf16>
  %c = ds.cast %b : tensor<2x4x4xbf16> -> tensor<2x4x4xf32>
  %p = ds.softmax %c axis = 2 : tensor<2x4x4xf32>
  %l = ds.mse_loss %p, %y : tensor<2x4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
func.func @finite_fill_softmax(%w: tensor<2x4x4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                               %y: tensor<2x4x4xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %m = ds.causal_mask %w fill = -1.0e+09 : tensor<2x4x4xf32>
  %p = ds.softmax %m axis = 2 : tensor<2x4x4xf32>
  %l = ds.mse_loss %p, %y : tensor<2x4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Broadcast operands get their gradient summed back to their shape; integer
// operands (labels) get none.
// CHECK-LABEL: func.func @bias_broadcast
// CHECK: %[[DL:.*]] = ds.cross_entropy_grad
// CHECK: ds.reduce_sum %[[DL]] [0] keep_dims {ds.op_id = 1 : i64, ds.vjp_of = "ds.add"} : tensor<8x5xf32> -> tensor<1x5xf32>
func.func @bias_broadcast(%b: tensor<1x5xf32> {ds.param = "b", ds.init = #ds.init<zeros>},
                          %x: tensor<8x5xf32> {ds.input = "x"}, %y: tensor<8xi64> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %z = ds.add %x, %b : tensor<8x5xf32>, tensor<1x5xf32> -> tensor<8x5xf32>
  %l = ds.cross_entropy %z, %y : tensor<8x5xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// State updates (batch-norm running statistics) stay as they are; the
// running statistics get no gradient.
// CHECK-LABEL: func.func @batch_norm_state
// CHECK-SAME: tensor<4xf32> {ds.update = 2 : i64}, tensor<4xf32> {ds.update = 3 : i64}, tensor<4xf32> {ds.grad = 0 : i64}, tensor<4xf32> {ds.grad = 1 : i64}
func.func @batch_norm_state(%g: tensor<4xf32> {ds.param = "bn.weight", ds.init = #ds.init<ones>},
                            %b: tensor<4xf32> {ds.param = "bn.bias", ds.init = #ds.init<zeros>},
                            %m: tensor<4xf32> {ds.state = #ds.state<"bn.running_mean">, ds.init = #ds.init<zeros>},
                            %v: tensor<4xf32> {ds.state = #ds.state<"bn.running_var">, ds.init = #ds.init<ones>},
                            %x: tensor<8x4xf32> {ds.input = "x"}, %t: tensor<8x4xf32> {ds.input = "t"})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 2 : i64}, tensor<4xf32> {ds.update = 3 : i64})
    attributes {ds.train_step} {
  %y, %m1, %v1 = ds.batch_norm %x, %g, %b, %m, %v : tensor<8x4xf32>, tensor<4xf32>
  %l = ds.mse_loss %y, %t : tensor<8x4xf32> -> tensor<f32>
  return %l, %m1, %v1 : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @negative_no_rule(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                            %x: tensor<4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  // expected-error@+1 {{'arith.addf' op ds-autodiff: no gradient rule for 'arith.addf', which lies between the parameters and the loss}}
  %s = arith.addf %w, %x : tensor<4xf32>
  %l = ds.mse_loss %s, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An upstream op off the differentiable path is tolerated.
// CHECK-LABEL: func.func @upstream_tolerated
// CHECK-SAME: ds.grad = 0
// CHECK: arith.addi
func.func @upstream_tolerated(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                              %x: tensor<4xf32> {ds.input = "x"}, %i: tensor<4xi64> {ds.input = "i"})
    -> (tensor<f32> {ds.loss}, tensor<4xi64> {ds.metric = "i2"}) attributes {ds.train_step} {
  %i2 = arith.addi %i, %i : tensor<4xi64>
  %l = ds.mse_loss %w, %x : tensor<4xf32> -> tensor<f32>
  return %l, %i2 : tensor<f32>, tensor<4xi64>
}

// -----

// expected-error@+1 {{ds-autodiff: the step already returns gradients ('ds.grad' results); differentiate a forward + loss step}}
func.func @negative_twice(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-autodiff: the step already updates its parameters; run ds-autodiff before ds-insert-optimizer}}
func.func @negative_after_optimizer(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-autodiff: no function is marked 'ds.train_step'}}
module {
  func.func @plain() {
    return
  }
}

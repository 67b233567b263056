// RUN: ds-opt %s --ds-clip-gradients -split-input-file -verify-diagnostics
// RUN: not ds-opt %s --ds-clip-gradients="mode=layerwise" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not ds-opt %s --ds-clip-gradients="norm-type=1" 2>&1 | FileCheck %s --check-prefix=NORM
// RUN: not ds-opt %s --ds-clip-gradients="mode=adaptive norm-type=inf" 2>&1 | FileCheck %s --check-prefix=ADAPTNORM
// RUN: not ds-opt %s --ds-clip-gradients="max-norm=0" 2>&1 | FileCheck %s --check-prefix=MAX
// RUN: not ds-opt %s --ds-clip-gradients="mode=adaptive history=0" 2>&1 | FileCheck %s --check-prefix=HIST
// RUN: not ds-opt %s --ds-clip-gradients="noise-std=-1" 2>&1 | FileCheck %s --check-prefix=NOISE

// MODE: for the --mode option: Cannot find option named 'layerwise'!
// NORM: for the --norm-type option: Cannot find option named '1'!
// ADAPTNORM: in option 'norm-type' of pass 'ds-clip-gradients': applies to mode=global
// MAX: in option 'max-norm' of pass 'ds-clip-gradients': must be positive and finite
// HIST: in option 'history' of pass 'ds-clip-gradients': must be in [1, 2^24], got 0
// NOISE: in option 'noise-std' of pass 'ds-clip-gradients': must be finite and >= 0

// expected-error@+1 {{ds-clip-gradients: the step has no gradients; run ds-autodiff first}}
func.func @negative_no_grads(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{ds-clip-gradients: the step already updates its parameters; ds-clip-gradients must run before ds-insert-optimizer}}
func.func @negative_after_optimizer(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-clip-gradients: the gradients are already clipped}}
func.func @negative_twice(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}, tensor<f64> {ds.metric = "clip_norm"}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  %n = arith.constant dense<1.0> : tensor<f64>
  return %l, %w, %n : tensor<f32>, tensor<4xf32>, tensor<f64>
}

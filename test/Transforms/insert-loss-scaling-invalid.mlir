// RUN: ds-opt %s --ds-insert-loss-scaling -split-input-file -verify-diagnostics
// RUN: not ds-opt %s --ds-insert-loss-scaling="growth-factor=1.0" -split-input-file 2>&1 | FileCheck %s --check-prefix=GROWTH
// RUN: not ds-opt %s --ds-insert-loss-scaling="backoff-factor=1.5" -split-input-file 2>&1 | FileCheck %s --check-prefix=BACKOFF
// RUN: not ds-opt %s --ds-insert-loss-scaling="hysteresis=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=HYST
// RUN: not ds-opt %s --ds-insert-loss-scaling="init-scale=1e40" -split-input-file 2>&1 | FileCheck %s --check-prefix=INIT
// RUN: not ds-opt %s --ds-insert-loss-scaling="anomaly-count=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=COUNT

// GROWTH: in option 'growth-factor' of pass 'ds-insert-loss-scaling': must be > 1 and finite, got 1.000000
// BACKOFF: in option 'backoff-factor' of pass 'ds-insert-loss-scaling': must be in (0, 1), got 1.500000
// HYST: in option 'hysteresis' of pass 'ds-insert-loss-scaling': must be in [1, 2^31), got 0
// INIT: in option 'init-scale' of pass 'ds-insert-loss-scaling': must be positive and finite in f32
// COUNT: in option 'anomaly-count' of pass 'ds-insert-loss-scaling': must be in [1, 2^31), got 0

// expected-error@+1 {{ds-insert-loss-scaling: the step has no gradients; run ds-autodiff first}}
func.func @negative_no_grads(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{ds-insert-loss-scaling: the step already updates its parameters; ds-insert-loss-scaling must run before ds-insert-optimizer}}
func.func @negative_after_optimizer(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Gradients that do not come from ds-autodiff (no marked seed).
// expected-error@+1 {{ds-insert-loss-scaling: no backward seed ('arith.constant' marked 'ds.seed'); the gradients must come from ds-autodiff}}
func.func @negative_no_seed(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-insert-loss-scaling: the step already has loss scaling (a 'loss_scale' state)}}
func.func @negative_twice(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                          %s: tensor<f32> {ds.state = #ds.state<"loss_scale">, ds.init = #ds.init<ones>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-insert-loss-scaling: the gradients are already clipped; ds-insert-loss-scaling must run before ds-clip-gradients}}
func.func @negative_after_clipping(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}, tensor<f64> {ds.metric = "clip_norm"}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  %n = arith.constant dense<1.0> : tensor<f64>
  return %l, %w, %n : tensor<f32>, tensor<4xf32>, tensor<f64>
}

// -----

func.func @negative_two_seeds(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  %a = arith.constant {ds.seed} dense<1.0> : tensor<f32>
  // expected-error@+1 {{ds-insert-loss-scaling: a second 'ds.seed' constant; expected exactly one}}
  %b = arith.constant {ds.seed} dense<1.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-insert-loss-scaling: no function is marked 'ds.train_step'}}
module {
  func.func @negative_no_step() {
    return
  }
}

// RUN: ds-opt %s --ds-insert-optimizer -split-input-file -verify-diagnostics

// expected-error@+1 {{ds-insert-optimizer: the step returns no gradients; run ds-autodiff first}}
func.func @negative_no_grads(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{ds-insert-optimizer: the step already updates its parameters}}
func.func @negative_twice(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-insert-optimizer: the 'step' state must be a tensor<i64>, got 'tensor<f32>'}}
func.func @negative_step_type(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                              %s: tensor<f32> {ds.state = #ds.state<"step">, ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-insert-optimizer: the 'step' state is already updated}}
func.func @negative_step_updated(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                                 %s: tensor<i64> {ds.state = #ds.state<"step">, ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}, tensor<i64> {ds.update = 1 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w, %s : tensor<f32>, tensor<4xf32>, tensor<i64>
}

// -----

// expected-error@+1 {{ds-insert-optimizer: 'ds.optim' of parameter 'w': momentum must be in [0, 1), got 1.500000}}
func.func @negative_optim_momentum(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>, ds.optim = {kind = "sgd", momentum = 1.5}})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{ds-insert-optimizer: 'ds.optim' of parameter 'w': unknown optimizer kind 'lamb'; expected sgd, momentum, adam or adamw}}
func.func @negative_optim_kind(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>, ds.optim = {kind = "lamb"}})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

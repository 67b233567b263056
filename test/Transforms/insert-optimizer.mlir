// RUN: ds-opt %s --ds-insert-optimizer -split-input-file | FileCheck %s --check-prefix=ADAMW
// RUN: ds-opt %s --ds-insert-optimizer="kind=momentum lr=0.1 nesterov=true" -split-input-file | FileCheck %s --check-prefix=MOM
// RUN: ds-opt %s --ds-insert-optimizer="kind=sgd schedule=warmup-cosine warmup-steps=10 total-steps=100" -split-input-file | FileCheck %s --check-prefix=SGD
// RUN: ds-opt %s --ds-insert-optimizer -split-input-file | FileCheck %s --check-prefix=ONCE
// RUN: not ds-opt %s --ds-insert-optimizer="kind=lamb" -split-input-file 2>&1 | FileCheck %s --check-prefix=BADKIND
// RUN: not ds-opt %s --ds-insert-optimizer="schedule=warmup-cosine total-steps=5 warmup-steps=5" -split-input-file 2>&1 | FileCheck %s --check-prefix=BADSCHED
// RUN: not ds-opt %s --ds-insert-optimizer="lr=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=BADLR
// Out-of-range values are refused, naming the option and the pass.
// RUN: not ds-opt %s --ds-insert-optimizer="lr=1e400" 2>&1 | FileCheck %s --check-prefix=LRINF
// RUN: not ds-opt %s --ds-insert-optimizer="kind=momentum momentum=-3" 2>&1 | FileCheck %s --check-prefix=MOMNEG
// RUN: not ds-opt %s --ds-insert-optimizer="kind=sgd dampening=7" 2>&1 | FileCheck %s --check-prefix=DAMP
// RUN: not ds-opt %s --ds-insert-optimizer="weight-decay=-5" 2>&1 | FileCheck %s --check-prefix=WDNEG
// RUN: not ds-opt %s --ds-insert-optimizer="eps=0" 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not ds-opt %s --ds-insert-optimizer="lr=1 lr=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: in option 'lr' of pass 'ds-insert-optimizer': given 2 times; give each option once
// LRINF: error: in option 'lr' of pass 'ds-insert-optimizer': must be positive and finite, got inf
// MOMNEG: error: in option 'momentum' of pass 'ds-insert-optimizer': must be in [0, 1), or -1 for the kind's default, got -3.000000
// DAMP: error: in option 'dampening' of pass 'ds-insert-optimizer': must be in [0, 1], got 7.000000
// WDNEG: error: in option 'weight-decay' of pass 'ds-insert-optimizer': must be >= 0, or -1 for the kind's default, got -5.000000
// EPS: error: in option 'eps' of pass 'ds-insert-optimizer': must be positive and finite, got 0.000000

// The structure of the update; the numbers are checked step by step against
// torch.optim in test/Integration/Optimizers.

// ADAMW-LABEL: func.func @step
// ADAMW-SAME: %{{.*}}: tensor<i64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"step">}
// ADAMW-SAME: %{{.*}}: tensor<4x3xf32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"adam.m", of = "w">}
// ADAMW-SAME: %{{.*}}: tensor<4x3xf32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"adam.v", of = "w">}
// ADAMW-SAME: %{{.*}}: tensor<i64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"iteration">}
// ADAMW-SAME: -> (tensor<f32> {ds.loss}, tensor<4x3xf32> {ds.update = 0 : i64}, tensor<4x3xf32> {ds.update = 3 : i64}, tensor<4x3xf32> {ds.update = 4 : i64}, tensor<i64> {ds.update = 2 : i64}, tensor<i64> {ds.update = 5 : i64}, tensor<f64> {ds.metric = "lr"})
// ADAMW: math.powf
// ADAMW: ds.sqrt
// ADAMW-NOT: ds.grad

// The scalars share their constants (ScalarBuilder's cache): one 1.0.
// ONCE-LABEL: func.func @step
// ONCE: arith.constant 1.000000e+00 : f64
// ONCE-NOT: arith.constant 1.000000e+00 : f64
// ONCE: return

// MOM-LABEL: func.func @step
// MOM-SAME: ds.state = #ds.state<"momentum_buffer", of = "w">
// MOM: ds.select
// MOM-NOT: adam

// SGD-LABEL: func.func @step
// SGD: math.cos
// SGD-NOT: momentum_buffer

// BADKIND: for the --kind option: Cannot find option named 'lamb'!
// BADSCHED: error: in option 'schedule' of pass 'ds-insert-optimizer': warmup-cosine needs 0 <= warmup-steps < total-steps, got warmup-steps=5 total-steps=5
// BADLR: error: in option 'lr' of pass 'ds-insert-optimizer': must be positive and finite, got 0
func.func @step(%w: tensor<4x3xf32> {ds.param = "w", ds.init = #ds.init<normal, 0.02>},
                %x: tensor<2x3xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}, tensor<4x3xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<2x3xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4x3xf32>
}

// -----

// An existing step counter is shared, not duplicated.
// ADAMW-LABEL: func.func @shared_step
// ADAMW-SAME: %[[S:.*]]: tensor<i64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"step">}
// ADAMW-NOT: ds.state = #ds.state<"step">
// ADAMW-SAME: tensor<i64> {ds.update = 1 : i64}
func.func @shared_step(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                       %s: tensor<i64> {ds.state = #ds.state<"step">, ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

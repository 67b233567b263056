// The example pass of docs/WritingAPass.md (which shows this file), and the
// template of a technique pass's lit test: it starts from a hand-written
// gradient step (the `ds.grad` result is written out, no --ds-autodiff), so
// it checks only what the pass adds.
//
// RUN: ds-opt %s --ds-test-loss-ema | FileCheck %s
// RUN: ds-opt %s --ds-test-loss-ema --ds-insert-optimizer | FileCheck %s --check-prefix=OPT
// RUN: not ds-opt %s --ds-test-loss-ema --ds-test-loss-ema 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not ds-opt %s --ds-test-loss-ema=decay=1 2>&1 | FileCheck %s --check-prefix=DECAY
//
// Numerics, by running the step: the metric against a plain loop over the
// losses ds-run reports.
// RUN: ds-opt %s --ds-test-loss-ema -o %t.mlir
// RUN: %python %S/Inputs/check_loss_ema.py data %t.x.npy
// RUN: %ds_bin/ds-run %t.mlir --steps 6 --optimizer sgd --lr 0.1 --data x=%t.x.npy --quiet --report %t.json
// RUN: %python %S/Inputs/check_loss_ema.py %t.json 0.9 | FileCheck %s --check-prefix=NUM
// NUM: loss_ema matches over 6 steps

// CHECK-LABEL: func.func @step
// The state and the shared counter come last among the arguments...
// CHECK-SAME: %[[EMA:[a-z0-9]+]]: tensor<f64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"loss_ema">}
// CHECK-SAME: %[[IT:[a-z0-9]+]]: tensor<i64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"iteration">}
// ...their updates and the metric last among the results.
// CHECK-SAME: tensor<i64> {ds.update = 3 : i64}, tensor<f64> {ds.update = 2 : i64}, tensor<f64> {ds.metric = "loss_ema"}
// CHECK: tensor.extract %[[EMA]][]
// CHECK: math.powf

// ds-insert-optimizer reuses the counter: one `iteration`, updated once.
// OPT-LABEL: func.func @step
// OPT-COUNT-1: ds.state = #ds.state<"iteration">
// OPT-NOT: ds.state = #ds.state<"iteration">
// OPT-SAME: tensor<i64> {ds.update = 3 : i64}
// OPT-NOT: ds.update = 3 :

// TWICE: error: 'func.func' op ds-test-loss-ema: the step already has a 'loss_ema' state
// DECAY: error: ds-test-loss-ema: decay must be in (0, 1), got 1

func.func @step(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<normal, 1.0>},
                %x: tensor<4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  // loss = mean((w - x)^2), d loss / d w = (w - x) / 2.
  %l = ds.mse_loss %w, %x : tensor<4xf32> -> tensor<f32>
  %d = ds.sub %w, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %h = arith.constant dense<0.5> : tensor<f32>
  %g = ds.mul %d, %h : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

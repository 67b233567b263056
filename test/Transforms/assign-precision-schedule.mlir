// The time level: a schedule (or anomaly-steps) gives the step a
// high-precision variant with the same signature: the same amax-history
// state, updated the same way (so the FP8 phase starts calibrated), and no
// rounding. The schedule the runner follows is a module attribute.
// RUN: ds-opt %s --ds-autodiff "--ds-assign-precision=policy=%S/Inputs/policy-schedule-fp8.yaml total-steps=50 anomaly-steps=5" | FileCheck %s
// RUN: ds-opt %s --ds-autodiff "--ds-assign-precision=anomaly-steps=7" | FileCheck %s --check-prefix=ANOM

// CHECK: ds.precision_schedule = {step = {anomaly_steps = 5 : i64, high = "step_high", phases = [
// CHECK-SAME: {begin = 0 : i64, end = 5 : i64, phase = "warm-up", variant = "step_high"},
// CHECK-SAME: {begin = 5 : i64, end = 40 : i64, phase = "policy", variant = "step"},
// CHECK-SAME: {begin = 40 : i64, end = 50 : i64, phase = "fine-tune", variant = "step_high"}], total_steps = 50 : i64}}

// CHECK-LABEL: func.func @step(
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#0.input">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#0.weight">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#0.grad0.cotangent">
// CHECK-SAME: -> (tensor<f32> {ds.loss}, tensor<8x8xf32> {ds.grad = 2 : i64}, tensor<4xf32> {ds.update = 3 : i64}, tensor<4xf32> {ds.update = 4 : i64}, tensor<4xf32> {ds.update = 5 : i64})
// CHECK: ds.cast {{.*}} saturate : tensor<4x8xf32> -> tensor<4x8xf8E4M3FN>
// CHECK: ds.cast {{.*}} saturate : tensor<8x8xf32> -> tensor<8x8xf8E4M3FN>
// CHECK: ds.cast {{.*}} saturate {{.*}} -> tensor<4x8xf8E5M2>

// CHECK-LABEL: func.func @step_high(
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#0.input">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#0.weight">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#0.grad0.cotangent">
// CHECK-SAME: -> (tensor<f32> {ds.loss}, tensor<8x8xf32> {ds.grad = 2 : i64}, tensor<4xf32> {ds.update = 3 : i64}, tensor<4xf32> {ds.update = 4 : i64}, tensor<4xf32> {ds.update = 5 : i64})
// CHECK-NOT: ds.cast
// CHECK: ds.matmul %arg0, %arg2 transpose_rhs
// CHECK-NOT: ds.cast
// CHECK: return

// Without a schedule, anomaly-steps alone builds the variant; the runner
// stays on the policy except after anomalies.
// ANOM: ds.precision_schedule = {step = {anomaly_steps = 7 : i64, high = "step_high", phases = [], total_steps = 0 : i64}}
// ANOM: func.func @step(
// ANOM: func.func @step_high(

func.func @step(%x: tensor<4x8xf32> {ds.input = "x"}, %t: tensor<4x8xf32> {ds.input = "t"},
                %w: tensor<8x8xf32> {ds.param = "q.weight", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %y = ds.matmul %x, %w transpose_rhs {ds.role = "attn.q"} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %l = ds.mse_loss %y, %t : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// RUN: ds-opt %s --ds-training-pipeline="precision loss-scaling clip-mode=global clip-max-norm=1 optimizer-kind=sgd optimizer-lr=0.1" | FileCheck %s
// RUN: ds-opt %s --ds-training-pipeline | FileCheck %s --check-prefix=PLAIN
// RUN: ds-opt %s --ds-training-pipeline="precision lower" | FileCheck %s --check-prefix=LOWER
// RUN: not ds-opt %s --ds-training-pipeline="optimizer-kind=sgd optimizer-lr=x" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not ds-opt %s --ds-training-pipeline="optimizer-kind=lamb" 2>&1 | FileCheck %s --check-prefix=BADKIND
// RUN: not ds-opt %s --ds-training-pipeline="optimizer='kind=sgd'" 2>&1 | FileCheck %s --check-prefix=NESTED
// A value outside a pass's range is that pass's located error.
// RUN: not ds-opt %s --ds-training-pipeline="loss-scaling-growth-factor=0.5" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not ds-opt %s --ds-training-pipeline="optimizer-lr=1 optimizer-lr=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: in option 'optimizer-lr' of pass 'ds-training-pipeline': given more than once
// Options of a technique turn it on, as policy does for precision.
// RUN: ds-opt %s --ds-training-pipeline="clip-max-norm=0.5" | FileCheck %s --check-prefix=IMPLIED
// IMPLIED: ds.metric = "clip_coef"
// The passes after ds-assign-precision treat the high-precision variant
// like the step, so both keep one signature.
// RUN: ds-opt %s --ds-training-pipeline="precision anomaly-steps=4 loss-scaling" | FileCheck %s --check-prefix=VARIANT
// VARIANT: ds.precision_schedule = {step = {anomaly_steps = 4 : i64, high = "step_high"
// VARIANT: func.func @step({{.*}}ds.state = #ds.state<"loss_scale">{{.*}}) -> ([[SIG:.*]]) attributes
// VARIANT: func.func @step_high({{.*}}ds.state = #ds.state<"loss_scale">{{.*}}) -> ([[SIG]]) attributes

// A role from a front end is kept. The canonical order: precision state (amax histories), loss-scaler state,
// the optimizer's updates guarded by found_inf, clipping's metric.
// CHECK-LABEL: func.func @step
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#0.input">
// CHECK-SAME: ds.state = #ds.state<"loss_scale">
// CHECK-SAME: ds.metric = "found_inf"
// The finished step is canonicalized and CSE'd: the constants are hoisted
// to the top, one per value, shared by loss scaling, clipping and the
// optimizer.
// CHECK: arith.constant 1.000000e+00 : f64
// CHECK-NOT: arith.constant 1.000000e+00 : f64
// CHECK: ds.cast {{.*}} saturate {{.*}} -> tensor<8x16xf8E4M3FN>
// CHECK-NOT: ds.grad =

// PLAIN-LABEL: func.func @step
// PLAIN-NOT: fp8
// PLAIN-SAME: ds.state = #ds.state<"adam.m", of = "attn.q_proj.weight">

// LOWER: llvm.func @step

// BAD: for the --optimizer-lr option: 'x' value invalid for floating point argument!
// BAD: error: ds-training-pipeline: cannot parse the options 'optimizer-kind=sgd optimizer-lr=x'
// BADKIND: for the --optimizer-kind option: Cannot find option named 'lamb'!
// NESTED: no such option optimizer
// RANGE: error: in option 'growth-factor' of pass 'ds-insert-loss-scaling': must be > 1 and finite, got 0.500000

func.func @step(%x: tensor<8x16xf32> {ds.input = "x"}, %y: tensor<8xi64> {ds.input = "y"},
    %wq: tensor<16x16xf32> {ds.param = "attn.q_proj.weight", ds.init = #ds.init<normal, 0.1>},
    %wh: tensor<10x16xf32> {ds.param = "head.weight", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %q = ds.matmul %x, %wq transpose_rhs {ds.role = "attn.q"} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %t = ds.tanh %q : tensor<8x16xf32>
  %z = ds.matmul %t, %wh transpose_rhs : tensor<8x16xf32>, tensor<10x16xf32> -> tensor<8x10xf32>
  %l = ds.cross_entropy %z, %y : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// ds-partition-pipeline on a two-layer MLP (forward + loss, made a training
// step with clipping so that the global norm spans the stages): two stages,
// two micro-batches, 1F1B.
// RUN: ds-opt %s --ds-training-pipeline="clip=true pipeline-stages=2 pipeline-micro-batches=2" | FileCheck %s
// And gradient accumulation (one stage): no transfers, no cross-stage sums.
// RUN: ds-opt %s --ds-training-pipeline="pipeline-micro-batches=3" | FileCheck %s --check-prefix=ACC

// CHECK: module attributes {
// CHECK-SAME: ds.pipeline = {
// CHECK-SAME: micro_batches = 2
// CHECK-SAME: schedule = "1f1b"
// CHECK-SAME: stages = 2

// The micro-batch functions of stage 0: the forward ends with what stage 1
// reads (its output); the backward also returns the running sums of its
// parameters' gradients.
// CHECK-LABEL: func.func private @step_s0_fwd(
// CHECK: ds.matmul
// CHECK-LABEL: func.func private @step_s0_bwd(
// CHECK: ds.add
// CHECK-LABEL: func.func private @step_s1_fwd(
// CHECK: ds.mse_loss
// CHECK-LABEL: func.func private @step_s1_bwd(

// The update: the mean over the micro-batches (x 1/2), the global norm of
// the clipping as a sum over the stages.
// CHECK-LABEL: func.func private @step_s0_update(
// CHECK: dense<5.000000e-01>
// CHECK: ds.all_reduce {{.*}} sum across_stages
// CHECK-LABEL: func.func private @step_s1_update(
// CHECK: ds.all_reduce {{.*}} sum across_stages

// The stage functions are training steps of their own; batch inputs hold
// both micro-batches (2 x 3 rows). Stage 0 runs F0 B0 F1 B1 (1F1B on the
// first stage of two: one forward ahead), sending activations and
// receiving their cotangents.
// CHECK-LABEL: func.func @step_s0(
// CHECK-SAME: tensor<6x4xf32> {ds.input = "x"}
// CHECK-SAME: ds.pipeline_stage = 0
// CHECK: tensor.extract_slice {{.*}}[0, 0] [3, 4] [1, 1]
// CHECK: call @step_s0_fwd
// CHECK: ds.send {{.*}} to 1 tag 0
// CHECK: tensor.extract_slice {{.*}}[3, 0] [3, 4] [1, 1]
// CHECK: call @step_s0_fwd
// CHECK: ds.send {{.*}} to 1 tag 0
// CHECK: ds.recv from 1 tag 1
// CHECK: call @step_s0_bwd
// CHECK: ds.recv from 1 tag 1
// CHECK: call @step_s0_bwd
// CHECK: call @step_s0_update
// CHECK-LABEL: func.func @step_s1(
// CHECK-SAME: ds.pipeline_stage = 1
// CHECK: ds.recv from 0 tag 0
// CHECK: call @step_s1_fwd
// CHECK: call @step_s1_bwd
// CHECK: ds.send {{.*}} to 0 tag 1
// CHECK: ds.recv from 0 tag 0
// CHECK: call @step_s1_fwd
// CHECK: call @step_s1_bwd
// CHECK: ds.send {{.*}} to 0 tag 1
// CHECK: call @step_s1_update

// ACC: ds.pipeline = {{{.*}}micro_batches = 3{{.*}}stages = 1
// ACC-NOT: ds.send
// ACC-NOT: across_stages
// ACC-LABEL: func.func @step_s0(
// ACC-SAME: tensor<9x4xf32> {ds.input = "x"}
// ACC-COUNT-3: call @step_s0_bwd
// ACC: call @step_s0_update

func.func @step(%w1: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<uniform, 0.5>},
                %w2: tensor<2x8xf32> {ds.param = "fc2.weight", ds.init = #ds.init<uniform, 0.35>},
                %x: tensor<3x4xf32> {ds.input = "x"},
                %y: tensor<3x2xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %a = ds.relu %h : tensor<3x8xf32>
  %q = ds.matmul %a, %w2 transpose_rhs : tensor<3x8xf32>, tensor<2x8xf32> -> tensor<3x2xf32>
  %l = ds.mse_loss %q, %y : tensor<3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

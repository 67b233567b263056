// Two values cross the cut each way: each stage receives them in the order
// the other stage sends them (its micro-batch function's outputs), which
// NCCL's point-to-point transfers need (they match by order, not by
// channel; lib/Runtime/CommNccl.cpp).
// RUN: ds-opt %s --ds-training-pipeline="pipeline-stages=2 pipeline-micro-batches=2" | FileCheck %s

// CHECK-LABEL: func.func @step_s0(
// CHECK: call @step_s0_fwd
// CHECK-NEXT: ds.send {{.*}} to 1 tag 0
// CHECK-NEXT: ds.send {{.*}} to 1 tag 1
// CHECK: ds.recv from 1 tag 2
// CHECK-NEXT: ds.recv from 1 tag 3
// CHECK-NEXT: call @step_s0_bwd
// CHECK-LABEL: func.func @step_s1(
// CHECK: ds.recv from 0 tag 0
// CHECK-NEXT: ds.recv from 0 tag 1
// CHECK: call @step_s1_bwd
// CHECK-NEXT: ds.send {{.*}} to 0 tag 2
// CHECK-NEXT: ds.send {{.*}} to 0 tag 3

func.func @step(%w1: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<uniform, 0.5>},
                %w2: tensor<2x8xf32> {ds.param = "fc2.weight", ds.init = #ds.init<uniform, 0.35>},
                %w3: tensor<2x6xf32> {ds.param = "fc3.weight", ds.init = #ds.init<uniform, 0.35>},
                %x: tensor<3x4xf32> {ds.input = "x"},
                %y: tensor<3x2xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
  %a = ds.relu %h : tensor<3x8xf32>
  %s = ds.slice %h offsets [0, 0] : tensor<3x8xf32> -> tensor<3x6xf32>
  %b = ds.tanh %s : tensor<3x6xf32>
  %qb = ds.matmul %b, %w3 transpose_rhs : tensor<3x6xf32>, tensor<2x6xf32> -> tensor<3x2xf32>
  %qa = ds.matmul %a, %w2 transpose_rhs : tensor<3x8xf32>, tensor<2x8xf32> -> tensor<3x2xf32>
  %q = ds.tanh %qa : tensor<3x2xf32>
  // The loss stage reads qb before q; stage 0 computes q's input after qb.
  %l = ds.mse_loss %qb, %q : tensor<3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// RUN: ds-opt %s -split-input-file --ds-insert-fake-quant=policy=%S/Inputs/quant-tiers.yaml | FileCheck %s
// RUN: ds-opt %s -split-input-file --ds-insert-fake-quant=policy=%S/Inputs/quant-tiers.yaml --ds-autodiff --ds-assign-precision | FileCheck %s --check-prefix=PREC
// Policy errors, located in the policy file:
// RUN: not ds-opt %s -split-input-file --ds-insert-fake-quant=policy=%S/Inputs/quant-bad-scheme.yaml 2>&1 | FileCheck %s --check-prefix=SCHEME
// RUN: not ds-opt %s -split-input-file --ds-insert-fake-quant=policy=%S/Inputs/quant-loss.yaml 2>&1 | FileCheck %s --check-prefix=LOSS
// RUN: not ds-opt %s -split-input-file --ds-insert-fake-quant=policy=%S/Inputs/quant-keep-and-weight.yaml 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not ds-opt %s -split-input-file --ds-insert-fake-quant=policy=%S/Inputs/quant-group-7.yaml 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not ds-opt %s -split-input-file --ds-insert-fake-quant=policy=%S/Inputs/mgpm-no-quant.yaml 2>&1 | FileCheck %s --check-prefix=NOQUANT
// SCHEME: quant-bad-scheme.yaml:3:13: error: ds-insert-fake-quant: unknown weight scheme 'int1'; expected int<bits> (2..16, e.g. int8) or none
// LOSS: quant-loss.yaml:2:5: error: ds-insert-fake-quant: quant rule #0 quantizes 'ds.cross_entropy'; losses, reductions, softmax and norms are not quantized (batch norm's output may be, with 'output: fp8')
// BOTH: quant-keep-and-weight.yaml:2:5: error: ds-insert-fake-quant: quant rule #0 keeps its layers unquantized and quantizes them too; give keep or the schemes
// GROUP: error: 'ds.matmul' op ds-insert-fake-quant: group 7 of quant rule #0 (op ds.matmul) at {{.*}}quant-group-7.yaml:2:5 does not divide the reduction dimension 4 of 'fc1.weight'
// NOQUANT: mgpm-no-quant.yaml:1:1: error: ds-insert-fake-quant: the policy has no 'quant:' section for ds-insert-fake-quant

// fc1 gets the INT8 tier (per channel); fc2 (by name) INT4 per group of 4
// along its reduction axis, weights only.
// CHECK-LABEL: func.func @step
// CHECK-SAME: tensor<3x2xf32> {{.*}}#ds.state<"qat.weight.scale", of = "fc2.weight">
// CHECK: ds.fake_quant {{.*}} axis = 0 {ds.quant} : tensor<8x4xf32>, tensor<8xf32>, tensor<f32>
// CHECK: %[[XQ:.*]] = ds.fake_quant {{.*}} {ds.quant} : tensor<2x4xf32>, tensor<f32>, tensor<f32>
// The per-group observer splits the reduction axis into groups.
// CHECK: ds.reshape {{.*}} : tensor<3x8xf32> -> tensor<3x2x4xf32>
// CHECK: ds.reduce_max {{.*}} [2] {ds.quant} : tensor<3x2x4xf32> -> tensor<3x2xf32>
// CHECK: %[[W2Q:.*]] = ds.fake_quant {{.*}} axis = 1 group_size = 4 {ds.quant} : tensor<3x8xf32>, tensor<3x2xf32>, tensor<f32>
// CHECK: ds.matmul %[[XQ]]
// CHECK: %[[H:.*]] = ds.relu
// CHECK-NOT: ds.fake_quant %[[H]]
// CHECK: ds.matmul %[[H]], %[[W2Q]] transpose_rhs
// PREC: rule = "quant: its inputs are fake-quantized (ds-insert-fake-quant)
func.func @step(%w1: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<zeros>},
                %w2: tensor<3x8xf32> {ds.param = "fc2.weight", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h0 = ds.matmul %x, %w1 transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %h = ds.relu %h0 : tensor<2x8xf32>
  %y = ds.matmul %h, %w2 transpose_rhs : tensor<2x8xf32>, tensor<3x8xf32> -> tensor<2x3xf32>
  %l = ds.reduce_sum %y [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Batch norm in dynamic FP8: its output, with this step's scale
// max|y| / 448 and no state; its consumers read the quantized value.
// CHECK-LABEL: func.func @bn
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = ds.batch_norm
// CHECK: %[[A:.*]] = ds.abs %[[Y]] {ds.quant}
// CHECK: ds.reduce_max %[[A]] [0, 1, 2, 3] {ds.quant}
// CHECK: arith.constant {ds.quant} dense<4.480000e+02> : tensor<f32>
// CHECK: %[[Q:.*]] = ds.fake_quant %[[Y]], {{.*}} format = f8E4M3FN {ds.quant}
// CHECK: ds.relu %[[Q]]
func.func @bn(%g: tensor<3xf32> {ds.param = "bn.weight", ds.init = #ds.init<ones>},
              %b: tensor<3xf32> {ds.param = "bn.bias", ds.init = #ds.init<zeros>},
              %rm: tensor<3xf32> {ds.state = #ds.state<"running_mean", of = "bn.weight">, ds.init = #ds.init<zeros>},
              %rv: tensor<3xf32> {ds.state = #ds.state<"running_var", of = "bn.weight">, ds.init = #ds.init<ones>},
              %x: tensor<2x3x4x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}, tensor<3xf32> {ds.update = 2 : i64}, tensor<3xf32> {ds.update = 3 : i64})
    attributes {ds.train_step} {
  %y, %m, %v = ds.batch_norm %x, %g, %b, %rm, %rv : tensor<2x3x4x4xf32>, tensor<3xf32>
  %r = ds.relu %y : tensor<2x3x4x4xf32>
  %l = ds.reduce_sum %r [0, 1, 2, 3] : tensor<2x3x4x4xf32> -> tensor<f32>
  return %l, %m, %v : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

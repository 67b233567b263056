// RUN: ds-opt %s --split-input-file --ds-autodiff "--ds-assign-precision=policy=%ds_src_root/scripts/gpu-check/fp8.yaml" | FileCheck %s

// Each tensor is quantised to FP8 once, as Transformer Engine's Linear
// does: the weight-gradient GEMM reads the FP8 input its forward made
// (reshaped to [B*T, K]), and both gradient GEMMs read one FP8 cotangent,
// whatever views of the tensor they take. So a linear layer has three amax
// histories (input, weight, output gradient), not one per GEMM operand.
// The MLP's hidden activation is kept in bf16 (`storage`): the backward
// widens the bf16 value again, and that widening is the same tensor.

// CHECK-LABEL: func.func @mlp
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.ffn.up#{{[0-9]+}}.input">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.ffn.up#{{[0-9]+}}.weight">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.ffn.down#{{[0-9]+}}.input">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.ffn.down#{{[0-9]+}}.weight">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.ffn.down#{{[0-9]+}}.grad0.cotangent">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.ffn.up#{{[0-9]+}}.grad0.cotangent">
// CHECK-NOT: fp8.amax_history
// CHECK-SAME: -> (

// The forward quantises x, W1, the GELU's output and W2: four FP8 casts.
// CHECK: %[[XQ:.*]] = ds.cast %{{.*}} saturate : tensor<2x8x16xf32> -> tensor<2x8x16xf8E4M3FN>
// CHECK: ds.cast %{{.*}} saturate : tensor<32x16xf32> -> tensor<32x16xf8E4M3FN>
// CHECK: %[[AQ:.*]] = ds.cast %{{.*}} saturate : tensor<2x8x32xf32> -> tensor<2x8x32xf8E4M3FN>
// CHECK: ds.cast %{{.*}} saturate : tensor<16x32xf32> -> tensor<16x32xf8E4M3FN>

// Each backward quantises its cotangent once; the weight gradient reads
// it and the forward's input as [16, N] views.
// CHECK: %[[DYQ:.*]] = ds.cast %{{.*}} saturate {{.*}} -> tensor<2x8x16xf8E5M2>
// CHECK-NOT: saturate
// CHECK: %[[DYF:.*]] = ds.reshape %[[DYQ]] {{.*}} -> tensor<16x16xf8E5M2>
// CHECK: %[[AF:.*]] = ds.reshape %[[AQ]] {{.*}} -> tensor<16x32xf8E4M3FN>
// CHECK: ds.matmul %[[DYF]], %[[AF]] transpose_lhs
// The first layer needs no input gradient: its cotangent is quantised
// where the weight gradient reads it, as [16, 32].
// CHECK: %[[DHQ:.*]] = ds.cast %{{.*}} saturate {{.*}} -> tensor<16x32xf8E5M2>
// CHECK-NOT: saturate
// CHECK: %[[XF:.*]] = ds.reshape %[[XQ]] {{.*}} -> tensor<16x16xf8E4M3FN>
// CHECK: ds.matmul %[[DHQ]], %[[XF]] transpose_lhs
// CHECK-NOT: saturate
// CHECK: return

func.func @mlp(%x: tensor<2x8x16xf32> {ds.input = "x"}, %t: tensor<2x8x16xf32> {ds.input = "t"},
               %w1: tensor<32x16xf32> {ds.param = "fc1.weight", ds.init = #ds.init<normal, 0.1>},
               %w2: tensor<16x32xf32> {ds.param = "fc2.weight", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs {ds.role = "ffn.up"} : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32>
  %a = ds.gelu %h approximate = tanh {ds.role = "ffn.act"} : tensor<2x8x32xf32>
  %y = ds.matmul %a, %w2 transpose_rhs {ds.role = "ffn.down"} : tensor<2x8x32xf32>, tensor<16x32xf32> -> tensor<2x8x16xf32>
  %l = ds.mse_loss %y, %t : tensor<2x8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A linear layer's output kept in bf16 (`storage`, after the bias) and
// read through a reshape and a transpose, as attention's v projection is:
// its gradient is kept in bf16 for the layer's own backward, and the FP8
// quantisation reads that rounded gradient, its amax included (the amax
// looks through reshapes, and used to read the f32 gradient before the
// head merge, in a pass of its own).
// CHECK-LABEL: func.func @viewed
// CHECK:         %[[W:.*]] = ds.cast %{{.*}} {ds.vjp_of = "ds.cast"} : tensor<2x8x32xbf16> -> tensor<2x8x32xf32>
// CHECK:         ds.abs %[[W]] {{.*}}ds.role = "attn.v"
// CHECK-NOT:     ds.abs {{.*}}tensor<2x8x4x8xf32>
// CHECK:         ds.cast %{{.*}} saturate {{.*}} -> tensor<16x32xf8E5M2>
func.func @viewed(%x: tensor<2x8x16xf32> {ds.input = "x"}, %t: tensor<2x4x8x8xf32> {ds.input = "t"},
                  %w: tensor<32x16xf32> {ds.param = "v.weight", ds.init = #ds.init<normal, 0.1>},
                  %b: tensor<32xf32> {ds.param = "v.bias", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w transpose_rhs {ds.role = "attn.v"} : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32>
  %bb = ds.reshape %b : tensor<32xf32> -> tensor<1x1x32xf32>
  %y = ds.add %h, %bb : tensor<2x8x32xf32>, tensor<1x1x32xf32> -> tensor<2x8x32xf32>
  %v = ds.reshape %y : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %vt = ds.transpose %v [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  %l = ds.mse_loss %vt, %t : tensor<2x4x8x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

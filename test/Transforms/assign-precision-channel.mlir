// The channel level: a running estimate per output channel (state, -1
// before the first observation), the mask `estimate > threshold` selects
// the f32 or the rule's BF16 copy per weight channel and per output
// channel, one GEMM, and the promoted channels as a metric. A matmul whose
// weight is not a parameter is left to the module level, with a warning.
// Numerics: test/Integration/Precision/channel.test.
// RUN: ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-channel.yaml 2>&1 | FileCheck %s

// CHECK: warning: ds-assign-precision: the channel level does not apply to this ffn.up op: its weight operand is not a parameter
// CHECK: ds.precision_map = {step = [{channel = "output channels whose gradient variance exceeds 1.5x the layer mean (running estimate, momentum 0.8) run in f32", compute = "bf16", label = "ffn.up#0"
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[V:arg[0-9]+]]: tensor<16xf32> {ds.init = #ds.init<constant, -1.000000e+00>, ds.state = #ds.state<"channel.grad_var.ffn.up#0">}
// CHECK-SAME: tensor<16xf32> {ds.metric = "channel.high.ffn.up#0"}, tensor<16xf32> {ds.update = [[#]] : i64}
// CHECK: %[[MASK:.*]] = ds.compare gt, %[[V]], %{{.*}} : tensor<16xf32>, tensor<f32> -> tensor<16xi1>
// CHECK: %[[WB:.*]] = ds.cast %{{.*}} : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK: %[[VR:.*]] = ds.reshape %[[V]] : tensor<16xf32> -> tensor<1x16xf32>
// CHECK: %[[WM:.*]] = ds.compare gt, %[[VR]]
// CHECK: %[[W:.*]] = ds.select %[[WM]], %arg{{[0-9]+}}, %[[WB]] : tensor<1x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>
// CHECK: ds.matmul %{{.*}}, %[[W]] {ds.op_id
// CHECK: ds.select %[[MASK]], %{{.*}}, %{{.*}} : tensor<16xi1>, tensor<f32>, tensor<f32> -> tensor<16xf32>
// CHECK: ds.reduce_mean %{{.*}} [0] : tensor<8x16xf32> -> tensor<16xf32>

func.func @step(%x: tensor<4x8xf32> {ds.input = "x"}, %t: tensor<4x16xf32> {ds.input = "t"},
                %w: tensor<8x16xf32> {ds.param = "up.weight", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w {ds.role = "ffn.up"} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %a = ds.matmul %h, %t transpose_lhs {ds.role = "ffn.up"} : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<16x16xf32>
  %s = ds.reduce_sum %a [0, 1] : tensor<16x16xf32> -> tensor<f32>
  %l = ds.mse_loss %h, %t : tensor<4x16xf32> -> tensor<f32>
  %r = ds.add %l, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  return %r : tensor<f32>
}

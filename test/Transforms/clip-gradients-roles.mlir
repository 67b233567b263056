// RUN: ds-opt %s --ds-autodiff --ds-clip-gradients="mode=adaptive history=4" | FileCheck %s
// RUN: ds-opt %s --ds-autodiff --ds-clip-gradients="mode=adaptive history=4" | FileCheck %s --check-prefix=NOABS

// Adaptive clipping picks each parameter's norm from the structure of the
// step, without ds-assign-precision and with names that say nothing: the
// attention projections and their bias (w0..w4) take the L2 norm, the FFN
// projections and their bias (w5..w7) the infinity norm; the norm (w8, w9)
// and the head (w10), neither, take the L2 norm of the keyword fallback.
// Every parameter has its own shape, so each check names its gradient by
// type; the gradients are clipped in argument order.
// CHECK-LABEL: func.func @gpt_block
// CHECK: arith.constant 9.000000e-01 : f64
// CHECK: ds.mul %[[G0:.*]], %[[G0]] : tensor<8x6xf32>, tensor<8x6xf32>
// CHECK: ds.mul %[[G1:.*]], %[[G1]] : tensor<8xf32>, tensor<8xf32>
// CHECK: ds.mul %[[G2:.*]], %[[G2]] : tensor<6x8xf32>, tensor<6x8xf32>
// CHECK: ds.mul %[[G3:.*]], %[[G3]] : tensor<5x6xf32>, tensor<5x6xf32>
// CHECK: ds.mul %[[G4:.*]], %[[G4]] : tensor<6x5xf32>, tensor<6x5xf32>
// CHECK: ds.abs %{{.*}} : tensor<12x6xf32>
// CHECK: ds.abs %{{.*}} : tensor<12xf32>
// CHECK: ds.abs %{{.*}} : tensor<6x12xf32>
// CHECK: ds.mul %[[G8:.*]], %[[G8]] : tensor<6xf32>, tensor<6xf32>
// CHECK: ds.mul %[[G9:.*]], %[[G9]] : tensor<6xf32>, tensor<6xf32>
// CHECK: ds.mul %[[G10:.*]], %[[G10]] : tensor<16x6xf32>, tensor<16x6xf32>

// No infinity norm for any attention, norm or head parameter.
// NOABS-LABEL: func.func @gpt_block
// NOABS-NOT: ds.abs %{{[^ ]*}} : tensor<{{8x6|8|6x8|5x6|6x5|6|16x6}}xf32>
// NOABS: return

func.func @gpt_block(
    %w0: tensor<8x6xf32> {ds.param = "w0", ds.init = #ds.init<uniform, 0.4>},
    %w1: tensor<8xf32> {ds.param = "w1", ds.init = #ds.init<zeros>},
    %w2: tensor<6x8xf32> {ds.param = "w2", ds.init = #ds.init<uniform, 0.4>},
    %w3: tensor<5x6xf32> {ds.param = "w3", ds.init = #ds.init<uniform, 0.4>},
    %w4: tensor<6x5xf32> {ds.param = "w4", ds.init = #ds.init<uniform, 0.4>},
    %w5: tensor<12x6xf32> {ds.param = "w5", ds.init = #ds.init<uniform, 0.4>},
    %w6: tensor<12xf32> {ds.param = "w6", ds.init = #ds.init<zeros>},
    %w7: tensor<6x12xf32> {ds.param = "w7", ds.init = #ds.init<uniform, 0.3>},
    %w8: tensor<6xf32> {ds.param = "w8", ds.init = #ds.init<ones>},
    %w9: tensor<6xf32> {ds.param = "w9", ds.init = #ds.init<zeros>},
    %w10: tensor<16x6xf32> {ds.param = "w10", ds.init = #ds.init<uniform, 0.4>},
    %x: tensor<4x6xf32> {ds.input = "x"},
    %targets: tensor<4xi64> {ds.input = "targets"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  // Attention: q (with a bias), k (stored transposed), v, scores, causal
  // softmax, context, output projection, residual.
  %q0 = ds.matmul %x, %w0 transpose_rhs : tensor<4x6xf32>, tensor<8x6xf32> -> tensor<4x8xf32>
  %b1 = ds.reshape %w1 : tensor<8xf32> -> tensor<1x8xf32>
  %q = ds.add %q0, %b1 : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %k = ds.matmul %x, %w2 : tensor<4x6xf32>, tensor<6x8xf32> -> tensor<4x8xf32>
  %v = ds.matmul %x, %w3 transpose_rhs : tensor<4x6xf32>, tensor<5x6xf32> -> tensor<4x5xf32>
  %s0 = ds.matmul %q, %k transpose_rhs : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x4xf32>
  %c = arith.constant dense<0.35> : tensor<f32>
  %s1 = ds.mul %s0, %c : tensor<4x4xf32>, tensor<f32> -> tensor<4x4xf32>
  %s2 = ds.causal_mask %s1 : tensor<4x4xf32>
  %p = ds.softmax %s2 axis = 1 : tensor<4x4xf32>
  %ctx = ds.matmul %p, %v : tensor<4x4xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
  %o = ds.matmul %ctx, %w4 transpose_rhs : tensor<4x5xf32>, tensor<6x5xf32> -> tensor<4x6xf32>
  %h = ds.add %x, %o : tensor<4x6xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  // FFN: norm, up (with a bias), GELU, down, residual.
  %n = ds.layer_norm %h, %w8, %w9 : tensor<4x6xf32>, tensor<6xf32>, tensor<6xf32>
  %u0 = ds.matmul %n, %w5 transpose_rhs : tensor<4x6xf32>, tensor<12x6xf32> -> tensor<4x12xf32>
  %b6 = ds.reshape %w6 : tensor<12xf32> -> tensor<1x12xf32>
  %u = ds.add %u0, %b6 : tensor<4x12xf32>, tensor<1x12xf32> -> tensor<4x12xf32>
  %a = ds.gelu %u : tensor<4x12xf32>
  %d = ds.matmul %a, %w7 transpose_rhs : tensor<4x12xf32>, tensor<6x12xf32> -> tensor<4x6xf32>
  %h2 = ds.add %h, %d : tensor<4x6xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  // Head and loss.
  %logits = ds.matmul %h2, %w10 transpose_rhs : tensor<4x6xf32>, tensor<16x6xf32> -> tensor<4x16xf32>
  %l = ds.cross_entropy %logits, %targets : tensor<4x16xf32>, tensor<4xi64> -> tensor<f32>
  return %l : tensor<f32>
}

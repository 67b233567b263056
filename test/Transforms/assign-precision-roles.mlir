// RUN: ds-opt %s --ds-autodiff --ds-assign-precision -split-input-file | FileCheck %s

// The role analysis works on the structure alone: parameters are named
// p0, p1, ... and no op has a module path.

// CHECK-LABEL: func.func @separate_qkv
// CHECK: ds.layer_norm {{.*}}ds.role = "norm"
// CHECK: ds.matmul {{.*}}ds.role = "attn.q"
// CHECK: ds.matmul {{.*}}ds.role = "attn.k"
// CHECK: ds.matmul {{.*}}ds.role = "attn.v"
// CHECK: ds.matmul {{.*}}ds.role = "attn.scores"
// CHECK: ds.softmax {{.*}}ds.role = "softmax"
// CHECK: ds.matmul {{.*}}ds.role = "attn.context"
// CHECK: ds.matmul {{.*}}ds.role = "attn.out"
// CHECK: ds.mse_loss {{.*}}ds.role = "loss"
func.func @separate_qkv(%x: tensor<2x8x16xf32> {ds.input = "x"}, %y: tensor<2x8x16xf32> {ds.input = "y"},
    %g: tensor<16xf32> {ds.param = "p0", ds.init = #ds.init<ones>},
    %b: tensor<16xf32> {ds.param = "p1", ds.init = #ds.init<zeros>},
    %wq: tensor<16x16xf32> {ds.param = "p2", ds.init = #ds.init<normal, 0.1>},
    %wk: tensor<16x16xf32> {ds.param = "p3", ds.init = #ds.init<normal, 0.1>},
    %wv: tensor<16x16xf32> {ds.param = "p4", ds.init = #ds.init<normal, 0.1>},
    %wo: tensor<16x16xf32> {ds.param = "p5", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %n = ds.layer_norm %x, %g, %b : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>
  %q = ds.matmul %n, %wq transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %k = ds.matmul %n, %wk transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %v = ds.matmul %n, %wv transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %s = ds.matmul %q, %k transpose_rhs : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x8xf32>
  %c = arith.constant dense<0.25> : tensor<f32>
  %ss = ds.mul %s, %c : tensor<2x8x8xf32>, tensor<f32> -> tensor<2x8x8xf32>
  %m = ds.causal_mask %ss : tensor<2x8x8xf32>
  %p = ds.softmax %m axis = 2 : tensor<2x8x8xf32>
  %a = ds.matmul %p, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  %o = ds.matmul %a, %wo transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %l = ds.mse_loss %o, %y : tensor<2x8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// One projection split into q, k and v by slices (a fused QKV), with heads.
// CHECK-LABEL: func.func @fused_qkv
// CHECK: ds.matmul {{.*}}ds.role = "attn.qkv"
// CHECK-NOT: ds.role = "attn.q"
// CHECK: ds.matmul {{.*}}ds.role = "attn.scores"
// CHECK: ds.matmul {{.*}}ds.role = "attn.context"
// CHECK: ds.matmul {{.*}}ds.role = "attn.out"
func.func @fused_qkv(%x: tensor<2x8x16xf32> {ds.input = "x"}, %y: tensor<2x8x16xf32> {ds.input = "y"},
    %w: tensor<48x16xf32> {ds.param = "p0", ds.init = #ds.init<normal, 0.1>},
    %bias: tensor<48xf32> {ds.param = "p1", ds.init = #ds.init<zeros>},
    %wo: tensor<16x16xf32> {ds.param = "p2", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %qkv0 = ds.matmul %x, %w transpose_rhs : tensor<2x8x16xf32>, tensor<48x16xf32> -> tensor<2x8x48xf32>
  %b2 = ds.reshape %bias : tensor<48xf32> -> tensor<1x1x48xf32>
  %qkv = ds.add %qkv0, %b2 : tensor<2x8x48xf32>, tensor<1x1x48xf32> -> tensor<2x8x48xf32>
  %q = ds.slice %qkv offsets [0, 0, 0] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %k = ds.slice %qkv offsets [0, 0, 16] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %v = ds.slice %qkv offsets [0, 0, 32] : tensor<2x8x48xf32> -> tensor<2x8x16xf32>
  %q4 = ds.reshape %q : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %k4 = ds.reshape %k : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %v4 = ds.reshape %v : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
  %qh = ds.transpose %q4 [0, 2, 1, 3] : tensor<2x8x2x8xf32> -> tensor<2x2x8x8xf32>
  %kh = ds.transpose %k4 [0, 2, 1, 3] : tensor<2x8x2x8xf32> -> tensor<2x2x8x8xf32>
  %vh = ds.transpose %v4 [0, 2, 1, 3] : tensor<2x8x2x8xf32> -> tensor<2x2x8x8xf32>
  %s = ds.matmul %qh, %kh transpose_rhs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %p = ds.softmax %s axis = 3 : tensor<2x2x8x8xf32>
  %a = ds.matmul %p, %vh : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %at = ds.transpose %a [0, 2, 1, 3] : tensor<2x2x8x8xf32> -> tensor<2x8x2x8xf32>
  %a3 = ds.reshape %at : tensor<2x8x2x8xf32> -> tensor<2x8x16xf32>
  %o = ds.matmul %a3, %wo transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %l = ds.mse_loss %o, %y : tensor<2x8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// SwiGLU: silu(x Wg) * (x Wu), then Wd; the projection into the loss is
// the head.
// CHECK-LABEL: func.func @swiglu
// CHECK: ds.matmul {{.*}}ds.role = "ffn.gate"
// CHECK: ds.matmul {{.*}}ds.role = "ffn.up"
// CHECK: ds.silu {{.*}}ds.role = "ffn.act"
// CHECK: ds.mul {{.*}}ds.role = "ffn.act"
// CHECK: ds.matmul {{.*}}ds.role = "ffn.down"
// CHECK: ds.matmul {{.*}}ds.role = "head"
// CHECK: ds.cross_entropy {{.*}}ds.role = "loss"
func.func @swiglu(%x: tensor<8x16xf32> {ds.input = "x"}, %y: tensor<8xi64> {ds.input = "y"},
    %wg: tensor<32x16xf32> {ds.param = "p0", ds.init = #ds.init<normal, 0.1>},
    %wu: tensor<32x16xf32> {ds.param = "p1", ds.init = #ds.init<normal, 0.1>},
    %wd: tensor<16x32xf32> {ds.param = "p2", ds.init = #ds.init<normal, 0.1>},
    %wh: tensor<10x16xf32> {ds.param = "p3", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %g = ds.matmul %x, %wg transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %u = ds.matmul %x, %wu transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %a = ds.silu %g : tensor<8x32xf32>
  %h = ds.mul %a, %u : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  %d = ds.matmul %h, %wd transpose_rhs : tensor<8x32xf32>, tensor<16x32xf32> -> tensor<8x16xf32>
  %r = ds.add %d, %x : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %z = ds.matmul %r, %wh transpose_rhs : tensor<8x16xf32>, tensor<10x16xf32> -> tensor<8x10xf32>
  %l = ds.cross_entropy %z, %y : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A module path names a projection the structure left generic.
// CHECK-LABEL: func.func @named
// CHECK: ds.matmul {{.*}}ds.module = "enc.q_proj"{{.*}}ds.role = "attn.q"
// CHECK: ds.matmul {{.*}}ds.role = "head"
func.func @named(%x: tensor<8x16xf32> {ds.input = "x"}, %y: tensor<8xi64> {ds.input = "y"},
    %w: tensor<16x16xf32> {ds.param = "p0", ds.init = #ds.init<normal, 0.1>},
    %wh: tensor<10x16xf32> {ds.param = "p1", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %q = ds.matmul %x, %w transpose_rhs {ds.module = "enc.q_proj"} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %t = ds.tanh %q : tensor<8x16xf32>
  %s = ds.add %t, %x : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %z = ds.matmul %s, %wh transpose_rhs : tensor<8x16xf32>, tensor<10x16xf32> -> tensor<8x10xf32>
  %l = ds.cross_entropy %z, %y : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

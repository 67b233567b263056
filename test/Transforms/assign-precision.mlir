// RUN: ds-opt %s --ds-autodiff --ds-assign-precision | FileCheck %s
// RUN: ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-current-block.yaml | FileCheck %s --check-prefix=SCALING
// RUN: ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-grad-storage.yaml | FileCheck %s --check-prefix=GRADS

// The default policy on a one-head attention + GELU MLP block.

// The q/k/v projections' operands get amax histories (state, zeros), with
// their updates; k and v share the quantised input of q.
// The decisions are recorded in the module.
// CHECK: ds.precision_map = {block = [
// CHECK-SAME: {compute = "f32", label = "norm#{{[0-9]+}}", op = "ds.layer_norm", role = "norm", rule = "no rule: f32", storage = "f32"}
// CHECK-SAME: {compute = "f8E4M3FN", grad = "f8E5M2", label = "attn.q#{{[0-9]+}}", op = "ds.matmul", role = "attn.q", rule = "rule #0 (role attn.q,attn.k,attn.v,attn.qkv) at <default policy>:5", scaling = "delayed", storage = "f32"}
// CHECK-SAME: {compute = "bf16", label = "ffn.act#{{[0-9]+}}", op = "ds.gelu", role = "ffn.act", rule = "rule #2 (role ffn.act) at <default policy>:12", storage = "bf16"}
// CHECK-LABEL: func.func @block
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#{{[0-9]+}}.input">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#{{[0-9]+}}.weight">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.k#{{[0-9]+}}.weight">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.v#{{[0-9]+}}.weight">
// CHECK-SAME: ds.state = #ds.state<"fp8.amax_history.attn.q#{{[0-9]+}}.grad0.cotangent">
// CHECK-SAME: tensor<1024xf32> {ds.update =
// Delayed scaling: scale = 448 / max(history), 1 while the history is empty.
// CHECK: %[[PREV:.*]] = ds.reduce_max %{{.*}} [0] : tensor<1024xf32> -> tensor<f32>
// CHECK: ds.compare gt, %[[PREV]]
// CHECK: %[[S:.*]] = ds.select {{.*}} : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
// CHECK: %[[XS:.*]] = ds.mul %{{.*}}, %[[S]] : tensor<2x8x16xf32>, tensor<f32>
// CHECK: %[[XQ:.*]] = ds.cast %[[XS]] saturate : tensor<2x8x16xf32> -> tensor<2x8x16xf8E4M3FN>
// The FP8 GEMM accumulates in FP32 and is descaled after.
// CHECK: %[[Y:.*]] = ds.matmul %[[XQ]], %{{.*}} transpose_rhs {{.*}}ds.role = "attn.q"{{.*}} : tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN> -> tensor<2x8x16xf32>
// CHECK: ds.mul %[[Y]], %{{.*}} : tensor<2x8x16xf32>, tensor<f32>
// Softmax stay FP32.
// CHECK: ds.softmax %{{.*}} : tensor<2x8x8xf32>
// FFN: the up projection's result is kept in BF16, GELU computes in BF16.
// CHECK: ds.matmul {{.*}}ds.role = "ffn.up"{{.*}} -> tensor<2x8x32xf32>
// CHECK: ds.cast %{{.*}} : tensor<2x8x32xf32> -> tensor<2x8x32xbf16>
// CHECK: ds.gelu %{{.*}} {{.*}}ds.role = "ffn.act"{{.*}} : tensor<2x8x32xbf16>
// CHECK: ds.matmul {{.*}}ds.role = "ffn.down"{{.*}} : tensor<2x8x32xbf16>, tensor<16x32xbf16> -> tensor<2x8x16xf32>
// The backward reads the BF16 copies, widened inside the backward, so the
// narrow values are what lives from the forward to the backward.
// CHECK: ds.cast %{{.*}} {ds.vjp_of = "ds.cast"} : tensor<2x8x32xbf16> -> tensor<2x8x32xf32>
// Gradient GEMMs of the projections: E5M2 cotangents, E4M3 weights.
// CHECK: ds.matmul {{.*}}ds.role = "attn.q", ds.vjp_of = "ds.matmul"} : tensor<2x8x16xf8E5M2>, tensor<16x16xf8E4M3FN> -> tensor<2x8x16xf32>

// Current scaling has no state; block scaling quantises 1 x 8 tiles of the
// activation and 8 x 8 blocks of the weight, dequantised before an FP32 GEMM.
// SCALING: ds.precision_map = {block = [
// SCALING-SAME: scaling = "current"
// SCALING-SAME: scaling = "block"
// SCALING-LABEL: func.func @block
// SCALING-NOT: fp8.amax_history
// SCALING: ds.cast %{{.*}} saturate : tensor<2x8x16xf32> -> tensor<2x8x16xf8E4M3FN>
// SCALING: ds.matmul {{.*}}ds.role = "attn.q"{{.*}} : tensor<2x8x16xf8E4M3FN>, tensor<16x16xf8E4M3FN> -> tensor<2x8x16xf32>
// SCALING: ds.reshape %{{.*}} : tensor<2x8x16xf32> -> tensor<2x8x2x8xf32>
// SCALING: ds.reduce_max %{{.*}} [3] keep_dims : tensor<2x8x2x8xf32> -> tensor<2x8x2x1xf32>
// SCALING: ds.cast %{{.*}} saturate : tensor<2x8x2x8xf32> -> tensor<2x8x2x8xf8E4M3FN>
// SCALING: ds.reshape %{{.*}} : tensor<16x16xf32> -> tensor<2x8x2x8xf32>
// SCALING: ds.reduce_max %{{.*}} [1, 3] keep_dims : tensor<2x8x2x8xf32> -> tensor<2x1x2x1xf32>
// SCALING: ds.matmul {{.*}}ds.role = "attn.k"{{.*}} : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
// grad-storage: the gradient GEMMs' results are rounded to it (and read
// widened back), their precision map entries say so.
// GRADS: ds.precision_map = {block = [
// GRADS-SAME: {compute = "bf16", label = "ffn.down#{{[0-9]+}}.grad0", op = "ds.matmul", role = "ffn.down", rule = {{.*}}, storage = "bf16"}
// GRADS-SAME: {compute = "f32", label = "attn.out#{{[0-9]+}}.grad0", op = "ds.matmul", role = "attn.out", rule = {{.*}}, storage = "f16"}
// GRADS-LABEL: func.func @block
// GRADS: %[[D:.*]] = ds.matmul {{.*}}ds.role = "ffn.down", ds.vjp_of = "ds.matmul"} : tensor<2x8x16xbf16>, tensor<16x32xbf16> -> tensor<2x8x32xf32>
// GRADS-NEXT: %[[DB:.*]] = ds.cast %[[D]] {{{.*}}ds.role = "ffn.down", ds.vjp_of = "ds.matmul"} : tensor<2x8x32xf32> -> tensor<2x8x32xbf16>
// GRADS-NEXT: ds.cast %[[DB]] {{{.*}}ds.role = "ffn.down", ds.vjp_of = "ds.matmul"} : tensor<2x8x32xbf16> -> tensor<2x8x32xf32>
// GRADS: %[[O:.*]] = ds.matmul {{.*}}ds.role = "attn.out", ds.vjp_of = "ds.matmul"} : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
// GRADS-NEXT: %[[OH:.*]] = ds.cast %[[O]] {{.*}} : tensor<2x8x16xf32> -> tensor<2x8x16xf16>
// GRADS-NEXT: ds.cast %[[OH]] {{.*}} : tensor<2x8x16xf16> -> tensor<2x8x16xf32>
func.func @block(%x: tensor<2x8x16xf32> {ds.input = "x"}, %y: tensor<2x8x16xf32> {ds.input = "y"},
    %g: tensor<16xf32> {ds.param = "ln.weight", ds.init = #ds.init<ones>},
    %b: tensor<16xf32> {ds.param = "ln.bias", ds.init = #ds.init<zeros>},
    %wq: tensor<16x16xf32> {ds.param = "attn.q_proj.weight", ds.init = #ds.init<normal, 0.1>},
    %wk: tensor<16x16xf32> {ds.param = "attn.k_proj.weight", ds.init = #ds.init<normal, 0.1>},
    %wv: tensor<16x16xf32> {ds.param = "attn.v_proj.weight", ds.init = #ds.init<normal, 0.1>},
    %wo: tensor<16x16xf32> {ds.param = "attn.out_proj.weight", ds.init = #ds.init<normal, 0.1>},
    %w1: tensor<32x16xf32> {ds.param = "mlp.fc1.weight", ds.init = #ds.init<normal, 0.1>},
    %w2: tensor<16x32xf32> {ds.param = "mlp.fc2.weight", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %n = ds.layer_norm %x, %g, %b : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>
  %q = ds.matmul %n, %wq transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %k = ds.matmul %n, %wk transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %v = ds.matmul %n, %wv transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %s = ds.matmul %q, %k transpose_rhs : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x8xf32>
  %m = ds.causal_mask %s : tensor<2x8x8xf32>
  %p = ds.softmax %m axis = 2 : tensor<2x8x8xf32>
  %a = ds.matmul %p, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  %o = ds.matmul %a, %wo transpose_rhs : tensor<2x8x16xf32>, tensor<16x16xf32> -> tensor<2x8x16xf32>
  %r = ds.add %o, %x : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  %h = ds.matmul %r, %w1 transpose_rhs : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32>
  %act = ds.gelu %h : tensor<2x8x32xf32>
  %d = ds.matmul %act, %w2 transpose_rhs : tensor<2x8x32xf32>, tensor<16x32xf32> -> tensor<2x8x16xf32>
  %r2 = ds.add %d, %r : tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  %l = ds.mse_loss %r2, %y : tensor<2x8x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

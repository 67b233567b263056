// RUN: ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-storage-bias.yaml | FileCheck %s
// RUN: ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-storage-bias-grad.yaml | FileCheck %s --check-prefix=GRAD

// A matmul kept in bf16 (`storage`) whose product only a bias add reads
// (a vector along the last dimension) is kept after the bias instead, the
// bias rounded to bf16 first: autocast's F.linear, bf16(x W^T + bf16(b)),
// one rounding in the GEMM's epilogue. The GELU and the backward read the
// rounded sum. A residual add (a full tensor) and an add with a rule of its
// own leave the product rounded as before.
// CHECK-LABEL: func.func @linear
// CHECK:      %[[P:.*]] = ds.matmul {{.*}} -> tensor<4x32xf32>
// CHECK-NEXT: %[[BR:.*]] = ds.reshape %{{.*}} : tensor<32xf32> -> tensor<1x32xf32>
// CHECK-NEXT: %[[BN:.*]] = ds.cast %[[BR]] : tensor<1x32xf32> -> tensor<1x32xbf16>
// CHECK-NEXT: %[[BW:.*]] = ds.cast %[[BN]] : tensor<1x32xbf16> -> tensor<1x32xf32>
// CHECK-NEXT: %[[S:.*]] = ds.add %[[P]], %[[BW]]
// CHECK-NEXT: %[[SN:.*]] = ds.cast %[[S]] : tensor<4x32xf32> -> tensor<4x32xbf16>
// CHECK-NEXT: %[[SW:.*]] = ds.cast %[[SN]] : tensor<4x32xbf16> -> tensor<4x32xf32>
// CHECK-NEXT: ds.gelu %[[SW]]
// The residual: the product itself rounded.
// CHECK:      %[[D:.*]] = ds.matmul {{.*}} -> tensor<4x16xf32>
// CHECK-NEXT: %[[DN:.*]] = ds.cast %[[D]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK-NEXT: %[[DW:.*]] = ds.cast %[[DN]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: ds.add %[[DW]], %{{.*}} : tensor<4x16xf32>, tensor<4x16xf32>
// The ruled add: the product rounded, the bias not.
// CHECK:      %[[E:.*]] = ds.matmul {{.*}} -> tensor<4x16xf32>
// CHECK-NEXT: %[[EN:.*]] = ds.cast %[[E]] : tensor<4x16xf32> -> tensor<4x16xbf16>
// CHECK-NEXT: %[[EW:.*]] = ds.cast %[[EN]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: ds.reshape
// CHECK-NEXT: ds.add %[[EW]], %{{.*}} : tensor<4x16xf32>, tensor<1x16xf32>
// The backward's GELU gradient reads the rounded sum (its bf16 copy).
// CHECK:      %[[SB:.*]] = ds.cast %[[SN]] {{.*}} : tensor<4x32xbf16> -> tensor<4x32xf32>
// CHECK-NEXT: ds.gelu_grad %[[SB]]
// With `grad: bf16`, the gradient of the linear layer's output is kept in
// bf16 too (autocast keeps a bf16 tensor's gradient in bf16): the bias
// gradient and the layer's gradient GEMMs read the rounded cotangent.
// GRAD-LABEL: func.func @linear
// GRAD:      %[[GG:.*]] = ds.gelu_grad
// GRAD-NEXT: %[[GN:.*]] = ds.cast %[[GG]] {ds.vjp_of = "ds.cast"} : tensor<4x32xf32> -> tensor<4x32xbf16>
// GRAD:      %[[GW:.*]] = ds.cast %[[GN]] {{.*}} : tensor<4x32xbf16> -> tensor<4x32xf32>
// GRAD-NEXT: ds.reduce_sum %[[GW]] [0]
// GRAD:      ds.cast %[[GW]] {{.*}}ds.role = "ffn.up"{{.*}} : tensor<4x32xf32> -> tensor<4x32xbf16>
func.func @linear(%x: tensor<4x16xf32> {ds.input = "x"}, %y: tensor<4x16xf32> {ds.input = "y"},
    %w1: tensor<32x16xf32> {ds.param = "fc1.weight", ds.init = #ds.init<normal, 0.1>},
    %b1: tensor<32xf32> {ds.param = "fc1.bias", ds.init = #ds.init<normal, 0.1>},
    %w2: tensor<16x32xf32> {ds.param = "fc2.weight", ds.init = #ds.init<normal, 0.1>},
    %w3: tensor<16x16xf32> {ds.param = "fc3.weight", ds.init = #ds.init<normal, 0.1>},
    %b3: tensor<16xf32> {ds.param = "ruled.bias", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<4x16xf32>, tensor<32x16xf32> -> tensor<4x32xf32>
  %rb = ds.reshape %b1 : tensor<32xf32> -> tensor<1x32xf32>
  %hb = ds.add %h, %rb : tensor<4x32xf32>, tensor<1x32xf32> -> tensor<4x32xf32>
  %g = ds.gelu %hb : tensor<4x32xf32>
  %d = ds.matmul %g, %w2 transpose_rhs : tensor<4x32xf32>, tensor<16x32xf32> -> tensor<4x16xf32>
  %r = ds.add %d, %x : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %e = ds.matmul %r, %w3 transpose_rhs : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  %rb3 = ds.reshape %b3 : tensor<16xf32> -> tensor<1x16xf32>
  %o = ds.add %e, %rb3 : tensor<4x16xf32>, tensor<1x16xf32> -> tensor<4x16xf32>
  %l = ds.mse_loss %o, %y : tensor<4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

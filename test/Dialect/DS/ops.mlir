// RUN: ds-opt %s | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | ds-opt | FileCheck %s
// RUN: ds-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Every ds op round-trips through its custom and its generic form.

// CHECK-LABEL: func @matmul
func.func @matmul(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<5x3xf32>,
                  %x: tensor<2x4x3xf32>, %y: tensor<2x3x6xf32>,
                  %q: tensor<4x3xf8E4M3FN>, %r: tensor<3x5xf8E4M3FN>) {
  // CHECK: ds.matmul %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  %0 = ds.matmul %a, %b : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
  // CHECK: ds.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<4x3xf32>, tensor<5x3xf32> -> tensor<4x5xf32>
  %1 = ds.matmul %a, %c transpose_rhs : tensor<4x3xf32>, tensor<5x3xf32> -> tensor<4x5xf32>
  // CHECK: ds.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<4x3xf32>, tensor<5x4xf32> -> tensor<3x5xf32>
  %t = ds.transpose %1 [1, 0] : tensor<4x5xf32> -> tensor<5x4xf32>
  %2 = ds.matmul %a, %t transpose_lhs transpose_rhs : tensor<4x3xf32>, tensor<5x4xf32> -> tensor<3x5xf32>
  // CHECK: ds.matmul %{{.*}}, %{{.*}} : tensor<2x4x3xf32>, tensor<2x3x6xf32> -> tensor<2x4x6xf32>
  %3 = ds.matmul %x, %y : tensor<2x4x3xf32>, tensor<2x3x6xf32> -> tensor<2x4x6xf32>
  // CHECK: ds.matmul %{{.*}}, %{{.*}} : tensor<2x4x3xf32>, tensor<3x5xf32> -> tensor<2x4x5xf32>
  %4 = ds.matmul %x, %b : tensor<2x4x3xf32>, tensor<3x5xf32> -> tensor<2x4x5xf32>
  // CHECK: ds.matmul %{{.*}}, %{{.*}} : tensor<4x3xf8E4M3FN>, tensor<3x5xf8E4M3FN> -> tensor<4x5xf32>
  %5 = ds.matmul %q, %r : tensor<4x3xf8E4M3FN>, tensor<3x5xf8E4M3FN> -> tensor<4x5xf32>
  return
}
// GENERIC: "ds.matmul"(%{{.*}}, %{{.*}}) <{transpose_lhs, transpose_rhs}>

// CHECK-LABEL: func @binary
func.func @binary(%a: tensor<4x8xf32>, %b: tensor<1x8xf32>, %s: tensor<f32>,
                  %i: tensor<4x8xi64>) {
  // CHECK: ds.add %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %0 = ds.add %a, %b : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  // CHECK: ds.sub %{{.*}}, %{{.*}} : tensor<1x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = ds.sub %b, %a : tensor<1x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: ds.mul %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %2 = ds.mul %a, %s : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: ds.div %{{.*}}, %{{.*}} : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = ds.div %s, %a : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: ds.maximum %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = ds.maximum %a, %a : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: ds.minimum %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %5 = ds.minimum %a, %b : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  // CHECK: ds.add %{{.*}}, %{{.*}} : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
  %6 = ds.add %i, %i : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
  // CHECK: ds.broadcast %{{.*}} dims = [1, 2] : tensor<1x8xf32> -> tensor<3x4x8xf32>
  %7 = ds.broadcast %b dims = [1, 2] : tensor<1x8xf32> -> tensor<3x4x8xf32>
  return
}

// CHECK-LABEL: func @unary
func.func @unary(%x: tensor<4x8xf32>) {
  // CHECK: ds.relu %{{.*}} : tensor<4x8xf32>
  %0 = ds.relu %x : tensor<4x8xf32>
  // CHECK: ds.gelu %{{.*}} : tensor<4x8xf32>
  %1 = ds.gelu %x : tensor<4x8xf32>
  // CHECK: ds.gelu %{{.*}} approximate = tanh : tensor<4x8xf32>
  %2 = ds.gelu %x approximate = tanh : tensor<4x8xf32>
  // CHECK: ds.silu
  %3 = ds.silu %x : tensor<4x8xf32>
  // CHECK: ds.sigmoid
  %4 = ds.sigmoid %x : tensor<4x8xf32>
  // CHECK: ds.tanh
  %5 = ds.tanh %x : tensor<4x8xf32>
  // CHECK: ds.exp
  %6 = ds.exp %x : tensor<4x8xf32>
  // CHECK: ds.log
  %7 = ds.log %x : tensor<4x8xf32>
  // CHECK: ds.sqrt
  %8 = ds.sqrt %x : tensor<4x8xf32>
  // CHECK: ds.rsqrt
  %9 = ds.rsqrt %x : tensor<4x8xf32>
  // CHECK: ds.neg
  %10 = ds.neg %x : tensor<4x8xf32>
  // CHECK: ds.abs %{{.*}} : tensor<4x8xf32>
  %11 = ds.abs %x : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func @cast
func.func @cast(%x: tensor<4x8xf32>, %i: tensor<4xi64>) {
  // CHECK: ds.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
  %0 = ds.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK: ds.cast %{{.*}} saturate : tensor<4x8xf32> -> tensor<4x8xf8E4M3FN>
  %1 = ds.cast %x saturate : tensor<4x8xf32> -> tensor<4x8xf8E4M3FN>
  // CHECK: ds.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xf8E5M2>
  %2 = ds.cast %x : tensor<4x8xf32> -> tensor<4x8xf8E5M2>
  // CHECK: ds.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xf16>
  %3 = ds.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
  // CHECK: ds.cast %{{.*}} : tensor<4xi64> -> tensor<4xf32>
  %4 = ds.cast %i : tensor<4xi64> -> tensor<4xf32>
  // CHECK: ds.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xi8>
  %5 = ds.cast %x : tensor<4x8xf32> -> tensor<4x8xi8>
  return
}

// CHECK-LABEL: func @norms
func.func @norms(%x: tensor<2x16x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>,
                 %w2: tensor<16x64xf32>, %b2: tensor<16x64xf32>) {
  // CHECK: ds.softmax %{{.*}} axis = 2 : tensor<2x16x64xf32>
  %0 = ds.softmax %x axis = 2 : tensor<2x16x64xf32>
  // CHECK: ds.log_softmax %{{.*}} axis = 0 : tensor<2x16x64xf32>
  %1 = ds.log_softmax %x axis = 0 : tensor<2x16x64xf32>
  // CHECK: ds.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
  %2 = ds.layer_norm %x, %w, %b : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
  // CHECK: ds.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps = {{.*}} : tensor<2x16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
  %3 = ds.layer_norm %x, %w2, %b2 eps = 1.0e-6 : tensor<2x16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
  // CHECK: ds.rms_norm %{{.*}}, %{{.*}} eps = {{.*}} : tensor<2x16x64xf32>, tensor<64xf32>
  %4 = ds.rms_norm %x, %w eps = 1.0e-6 : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: ds.rms_norm %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64xf32>
  %5 = ds.rms_norm %x, %w : tensor<2x16x64xf32>, tensor<64xf32>
  return
}

// CHECK-LABEL: func @batch_norm
func.func @batch_norm(%x: tensor<8x16x14x14xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>,
                      %m: tensor<16xf32>, %v: tensor<16xf32>, %x2: tensor<8x16xf32>) {
  // CHECK: ds.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x16x14x14xf32>, tensor<16xf32>
  %y, %m1, %v1 = ds.batch_norm %x, %g, %b, %m, %v : tensor<8x16x14x14xf32>, tensor<16xf32>
  // CHECK: ds.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} momentum = {{.*}} eps = {{.*}} : tensor<8x16xf32>, tensor<16xf32>
  %y2, %m2, %v2 = ds.batch_norm %x2, %g, %b, %m, %v momentum = 0.2 eps = 1.0e-3 : tensor<8x16xf32>, tensor<16xf32>
  return
}

// CHECK-LABEL: func @reductions
func.func @reductions(%x: tensor<4x8x5xf32>) {
  // CHECK: ds.reduce_sum %{{.*}} [1] : tensor<4x8x5xf32> -> tensor<4x5xf32>
  %0 = ds.reduce_sum %x [1] : tensor<4x8x5xf32> -> tensor<4x5xf32>
  // CHECK: ds.reduce_mean %{{.*}} [0, 2] keep_dims : tensor<4x8x5xf32> -> tensor<1x8x1xf32>
  %1 = ds.reduce_mean %x [0, 2] keep_dims : tensor<4x8x5xf32> -> tensor<1x8x1xf32>
  // CHECK: ds.reduce_max %{{.*}} [0, 1, 2] : tensor<4x8x5xf32> -> tensor<f32>
  %2 = ds.reduce_max %x [0, 1, 2] : tensor<4x8x5xf32> -> tensor<f32>
  return
}

// CHECK-LABEL: func @shapes
func.func @shapes(%x: tensor<2x16x4x8xf32>, %a: tensor<4x3xf32>, %b: tensor<4x5xf32>) {
  // CHECK: ds.transpose %{{.*}} [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %0 = ds.transpose %x [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  // CHECK: ds.reshape %{{.*}} : tensor<2x16x4x8xf32> -> tensor<32x32xf32>
  %1 = ds.reshape %x : tensor<2x16x4x8xf32> -> tensor<32x32xf32>
  // CHECK: ds.slice %{{.*}} offsets [0, 2] : tensor<4x5xf32> -> tensor<4x3xf32>
  %2 = ds.slice %b offsets [0, 2] : tensor<4x5xf32> -> tensor<4x3xf32>
  // CHECK: ds.slice %{{.*}} offsets [1, 0] strides [2, 2] : tensor<4x5xf32> -> tensor<2x3xf32>
  %3 = ds.slice %b offsets [1, 0] strides [2, 2] : tensor<4x5xf32> -> tensor<2x3xf32>
  // CHECK: ds.concat %{{.*}}, %{{.*}} axis = 1 : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x8xf32>
  %4 = ds.concat %a, %b axis = 1 : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x8xf32>
  // CHECK: ds.concat %{{.*}} axis = 0 : tensor<4x3xf32> -> tensor<4x3xf32>
  %5 = ds.concat %a axis = 0 : tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// CHECK-LABEL: func @transformer
func.func @transformer(%wte: tensor<96x64xf32>, %tok: tensor<2x16xi64>,
                       %s: tensor<2x4x16x16xf32>, %s2: tensor<8x12xf32>,
                       %x: tensor<2x16x64xf32>, %rng: tensor<2xi64>) {
  // CHECK: ds.embedding %{{.*}}, %{{.*}} : tensor<96x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf32>
  %0 = ds.embedding %wte, %tok : tensor<96x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf32>
  // CHECK: ds.causal_mask %{{.*}} : tensor<2x4x16x16xf32>
  %1 = ds.causal_mask %s : tensor<2x4x16x16xf32>
  // CHECK: ds.causal_mask %{{.*}} : tensor<8x12xf32>
  %2 = ds.causal_mask %s2 : tensor<8x12xf32>
  // CHECK: ds.dropout %{{.*}}, %{{.*}} p = 1.000000e-01 : tensor<2x16x64xf32>, tensor<2xi64>
  %3, %rng1 = ds.dropout %x, %rng p = 0.1 : tensor<2x16x64xf32>, tensor<2xi64>
  // CHECK: ds.random_normal %{{.*}} std = 1.000000e-03 : tensor<2xi64> -> tensor<2x16x64xf32>
  %4, %rng2 = ds.random_normal %rng1 std = 0.001 : tensor<2xi64> -> tensor<2x16x64xf32>
  return
}

// CHECK-LABEL: func @conv_pool
func.func @conv_pool(%x: tensor<8x3x28x28xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>,
                     %wg: tensor<16x1x3x3xf32>, %y: tensor<8x16x28x28xf32>) {
  // CHECK: ds.conv2d %{{.*}}, %{{.*}}, %{{.*}} padding = [1, 1] : tensor<8x3x28x28xf32>, tensor<16x3x3x3xf32>, tensor<16xf32> -> tensor<8x16x28x28xf32>
  %0 = ds.conv2d %x, %w, %b padding = [1, 1] : tensor<8x3x28x28xf32>, tensor<16x3x3x3xf32>, tensor<16xf32> -> tensor<8x16x28x28xf32>
  // CHECK: ds.conv2d %{{.*}}, %{{.*}} strides = [2, 2] dilation = [2, 2] : tensor<8x3x28x28xf32>, tensor<16x3x3x3xf32> -> tensor<8x16x12x12xf32>
  %1 = ds.conv2d %x, %w strides = [2, 2] dilation = [2, 2] : tensor<8x3x28x28xf32>, tensor<16x3x3x3xf32> -> tensor<8x16x12x12xf32>
  // CHECK: ds.conv2d %{{.*}}, %{{.*}} padding = [1, 1] groups = 16 : tensor<8x16x28x28xf32>, tensor<16x1x3x3xf32> -> tensor<8x16x28x28xf32>
  %2 = ds.conv2d %y, %wg padding = [1, 1] groups = 16 : tensor<8x16x28x28xf32>, tensor<16x1x3x3xf32> -> tensor<8x16x28x28xf32>
  // CHECK: ds.max_pool2d %{{.*}} kernel = [2, 2] : tensor<8x16x28x28xf32> -> tensor<8x16x14x14xf32>
  %3 = ds.max_pool2d %y kernel = [2, 2] : tensor<8x16x28x28xf32> -> tensor<8x16x14x14xf32>
  // CHECK: ds.max_pool2d %{{.*}} kernel = [3, 3] strides = [2, 2] padding = [1, 1] : tensor<8x16x28x28xf32> -> tensor<8x16x14x14xf32>
  %4 = ds.max_pool2d %y kernel = [3, 3] strides = [2, 2] padding = [1, 1] : tensor<8x16x28x28xf32> -> tensor<8x16x14x14xf32>
  // CHECK: ds.avg_pool2d %{{.*}} kernel = [2, 2] strides = [1, 1] : tensor<8x16x28x28xf32> -> tensor<8x16x27x27xf32>
  %5 = ds.avg_pool2d %y kernel = [2, 2] strides = [1, 1] : tensor<8x16x28x28xf32> -> tensor<8x16x27x27xf32>
  return
}

// CHECK-LABEL: func @losses
func.func @losses(%logits: tensor<32x96xf32>, %labels: tensor<32xi64>,
                  %p: tensor<16x4xf32>, %t: tensor<16x4xf32>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: ds.cross_entropy %{{.*}}, %{{.*}} : tensor<32x96xf32>, tensor<32xi64> -> tensor<f32>
  %0 = ds.cross_entropy %logits, %labels : tensor<32x96xf32>, tensor<32xi64> -> tensor<f32>
  // CHECK: ds.mse_loss %{{.*}}, %{{.*}} : tensor<16x4xf32> -> tensor<f32>
  %1 = ds.mse_loss %p, %t : tensor<16x4xf32> -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func @f64_and_annotations
func.func @f64_and_annotations(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
  // CHECK: ds.tanh %{{.*}} {ds.module = "layers.0.mlp", ds.role = "ffn.act"} : tensor<3x5xf64>
  %0 = ds.tanh %x {ds.module = "layers.0.mlp", ds.role = "ffn.act"} : tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK-LABEL: func @compare_select
func.func @compare_select(%x: tensor<4x8xf32>, %z: tensor<f32>, %i: tensor<4x1xi64>) {
  // CHECK: ds.compare gt, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xi1>
  %0 = ds.compare gt, %x, %z : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xi1>
  // CHECK: ds.compare eq, %{{.*}}, %{{.*}} : tensor<4x1xi64>, tensor<4x1xi64> -> tensor<4x1xi1>
  %1 = ds.compare eq, %i, %i : tensor<4x1xi64>, tensor<4x1xi64> -> tensor<4x1xi1>
  // CHECK: ds.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %2 = ds.select %0, %x, %z : tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  // CHECK: ds.causal_mask %{{.*}} fill = 0.000000e+00 : tensor<4x8xf32>
  %3 = ds.causal_mask %x fill = 0.0 : tensor<4x8xf32>
  return
}
// GENERIC-LABEL: sym_name = "compare_select"
// GENERIC: "ds.causal_mask"(%{{.*}}) <{fill = 0.000000e+00 : f64}>

// CHECK-LABEL: func @backward_kernels
func.func @backward_kernels(%x: tensor<4x8xf32>, %l: tensor<32x96xf32>, %y: tensor<32xi64>, %s: tensor<f32>,
                            %dy: tensor<2x16x64xf32>, %tok: tensor<2x16xi64>,
                            %cx: tensor<8x3x28x28xf32>, %cw: tensor<16x3x3x3xf32>, %cdy: tensor<8x16x28x28xf32>,
                            %pdy: tensor<8x16x14x14xf32>, %z: tensor<4x16xf32>) {
  // CHECK: ds.gelu_grad %{{.*}}, %{{.*}} approximate = tanh : tensor<4x8xf32>
  %0 = ds.gelu_grad %x, %x approximate = tanh : tensor<4x8xf32>
  // CHECK: ds.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x96xf32>, tensor<32xi64>, tensor<f32>
  %1 = ds.cross_entropy_grad %l, %y, %s : tensor<32x96xf32>, tensor<32xi64>, tensor<f32>
  // CHECK: ds.embedding_grad %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<96x64xf32>
  %2 = ds.embedding_grad %dy, %tok : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<96x64xf32>
  // CHECK: ds.conv2d_grad_input %{{.*}}, %{{.*}} padding = [1, 1] : tensor<8x16x28x28xf32>, tensor<16x3x3x3xf32> -> tensor<8x3x28x28xf32>
  %3 = ds.conv2d_grad_input %cdy, %cw padding = [1, 1] : tensor<8x16x28x28xf32>, tensor<16x3x3x3xf32> -> tensor<8x3x28x28xf32>
  // CHECK: ds.conv2d_grad_weight %{{.*}}, %{{.*}} padding = [1, 1] : tensor<8x16x28x28xf32>, tensor<8x3x28x28xf32> -> tensor<16x3x3x3xf32>
  %4 = ds.conv2d_grad_weight %cdy, %cx padding = [1, 1] : tensor<8x16x28x28xf32>, tensor<8x3x28x28xf32> -> tensor<16x3x3x3xf32>
  // CHECK: ds.max_pool2d_grad %{{.*}}, %{{.*}} kernel = [2, 2] : tensor<8x16x28x28xf32>, tensor<8x16x14x14xf32>
  %5 = ds.max_pool2d_grad %cdy, %pdy kernel = [2, 2] : tensor<8x16x28x28xf32>, tensor<8x16x14x14xf32>
  // CHECK: ds.avg_pool2d_grad %{{.*}}, %{{.*}} kernel = [2, 2] strides = [2, 2] : tensor<8x16x28x28xf32>, tensor<8x16x14x14xf32>
  %6 = ds.avg_pool2d_grad %cdy, %pdy kernel = [2, 2] strides = [2, 2] : tensor<8x16x28x28xf32>, tensor<8x16x14x14xf32>
  // CHECK: ds.insert_slice %{{.*}} into %{{.*}} offsets [0, 8] : tensor<4x8xf32> into tensor<4x16xf32>
  %7 = ds.insert_slice %x into %z offsets [0, 8] : tensor<4x8xf32> into tensor<4x16xf32>
  // CHECK: ds.insert_slice %{{.*}} into %{{.*}} offsets [0, 0] strides [1, 2] : tensor<4x8xf32> into tensor<4x16xf32>
  %8 = ds.insert_slice %x into %z offsets [0, 0] strides [1, 2] : tensor<4x8xf32> into tensor<4x16xf32>
  return
}

// CHECK-LABEL: func @fake_quant
func.func @fake_quant(%x: tensor<32x16xf32>, %s0: tensor<f32>, %sc: tensor<32xf32>,
                      %sg: tensor<32x4xf32>, %q: tensor<f32>, %dy: tensor<32x16xf32>) {
  // CHECK: ds.fake_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x16xf32>, tensor<f32>, tensor<f32>
  %0 = ds.fake_quant %x, %s0, %s0, %q, %q : tensor<32x16xf32>, tensor<f32>, tensor<f32>
  // CHECK: ds.fake_quant {{.*}} axis = 0 learned grad_scaling : tensor<32x16xf32>, tensor<32xf32>, tensor<f32>
  %1 = ds.fake_quant %x, %sc, %sc, %q, %q axis = 0 learned grad_scaling : tensor<32x16xf32>, tensor<32xf32>, tensor<f32>
  // CHECK: ds.fake_quant {{.*}} axis = 1 group_size = 4 : tensor<32x16xf32>, tensor<32x4xf32>, tensor<f32>
  %2 = ds.fake_quant %x, %sg, %sg, %q, %q axis = 1 group_size = 4 : tensor<32x16xf32>, tensor<32x4xf32>, tensor<f32>
  // CHECK: ds.fake_quant {{.*}} format = f8E4M3FN : tensor<32x16xf32>, tensor<f32>, tensor<f32>
  %3 = ds.fake_quant %x, %s0, %s0, %q, %q format = f8E4M3FN : tensor<32x16xf32>, tensor<f32>, tensor<f32>
  // CHECK: ds.fake_quant_grad {{.*}} of = scale axis = 0 learned : tensor<32x16xf32>, tensor<32xf32>, tensor<f32>
  %4 = ds.fake_quant_grad %x, %sc, %sc, %q, %q, %dy of = scale axis = 0 learned : tensor<32x16xf32>, tensor<32xf32>, tensor<f32>
  return
}

// Channel-split layers fed by ops the pass rebuilt before them (an FP8
// GEMM, a BF16 activation) read the rebuilt values; the result verifies
// and lowers. (Regression: the split read the erased GEMM's result.)
// RUN: ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-channel-chain.yaml | FileCheck %s
// RUN: ds-opt %s --ds-training-pipeline="policy=%S/Inputs/policy-channel-chain.yaml loss-scaling lower" -o /dev/null

// CHECK-LABEL: func.func @step(
// The FP8 layer, split: dequantised operands, one f32 GEMM.
// CHECK: ds.cast %{{.*}} saturate : tensor<8x16xf32> -> tensor<8x16xf8E4M3FN>
// CHECK: ds.select %{{.*}}, %arg2, %{{.*}} : tensor<1x16xi1>, tensor<8x16xf32>, tensor<8x16xf32>
// CHECK: ds.matmul %{{.*}}, %{{.*}} {ds.op_id = {{.*}}} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK: %[[G:.*]] = ds.gelu %{{.*}} : tensor<4x16xbf16>
// CHECK: %[[GW:.*]] = ds.cast %[[G]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK: ds.select %{{.*}}, %arg3, %{{.*}} : tensor<1x16xi1>, tensor<16x16xf32>, tensor<16x16xf32>
// CHECK: ds.matmul %{{.*}}, %{{.*}} {ds.op_id

func.func @step(%x: tensor<4x8xf32> {ds.input = "x"}, %t: tensor<4x16xf32> {ds.input = "t"},
                %w1: tensor<8x16xf32> {ds.param = "w1", ds.init = #ds.init<normal, 0.1>},
                %w2: tensor<16x16xf32> {ds.param = "w2", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 {ds.role = "ffn.up"} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %g = ds.gelu %h {ds.role = "ffn.act"} : tensor<4x16xf32>
  %y = ds.matmul %g, %w2 {ds.role = "ffn.down"} : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  %l = ds.mse_loss %y, %t : tensor<4x16xf32> -> tensor<f32>
  return %l : tensor<f32>
}

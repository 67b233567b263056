// RUN: ds-opt %s --ds-sparsify-matmul="total-steps=100 update-every=10" | FileCheck %s
// RUN: ds-opt %s --ds-sparsify-matmul="total-steps=100 update-every=10" --ds-autodiff --ds-update-sparsity-masks --ds-insert-optimizer | FileCheck %s --check-prefix=STEP
// RUN: not ds-opt %s --ds-sparsify-matmul="total-steps=10" --ds-autodiff --ds-insert-optimizer 2>&1 | FileCheck %s --check-prefix=NOUPDATE
// RUN: ds-opt %s --ds-training-pipeline="sparsity sparsity-schedule=constant sparsity-final=0.9 fake-quant" | FileCheck %s --check-prefix=PIPE

// NOUPDATE: ds-insert-optimizer: the block mask 'sparsity.mask@fc1.weight' is never updated; run ds-update-sparsity-masks before ds-insert-optimizer

// The hidden layer becomes block-sparse on a mask state (one i8 per 8x8
// block, starting dense); the head (the layer feeding the loss) stays dense.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W1:[^:]+]]: tensor<64x32xf32> {ds.init = #ds.init<uniform, 2.000000e-01>, ds.param = "fc1.weight"}
// CHECK-SAME: %[[IT:[^:]+]]: tensor<i64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"iteration">}
// CHECK-SAME: %[[M:[^:]+]]: tensor<8x4xi8> {ds.init = #ds.init<ones>, ds.state = #ds.state<"sparsity.mask", of = "fc1.weight">}
// CHECK-SAME: {ds.metric = "sparsity.mask_update"}
// CHECK: ds.block_sparse_matmul %{{.*}}, %[[W1]], %[[M]] block = 8 transpose_weight
// CHECK: ds.matmul %{{.*}}, %{{.*}} transpose_rhs
// CHECK: math.cos

// After autodiff: the weight gradient is sampled on the mask (all ones on
// regrow iterations; the input x needs no gradient); the mask update keeps the top blocks; the optimizer skips
// mask-update iterations and masks the weight and its moments.
// STEP: module attributes {{{.*}}ds.sparsity = {step = {block = 8 : i64, distribution = "uniform", {{.*}}schedule = "cosine", score = "l1", total_steps = 100 : i64, update_every = 10 : i64}}}
// STEP: func.func @step
// STEP-SAME: {ds.metric = "sparsity.mask_update"}, tensor<f64> {ds.metric = "sparsity.scheduled"}, tensor<8x4xi8> {ds.update = 5 : i64}
// STEP-SAME: {ds.metric = "sparsity@fc1.weight"}, {{.*}} {ds.metric = "sparsity.dropped@fc1.weight"}, {{.*}} {ds.metric = "sparsity.grown@fc1.weight"}
// STEP: %[[GM:.*]] = ds.select %{{.*}}, %{{.*}}, %[[MASK:[^ ]+]] : tensor<i1>, tensor<8x4xi8>, tensor<8x4xi8>
// STEP: ds.block_sparse_matmul %{{.*}}, %{{.*}}, %[[MASK]] block = 8 transpose_weight
// STEP: ds.block_sampled_matmul %{{.*}}, %{{.*}}, %[[GM]] block = 8 {{{.*}}ds.vjp_of = "ds.block_sparse_matmul"}
// STEP: ds.top_k_mask
// STEP: ds.top_k_mask
// STEP: ds.compare gt, %{{.*}} : tensor<f32>, tensor<f32> -> tensor<i1>
// STEP: %[[EXP:.*]] = ds.broadcast %{{.*}} dims = [0, 2] : tensor<8x4xi1> -> tensor<8x8x4x8xi1>
// STEP: %[[ACT:.*]] = ds.reshape %[[EXP]] : tensor<8x8x4x8xi1> -> tensor<64x32xi1>
// STEP: ds.select %[[ACT]], %{{.*}}, %{{.*}} : tensor<64x32xi1>, tensor<64x32xf32>, tensor<f32> -> tensor<64x32xf32>

// The pipeline sparsifies first, then fake-quantizes the sparse layer's
// weight (the observer sees the masked weight).
// PIPE: ds.fake_quant %{{.*}} axis = 0 {{.*}}: tensor<64x32xf32>
// PIPE: ds.block_sparse_matmul
func.func @step(
    %w1: tensor<64x32xf32> {ds.param = "fc1.weight", ds.init = #ds.init<uniform, 0.2>},
    %w2: tensor<16x64xf32> {ds.param = "fc2.weight", ds.init = #ds.init<uniform, 0.15>},
    %x: tensor<24x32xf32> {ds.input = "x"},
    %labels: tensor<24xi64> {ds.input = "labels"})
    -> (tensor<f32> {ds.loss})
    attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<24x32xf32>, tensor<64x32xf32> -> tensor<24x64xf32>
  %a = ds.tanh %h : tensor<24x64xf32>
  %y = ds.matmul %a, %w2 transpose_rhs : tensor<24x64xf32>, tensor<16x64xf32> -> tensor<24x16xf32>
  %loss = ds.cross_entropy %y, %labels : tensor<24x16xf32>, tensor<24xi64> -> tensor<f32>
  return %loss : tensor<f32>
}

// RUN: ds-opt %s --ds-autodiff --ds-clip-gradients | FileCheck %s
// RUN: ds-opt %s --ds-autodiff --ds-clip-gradients="norm-type=inf max-norm=0.5" | FileCheck %s --check-prefix=INF
// RUN: ds-opt %s --ds-autodiff --ds-clip-gradients="mode=adaptive history=16" | FileCheck %s --check-prefix=ADAPT
// RUN: ds-opt %s --ds-autodiff --ds-clip-gradients="mode=adaptive noise-std=0.01" | FileCheck %s --check-prefix=NOISE
// RUN: ds-opt %s --ds-autodiff --ds-insert-loss-scaling --ds-clip-gradients="mode=adaptive" | FileCheck %s --check-prefix=GUARD

// Global L2 (torch.nn.utils.clip_grad_norm_): the L2 norm of per-tensor L2
// norms, max-norm / (norm + 1e-6) clamped to 1, every gradient scaled.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: -> (tensor<f32> {ds.loss}, tensor<4x3xf32> {ds.grad = 0 : i64}, tensor<5x3xf32> {ds.grad = 1 : i64}, tensor<f64> {ds.metric = "clip_coef"}, tensor<f64> {ds.metric = "clip_norm"})
// CHECK: %[[GF:.*]] = ds.matmul {{.*}} -> tensor<5x3xf32>
// CHECK: %[[GQ:.*]] = ds.matmul {{.*}} -> tensor<4x3xf32>
// CHECK: ds.mul %[[GQ]], %[[GQ]]
// CHECK: ds.mul %[[GF]], %[[GF]]
// CHECK: math.sqrt
// CHECK: %[[EPS:.*]] = arith.constant 9.9999999999999995E-7 : f64
// CHECK: %[[D:.*]] = arith.addf %{{.*}}, %[[EPS]]
// CHECK: %[[C:.*]] = arith.divf %{{.*}}, %[[D]]
// CHECK: %[[CL:.*]] = arith.minimumf %[[C]]
// CHECK: ds.mul %[[GQ]]
// CHECK: ds.mul %[[GF]]

// INF-LABEL: func.func @step(
// INF: ds.abs
// INF: ds.reduce_max
// INF: ds.abs
// INF: ds.reduce_max
// INF: arith.maximumf
// INF: arith.constant 5.000000e-01 : f64

// Adaptive: the ring buffer, count and threshold are state; attention
// (q_proj) uses the L2 norm, FFN (mlp.fc1) the infinity norm.
// ADAPT-LABEL: func.func @step(
// ADAPT-SAME: tensor<1xf64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"clip.threshold">}
// ADAPT-SAME: tensor<i64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"clip.count">}
// ADAPT-SAME: %[[H:[^:]*]]: tensor<16xf64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"clip.history">}
// ADAPT-SAME: tensor<f64> {ds.metric = "clip_threshold"}, tensor<f64> {ds.metric = "clip_norm"}
// ADAPT: %[[GF:.*]] = ds.matmul {{.*}} -> tensor<5x3xf32>
// ADAPT: %[[GQ:.*]] = ds.matmul {{.*}} -> tensor<4x3xf32>
// ADAPT: arith.remsi
// ADAPT: %[[AT:.*]] = ds.compare eq, %{{.*}}, %{{.*}} : tensor<16xi64>, tensor<i64> -> tensor<16xi1>
// ADAPT: %[[INS:.*]] = ds.select %[[AT]], %{{.*}}, %[[H]] : tensor<16xi1>, tensor<f64>, tensor<16xf64> -> tensor<16xf64>
// ADAPT: ds.reduce_sum %[[INS]] [0]
// ADAPT: arith.constant 9.000000e-01 : f64
// ADAPT: ds.mul %[[GQ]], %[[GQ]]
// ADAPT: ds.mul %[[GQ]],
// ADAPT: ds.abs %[[GF]]
// ADAPT: ds.reduce_max
// ADAPT: ds.mul %[[GF]],

// NOISE-LABEL: func.func @step(
// NOISE-SAME: %[[RNG:[^:]*]]: tensor<2xi64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"clip.rng">}
// NOISE: %[[N1:.*]], %[[R1:.*]] = ds.random_normal %[[RNG]] std = 1.000000e-02 : tensor<2xi64> -> tensor<4x3xf32>
// NOISE: ds.add %{{.*}}, %[[N1]]
// NOISE: %[[N2:.*]], %[[R2:.*]] = ds.random_normal %[[R1]] std = 1.000000e-02 : tensor<2xi64> -> tensor<5x3xf32>
// NOISE: return {{.*}}%[[R2]]

// After loss scaling, a skipped step keeps the clipping state.
// GUARD-LABEL: func.func @step(
// GUARD-SAME: %[[CNT:[^:]*]]: tensor<i64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"clip.count">}
// GUARD-SAME: %[[H:[^:]*]]: tensor<1000xf64> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"clip.history">}
// GUARD: %[[FOUND:.*]] = tensor.from_elements %{{.*}} : tensor<f32>
// GUARD: %[[C:.*]] = tensor.extract %[[CNT]][]
// GUARD: %[[INS:.*]] = ds.select %{{.*}}, %{{.*}}, %[[H]] : tensor<1000xi1>
// GUARD: arith.select %{{.*}}, %[[C]], %{{.*}} : i64
// GUARD: ds.select %{{.*}}, %[[H]], %[[INS]] : tensor<i1>, tensor<1000xf64>

func.func @step(%q: tensor<4x3xf32> {ds.param = "layers.0.attn.q_proj.weight", ds.init = #ds.init<uniform, 0.5>},
                %f: tensor<5x3xf32> {ds.param = "layers.0.mlp.fc1.weight", ds.init = #ds.init<uniform, 0.5>},
                %x: tensor<2x3xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %a = ds.matmul %x, %q transpose_rhs : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %b = ds.matmul %x, %f transpose_rhs : tensor<2x3xf32>, tensor<5x3xf32> -> tensor<2x5xf32>
  %sa = ds.reduce_sum %a [0, 1] : tensor<2x4xf32> -> tensor<f32>
  %sb = ds.reduce_sum %b [0, 1] : tensor<2x5xf32> -> tensor<f32>
  %l = ds.add %sa, %sb : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

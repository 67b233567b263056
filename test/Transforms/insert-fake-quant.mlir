// RUN: ds-opt %s --ds-insert-fake-quant | FileCheck %s
// RUN: ds-opt %s --ds-insert-fake-quant="weights=false" | FileCheck %s --check-prefix=ACT
// RUN: ds-opt %s --ds-insert-fake-quant="weight-bits=4 activation-bits=8 reduce-range=false observer=min-max" | FileCheck %s --check-prefix=BITS
// RUN: ds-opt %s --ds-insert-fake-quant="freeze-observers-at=10 fake-quant-from=2" | FileCheck %s --check-prefix=SCHED
// RUN: ds-opt %s --ds-insert-fake-quant --ds-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: ds-opt %s --ds-insert-fake-quant="weight-observer=current activations=false" | FileCheck %s --check-prefix=CUR
// The numerics (bit-identical to torch.ao's FakeQuantize over 20 steps) are
// checked by test/Integration/Quant/qat.test.

// A linear layer (weight [out, in], transpose_rhs), a second one, and an
// attention-style matmul of two activations, which is not a layer.
// CHECK-LABEL: func.func @step
// State per quantized value, named by the layer's weight parameter: the
// observers start at +-inf, the scale at 1 and the zero point at 0.
// CHECK-SAME: %[[WMIN:[a-z0-9]+]]: tensor<8xf32> {ds.init = #ds.init<constant, 0x7FF0000000000000>, ds.state = #ds.state<"qat.weight.min", of = "fc1.weight">}
// CHECK-SAME: ds.state = #ds.state<"qat.weight.max", of = "fc1.weight">
// CHECK-SAME: {ds.init = #ds.init<ones>, ds.state = #ds.state<"qat.weight.scale", of = "fc1.weight">}
// CHECK-SAME: {ds.init = #ds.init<zeros>, ds.state = #ds.state<"qat.weight.zero_point", of = "fc1.weight">}
// CHECK-SAME: %{{.*}}: tensor<f32> {{.*}}#ds.state<"qat.input.min", of = "fc1.weight">
// CHECK-SAME: #ds.state<"qat.weight.min", of = "fc2.weight">
// CHECK-SAME: #ds.state<"qat.input.min", of = "fc2.weight">
// CHECK-SAME: -> (tensor<f32> {ds.loss}, tensor<i64> {ds.update = 3 : i64}, tensor<8xf32> {ds.update = 4 : i64}
// The per-channel observer of the weight reduces over the input dimension.
// CHECK: ds.reduce_max %{{.*}} [1] {ds.quant} : tensor<8x4xf32> -> tensor<8xf32>
// CHECK: %[[WQ:.*]] = ds.fake_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} axis = 0 {ds.quant} : tensor<8x4xf32>, tensor<8xf32>, tensor<f32>
// The activation: per tensor, affine.
// CHECK: %[[XQ:.*]] = ds.fake_quant %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {ds.quant} : tensor<2x4xf32>, tensor<f32>, tensor<f32>
// The second layer's weight is [in, out]: its output channels are axis 1.
// CHECK: ds.fake_quant {{.*}} axis = 1 {ds.quant} : tensor<8x3xf32>, tensor<3xf32>, tensor<f32>
// CHECK: ds.matmul %[[XQ]], %[[WQ]] transpose_rhs
// CHECK: ds.fake_quant {{.*}} {ds.quant} : tensor<2x8xf32>, tensor<f32>, tensor<f32>
// CHECK: %[[A:.*]] = ds.matmul
// CHECK-NOT: ds.fake_quant
// CHECK: ds.matmul %[[A]], %[[A]] transpose_rhs
// The iteration counter advances; every state gets its update.
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
// ACT-NOT: qat.weight
// ACT: qat.input.min
// ACT-NOT: axis = 0
// BITS: arith.constant {ds.quant} dense<-8.000000e+00> : tensor<f32>
// BITS: arith.constant {ds.quant} dense<7.000000e+00> : tensor<f32>
// BITS: ds.minimum
// BITS: arith.constant {ds.quant} dense<2.550000e+02> : tensor<f32>
// The schedule reads the counter: observers on while iteration < 10, fake
// quantization from iteration 2.
// SCHED: %[[LIMIT:.*]] = arith.constant {ds.quant} dense<10> : tensor<i64>
// SCHED: ds.compare lt, %{{.*}}, %[[LIMIT]] {ds.quant} : tensor<i64>, tensor<i64> -> tensor<i1>
// SCHED: %[[FROM:.*]] = arith.constant {ds.quant} dense<2> : tensor<i64>
// SCHED: %[[ON:.*]] = ds.compare ge, %{{.*}}, %[[FROM]] {ds.quant} : tensor<i64>, tensor<i64> -> tensor<i1>
// SCHED: ds.select %[[ON]]
// The current weights' range: no moving average (no first-observation test).
// CUR-NOT: ds.compare eq
// CUR: ds.fake_quant {{.*}} axis = 0
// The backward goes through the straight-through estimator.
// GRAD-DAG: ds.fake_quant_grad {{.*}} of = input {{.*}}: tensor<2x8xf32>, tensor<f32>, tensor<f32>
// GRAD-DAG: ds.fake_quant_grad {{.*}} of = input axis = 1 {{.*}}: tensor<8x3xf32>, tensor<3xf32>, tensor<f32>
// GRAD-DAG: ds.fake_quant_grad {{.*}} of = input axis = 0 {{.*}}: tensor<8x4xf32>, tensor<8xf32>, tensor<f32>
func.func @step(%w1: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<zeros>},
                %w2: tensor<8x3xf32> {ds.param = "fc2.weight", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %a = ds.matmul %h, %w2 : tensor<2x8xf32>, tensor<8x3xf32> -> tensor<2x3xf32>
  %s = ds.matmul %a, %a transpose_rhs : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x2xf32>
  %l = ds.reduce_sum %s [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// With a precision policy, the quantization wins for the fake-quantized
// layers (and the observers keep their f32 arithmetic); the map says so.
// RUN: ds-opt %s --ds-insert-fake-quant --ds-autodiff --ds-assign-precision | FileCheck %s --check-prefix=PREC
// PREC: op = "ds.matmul", role = "linear", rule = "quant: its inputs are fake-quantized (ds-insert-fake-quant), which wins over
// PREC-NOT: ds.reduce_max{{.*}}rule

// RUN: ds-opt %s --ds-insert-fake-quant="learn-scales" | FileCheck %s --check-prefix=LSQ
// With learn-scales the scales are parameters (the learned change, no weight decay), the
// start is state set on iteration 0 from the first values, and the
// fake-quantizer is learned with LSQ's gradient scale.
// LSQ-LABEL: func.func @step
// LSQ-SAME: {ds.init = #ds.init<zeros>, ds.optim = {weight_decay = 0.000000e+00 : f64}, ds.param = "fc1.weight_fake_quant.scale"}
// LSQ-SAME: ds.state = #ds.state<"qat.weight.scale_init", of = "fc1.weight">
// LSQ-SAME: ds.param = "fc1.input_fake_quant.scale"
// LSQ-SAME: ds.param = "fc1.input_fake_quant.zero_point"
// LSQ-SAME: ds.state = #ds.state<"qat.input.zero_point_init", of = "fc1.weight">
// LSQ-NOT: qat.weight.min
// LSQ: ds.reduce_mean
// LSQ: ds.stop_gradient
// LSQ: ds.fake_quant {{.*}} axis = 0 learned grad_scaling {ds.quant} : tensor<8x4xf32>, tensor<8xf32>, tensor<f32>

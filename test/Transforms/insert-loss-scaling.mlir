// RUN: ds-opt %s --ds-autodiff --ds-insert-loss-scaling | FileCheck %s
// RUN: ds-opt %s --ds-autodiff --ds-insert-loss-scaling="growth-interval=3 hysteresis=2 min-scale=1024 anomaly=0" | FileCheck %s --check-prefix=HYST
// RUN: ds-opt %s --ds-autodiff --ds-insert-loss-scaling="activation-cap-gamma=8 activation-cap-max=1e6 anomaly=0" | FileCheck %s --check-prefix=CAP
// RUN: ds-opt %s --ds-autodiff --ds-insert-loss-scaling="inject-nonfinite=1 anomaly=0" | FileCheck %s --check-prefix=INJECT
// RUN: ds-opt %s --ds-autodiff --ds-insert-loss-scaling --ds-insert-optimizer="kind=adam" | FileCheck %s --check-prefix=OPT

// The scale, growth tracker and anomaly state are new state arguments; the
// seed is multiplied by the scale; gradients are unscaled by the f32
// reciprocal computed in f64; found_inf, loss_scale, grad_norm and anomaly
// are metrics.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[W:[^:]*]]: tensor<3x5xf32> {{.*}}ds.param = "fc.weight"
// CHECK-SAME: %[[S:[^:]*]]: tensor<f32> {ds.init = #ds.init<constant, 6.553600e+04>, ds.state = #ds.state<"loss_scale">}
// CHECK-SAME: %[[T:[^:]*]]: tensor<i32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"loss_scale.growth_tracker">}
// CHECK-SAME: tensor<f64> {ds.init = #ds.init<constant, -1.000000e+00>, ds.state = #ds.state<"anomaly.prev_norm">}
// CHECK-SAME: tensor<i32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"anomaly.run_length">}
// CHECK-SAME: -> (tensor<f32> {ds.loss}, tensor<3x5xf32> {ds.grad = 0 : i64}, tensor<f32> {ds.update = 3 : i64}, tensor<i32> {ds.update = 4 : i64}, tensor<f32> {ds.metric = "found_inf"}, tensor<f32> {ds.metric = "loss_scale"}, tensor<f64> {ds.update = 5 : i64}, tensor<i32> {ds.update = 6 : i64}, tensor<f64> {ds.metric = "grad_norm"}, tensor<f32> {ds.metric = "anomaly"})
// CHECK: %[[SEED:.*]] = arith.constant {ds.seed} dense<1.000000e+00> : tensor<f32>
// CHECK: %[[SV:.*]] = tensor.extract %[[S]][] : tensor<f32>
// CHECK: %[[SCALE:.*]] = tensor.from_elements %{{.*}} : tensor<f32>
// CHECK: %[[SCALED:.*]] = ds.mul %[[SEED]], %[[SCALE]]
// CHECK: ds.mul %[[SCALED]], %{{.*}} {ds.op_id = 0 : i64, ds.vjp_of = "ds.mse_loss"}
// CHECK: %[[G:.*]] = ds.matmul {{.*}}ds.vjp_of = "ds.matmul"
// CHECK: %[[D:.*]] = ds.sub %[[G]], %[[G]]
// CHECK: ds.reduce_sum %[[D]] [0, 1]
// CHECK: %[[FOUND:.*]] = arith.cmpf uno
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %{{.*}} : f64
// CHECK: %[[INV32:.*]] = arith.truncf %[[INV]] : f64 to f32
// CHECK: %[[INVT:.*]] = tensor.from_elements %[[INV32]]
// CHECK: %[[UNSCALED:.*]] = ds.mul %[[G]], %[[INVT]]
// CHECK: arith.constant 2000 : i32
// CHECK: arith.cmpf ogt
// CHECK: return %{{.*}}, %[[UNSCALED]], {{.*}}%[[SCALE]],

// Megatron's hysteresis counter and the min-scale floor.
// HYST-LABEL: func.func @step(
// HYST-SAME: tensor<i32> {ds.init = #ds.init<constant, 2.000000e+00>, ds.state = #ds.state<"loss_scale.hysteresis">}
// HYST-NOT: anomaly
// HYST: arith.constant 1.024000e+03 : f64
// HYST: arith.maximumf
// HYST: arith.cmpi sle
// HYST: arith.constant 3 : i32

// The activation cap reads the previous step's max|activation| (the loss
// op's prediction) from state and updates it from this step.
// CAP-LABEL: func.func @step(
// CAP-SAME: %[[A:[^:]*]]: tensor<f32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"loss_scale.activation_max">}
// CAP: %[[P:.*]] = ds.matmul %{{.*}}, %{{.*}} transpose_rhs {ds.op_id = 1 : i64} : tensor<8x5xf32>
// CAP: arith.constant {ds.seed}
// CAP: tensor.extract %[[A]][]
// CAP: arith.constant 8.000000e+00 : f64
// CAP: arith.minimumf
// CAP: %[[ABS:.*]] = ds.abs %[[P]]
// CAP: ds.reduce_max %[[ABS]] [0, 1]

// Fault injection: an input that turns the prediction (and the scaled seed)
// into NaN.
// INJECT-LABEL: func.func @step(
// INJECT-SAME: %[[FLAG:[^:]*]]: tensor<f32> {ds.input = "inject_nonfinite"}
// INJECT: %[[P:.*]] = ds.matmul
// INJECT: %[[NAN:.*]] = arith.constant dense<0x7FC00000> : tensor<f32>
// INJECT: %[[ON:.*]] = ds.compare gt, %[[FLAG]]
// INJECT: %[[POISONED:.*]] = ds.select %[[ON]], %[[NAN]], %[[P]]
// INJECT: ds.mse_loss %[[POISONED]]
// INJECT: ds.select %[[ON]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
// INJECT: ds.sub %[[POISONED]]

// ds-insert-optimizer guards every update with found_inf.
// OPT-LABEL: func.func @step(
// OPT: %[[FOUND:.*]] = tensor.from_elements %{{.*}} : tensor<f32>
// OPT: %[[SKIP:.*]] = ds.compare gt, %[[FOUND]]
// OPT: ds.select %[[SKIP]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<3x5xf32>, tensor<3x5xf32>
// OPT: ds.select %[[SKIP]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<3x5xf32>, tensor<3x5xf32>
// OPT: ds.select %[[SKIP]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<3x5xf32>, tensor<3x5xf32>
// OPT: ds.select %[[SKIP]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<i64>, tensor<i64>
func.func @step(%w: tensor<3x5xf32> {ds.param = "fc.weight", ds.init = #ds.init<uniform, 0.5>},
                %x: tensor<8x5xf32> {ds.input = "x"},
                %y: tensor<8x3xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %p = ds.matmul %x, %w transpose_rhs : tensor<8x5xf32>, tensor<3x5xf32> -> tensor<8x3xf32>
  %l = ds.mse_loss %p, %y : tensor<8x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// RUN: ds-opt %s --ds-insert-fake-quant=dynamic-bits --ds-autodiff --ds-qat-bit-width | FileCheck %s
// RUN: not ds-opt %s --ds-autodiff --ds-qat-bit-width 2>&1 | FileCheck %s --check-prefix=NOTIER
// RUN: not ds-opt %s --ds-insert-fake-quant=dynamic-bits --ds-qat-bit-width 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not ds-opt %s --ds-insert-fake-quant="dynamic-bits policy=%S/Inputs/quant-int4-group2.yaml" 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not ds-opt %s --ds-insert-fake-quant=dynamic-bits --ds-autodiff --ds-qat-bit-width=window=0 2>&1 | FileCheck %s --check-prefix=WINDOW
// RUN: not ds-opt %s --ds-insert-fake-quant=dynamic-bits --ds-autodiff --ds-qat-bit-width=momentum=1 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// The numerics (tiers on the predicted steps) are checked by
// test/Integration/Quant/bit-width.test.
// NOTIER: error: 'func.func' op ds-qat-bit-width: has no 'qat.weight.tier' state: run ds-insert-fake-quant{dynamic-bits} on its forward first
// NOGRAD: ds-qat-bit-width
// GROUP: dynamic-bits moves weights between int4 and int8 per channel, but quant rule #0 (op ds.matmul) at {{.*}}quant-int4-group2.yaml:2:5 quantizes 'fc1.weight' to int4 per group; give it 'weight: int4' or 'int8' and 'group: channel'
// WINDOW: in option 'window' of pass 'ds-qat-bit-width': must be >= 1, got 0
// MOMENTUM: in option 'momentum' of pass 'ds-qat-bit-width': must be in [0, 1), got 1.000000

// The tier is state (starting at int8 for the default policy) whose grid
// the forward selects on the device; the backward half adds the running
// estimate and the calm counter, moves the tier and reports the bits.
// CHECK-LABEL: func.func @step
// CHECK-SAME: {ds.init = #ds.init<constant, 1.000000e+00>, ds.state = #ds.state<"qat.weight.tier", of = "fc1.weight">}
// CHECK-SAME: {ds.init = #ds.init<constant, -1.000000e+00>, ds.state = #ds.state<"qat.weight.grad_var", of = "fc1.weight">}
// CHECK-SAME: ds.state = #ds.state<"qat.weight.calm", of = "fc1.weight">
// CHECK-SAME: {ds.metric = "qat.bits.fc1.weight"}
// CHECK: %[[INT4:.*]] = ds.compare eq, %{{.*}}, %{{.*}} {ds.quant} : tensor<f32>, tensor<f32> -> tensor<i1>
// CHECK: ds.select %[[INT4]]
// CHECK: ds.fake_quant
func.func @step(%w1: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w1 transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %h [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// RUN: ds-opt %s -split-input-file --ds-autodiff | FileCheck %s
// The numerics of these gradients are checked against finite differences
// by test/Integration/Gradients/generic.test; this shows their structure.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (0, d1)>
// An elementwise generic with a body ds has no op for: one gradient generic
// per float input, recomputing the body; the broadcast input's gradient
// reduces over the loop it is broadcast along and is reshaped back.
// CHECK-LABEL: func.func @sin_mul
// CHECK: %[[FWD:.*]] = linalg.generic
// CHECK: math.sin
// CHECK: %[[GW:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ds.vjp_of = "linalg.generic"
// CHECK: math.cos
// CHECK: linalg.yield
// CHECK: %[[FILL:.*]] = linalg.fill
// CHECK: %[[GB:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]
// CHECK-SAME: outs(%[[FILL]] : tensor<5xf32>)
// CHECK: math.cos
// CHECK: arith.addf
// CHECK: %[[GB2:.*]] = ds.reshape %[[GB]] {{.*}} : tensor<5xf32> -> tensor<1x5xf32>
// CHECK: return {{.*}}, %[[GW]], %[[GB2]]
func.func @sin_mul(%w: tensor<3x5xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                   %b: tensor<1x5xf32> {ds.param = "b", ds.init = #ds.init<zeros>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %e = tensor.empty() : tensor<3x5xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w, %b : tensor<3x5xf32>, tensor<1x5xf32>) outs(%e : tensor<3x5xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    %s = math.sin %m : f32
    linalg.yield %s : f32
  } -> tensor<3x5xf32>
  %l = ds.reduce_sum %y [0, 1] : tensor<3x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

#id = affine_map<(d0) -> (d0)>
// Integer inputs get no gradient; only the float one does.
// CHECK-LABEL: func.func @int_exponent
// CHECK: math.fpowi
// CHECK: linalg.generic
// CHECK: arith.sitofp
// CHECK: math.fpowi
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @int_exponent(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                        %n: tensor<4xi32> {ds.input = "n"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %n : tensor<4xf32>, tensor<4xi32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %k: i32, %o: f32):
    %p = math.fpowi %a, %k : f32, i32
    linalg.yield %p : f32
  } -> tensor<4xf32>
  %l = ds.reduce_sum %y [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}


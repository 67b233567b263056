// RUN: ds-opt %s --ds-export-contract --split-input-file | FileCheck %s
// RUN: ds-opt %s --ds-export-contract=strip=false --split-input-file | FileCheck %s --check-prefix=KEEP

// The contract moves into the module table and the function becomes plain.

// CHECK-LABEL: module attributes {ds.contract = {step = {
// CHECK-SAME: args = [{init = #ds.init<normal, 2.000000e-02>, name = "w", role = "param", type = tensor<4x3xf32>},
// CHECK-SAME: {init = #ds.init<zeros>, role = "state", state = #ds.state<"adam.m", of = "w">, type = tensor<4x3xf32>},
// CHECK-SAME: {name = "x", role = "input", type = tensor<2x3xf32>}],
// CHECK-SAME: results = [{role = "loss", type = tensor<f32>}, {of = 0 : i64, role = "update", type = tensor<4x3xf32>}, {name = "l2", role = "metric", type = tensor<f32>}]
// CHECK: func.func @step(%{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<4x3xf32>, %{{.*}}: tensor<2x3xf32>) -> (tensor<f32>, tensor<4x3xf32>, tensor<f32>) {
// CHECK: func.func @helper
// CHECK-SAME: attributes {keep}

// KEEP-LABEL: module attributes {ds.contract
// KEEP: func.func @step(%{{.*}}: tensor<4x3xf32> {ds.init = #ds.init<normal, 2.000000e-02>, ds.param = "w"}
// KEEP-SAME: attributes {ds.train_step}
func.func @step(%w: tensor<4x3xf32> {ds.param = "w", ds.init = #ds.init<normal, 0.02>},
                %m: tensor<4x3xf32> {ds.state = #ds.state<"adam.m", of = "w">, ds.init = #ds.init<zeros>},
                %x: tensor<2x3xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}, tensor<4x3xf32> {ds.update = 0 : i64}, tensor<f32> {ds.metric = "l2"})
    attributes {ds.train_step} {
  %y = ds.matmul %x, %w transpose_rhs : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %l = ds.mse_loss %y, %y : tensor<2x4xf32> -> tensor<f32>
  return %l, %w, %l : tensor<f32>, tensor<4x3xf32>, tensor<f32>
}
func.func @helper() attributes {keep} {
  return
}

// -----

// A module without training steps is left alone.
// CHECK-LABEL: module {
// CHECK-NEXT: func.func @plain
func.func @plain() {
  return
}

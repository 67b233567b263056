// RUN: ds-opt %s --ds-export-contract --ds-prepare-step-abi | FileCheck %s
// RUN: not ds-opt %s --ds-prepare-step-abi 2>&1 | FileCheck %s --check-prefix=ERR

// CHECK-LABEL: func.func @step
// CHECK-SAME: %{{.*}}: tensor<4xf32> {bufferization.writable = false}, %{{.*}}: tensor<4xf32> {bufferization.writable = false})
// CHECK-SAME: attributes {llvm.emit_c_interface}
// ERR: error: ds-prepare-step-abi: the module has no 'ds.contract' table; run ds-export-contract first
func.func @step(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                %x: tensor<4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

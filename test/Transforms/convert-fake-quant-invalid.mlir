// RUN: ds-opt %s --ds-convert-fake-quant -split-input-file -verify-diagnostics
// RUN: not ds-opt %S/Inputs/two-layers.mlir --ds-insert-fake-quant --ds-convert-fake-quant 2>&1 | FileCheck %s --check-prefix=OBSERVING
// RUN: not ds-opt %S/Inputs/two-layers.mlir --ds-insert-fake-quant="observe=false" --ds-autodiff --ds-convert-fake-quant 2>&1 | FileCheck %s --check-prefix=GRADS
// RUN: not ds-opt %S/Inputs/two-layers.mlir --ds-insert-fake-quant="observe=false weight-bits=4 dynamic-bits" --ds-convert-fake-quant 2>&1 | FileCheck %s --check-prefix=NOTHING
// OBSERVING: error: 'ds.fake_quant' op ds-convert-fake-quant: computes its scale in the step: its observer still runs, so the model is still being trained; convert the frozen forward (ds-insert-fake-quant{observe=false}), whose scales and zero points are the trained state
// GRADS: error: 'func.func' op ds-convert-fake-quant: converts the forward + loss of a trained model for inference; this step has gradients or parameter updates
// NOTHING: error: 'func.func' op ds-convert-fake-quant: has no ds.matmul whose activation and weight are frozen integer fake-quantizations; nothing to convert
// NOTHING: note: ds.matmul at {{.*}}: its weight is fake-quantized or not by a condition computed at run time (dynamic bit-width)

// A step that was never fake-quantized.
// expected-error @+1 {{ds-convert-fake-quant: has no ds.fake_quant to convert: quantize the forward of a model trained with QAT first (ds-insert-fake-quant{observe=false})}}
func.func @step(%w: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %h [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An FP8 fake-quantizer on a matmul's operands: nothing is convertible.
// expected-error @+2 {{ds-convert-fake-quant: has no ds.matmul whose activation and weight are frozen integer fake-quantizations; nothing to convert}}
// expected-note @+1 {{its activation cannot be an int8 operand: it is fake-quantized to FP8}}
func.func @step(%w: tensor<8x4xf32> {ds.param = "fc1.weight", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"},
                %s: tensor<f32> {ds.state = #ds.state<"s">, ds.init = #ds.init<ones>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %z = arith.constant dense<0.0> : tensor<f32>
  %lo = arith.constant dense<-448.0> : tensor<f32>
  %hi = arith.constant dense<448.0> : tensor<f32>
  %xq = ds.fake_quant %x, %s, %z, %lo, %hi format = f8E4M3FN : tensor<2x4xf32>, tensor<f32>, tensor<f32>
  %wq = ds.fake_quant %w, %s, %z, %lo, %hi format = f8E4M3FN : tensor<8x4xf32>, tensor<f32>, tensor<f32>
  %h = ds.matmul %xq, %wq transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %h [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

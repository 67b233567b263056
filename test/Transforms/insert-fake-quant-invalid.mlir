// RUN: ds-opt %s --ds-insert-fake-quant -split-input-file -verify-diagnostics
// RUN: not ds-opt %s --ds-insert-fake-quant="weight-bits=1" -split-input-file 2>&1 | FileCheck %s --check-prefix=BITS
// RUN: not ds-opt %s --ds-insert-fake-quant="activation-bits=17" -split-input-file 2>&1 | FileCheck %s --check-prefix=ABITS
// RUN: not ds-opt %s --ds-insert-fake-quant="averaging-constant=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=AVG
// RUN: not ds-opt %s --ds-insert-fake-quant="freeze-observers-at=-1" -split-input-file 2>&1 | FileCheck %s --check-prefix=FREEZE
// RUN: not ds-opt %s --ds-insert-fake-quant="freeze-observers-at=3 fake-quant-from=5" -split-input-file 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not ds-opt %s --ds-insert-fake-quant="weights=false activations=false" -split-input-file 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not ds-opt %s --ds-insert-fake-quant="weight-bits=4 weight-bits=8" -split-input-file 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not ds-opt %s --ds-insert-fake-quant --ds-insert-fake-quant -split-input-file 2>&1 | FileCheck %s --check-prefix=AGAIN
// RUN: not ds-opt %s --ds-training-pipeline="fake-quant-weight-bits=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=BITS0
// RUN: not ds-opt %s --ds-insert-fake-quant="observer=max-abs" -split-input-file 2>&1 | FileCheck %s --check-prefix=MAXABS
// MAXABS: in option 'observer' of pass 'ds-insert-fake-quant': max-abs is the seeds' symmetric weight scale; the activation grid is affine (use moving-average, min-max or current)
// BITS: in option 'weight-bits' of pass 'ds-insert-fake-quant': must be in [2, 16], got 1
// ABITS: in option 'activation-bits' of pass 'ds-insert-fake-quant': must be in [2, 16], got 17
// AVG: in option 'averaging-constant' of pass 'ds-insert-fake-quant': must be in (0, 1], got 0.000000
// FREEZE: in option 'freeze-observers-at' of pass 'ds-insert-fake-quant': must be >= 0 (0: never), got -1
// ORDER: in option 'freeze-observers-at' of pass 'ds-insert-fake-quant': freezes the observers at iteration 3, before fake quantization starts (fake-quant-from = 5)
// NONE: in option 'weights' of pass 'ds-insert-fake-quant': and 'activations' are both off: nothing to do
// TWICE: in option 'weight-bits' of pass 'ds-insert-fake-quant': given 2 times; give each option once
// AGAIN: error: 'func.func' op ds-insert-fake-quant: the step is already fake-quantized (it has 'qat.*' state)
// BITS0: in option 'weight-bits' of pass 'ds-insert-fake-quant': must be in [2, 16], got 0

// expected-error@+1 {{ds-insert-fake-quant: runs on the forward + loss step, before ds-autodiff; this step already has gradients or updates}}
func.func @step(%w: tensor<8x4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}, tensor<8x4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %h [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<8x4xf32>
}

// -----

// A step without a layer to quantize is left as it is, with a warning.
// expected-warning@+1 {{ds-insert-fake-quant: found no layer the quantization policy matches; the step is unchanged}}
func.func @step(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                %x: tensor<4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %p = ds.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %l = ds.reduce_sum %p [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @step(%w: tensor<8x4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %h [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// One weight read by two layers along different channel axes: refused
// before anything changes (one value has one fake-quantizer).
func.func @step(%w: tensor<4x4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  // expected-error@+1 {{ds-insert-fake-quant: reads a value that another layer}}
  %y = ds.matmul %h, %w transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %l = ds.reduce_sum %y [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A weight shared by two layers (tied layers) is quantized once, but the
// layers' inputs would both be named after it: refused.
func.func @step(%w: tensor<4x4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                %x: tensor<2x4xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  // expected-error@+1 {{ds-insert-fake-quant: is the second layer whose input is named after 'w' but is another value}}
  %y = ds.matmul %h, %w transpose_rhs : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %l = ds.reduce_sum %y [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// RUN: not ds-opt %s --ds-insert-fake-quant="learn-scales dynamic-bits" -split-input-file 2>&1 | FileCheck %s --check-prefix=LSQBITS
// RUN: not ds-opt %s --ds-insert-fake-quant="learn-scales freeze-observers-at=5" -split-input-file 2>&1 | FileCheck %s --check-prefix=LSQFREEZE
// LSQBITS: in option 'learn-scales' of pass 'ds-insert-fake-quant': and 'dynamic-bits' do not combine: a learned scale belongs to one grid
// LSQFREEZE: in option 'freeze-observers-at' of pass 'ds-insert-fake-quant': has nothing to freeze with 'learn-scales' (no observer runs; the scales are parameters)

// RUN: ds-opt %s --ds-insert-fake-quant="observe=false fake-quant-from=3" --ds-convert-fake-quant 2>%t.err | FileCheck %s
// RUN: FileCheck %s --check-prefix=WARN --allow-empty < %t.err
// RUN: ds-opt %s --ds-insert-fake-quant="observe=false reduce-range=false" --ds-convert-fake-quant 2>/dev/null | FileCheck %s --check-prefix=U8
// RUN: ds-opt %s --ds-insert-fake-quant="observe=false" --ds-convert-fake-quant --convert-ds-to-linalg 2>/dev/null | FileCheck %s --check-prefix=LOWER
// The numerics (integer inference against the fake-quantized forward, and
// the runtime's int8 GEMM against an exact loop) are checked by
// test/Integration/Quant/integer-inference.test and DSRuntimeTests.

// Two linear layers become int8: each operand a ds.quantize of the frozen
// state (no schedule: inference quantizes always), one ds.quantized_matmul.
// The attention-style matmul of two activations is no layer and stays.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W1:[a-z0-9_]+]]: tensor<8x4xf32> {ds.init = #ds.init<zeros>, ds.param = "fc1.weight"}
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<2x4xf32> {ds.input = "x"}
// CHECK-SAME: %[[SW1:[a-z0-9_]+]]: tensor<8xf32> {ds.init = #ds.init<ones>, ds.state = #ds.state<"qat.weight.scale", of = "fc1.weight">}
// CHECK-SAME: %[[ZW1:[a-z0-9_]+]]: tensor<8xf32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"qat.weight.zero_point", of = "fc1.weight">}
// CHECK-SAME: %[[SX1:[a-z0-9_]+]]: tensor<f32> {ds.init = #ds.init<ones>, ds.state = #ds.state<"qat.input.scale", of = "fc1.weight">}
// CHECK-SAME: %[[ZX1:[a-z0-9_]+]]: tensor<f32> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"qat.input.zero_point", of = "fc1.weight">}
// CHECK-NOT: ds.fake_quant
// CHECK-NOT: ds.select
// Each operand is quantized right after its fake-quantizer was (the
// weights' and the input's at the top).
// CHECK-DAG: %[[XI:.*]] = ds.quantize %[[X]], %[[SX1]], %[[ZX1]], %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<f32>, tensor<f32> -> tensor<2x4xi8>
// CHECK-DAG: %[[WI:.*]] = ds.quantize %[[W1]], %[[SW1]], %[[ZW1]], %{{.*}}, %{{.*}} axis = 0 : tensor<8x4xf32>, tensor<8xf32>, tensor<f32> -> tensor<8x4xi8>
// CHECK-DAG: %[[W2I:.*]] = ds.quantize {{.*}} axis = 1 : tensor<8x3xf32>, tensor<3xf32>, tensor<f32> -> tensor<8x3xi8>
// CHECK: %[[H:.*]] = ds.quantized_matmul %[[XI]], %[[WI]], %[[SX1]], %[[ZX1]], %[[SW1]], %[[ZW1]] transpose_rhs : tensor<2x4xi8>, tensor<8x4xi8>, tensor<f32>, tensor<8xf32> -> tensor<2x8xf32>
// CHECK: ds.quantize %[[H]]
// CHECK: %[[A:.*]] = ds.quantized_matmul %{{.*}}, %[[W2I]], {{.*}} : tensor<2x8xi8>, tensor<8x3xi8>, tensor<f32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: ds.matmul %[[A]], %[[A]] transpose_rhs
// Nothing was left fake-quantized, so the pass says nothing.
// WARN-NOT: warning

// An unsigned 8-bit grid (0..255) is stored shifted by -128.
// U8: %[[C128:.*]] = arith.constant dense<1.280000e+02> : tensor<f32>
// U8: %[[ZS:.*]] = ds.sub %{{.*}}, %[[C128]]
// U8: %[[LO:.*]] = arith.constant dense<-1.280000e+02> : tensor<f32>
// U8: %[[HI:.*]] = arith.constant dense<1.270000e+02> : tensor<f32>
// U8: ds.quantize %{{.*}}, %{{.*}}, %[[ZS]], %[[LO]], %[[HI]] : tensor<2x4xf32>
// U8: ds.quantized_matmul %{{.*}}, %{{.*}}, %{{.*}}, %[[ZS]],

// Lowered: an i8 x i8 -> i32 linalg.matmul into a zero fill (the runtime's
// integer GEMM after bufferization), the zero-point sums, and one
// elementwise generic that corrects in i32 and scales in f32.
// LOWER: linalg.fill ins(%{{.*}} : i32)
// LOWER: linalg.matmul {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x4xi8>, tensor<8x4xi8>) outs(%{{.*}} : tensor<2x8xi32>)
// LOWER: arith.subi
// LOWER: arith.sitofp
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

// RUN: ds-opt %S/Inputs/two-layers.mlir --ds-insert-fake-quant="observe=false" --ds-convert-fake-quant --ds-cpu-pipeline | FileCheck %s --check-prefix=CPU
// Both integer GEMMs call the runtime's exact int8 GEMM.
// CPU-COUNT-2: llvm.call @dsrt_matmul_s8s8s32(
// CPU-NOT: llvm.call @dsrt_matmul_s8s8s32(

// RUN: ds-opt %S/Inputs/two-layers.mlir --ds-insert-fake-quant="observe=false" --ds-convert-fake-quant="prepare-weights" | FileCheck %s --check-prefix=PREP
// With prepare-weights the weights are quantized once, by a step of their
// own whose updates are int8 state the inference step reads.
// PREP-LABEL: func.func @step(
// PREP-SAME: %[[W1I:[a-z0-9_]+]]: tensor<8x4xi8> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"qat.weight.int8", of = "fc1.weight">}
// PREP-SAME: %[[W2I:[a-z0-9_]+]]: tensor<8x3xi8> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"qat.weight.int8", of = "fc2.weight">}
// PREP-NOT: ds.quantize {{.*}}axis
// PREP: ds.quantized_matmul %{{.*}}, %[[W1I]],
// PREP: ds.quantized_matmul %{{.*}}, %[[W2I]],
// PREP: return
// PREP-LABEL: func.func @step_weights(
// PREP-SAME: -> (tensor<f32> {ds.loss}, tensor<8x4xi8> {ds.update = 20 : i64}, tensor<8x3xi8> {ds.update = 21 : i64})
// PREP-NOT: ds.quantized_matmul
// PREP: %[[Q1:.*]] = ds.quantize {{.*}} axis = 0 : tensor<8x4xf32>, tensor<8xf32>, tensor<f32> -> tensor<8x4xi8>
// PREP: %[[Q2:.*]] = ds.quantize {{.*}} axis = 1 : tensor<8x3xf32>, tensor<3xf32>, tensor<f32> -> tensor<8x3xi8>
// PREP-NOT: ds.matmul
// PREP: return %{{.*}}, %[[Q1]], %[[Q2]] :

// RUN: ds-opt %S/Inputs/tied-weight.mlir --ds-insert-fake-quant="observe=false" --ds-convert-fake-quant="prepare-weights" | FileCheck %s --check-prefix=TIED
// A weight two matmuls read is quantized once: one int8 state, named after
// its parameter, read by both integer matmuls (the contract verifies).
// TIED-LABEL: func.func @step(
// TIED-SAME: %[[WI:[a-z0-9_]+]]: tensor<8x8xi8> {ds.init = #ds.init<zeros>, ds.state = #ds.state<"qat.weight.int8", of = "fc.weight">})
// TIED-COUNT-2: ds.quantized_matmul %{{.*}}, %[[WI]],
// TIED-LABEL: func.func @step_weights(
// TIED-COUNT-1: ds.quantize
// TIED-NOT: ds.quantize

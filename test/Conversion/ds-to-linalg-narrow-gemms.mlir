// RUN: ds-opt %s --convert-ds-to-linalg="narrow-gemms" --mlir-print-local-scope | FileCheck %s
// RUN: ds-opt %s --convert-ds-to-linalg --mlir-print-local-scope | FileCheck %s --check-prefix=DEFAULT

// narrow-gemms (ds-gpu-pipeline sets it): a matmul of bf16 or f16 operands
// stays one mixed-type contraction that accumulates in f32, for cuBLASLt's
// BF16/F16 GEMMs; FP8 operands are still extended to f32 first. By default
// (the CPU path) every narrow operand is extended.

// CHECK-LABEL: func.func @bf16_into_f32(
// CHECK-NOT:     arith.extf
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// DEFAULT-LABEL: func.func @bf16_into_f32(
// DEFAULT:         arith.extf %{{.*}} : bf16 to f32
// DEFAULT:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32>)
func.func @bf16_into_f32(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  %0 = ds.matmul %a, %b : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// A bf16 result is rounded once from the f32 accumulator.
// CHECK-LABEL: func.func @f16_into_f16(
// CHECK:         linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x4x8xf16>, tensor<2x8x16xf16>) outs(%{{.*}} : tensor<2x4x16xf32>)
// CHECK:         arith.truncf %{{.*}} : f32 to f16
func.func @f16_into_f16(%a: tensor<2x4x8xf16>, %b: tensor<2x8x16xf16>) -> tensor<2x4x16xf16> {
  %0 = ds.matmul %a, %b : tensor<2x4x8xf16>, tensor<2x8x16xf16> -> tensor<2x4x16xf16>
  return %0 : tensor<2x4x16xf16>
}

// CHECK-LABEL: func.func @fp8_extended(
// CHECK:         arith.extf %{{.*}} : f8E4M3FN to f32
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x16xf32>, tensor<16x16xf32>)
func.func @fp8_extended(%a: tensor<4x16xf8E4M3FN>, %b: tensor<16x16xf8E4M3FN>) -> tensor<4x16xf32> {
  %0 = ds.matmul %a, %b : tensor<4x16xf8E4M3FN>, tensor<16x16xf8E4M3FN> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// RUN: ds-opt %s --convert-ds-to-linalg="narrow-gemms fp8-gemms" --mlir-print-local-scope | FileCheck %s --check-prefix=FP8
// With fp8-gemms, FP8 matmuls with dimensions multiples of 16 and a
// format pair cuBLASLt has (not E5M2 x E5M2) keep their operands, copied
// transposed where needed into cuBLASLt's one FP8 layout, X * W^T; the
// others are still extended. (Numerics: Integration/Lowering/matmul-shape.)
// Four rows: not a multiple of 16.
// FP8-LABEL: func.func @fp8_extended(
// FP8:         arith.extf %{{.*}} : f8E4M3FN to f32
// FP8-LABEL: func.func @fp8_tn(
// FP8-NOT:     linalg.transpose
// FP8-NOT:     arith.extf
// FP8:         linalg.matmul {{.*}}ins(%{{.*}}, %{{.*}} : tensor<32x16xf8E4M3FN>, tensor<64x16xf8E4M3FN>) outs(%{{.*}} : tensor<32x64xf32>)
// FP8-LABEL: func.func @fp8_nn(
// FP8:         linalg.transpose ins(%{{.*}} : tensor<16x64xf8E4M3FN>) outs(%{{.*}} : tensor<64x16xf8E4M3FN>)
// FP8:         linalg.matmul
// The backward's dW = dY^T * X: both operands transposed, E5M2 x E4M3.
// FP8-LABEL: func.func @fp8_grad_weight(
// FP8:         linalg.transpose ins(%{{.*}} : tensor<32x64xf8E5M2>) outs(%{{.*}} : tensor<64x32xf8E5M2>)
// FP8:         linalg.transpose ins(%{{.*}} : tensor<32x16xf8E4M3FN>) outs(%{{.*}} : tensor<16x32xf8E4M3FN>)
// FP8:         linalg.matmul {{.*}}ins(%{{.*}}, %{{.*}} : tensor<64x32xf8E5M2>, tensor<16x32xf8E4M3FN>) outs(%{{.*}} : tensor<64x16xf32>)
// FP8-LABEL: func.func @fp8_e5m2(
// FP8:         arith.extf %{{.*}} : f8E5M2 to f32
// FP8-LABEL: func.func @fp8_unaligned(
// FP8:         arith.extf %{{.*}} : f8E4M3FN to f32
func.func @fp8_tn(%a: tensor<32x16xf8E4M3FN>, %b: tensor<64x16xf8E4M3FN>) -> tensor<32x64xf32> {
  %0 = ds.matmul %a, %b transpose_rhs : tensor<32x16xf8E4M3FN>, tensor<64x16xf8E4M3FN> -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}
func.func @fp8_nn(%a: tensor<32x16xf8E4M3FN>, %b: tensor<16x64xf8E4M3FN>) -> tensor<32x64xf32> {
  %0 = ds.matmul %a, %b : tensor<32x16xf8E4M3FN>, tensor<16x64xf8E4M3FN> -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}
func.func @fp8_grad_weight(%dy: tensor<32x64xf8E5M2>, %x: tensor<32x16xf8E4M3FN>) -> tensor<64x16xf32> {
  %0 = ds.matmul %dy, %x transpose_lhs : tensor<32x64xf8E5M2>, tensor<32x16xf8E4M3FN> -> tensor<64x16xf32>
  return %0 : tensor<64x16xf32>
}
func.func @fp8_e5m2(%a: tensor<32x16xf8E5M2>, %b: tensor<64x16xf8E5M2>) -> tensor<32x64xf32> {
  %0 = ds.matmul %a, %b transpose_rhs : tensor<32x16xf8E5M2>, tensor<64x16xf8E5M2> -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}
func.func @fp8_unaligned(%a: tensor<32x8xf8E4M3FN>, %b: tensor<64x8xf8E4M3FN>) -> tensor<32x64xf32> {
  %0 = ds.matmul %a, %b transpose_rhs : tensor<32x8xf8E4M3FN>, tensor<64x8xf8E4M3FN> -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

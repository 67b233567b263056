// RUN: ds-opt %s --split-input-file --verify-diagnostics --ds-check-gpu-support=fp8-gemms -o /dev/null
// RUN: ds-opt %s --split-input-file --ds-check-gpu-support -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM80

// ds-check-gpu-support warns, once per function and reason, where an FP8
// GEMM will run as an f32 GEMM on its FP8 values: the shapes and types
// cuBLASLt's FP8 path does not take, every FP8 GEMM on a chip without FP8
// GEMMs (no fp8-gemms: before sm_89), and the policy's block-scaled GEMMs.

// The GEMMs cuBLASLt's FP8 path takes get no warning: the forward X * W^T,
// the backward's E5M2 x E4M3 in any layout (transposed into X * W^T), a
// batched X.
func.func @taken(%x: tensor<32x16xf8E4M3FN>, %w: tensor<48x16xf8E4M3FN>,
                 %dy: tensor<32x48xf8E5M2>, %xb: tensor<2x16x16xf8E4M3FN>)
    -> (tensor<32x48xf32>, tensor<32x16xf32>, tensor<48x16xf32>, tensor<2x16x48xf32>) {
  %y = ds.matmul %x, %w transpose_rhs : tensor<32x16xf8E4M3FN>, tensor<48x16xf8E4M3FN> -> tensor<32x48xf32>
  %dx = ds.matmul %dy, %w : tensor<32x48xf8E5M2>, tensor<48x16xf8E4M3FN> -> tensor<32x16xf32>
  %dw = ds.matmul %dy, %x transpose_lhs : tensor<32x48xf8E5M2>, tensor<32x16xf8E4M3FN> -> tensor<48x16xf32>
  %yb = ds.matmul %xb, %w transpose_rhs : tensor<2x16x16xf8E4M3FN>, tensor<48x16xf8E4M3FN> -> tensor<2x16x48xf32>
  return %y, %dx, %dw, %yb : tensor<32x48xf32>, tensor<32x16xf32>, tensor<48x16xf32>, tensor<2x16x48xf32>
}

// -----

// One warning per reason, at the first matmul, with their number; f32 and
// bf16 GEMMs are not FP8 GEMMs.
func.func @not_taken(%a: tensor<5x16xf8E4M3FN>, %b: tensor<16x7xf8E4M3FN>,
                     %g: tensor<32x16xf8E5M2>, %h: tensor<16x16xf8E5M2>,
                     %q: tensor<2x16x16xf8E4M3FN>, %f: tensor<5x16xf32>,
                     %f2: tensor<16x7xf32>)
    -> (tensor<5x7xf32>, tensor<5x7xf32>, tensor<32x16xf32>, tensor<2x16x16xf32>, tensor<5x7xf32>) {
  // expected-warning @+1 {{2 FP8 matmuls of 'not_taken' run as f32 GEMMs on their FP8 values under ds-gpu-pipeline (the same numbers, at f32 speed): M = 5, N = 7, K = 16 (cuBLASLt's FP8 path needs multiples of 16)}}
  %0 = ds.matmul %a, %b : tensor<5x16xf8E4M3FN>, tensor<16x7xf8E4M3FN> -> tensor<5x7xf32>
  %1 = ds.matmul %a, %b : tensor<5x16xf8E4M3FN>, tensor<16x7xf8E4M3FN> -> tensor<5x7xf32>
  // expected-warning @+1 {{1 FP8 matmul of 'not_taken' runs as an f32 GEMM on its FP8 values under ds-gpu-pipeline (the same numbers, at f32 speed): E5M2 x E5M2 (cuBLASLt has no such FP8 kernel)}}
  %2 = ds.matmul %g, %h : tensor<32x16xf8E5M2>, tensor<16x16xf8E5M2> -> tensor<32x16xf32>
  // expected-warning @+1 {{a batched rhs (cuBLASLt's FP8 path takes one 2-D weight)}}
  %3 = ds.matmul %q, %q : tensor<2x16x16xf8E4M3FN>, tensor<2x16x16xf8E4M3FN> -> tensor<2x16x16xf32>
  %4 = ds.matmul %f, %f2 : tensor<5x16xf32>, tensor<16x7xf32> -> tensor<5x7xf32>
  return %0, %1, %2, %3, %4 : tensor<5x7xf32>, tensor<5x7xf32>, tensor<32x16xf32>, tensor<2x16x16xf32>, tensor<5x7xf32>
}

// -----

// The precision map's block-scaled GEMMs, by label, at their function.
module attributes {ds.precision_map = {step = [
    {compute = "f8E4M3FN", label = "attn.q#4", op = "ds.matmul", role = "attn.q", scaling = "delayed"},
    {compute = "f8E4M3FN", label = "attn.k#7", op = "ds.matmul", role = "attn.k", scaling = "block"},
    {compute = "f8E4M3FN", label = "attn.v#10", op = "ds.matmul", role = "attn.v", scaling = "block"}]}} {
  // expected-warning @+1 {{the block-scaled FP8 GEMMs of 'step' (attn.k#7, attn.v#10) run under ds-gpu-pipeline as f32 GEMMs on operands dequantised tile by tile (the same numbers, at f32 speed): cuBLASLt's block-scaled FP8 GEMMs are not used yet}}
  func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// Without fp8-gemms (a chip before sm_89) every FP8 GEMM gets one warning
// per function, the ones cuBLASLt would take on sm_89 included.
// SM80: warning: 4 FP8 matmuls of 'taken' run as f32 GEMMs on their FP8 values under ds-gpu-pipeline (the same numbers, at f32 speed): the chip has no FP8 GEMMs (cuBLASLt's need sm_89 or newer)
// SM80: warning: 4 FP8 matmuls of 'not_taken' run as f32 GEMMs {{.*}}: the chip has no FP8 GEMMs

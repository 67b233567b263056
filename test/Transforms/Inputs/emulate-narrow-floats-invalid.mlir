// Negative cases of ds-emulate-narrow-floats (run by
// test/Transforms/emulate-narrow-floats.mlir).

func.func @negative_unsupported_fp8(%x: f32) -> f8E4M3FNUZ {
  // expected-error@+1 {{'arith.truncf' op on 'f8E4M3FNUZ' cannot be emulated: ds-emulate-narrow-floats handles f8E4M3FN and f8E5M2}}
  %r = arith.truncf %x : f32 to f8E4M3FNUZ
  return %r : f8E4M3FNUZ
}

// -----

func.func @negative_rounding_mode(%x: f32) -> bf16 {
  // expected-error@+1 {{'arith.truncf' op with rounding mode 'downward' cannot be emulated: ds-emulate-narrow-floats rounds to nearest, ties to even}}
  %r = arith.truncf %x downward : f32 to bf16
  return %r : bf16
}

// -----

func.func @negative_tensor(%x: tensor<4xf32>) -> tensor<4xf8E5M2> {
  // expected-error@+1 {{'arith.truncf' op on tensors cannot be emulated: ds-emulate-narrow-floats runs after bufferization on scalars and vectors}}
  %r = arith.truncf %x : tensor<4xf32> to tensor<4xf8E5M2>
  return %r : tensor<4xf8E5M2>
}

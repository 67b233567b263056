// RUN: ds-opt %s --convert-ds-to-linalg -split-input-file -verify-diagnostics

// An op the lowering cannot express is reported at the op, by name, and
// the pass fails (nothing is rewritten).

func.func @negative_embedding_empty_table(%w: tensor<0x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // expected-error @below {{failed to legalize operation 'ds.embedding' that was explicitly marked illegal}}
  %0 = ds.embedding %w, %i : tensor<0x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

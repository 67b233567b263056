// RUN: ds-opt %s -split-input-file -verify-diagnostics

func.func @f(%x: tensor<2x12xf32>, %w: tensor<16x12xf32>, %m: tensor<2x1xi8>) -> tensor<2x16xf32> {
  // expected-error@+1 {{'ds.block_sparse_matmul' op block size 8 does not divide dimension 1 (12) of the weight 'tensor<16x12xf32>'}}
  %y = ds.block_sparse_matmul %x, %w, %m block = 8 transpose_weight : tensor<2x12xf32>, tensor<16x12xf32>, tensor<2x1xi8> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

func.func @f(%x: tensor<2x16xf32>, %w: tensor<16x16xf32>, %m: tensor<2x3xi8>) -> tensor<2x16xf32> {
  // expected-error@+1 {{'ds.block_sparse_matmul' op expects a mask of shape [2, 2] (one element per 8x8 block), got 'tensor<2x3xi8>'}}
  %y = ds.block_sparse_matmul %x, %w, %m block = 8 : tensor<2x16xf32>, tensor<16x16xf32>, tensor<2x3xi8> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<16x16xf32>, %m: tensor<2x2xi8>) -> tensor<2x16xf32> {
  // expected-error@+1 {{'ds.block_sparse_matmul' op contracts input dimension of size 8 with weight dimension 1 of size 16}}
  %y = ds.block_sparse_matmul %x, %w, %m block = 8 transpose_weight : tensor<2x8xf32>, tensor<16x16xf32>, tensor<2x2xi8> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

func.func @f(%a: tensor<4x16xf32>, %b: tensor<3x8xf32>, %m: tensor<2x1xi8>) -> tensor<16x8xf32> {
  // expected-error@+1 {{'ds.block_sampled_matmul' op expects lhs and rhs of rank >= 2 with the same leading dimensions, got 'tensor<4x16xf32>' and 'tensor<3x8xf32>'}}
  %d = ds.block_sampled_matmul %a, %b, %m block = 8 : tensor<4x16xf32>, tensor<3x8xf32>, tensor<2x1xi8> -> tensor<16x8xf32>
  return %d : tensor<16x8xf32>
}

// -----

func.func @f(%s: tensor<4x4xf32>, %k: tensor<2xi64>) -> tensor<4x4xi8> {
  // expected-error@+1 {{'ds.top_k_mask' op expects a rank-0 k, got 'tensor<2xi64>'}}
  %m = ds.top_k_mask %s, %k : tensor<4x4xf32>, tensor<2xi64> -> tensor<4x4xi8>
  return %m : tensor<4x4xi8>
}

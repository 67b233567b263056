// RUN: ds-opt %s -split-input-file -verify-diagnostics

func.func @f(%g: tensor<4x8xf32>) -> i64 {
  // expected-error@+1 {{'ds.all_reduce_start' op expects a 1-D bucket, got 'tensor<4x8xf32>'}}
  %r = ds.all_reduce_start %g scheme = none : tensor<4x8xf32> -> i64
  return %r : i64
}

// -----

func.func @f(%g: tensor<8xf32>) -> i64 {
  // expected-error@+1 {{'ds.all_reduce_start' op scheme 'three_tier' needs error-feedback residual operand and result}}
  %r = ds.all_reduce_start %g scheme = three_tier : tensor<8xf32> -> i64
  return %r : i64
}

// -----

func.func @f(%g: tensor<8xf32>, %r0: tensor<8xf32>) -> i64 {
  // expected-error@+1 {{'ds.all_reduce_start' op scheme 'fp16' takes no error-feedback residual operand and result}}
  %r, %r1 = ds.all_reduce_start %g residual(%r0 : tensor<8xf32>) scheme = fp16 : tensor<8xf32> -> i64, tensor<8xf32>
  return %r : i64
}

// -----

func.func @f(%g: tensor<8xf32>, %r0: tensor<8xf32>, %p: tensor<2xf64>) -> i64 {
  // expected-error@+1 {{'ds.all_reduce_start' op expects params of type tensor<3xf64>, got 'tensor<2xf64>'}}
  %r, %r1 = ds.all_reduce_start %g residual(%r0 : tensor<8xf32>) params(%p : tensor<2xf64>) scheme = topk : tensor<8xf32> -> i64, tensor<8xf32>
  return %r : i64
}

// -----

func.func @f(%h: i64) -> tensor<8xf32> {
  // expected-error@+1 {{'ds.all_reduce_wait' op expects a request made by ds.all_reduce_start}}
  %m = ds.all_reduce_wait %h : i64 -> tensor<8xf32>
  return %m : tensor<8xf32>
}

// -----

func.func @f(%g: tensor<8xf32>) -> tensor<4xf32> {
  %r = ds.all_reduce_start %g scheme = none : tensor<8xf32> -> i64
  // expected-error@+1 {{'ds.all_reduce_wait' op expects a result of the bucket's type 'tensor<8xf32>', got 'tensor<4xf32>'}}
  %m = ds.all_reduce_wait %r : i64 -> tensor<4xf32>
  return %m : tensor<4xf32>
}

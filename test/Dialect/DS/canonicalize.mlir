// RUN: ds-opt %s -canonicalize -split-input-file | FileCheck %s

// Every fold is exact (bit for bit, signed zeros and NaN included); the
// @negative_* functions are the near misses that must stay.

// CHECK-LABEL: func.func @mul_by_one
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @mul_by_one(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %one = arith.constant dense<1.0> : tensor<f32>
  %a = ds.mul %x, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %b = ds.mul %one, %x : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A one seen through a reshape, a broadcast and an exact cast is a one.
// CHECK-LABEL: func.func @mul_by_one_through_shape_ops
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @mul_by_one_through_shape_ops(%x: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %one = arith.constant dense<1.0> : tensor<f32>
  %h = ds.cast %one : tensor<f32> -> tensor<bf16>
  %r = ds.reshape %h : tensor<bf16> -> tensor<1x1xbf16>
  %b = ds.broadcast %r dims = [0, 1] : tensor<1x1xbf16> -> tensor<4x8xbf16>
  %a = ds.mul %x, %r : tensor<4x8xbf16>, tensor<1x1xbf16> -> tensor<4x8xbf16>
  %c = ds.mul %b, %x : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %a, %c : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// CHECK-LABEL: func.func @div_by_one
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<4xi64>)
// CHECK-NEXT: return %[[X]], %[[I]]
func.func @div_by_one(%x: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
  %one = arith.constant dense<1.0> : tensor<4xf32>
  %ione = arith.constant dense<1> : tensor<i64>
  %a = ds.div %x, %one : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %b = ds.div %i, %ione : tensor<4xi64>, tensor<i64> -> tensor<4xi64>
  return %a, %b : tensor<4xf32>, tensor<4xi64>
}

// -----

// -0.0 is the additive identity (x + -0.0 == x for x = +0.0 and -0.0).
// CHECK-LABEL: func.func @add_neg_zero
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<4xi32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[I]]
func.func @add_neg_zero(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi32>) {
  %nz = arith.constant dense<-0.0> : tensor<f32>
  %iz = arith.constant dense<0> : tensor<i32>
  %a = ds.add %x, %nz : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %b = ds.add %nz, %x : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %c = ds.add %i, %iz : tensor<4xi32>, tensor<i32> -> tensor<4xi32>
  return %a, %b, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xi32>
}

// -----

// x - +0.0 == x (-0.0 - +0.0 is -0.0).
// CHECK-LABEL: func.func @sub_pos_zero
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @sub_pos_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %z = arith.constant dense<0.0> : tensor<f32>
  %a = ds.sub %x, %z : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_of_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[R:.*]] = ds.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<2x3x4xf32>) -> tensor<24xf32> {
  %a = ds.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %b = ds.reshape %a : tensor<6x4xf32> -> tensor<24xf32>
  return %b : tensor<24xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @reshape_round_trip(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %a = ds.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %b = ds.reshape %a : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %c = ds.reshape %x : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %b, %c : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Result dimension k of the pair is input dimension inner[outer[k]].
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = ds.transpose %[[X]] [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_of_transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %a = ds.transpose %x [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %b = ds.transpose %a [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  return %b : tensor<4x2x3xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @transpose_identity(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %a = ds.transpose %x [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %b = ds.transpose %a [0, 2, 1] : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  %c = ds.transpose %x [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %b, %c : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_to_own_type
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @broadcast_to_own_type(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %b = ds.broadcast %x dims = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// -----

// Widening is exact, so narrowing back recovers the value; `saturate` on
// the narrowing clamps nothing (every value came from the narrow type).
// CHECK-LABEL: func.func @cast_ext_then_trunc
// CHECK-SAME: (%[[H:.*]]: tensor<4xbf16>, %[[Q:.*]]: tensor<4xf8E4M3FN>, %[[I:.*]]: tensor<4xi8>)
// CHECK-NEXT: return %[[H]], %[[Q]], %[[I]], %[[H]]
func.func @cast_ext_then_trunc(%h: tensor<4xbf16>, %q: tensor<4xf8E4M3FN>, %i: tensor<4xi8>)
    -> (tensor<4xbf16>, tensor<4xf8E4M3FN>, tensor<4xi8>, tensor<4xbf16>) {
  %a = ds.cast %h : tensor<4xbf16> -> tensor<4xf32>
  %b = ds.cast %a : tensor<4xf32> -> tensor<4xbf16>
  %c = ds.cast %q : tensor<4xf8E4M3FN> -> tensor<4xf16>
  %d = ds.cast %c saturate : tensor<4xf16> -> tensor<4xf8E4M3FN>
  %e = ds.cast %i : tensor<4xi8> -> tensor<4xi64>
  %f = ds.cast %e : tensor<4xi64> -> tensor<4xi8>
  %g = ds.cast %h : tensor<4xbf16> -> tensor<4xbf16>
  return %b, %d, %f, %g : tensor<4xbf16>, tensor<4xf8E4M3FN>, tensor<4xi8>, tensor<4xbf16>
}

// -----

// Discardable annotations do not stop a fold: the op goes away with them.
// CHECK-LABEL: func.func @annotated_fold
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @annotated_fold(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  %a = ds.mul %x, %one {ds.op_id = 3 : i64, ds.role = "attn.q"} : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Narrowing then widening is mixed precision's rounding: it stays.
// CHECK-LABEL: func.func @negative_trunc_then_ext
// CHECK: %[[N:.*]] = ds.cast %{{.*}} : tensor<4xf32> -> tensor<4xbf16>
// CHECK: %[[W:.*]] = ds.cast %[[N]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK: %[[I:.*]] = ds.cast %{{.*}} : tensor<4xi64> -> tensor<4xi8>
// CHECK: %[[J:.*]] = ds.cast %[[I]] : tensor<4xi8> -> tensor<4xi64>
// CHECK: return %[[W]], %[[J]]
func.func @negative_trunc_then_ext(%x: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
  %a = ds.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %b = ds.cast %a : tensor<4xbf16> -> tensor<4xf32>
  %c = ds.cast %i : tensor<4xi64> -> tensor<4xi8>
  %d = ds.cast %c : tensor<4xi8> -> tensor<4xi64>
  return %b, %d : tensor<4xf32>, tensor<4xi64>
}

// -----

// A saturating narrowing then a widening clamps and rounds: it stays. So
// does a pair through a format that cannot hold the source (f16 -> bf16 is
// not a widening, although both are 16 bits).
// CHECK-LABEL: func.func @negative_saturate_casts
// CHECK: %[[Q:.*]] = ds.cast %{{.*}} saturate : tensor<4xf32> -> tensor<4xf8E4M3FN>
// CHECK: %[[W:.*]] = ds.cast %[[Q]] : tensor<4xf8E4M3FN> -> tensor<4xf32>
// CHECK: %[[B:.*]] = ds.cast %{{.*}} saturate : tensor<4xf16> -> tensor<4xbf16>
// CHECK: %[[H:.*]] = ds.cast %[[B]] saturate : tensor<4xbf16> -> tensor<4xf16>
// CHECK: return %[[W]], %[[H]]
func.func @negative_saturate_casts(%x: tensor<4xf32>, %h: tensor<4xf16>) -> (tensor<4xf32>, tensor<4xf16>) {
  %a = ds.cast %x saturate : tensor<4xf32> -> tensor<4xf8E4M3FN>
  %b = ds.cast %a : tensor<4xf8E4M3FN> -> tensor<4xf32>
  %c = ds.cast %h saturate : tensor<4xf16> -> tensor<4xbf16>
  %d = ds.cast %c saturate : tensor<4xbf16> -> tensor<4xf16>
  return %b, %d : tensor<4xf32>, tensor<4xf16>
}

// -----

// x + +0.0 is not x: -0.0 + +0.0 is +0.0. Nor is x - -0.0: -0.0 - -0.0 is
// +0.0.
// CHECK-LABEL: func.func @negative_add_pos_zero
// CHECK: %[[A:.*]] = ds.add
// CHECK: %[[B:.*]] = ds.sub
// CHECK: return %[[A]], %[[B]]
func.func @negative_add_pos_zero(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %z = arith.constant dense<0.0> : tensor<f32>
  %nz = arith.constant dense<-0.0> : tensor<f32>
  %a = ds.add %x, %z : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %b = ds.sub %x, %nz : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// The result is larger than x: the multiplication by one broadcasts x.
// CHECK-LABEL: func.func @negative_broadcasting_mul_by_one
// CHECK: %[[M:.*]] = ds.mul %{{.*}}, %{{.*}} : tensor<1x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: return %[[M]]
func.func @negative_broadcasting_mul_by_one(%x: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %one = arith.constant dense<1.0> : tensor<4x8xf32>
  %a = ds.mul %x, %one : tensor<1x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %a : tensor<4x8xf32>
}

// -----

// Not a one: a splat is needed.
// CHECK-LABEL: func.func @negative_not_splat
// CHECK: ds.mul
func.func @negative_not_splat(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = arith.constant dense<[1.0, 1.5]> : tensor<2xf32>
  %a = ds.mul %x, %c : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %a : tensor<2xf32>
}

// -----

// The backward seed is not a one: loss scaling will scale it. An op marked
// ds.seed does not fold either.
// CHECK-LABEL: func.func @negative_seed
// CHECK: %[[SEED:.*]] = arith.constant {ds.seed} dense<1.000000e+00>
// CHECK: ds.mul %{{.*}}, %[[SEED]]
// CHECK: ds.reshape %{{.*}} {ds.seed}
func.func @negative_seed(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %seed = arith.constant {ds.seed} dense<1.0> : tensor<f32>
  %s = ds.mul %x, %seed : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
  %r = ds.reshape %x {ds.seed} : tensor<2xf32> -> tensor<2xf32>
  return %s, %r : tensor<2xf32>, tensor<2xf32>
}

// -----

// A cast of a reshape of x reuses an earlier cast of x to the same type (and
// saturation): the two commute, so the rounding is done once.
// CHECK-LABEL: func.func @cast_through_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[C:.*]] = ds.cast %[[X]] : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
// CHECK-NOT: ds.cast %{{.*}} : tensor<6x4xf32> -> tensor<6x4xbf16>
// CHECK: %[[R:.*]] = ds.reshape %[[C]] : tensor<2x3x4xbf16> -> tensor<6x4xbf16>
// CHECK: return %[[C]], %[[R]]
func.func @cast_through_reshape(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xbf16>, tensor<6x4xbf16>) {
  %a = ds.cast %x : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
  %r = ds.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %b = ds.cast %r : tensor<6x4xf32> -> tensor<6x4xbf16>
  return %a, %b : tensor<2x3x4xbf16>, tensor<6x4xbf16>
}

// -----

// No earlier cast of x to that type (another type, another saturation, or
// only a later one): the cast of the reshape stays where it is.
// CHECK-LABEL: func.func @negative_cast_through_reshape
// CHECK: ds.cast %{{.*}} : tensor<6x4xf32> -> tensor<6x4xbf16>
// CHECK: ds.cast %{{.*}} saturate : tensor<6x4xf32> -> tensor<6x4xf8E4M3FN>
// CHECK: ds.cast %{{.*}} : tensor<6x4xf32> -> tensor<6x4xf16>
func.func @negative_cast_through_reshape(%x: tensor<2x3x4xf32>)
    -> (tensor<2x3x4xf64>, tensor<6x4xbf16>, tensor<2x3x4xf8E4M3FN>, tensor<6x4xf8E4M3FN>, tensor<6x4xf16>, tensor<2x3x4xf16>) {
  %a = ds.cast %x : tensor<2x3x4xf32> -> tensor<2x3x4xf64>
  %r = ds.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %b = ds.cast %r : tensor<6x4xf32> -> tensor<6x4xbf16>
  %q = ds.cast %x : tensor<2x3x4xf32> -> tensor<2x3x4xf8E4M3FN>
  %s = ds.cast %r saturate : tensor<6x4xf32> -> tensor<6x4xf8E4M3FN>
  %l = ds.cast %r : tensor<6x4xf32> -> tensor<6x4xf16>
  %m = ds.cast %x : tensor<2x3x4xf32> -> tensor<2x3x4xf16>
  return %a, %b, %q, %s, %l, %m : tensor<2x3x4xf64>, tensor<6x4xbf16>, tensor<2x3x4xf8E4M3FN>, tensor<6x4xf8E4M3FN>, tensor<6x4xf16>, tensor<2x3x4xf16>
}

// RUN: ds-opt %s --pass-pipeline="builtin.module(func.func(ds-approximate-math))" | FileCheck %s

// f32 transcendentals become inline polynomials; f64 keeps the precise call.
// CHECK-LABEL: func.func @math
// CHECK-NOT: math.tanh %{{.*}} : f32
// CHECK-NOT: math.exp %{{.*}} : f32
// CHECK: math.tanh %{{.*}} : f64
func.func @math(%a: f32, %b: f64) -> (f32, f32, f64) {
  %0 = math.tanh %a : f32
  %1 = math.exp %a : f32
  %2 = math.tanh %b : f64
  return %0, %1, %2 : f32, f32, f64
}

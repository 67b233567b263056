// RUN: ds-opt %s --ds-emulate-narrow-floats=keep-f32-casts --canonicalize | FileCheck %s
// RUN: ds-opt %s --canonicalize | FileCheck %s --check-prefix=FOLDED

// keep-f32-casts (ds-gpu-pipeline's kernels on sm_80 and newer, where NVPTX
// converts in one instruction): casts between f32 and bf16 or f16 stay
// casts, and lose the `contract` flag that arith-emulate-unsupported-floats
// put on them. With the flag, canonicalization folds extf(truncf(x)) to x
// and the rounding after a narrow op is gone (FOLDED); without it the
// rounding stays. Casts from f64 and FP8 casts are still integer code.
// CHECK-LABEL: func @kept
// CHECK:         %[[T:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NOT:       contract
// CHECK:         %[[E:.*]] = arith.extf %[[T]] : bf16 to f32
// CHECK:         %[[H:.*]] = arith.truncf %{{.*}} : f32 to f16
// CHECK:         %[[HE:.*]] = arith.extf %[[H]] : f16 to f32
// CHECK:         arith.bitcast %{{.*}} : f64 to i64
// CHECK:         arith.bitcast %{{.*}} : i16 to bf16
// CHECK:         arith.extf %{{.*}} : bf16 to f32
// CHECK:         arith.bitcast %{{.*}} : i8 to f8E4M3FN
// CHECK-NOT:     arith.truncf {{.*}} to f8E4M3FN
// FOLDED-LABEL: func @kept
// FOLDED-NOT:     arith.truncf %{{.*}} : f32 to bf16
// FOLDED-NOT:     arith.extf %{{.*}} : bf16 to f32
func.func @kept(%x: f32, %d: f64, %y: bf16) -> (f32, f32, bf16, f8E4M3FN) {
  %t = arith.truncf %x fastmath<contract> : f32 to bf16
  %e = arith.extf %t fastmath<contract> : bf16 to f32
  %h = arith.truncf %x fastmath<contract> : f32 to f16
  %he = arith.extf %h fastmath<contract> : f16 to f32
  %b = arith.truncf %d : f64 to bf16
  %q = arith.truncf %y : bf16 to f8E4M3FN
  return %e, %he, %b, %q : f32, f32, bf16, f8E4M3FN
}

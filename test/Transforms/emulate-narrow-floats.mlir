// RUN: ds-opt %s --split-input-file --ds-emulate-narrow-floats \
// RUN:   | FileCheck %s --implicit-check-not='to f8' --implicit-check-not='to bf16' \
// RUN:   --implicit-check-not='bf16 to f32'
// RUN: ds-opt %s --split-input-file --ds-emulate-narrow-floats="types=bf16,f8E4M3FN,f8E5M2" \
// RUN:   | FileCheck %s --check-prefix=NO-F16
// RUN: not ds-opt %s --split-input-file --ds-emulate-narrow-floats="types=f32" \
// RUN:   2>&1 | FileCheck %s --check-prefix=BAD-TYPE
// RUN: ds-opt %S/Inputs/emulate-narrow-floats-invalid.mlir --split-input-file \
// RUN:   --ds-emulate-narrow-floats -verify-diagnostics
// RUN: not ds-opt %s --split-input-file --ds-emulate-narrow-floats="types=bf16" \
// RUN:   2>&1 | FileCheck %s --check-prefix=LEFT-OUT

// Only the numbers that define the rounding are checked here; that the code
// rounds right is shown by test/Integration/Numerics/casts.test, which runs
// it on every f32 bit pattern against PyTorch.

// f32 -> f8E4M3FN on a vector: integer code on the bits, one result bitcast.
// CHECK-LABEL: func @truncf_vector_e4m3
// CHECK-SAME: (%[[X:.*]]: vector<4xf32>)
// The first f32 above 464 (448 + half an ulp, a tie that rounds down to the
// even 448) overflows: 0x43E80001.
// CHECK-DAG: %[[OVF:.*]] = arith.constant dense<1139277825> : vector<4xi32>
// The smallest normal of E4M3, 2^-6, in f32 bits: below it, subnormal rounding.
// CHECK-DAG: %[[MINN:.*]] = arith.constant dense<1015021568> : vector<4xi32>
// CHECK: %[[U:.*]] = arith.bitcast %[[X]] : vector<4xf32> to vector<4xi32>
// CHECK: arith.cmpi ult, %{{.*}}, %[[MINN]] : vector<4xi32>
// CHECK: arith.cmpi uge, %{{.*}}, %[[OVF]] : vector<4xi32>
// CHECK: %[[T:.*]] = arith.trunci %{{.*}} : vector<4xi32> to vector<4xi8>
// CHECK: %[[R:.*]] = arith.bitcast %[[T]] : vector<4xi8> to vector<4xf8E4M3FN>
// CHECK: return %[[R]]
func.func @truncf_vector_e4m3(%x: vector<4xf32>) -> vector<4xf8E4M3FN> {
  %r = arith.truncf %x : vector<4xf32> to vector<4xf8E4M3FN>
  return %r : vector<4xf8E4M3FN>
}

// -----

// f32 -> bf16 needs neither the subnormal nor the overflow step (same
// exponent range): add 0x7FFF plus the lsb, shift, and a NaN select.
// NO-F16 shows that the option selects the emulated types.
// CHECK-LABEL: func @truncf_bf16
// CHECK-NOT: arith.cmpi ult
// CHECK: arith.cmpi ugt, %{{.*}}, %{{.*}} : i32
// CHECK: arith.trunci %{{.*}} : i32 to i16
// CHECK: arith.bitcast %{{.*}} : i16 to bf16
// NO-F16-LABEL: func @truncf_bf16
// NO-F16: arith.bitcast %{{.*}} : i16 to bf16
// NO-F16-LABEL: func @extf_f16_kept
// NO-F16: arith.extf %{{.*}} : f16 to f32
func.func @truncf_bf16(%x: f32) -> bf16 {
  %r = arith.truncf %x : f32 to bf16
  return %r : bf16
}
func.func @extf_f16_kept(%x: f16) -> f32 {
  %r = arith.extf %x : f16 to f32
  return %r : f32
}

// -----

// f64 sources are rounded once, on i64; narrow sources are first extended
// to f32 (exactly), then rounded.
// CHECK-LABEL: func @truncf_f64_and_narrow_sources
// CHECK: arith.bitcast %{{.*}} : f64 to i64
// CHECK: arith.trunci %{{.*}} : i64 to i8
// CHECK: arith.bitcast %{{.*}} : i8 to f8E5M2
// CHECK: arith.bitcast %{{.*}} : bf16 to i16
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.bitcast %{{.*}} : i8 to f8E4M3FN
func.func @truncf_f64_and_narrow_sources(%x: f64, %y: bf16) -> (f8E5M2, f8E4M3FN) {
  %a = arith.truncf %x : f64 to f8E5M2
  %b = arith.truncf %y : bf16 to f8E4M3FN
  return %a, %b : f8E5M2, f8E4M3FN
}

// -----

// Extension: bf16 -> f32 is a shift; FP8 subnormals go through an exact
// uitofp and a multiplication by 2^-9 (E4M3); FP8 -> f16 goes through f32.
// CHECK-LABEL: func @extf
// CHECK: arith.extui %{{.*}} : vector<8xi16> to vector<8xi32>
// CHECK: arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: arith.uitofp %{{.*}} : i64 to f64
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f64
// CHECK: arith.bitcast %{{.*}} : i64 to f64
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK: arith.bitcast %{{.*}} : i16 to f16
func.func @extf(%x: vector<8xbf16>, %y: f8E4M3FN) -> (vector<8xf32>, f64, f16) {
  %a = arith.extf %x : vector<8xbf16> to vector<8xf32>
  %b = arith.extf %y : f8E4M3FN to f64
  %c = arith.extf %y : f8E4M3FN to f16
  return %a, %b, %c : vector<8xf32>, f64, f16
}

// -----

// Casts between wide types are left to LLVM, and so are FP8 constants (the
// LLVM lowering stores FP8 as i8).
// CHECK-LABEL: func @wide_casts_and_constants
// CHECK: arith.constant dense<1.000000e+00> : vector<4xf8E4M3FN>
// CHECK: %[[W:.*]] = arith.truncf %{{.*}} : f64 to f32
// CHECK: %[[E:.*]] = arith.extf %{{.*}} : f32 to f64
func.func @wide_casts_and_constants(%x: f64) -> (vector<4xf8E4M3FN>, f32, f64) {
  %k = arith.constant dense<1.0> : vector<4xf8E4M3FN>
  %w = arith.truncf %x : f64 to f32
  %e = arith.extf %w : f32 to f64
  return %k, %w, %e : vector<4xf8E4M3FN>, f32, f64
}

// -----

// A `contract` extf(truncf(x)) pair (as arith-emulate-unsupported-floats
// writes them between two narrow ops) keeps its rounding: no folding.
// CHECK-LABEL: func @contract_pair_keeps_rounding
// CHECK: arith.trunci %{{.*}} : i32 to i16
// CHECK: %[[B:.*]] = arith.bitcast %{{.*}} : i16 to bf16
// CHECK: arith.bitcast %[[B]] : bf16 to i16
// CHECK: arith.bitcast %{{.*}} : i32 to f32
func.func @contract_pair_keeps_rounding(%x: f32) -> f32 {
  %t = arith.truncf %x fastmath<contract> : f32 to bf16
  %e = arith.extf %t fastmath<contract> : bf16 to f32
  return %e : f32
}

// LEFT-OUT: error: 'arith.truncf' op on 'f8E4M3FN' needs emulation, but the pass's types= option leaves it out
// BAD-TYPE: error: ds-emulate-narrow-floats: cannot emulate 'f32' (supported: bf16, f16, f8E4M3FN, f8E5M2)

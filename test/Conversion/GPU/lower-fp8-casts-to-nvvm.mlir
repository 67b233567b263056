// RUN: ds-opt %s --ds-lower-fp8-casts-to-nvvm | FileCheck %s
// The kernels to PTX for sm_90, where ptxas (gpu-module-to-binary) must
// accept the conversions.
// REQUIRES: ptxas
// RUN: ds-opt %s --ds-lower-fp8-casts-to-nvvm --ds-emulate-narrow-floats=keep-f32-casts \
// RUN:   --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary=format=isa \
// RUN: | FileCheck %s --check-prefix=PTX
// RUN: ds-opt %s --ds-lower-fp8-casts-to-nvvm --ds-emulate-narrow-floats=keep-f32-casts \
// RUN:   --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary=format=bin -o /dev/null

// A rounding into E4M3FN: the pair instruction (rn, satfinite) with x in
// both halves, then past 464 (strictly) NaN, where the instruction gives
// 448: 0x7F, or 0xFF below -464.
// CHECK-LABEL: gpu.func @round_e4m3
// CHECK:         %[[P:.*]] = nvvm.convert.f32x2.to.f8x2 %[[X:.*]], %[[X]] {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : i16(f8E4M3FN)
// CHECK:         %[[B:.*]] = arith.trunci %[[P]] : i16 to i8
// CHECK:         %[[HI:.*]] = arith.cmpf ogt, %[[X]], %{{.*}} : f32
// CHECK:         %[[LO:.*]] = arith.cmpf olt, %[[X]], %{{.*}} : f32
// CHECK:         %[[S1:.*]] = arith.select %[[HI]], %c127_i8, %[[B]] : i8
// CHECK:         %[[S2:.*]] = arith.select %[[LO]], %c-1_i8, %[[S1]] : i8
// CHECK:         arith.bitcast %[[S2]] : i8 to f8E4M3FN
// E5M2 from bf16: widened first (exactly); from 61440 on, inf (0x7C, 0xFC).
// CHECK-LABEL: gpu.func @round_e5m2
// CHECK:         %[[W:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:         nvvm.convert.f32x2.to.f8x2 %[[W]], %[[W]] {{.*}} : i16(f8E5M2)
// CHECK:         arith.cmpf oge
// CHECK:         arith.cmpf ole
// CHECK:         arith.select %{{.*}}, %c124_i8
// CHECK:         arith.select %{{.*}}, %c-4_i8
// An f64 source is left to ds-emulate-narrow-floats (through f32 it would
// round twice).
// CHECK-LABEL: gpu.func @round_f64
// CHECK-NOT:     nvvm.convert
// CHECK:         arith.truncf %{{.*}} : f64 to f8E4M3FN
// Widening: the byte in both lanes, the pair instruction to f16, then
// exactly to the result type.
// CHECK-LABEL: gpu.func @widen
// CHECK:         %[[H2:.*]] = nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// CHECK:         %[[H:.*]] = llvm.extractelement %[[H2]]
// CHECK:         arith.extf %[[H]] : f16 to f32
// CHECK:         nvvm.convert.f8x2.to.f16x2 %{{.*}} : vector<2xi8>(f8E5M2) -> vector<2xf16>
// CHECK:         arith.extf %{{.*}} : f16 to f32
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// PTX: cvt.rn.satfinite.e4m3x2.f32
// PTX: cvt.rn.satfinite.e5m2x2.f32
// PTX: cvt.rn.f16x2.e4m3x2
// PTX: cvt.rn.f16x2.e5m2x2
module attributes {gpu.container_module} {
  gpu.module @k [#nvvm.target<chip = "sm_90", features = "+ptx81">] {
    gpu.func @round_e4m3(%p: memref<4xf32>, %q: memref<4xf8E4M3FN>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %p[%c0] : memref<4xf32>
      %r = arith.truncf %x : f32 to f8E4M3FN
      memref.store %r, %q[%c0] : memref<4xf8E4M3FN>
      gpu.return
    }
    gpu.func @round_e5m2(%p: memref<4xbf16>, %q: memref<4xf8E5M2>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %p[%c0] : memref<4xbf16>
      %r = arith.truncf %x : bf16 to f8E5M2
      memref.store %r, %q[%c0] : memref<4xf8E5M2>
      gpu.return
    }
    gpu.func @round_f64(%p: memref<4xf64>, %q: memref<4xf8E4M3FN>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %p[%c0] : memref<4xf64>
      %r = arith.truncf %x : f64 to f8E4M3FN
      memref.store %r, %q[%c0] : memref<4xf8E4M3FN>
      gpu.return
    }
    gpu.func @widen(%p: memref<4xf8E4M3FN>, %q: memref<4xf8E5M2>, %o: memref<4xf32>,
                    %b: memref<4xbf16>) kernel {
      %c0 = arith.constant 0 : index
      %x = memref.load %p[%c0] : memref<4xf8E4M3FN>
      %y = memref.load %q[%c0] : memref<4xf8E5M2>
      %fx = arith.extf %x : f8E4M3FN to f32
      %by = arith.extf %y : f8E5M2 to bf16
      memref.store %fx, %o[%c0] : memref<4xf32>
      memref.store %by, %b[%c0] : memref<4xbf16>
      gpu.return
    }
  }
}

// ds-gpu-launch-report: a line per kernel launch, library GEMM and copy,
// with the bytes and FLOPs worked out by hand below, and the bounds at
// peaks small enough to show.
// RUN: ds-opt %s --ds-gpu-launch-report -o /dev/null 2>&1 | FileCheck %s
// RUN: ds-opt %s --ds-gpu-launch-report="output=%t.txt bandwidth=1 f32-tflops=0.001" -o /dev/null
// RUN: FileCheck %s --check-prefix=SLOW --input-file=%t.txt
// RUN: not ds-opt %s --ds-gpu-launch-report="output=%t.missing/report.txt" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not ds-opt %s --ds-gpu-launch-report="bandwidth=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO

// The kernel reads x (1000 f32: 4000 bytes, counted once though loaded
// twice) and its scratch in shared memory (not counted), and writes y
// (1000 bf16: 2000 bytes), which it then reads back: written first, y
// counts as written only (what a kernel reads of what it wrote comes from
// the cache, as a row group's later members read their row). The GEMM: batch 2, M 64, N 16, K 32, so
// 2 x 2 x 64 x 16 x 32 = 131072 FLOPs; A and B 16384 + 4096 bytes, C 8192.
// The copy moves 4000 bytes each way.
// CHECK: ds-gpu-launch-report: @step: 1 kernel launches, 1 library GEMMs, 1 copies
// CHECK: 1 kernel 4,1,1 x 256,1,1 0.004 0.002 - 0.00 launch-report.mlir:{{[0-9]+}}
// CHECK: 2 gemm 2 x 64x16x32 f32 0.020 0.008 0.00 0.01
// CHECK: 3 copy 0.004 0.004
// CHECK: kernels: 1, 0.0 MB moved
// CHECK: GEMMs: 1, 0.0 GFLOP, 0.0 MB moved: 0.0 us at 1979 / 989 / 67 TFLOP/s (FP8 / 16-bit / 32-bit)
// CHECK: bound: 0.0 us per call, without launch gaps

// At 1 GB/s (1000 bytes per us) and 0.001 TFLOP/s for f32: the kernel
// 6000 bytes, 6 us; the GEMM compute-bound, 131072 / 1000 = 131.07 us
// (its 28672 bytes would take 28.67); the copy 8 us. 145.07 in all.
// SLOW: 1 kernel {{.*}} 6.00
// SLOW: 2 gemm {{.*}} 0.00 131.07
// SLOW: 3 copy {{.*}} 8.00
// SLOW: kernels: 1, 0.0 MB moved: 6.0 us at 1 GB/s
// SLOW: bound: 145.1 us per call, without launch gaps

// NOFILE: error: ds-gpu-launch-report: cannot write '{{.*}}report.txt'
// ZERO: error: ds-gpu-launch-report: the bandwidth and peaks must be positive

func.func private @dsrt_cuda_matmul_f32(memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64)

func.func @step(%x: memref<1000xf32>, %y: memref<1000xbf16>, %z: memref<1000xf32>,
                %a: memref<2x64x32xf32>, %b: memref<2x32x16xf32>, %c: memref<2x64x16xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c256 = arith.constant 256 : index
  %c1000 = arith.constant 1000 : index
  %no = arith.constant 0 : i64
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
    %scratch = memref.alloca() : memref<256xf32, #gpu.address_space<workgroup>>
    %o = arith.muli %bx, %sx : index
    %i = arith.addi %o, %tx : index
    %in = arith.cmpi ult, %i, %c1000 : index
    scf.if %in {
      %v = memref.load %x[%i] : memref<1000xf32>
      %w = memref.load %x[%i] : memref<1000xf32>
      memref.store %v, %scratch[%tx] : memref<256xf32, #gpu.address_space<workgroup>>
      %s = memref.load %scratch[%tx] : memref<256xf32, #gpu.address_space<workgroup>>
      %t = arith.addf %s, %w : f32
      %h = arith.truncf %t : f32 to bf16
      memref.store %h, %y[%i] : memref<1000xbf16>
      %back = memref.load %y[%i] : memref<1000xbf16>
    }
    gpu.terminator
  }
  %ca = memref.cast %a : memref<2x64x32xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  %cb = memref.cast %b : memref<2x32x16xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  %cc = memref.cast %c : memref<2x64x16xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  call @dsrt_cuda_matmul_f32(%ca, %cb, %cc, %no, %no) : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64) -> ()
  gpu.memcpy %z, %x : memref<1000xf32>, memref<1000xf32>
  return
}

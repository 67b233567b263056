// ds-emulate-gpu-kernels runs a kernel's threads one at a time, so its
// synchronisations must hold: here every thread writes its slot of a
// per-block buffer, and after a gpu.barrier reads its neighbour's slot (a
// thread that ran ahead would read the fill, 0); a uniform loop around
// gpu.all_reduce sums k x tid over the block; a value from before the
// barrier is read after it. Two blocks of 64 threads. Expected, from the
// definitions: out[b][t] = (t+1)^2 - t^2 = 2t + 1, and for t = 63 the
// wrap-around 0 - 63^2 = -3969; sums[b][k] = k x (0 + ... + 63) = 2016 k.
// RUN: ds-opt %s --ds-emulate-gpu-kernels --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s

// gpu.thread_id inside the body is the launch's thread id; an unsigned
// loop around a barrier keeps its unsigned comparison (0 to 200 step 100
// in i8: two trips, where a signed 200 would be -56 and none).
// RUN: ds-opt %s --ds-emulate-gpu-kernels --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-runner -e unsigned_loop -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=UNSIGNED

// A synchronisation that only some threads reach (its condition differs
// across the threads) is undefined on a GPU; the emulation stops on it.
// RUN: ds-opt %s --ds-emulate-gpu-kernels --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts \
// RUN: | not --crash mlir-runner -e divergent -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=DIVERGENT

// gpu.subgroup_reduce combines each warp (32 consecutive threads, x
// fastest) and gives every lane the total: blocks of 32 x 3 threads, lane
// tx of warp ty holding tx x (ty + 1), so warp ty's sum is 496 (ty + 1),
// read at lanes 0 and 31; a maximum of (ty + 1) x 100 - tx gives
// (ty + 1) x 100, from lane 0. Two blocks, the same results.
// RUN: ds-opt %s --ds-emulate-gpu-kernels --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-runner -e warps -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=WARPS

// CHECK: sizes = [2, 3]
// CHECK-NEXT: {{\[}}[0,   2016,   4032],
// CHECK-NEXT: [0,   2016,   4032]]
// CHECK: sizes = [2, 64]
// CHECK-NEXT: {{\[}}[1,   3,   5,   7,   9,   11,   13,   15,   17,   19,   21,   23,   25,   27,   29,   31,   33,   35,   37,   39,   41,   43,   45,   47,   49,   51,   53,   55,   57,   59,   61,   63,   65,   67,   69,   71,   73,   75,   77,   79,   81,   83,   85,   87,   89,   91,   93,   95,   97,   99,   101,   103,   105,   107,   109,   111,   113,   115,   117,   119,   121,   123,   125,   -3969],
// CHECK-NEXT: [1,   3,   5,   7,   9,   11,   13,   15,   17,   19,   21,   23,   25,   27,   29,   31,   33,   35,   37,   39,   41,   43,   45,   47,   49,   51,   53,   55,   57,   59,   61,   63,   65,   67,   69,   71,   73,   75,   77,   79,   81,   83,   85,   87,   89,   91,   93,   95,   97,   99,   101,   103,   105,   107,   109,   111,   113,   115,   117,   119,   121,   123,   125,   -3969]]

// UNSIGNED: sizes = [4]
// UNSIGNED-NEXT: [2,  3,  4,  5]

// WARPS: sizes = [2, 3, 3]
// WARPS-NEXT: {{\[}}{{\[}}[496,   496,   100],
// WARPS-NEXT: [992,   992,   200],
// WARPS-NEXT: [1488,   1488,   300]],
// WARPS-NEXT: {{\[}}[496,   496,   100],
// WARPS-NEXT: [992,   992,   200],
// WARPS-NEXT: [1488,   1488,   300]]]

// DIVERGENT: ds-emulate-gpu-kernels: the threads of a block disagree on a value that decides a synchronisation

// A vector access that claims an alignment its address lacks faults on a
// GPU, and one past a buffer's end reads another buffer or faults; the
// host would run both, so the emulation checks every access's indices and
// every aligned vector's address, and stops at the first that fails.
// Thread t of @vectors copies elements 4t to 4t + 3 of 36 (i64: 32-byte
// aligned); with %shift = 1 it loads from 4t + 1 (8 bytes off) with the
// same claim, with %shift = 8 thread 7 loads elements 36 to 39.
// RUN: ds-opt %s --ds-emulate-gpu-kernels --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-runner -e aligned_vectors -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=ALIGNED
// RUN: ds-opt %s --ds-emulate-gpu-kernels --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts \
// RUN: | not --crash mlir-runner -e misaligned_vectors -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=MISALIGNED

// RUN: ds-opt %s --ds-emulate-gpu-kernels --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts \
// RUN: | not --crash mlir-runner -e vectors_out_of_bounds -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=BOUNDS

// Blocks of one launch run in any order and at once on a GPU, so an
// element one block writes and another reads or writes is a race, whatever
// order the emulation runs them in. Each of 4 blocks of 8 threads writes
// its part of %a, then (after a barrier) reads part (b + offset) mod 4:
// offset 0 is its own part; with 1, block 2 (the blocks run last first)
// reads what block 3 wrote; with 3, block 2 writes what block 3 read. In
// @blocks_write_one_part every block writes part 0.
// RUN: ds-opt %s --ds-emulate-gpu-kernels --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts > %t.races.mlir
// RUN: mlir-runner %t.races.mlir -e blocks_own_parts -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=OWN
// RUN: not --crash mlir-runner %t.races.mlir -e blocks_read_next_part -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=RAW
// RUN: not --crash mlir-runner %t.races.mlir -e blocks_read_previous_part -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=WAR
// RUN: not --crash mlir-runner %t.races.mlir -e blocks_write_one_part -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=WAW

// Threads of one block run in any order and at once between barriers, so
// an element (of shared or global memory) one thread writes and another
// reads or writes between the same two barriers is a race too, even though
// the emulation runs them one after another. One block of 8 threads:
// thread t writes tile[t] = t + 1, then reads tile[(t + shift) mod 8] into
// out[t], with a barrier between (@threads_exchange) or not
// (@threads_no_barrier: thread 6, which runs after 7, reads what 7 wrote).
// In @threads_write_one every thread stores to out[0]; in
// @threads_overwrite_read each thread, after a barrier, reads tile[t - 1]
// and then writes tile[t], which thread t + 1 read.
// RUN: mlir-runner %t.races.mlir -e threads_exchange -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=EXCHANGE
// RUN: not --crash mlir-runner %t.races.mlir -e threads_no_barrier -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=TRAW
// RUN: not --crash mlir-runner %t.races.mlir -e threads_write_one -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=TWAW
// RUN: not --crash mlir-runner %t.races.mlir -e threads_overwrite_read -entry-point-result=void -shared-libs=%mlir_runner_libs 2>&1 \
// RUN: | FileCheck %s --check-prefix=TWAR
// EXCHANGE: [2,  3,  4,  5,  6,  7,  8,  1]
// TRAW: ds-emulate-gpu-kernels: {{.*}}emulate-gpu-kernels-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: memref.load reads an element that another thread of its block writes between the same barriers (threads run in any order and at once between barriers on a GPU: a race)
// TWAW: ds-emulate-gpu-kernels: {{.*}}emulate-gpu-kernels-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: memref.store writes an element that another thread of its block writes between the same barriers
// TWAR: ds-emulate-gpu-kernels: {{.*}}emulate-gpu-kernels-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: memref.store writes an element that another thread of its block reads between the same barriers

// OWN: sizes = [32]
// OWN-NEXT: [1,  2,  3,  4,  5,  6,  7,  8,  9,  10,  11,  12,  13,  14,  15,  16,  17,  18,  19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31,  32]
// RAW: ds-emulate-gpu-kernels: {{.*}}emulate-gpu-kernels-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: memref.load reads an element that another block writes in the same launch (blocks run in any order and at once on a GPU: a race)
// WAR: ds-emulate-gpu-kernels: {{.*}}emulate-gpu-kernels-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: vector.store writes an element that another block reads in the same launch (blocks run in any order and at once on a GPU: a race)
// WAW: ds-emulate-gpu-kernels: {{.*}}emulate-gpu-kernels-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: vector.store writes an element that another block writes in the same launch (blocks run in any order and at once on a GPU: a race)

// ALIGNED: sizes = [32]
// ALIGNED-NEXT: [0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,  11,  12,  13,  14,  15,  16,  17,  18,  19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31]

// MISALIGNED: ds-emulate-gpu-kernels: {{.*}}emulate-gpu-kernels-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: vector.load claims 16-byte alignment at an address without it (a GPU faults: misaligned address)
// BOUNDS: ds-emulate-gpu-kernels: {{.*}}emulate-gpu-kernels-exec.mlir:{{[0-9]+}}:{{[0-9]+}}: vector.load out of bounds (a GPU reads or writes another buffer, or faults: illegal address)

func.func private @printMemrefI64(memref<*xi64>)

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i64
  %buf = memref.alloc() : memref<2x64xi64>
  %out = memref.alloc() : memref<2x64xi64>
  %sums = memref.alloc() : memref<2x3xi64>
  linalg.fill ins(%zero : i64) outs(%buf : memref<2x64xi64>)
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %t = arith.index_cast %tx : index to i64
    %b = arith.index_cast %bx : index to i64
    %sq = arith.muli %t, %t : i64
    %v = arith.addi %sq, %b : i64
    memref.store %v, %buf[%bx, %tx] : memref<2x64xi64>
    gpu.barrier
    %t1 = arith.addi %tx, %c1 : index
    %next = arith.remui %t1, %sx : index
    %n = memref.load %buf[%bx, %next] : memref<2x64xi64>
    %d = arith.subi %n, %v : i64
    memref.store %d, %out[%bx, %tx] : memref<2x64xi64>
    scf.for %k = %c0 to %c3 step %c1 {
      %kk = arith.index_cast %k : index to i64
      %x = arith.muli %t, %kk : i64
      %s = gpu.all_reduce add %x uniform {} : (i64) -> (i64)
      %first = arith.cmpi eq, %tx, %c0 : index
      scf.if %first {
        memref.store %s, %sums[%bx, %k] : memref<2x3xi64>
      }
    }
    gpu.terminator
  }
  %u = memref.cast %sums : memref<2x3xi64> to memref<*xi64>
  call @printMemrefI64(%u) : (memref<*xi64>) -> ()
  %o = memref.cast %out : memref<2x64xi64> to memref<*xi64>
  call @printMemrefI64(%o) : (memref<*xi64>) -> ()
  memref.dealloc %buf : memref<2x64xi64>
  memref.dealloc %out : memref<2x64xi64>
  memref.dealloc %sums : memref<2x3xi64>
  return
}

func.func @divergent() {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  %out = memref.alloc() : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %low = arith.cmpi ult, %tx, %c32 : index
    scf.if %low {
      %s = gpu.all_reduce add %one uniform {} : (f32) -> (f32)
      memref.store %s, %out[] : memref<f32>
    }
    gpu.terminator
  }
  memref.dealloc %out : memref<f32>
  return
}

func.func @unsigned_loop() {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %lb = arith.constant 0 : i8
  %ub = arith.constant 200 : i8
  %st = arith.constant 100 : i8
  %one = arith.constant 1 : i64
  %out = memref.alloc() : memref<4xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %t = gpu.thread_id x
    %ti = arith.index_cast %t : index to i64
    memref.store %ti, %out[%t] : memref<4xi64>
    scf.for unsigned %k = %lb to %ub step %st : i8 {
      %o = memref.load %out[%t] : memref<4xi64>
      %o2 = arith.addi %o, %one : i64
      gpu.barrier
      memref.store %o2, %out[%t] : memref<4xi64>
    }
    gpu.terminator
  }
  %u = memref.cast %out : memref<4xi64> to memref<*xi64>
  call @printMemrefI64(%u) : (memref<*xi64>) -> ()
  memref.dealloc %out : memref<4xi64>
  return
}

func.func @warps() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c31 = arith.constant 31 : index
  %c32 = arith.constant 32 : index
  %hundred = arith.constant 100 : i64
  %out = memref.alloc() : memref<2x3x3xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c3, %sz = %c1) {
    %t = arith.index_cast %tx : index to i64
    %w1 = arith.addi %ty, %c1 : index
    %w = arith.index_cast %w1 : index to i64
    %v = arith.muli %t, %w : i64
    %s = gpu.subgroup_reduce add %v uniform : (i64) -> i64
    %hw = arith.muli %w, %hundred : i64
    %m = arith.subi %hw, %t : i64
    %mx = gpu.subgroup_reduce maxsi %m uniform : (i64) -> i64
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      memref.store %s, %out[%bx, %ty, %c0] : memref<2x3x3xi64>
      memref.store %mx, %out[%bx, %ty, %c2] : memref<2x3x3xi64>
    }
    %last = arith.cmpi eq, %tx, %c31 : index
    scf.if %last {
      memref.store %s, %out[%bx, %ty, %c1] : memref<2x3x3xi64>
    }
    gpu.terminator
  }
  %u = memref.cast %out : memref<2x3x3xi64> to memref<*xi64>
  call @printMemrefI64(%u) : (memref<*xi64>) -> ()
  memref.dealloc %out : memref<2x3x3xi64>
  return
}

func.func @vectors(%shift: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %in = memref.alloc() {alignment = 64 : i64} : memref<36xi64>
  %out = memref.alloc() {alignment = 64 : i64} : memref<32xi64>
  scf.for %i = %c0 to %c32 step %c1 {
    %v = arith.index_cast %i : index to i64
    memref.store %v, %in[%i] : memref<36xi64>
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    %first = arith.muli %tx, %c4 : index
    %at = arith.addi %first, %shift : index
    %v = vector.load %in[%at] {alignment = 16 : i64} : memref<36xi64>, vector<4xi64>
    vector.store %v, %out[%first] {alignment = 16 : i64} : memref<32xi64>, vector<4xi64>
    gpu.terminator
  }
  %o = memref.cast %out : memref<32xi64> to memref<*xi64>
  call @printMemrefI64(%o) : (memref<*xi64>) -> ()
  memref.dealloc %in : memref<36xi64>
  memref.dealloc %out : memref<32xi64>
  return
}

func.func @aligned_vectors() {
  %c0 = arith.constant 0 : index
  call @vectors(%c0) : (index) -> ()
  return
}

func.func @misaligned_vectors() {
  %c1 = arith.constant 1 : index
  call @vectors(%c1) : (index) -> ()
  return
}

func.func @vectors_out_of_bounds() {
  %c8 = arith.constant 8 : index
  call @vectors(%c8) : (index) -> ()
  return
}

func.func @blocks(%offset: index, %part: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %a = memref.alloc() {alignment = 64 : i64} : memref<32xi64>
  %out = memref.alloc() : memref<32xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    // Thread 0 writes its block's part (block %bx, or %part if given) as
    // two vectors of 4.
    %zero = arith.cmpi eq, %tx, %c0 : index
    scf.if %zero {
      %given = arith.cmpi ne, %part, %c4 : index
      %p = arith.select %given, %part, %bx : index
      %base = arith.muli %p, %c8 : index
      %bv = arith.index_cast %base : index to i64
      %v = vector.broadcast %bv : i64 to vector<4xi64>
      %steps = arith.constant dense<[1, 2, 3, 4]> : vector<4xi64>
      %lo = arith.addi %v, %steps : vector<4xi64>
      %four = arith.constant dense<4> : vector<4xi64>
      %hi = arith.addi %lo, %four : vector<4xi64>
      vector.store %lo, %a[%base] {alignment = 32 : i64} : memref<32xi64>, vector<4xi64>
      %mid = arith.addi %base, %c4 : index
      vector.store %hi, %a[%mid] {alignment = 32 : i64} : memref<32xi64>, vector<4xi64>
    }
    gpu.barrier
    %b = arith.addi %bx, %offset : index
    %src = arith.remui %b, %c4 : index
    %row = arith.muli %src, %c8 : index
    %at = arith.addi %row, %tx : index
    %x = memref.load %a[%at] : memref<32xi64>
    %mine = arith.muli %bx, %c8 : index
    %to = arith.addi %mine, %tx : index
    memref.store %x, %out[%to] : memref<32xi64>
    gpu.terminator
  }
  %o = memref.cast %out : memref<32xi64> to memref<*xi64>
  call @printMemrefI64(%o) : (memref<*xi64>) -> ()
  memref.dealloc %a : memref<32xi64>
  memref.dealloc %out : memref<32xi64>
  return
}

func.func @blocks_own_parts() {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  call @blocks(%c0, %c4) : (index, index) -> ()
  return
}

func.func @blocks_read_next_part() {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  call @blocks(%c1, %c4) : (index, index) -> ()
  return
}

func.func @blocks_read_previous_part() {
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  call @blocks(%c3, %c4) : (index, index) -> ()
  return
}

func.func @blocks_write_one_part() {
  %c0 = arith.constant 0 : index
  call @blocks(%c0, %c0) : (index, index) -> ()
  return
}

// See the runs of @threads_exchange and its kin above.
func.func @threads(%shift: index, %barrier: i1, %one: i1, %overwrite: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %out = memref.alloc() : memref<8xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1)
             workgroup(%tile : memref<8xi64, #gpu.address_space<workgroup>>) {
    %t = arith.index_cast %tx : index to i64
    %one64 = arith.constant 1 : i64
    %v = arith.addi %t, %one64 : i64
    memref.store %v, %tile[%tx] : memref<8xi64, #gpu.address_space<workgroup>>
    scf.if %barrier {
      gpu.barrier
    }
    %s = arith.addi %tx, %shift : index
    %src = arith.remui %s, %c8 : index
    %x = memref.load %tile[%src] : memref<8xi64, #gpu.address_space<workgroup>>
    scf.if %overwrite {
      memref.store %x, %tile[%tx] : memref<8xi64, #gpu.address_space<workgroup>>
    }
    %to = arith.select %one, %c0, %tx : index
    memref.store %x, %out[%to] : memref<8xi64>
    gpu.terminator
  }
  %o = memref.cast %out : memref<8xi64> to memref<*xi64>
  call @printMemrefI64(%o) : (memref<*xi64>) -> ()
  memref.dealloc %out : memref<8xi64>
  return
}

func.func @threads_exchange() {
  %c1 = arith.constant 1 : index
  %true = arith.constant true
  %false = arith.constant false
  call @threads(%c1, %true, %false, %false) : (index, i1, i1, i1) -> ()
  return
}

func.func @threads_no_barrier() {
  %c1 = arith.constant 1 : index
  %false = arith.constant false
  call @threads(%c1, %false, %false, %false) : (index, i1, i1, i1) -> ()
  return
}

func.func @threads_write_one() {
  %c0 = arith.constant 0 : index
  %true = arith.constant true
  %false = arith.constant false
  call @threads(%c0, %true, %true, %false) : (index, i1, i1, i1) -> ()
  return
}

func.func @threads_overwrite_read() {
  %c7 = arith.constant 7 : index
  %true = arith.constant true
  %false = arith.constant false
  call @threads(%c7, %true, %false, %true) : (index, i1, i1, i1) -> ()
  return
}

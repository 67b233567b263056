// ds-merge-gpu-launches appends a one-block launch to the one-block launch
// before it: after a barrier, on the same threads (same block size) or on
// thread (0, 0, 0) (a one-thread launch); an allocation between them moves
// above. Structure first, then the merged chain run by the host emulation
// against values worked out by hand.
// RUN: ds-opt %s --ds-merge-gpu-launches --split-input-file | FileCheck %s
// RUN: ds-opt %s --ds-merge-gpu-launches=distinct-arguments --split-input-file | FileCheck %s --check-prefix=DISTINCT

// Three launches, one kernel. Thread t writes t^2; one thread sums them
// into a fresh buffer (its allocation moves above the first launch); then
// every thread t writes buf[63 - t] + sum.
// RUN: ds-opt %s --split-input-file --ds-merge-gpu-launches --ds-emulate-gpu-kernels \
// RUN:   --convert-linalg-to-loops --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts 2>&1 \
// RUN: | awk '/^\/\/ -----/ { n++; next } n == 0' \
// RUN: | mlir-runner -e chain -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=EXEC
// EXEC: [85344]
// EXEC: [89313, 89188, 89065, {{.*}}, 85348, 85345, 85344]

// Two launches of 2 blocks of 32 threads over 100 elements, independent:
// one kernel, each thread running both grid-stride loops. sq[i] = i^2 and
// tw[i] = 2i + in[i] (in[i] = i).
// RUN: ds-opt %s --split-input-file --ds-merge-gpu-launches --ds-emulate-gpu-kernels \
// RUN:   --convert-linalg-to-loops --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts 2>&1 \
// RUN: | awk '/^\/\/ -----/ { n++; next } n == 1' \
// RUN: | mlir-runner -e independent -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=INDEP
// INDEP: [0, 1, 4, 9, {{.*}}, 9604, 9801]
// INDEP: [0, 3, 6, 9, {{.*}}, 294, 297]

func.func private @printMemrefI64(memref<*xi64>)

// CHECK-LABEL: func.func @chain
// CHECK: %[[SUM:.*]] = memref.alloc() : memref<1xi64>
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c1, {{.*}} = %c1) threads(%[[TX:[^,]*]], %[[TY:[^,]*]], %[[TZ:[^,]*]]) in ({{.*}} = %c64,
// CHECK:   memref.store {{.*}}, %[[BUF:.*]][%[[TX]]]
// CHECK:   gpu.barrier
// CHECK:   %[[X0:.*]] = arith.cmpi eq, %[[TX]], %[[ZERO:.*]] : index
// CHECK:   scf.if
// CHECK:     scf.for
// CHECK:     memref.store {{.*}}, %[[SUM]]
// CHECK:   gpu.barrier
// CHECK:   arith.subi
// CHECK:   memref.load %[[SUM]]
// CHECK:   gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: call @printMemrefI64
func.func @chain() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0 : i64
  %buf = memref.alloc() : memref<64xi64>
  %out = memref.alloc() : memref<64xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %t = arith.index_cast %tx : index to i64
    %sq = arith.muli %t, %t : i64
    memref.store %sq, %buf[%tx] : memref<64xi64>
    gpu.terminator
  }
  %sum = memref.alloc() : memref<1xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %s = scf.for %i = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> (i64) {
      %v = memref.load %buf[%i] : memref<64xi64>
      %a = arith.addi %acc, %v : i64
      scf.yield %a : i64
    }
    memref.store %s, %sum[%tx] : memref<1xi64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %j = arith.subi %c63, %tx : index
    %v = memref.load %buf[%j] : memref<64xi64>
    %s = memref.load %sum[%c0] : memref<1xi64>
    %r = arith.addi %v, %s : i64
    memref.store %r, %out[%tx] : memref<64xi64>
    gpu.terminator
  }
  %u = memref.cast %sum : memref<1xi64> to memref<*xi64>
  call @printMemrefI64(%u) : (memref<*xi64>) -> ()
  %o = memref.cast %out : memref<64xi64> to memref<*xi64>
  call @printMemrefI64(%o) : (memref<*xi64>) -> ()
  memref.dealloc %buf : memref<64xi64>
  memref.dealloc %out : memref<64xi64>
  memref.dealloc %sum : memref<1xi64>
  return
}

// -----

// CHECK-LABEL: func.func @independent
// CHECK: gpu.launch
// CHECK:   scf.for
// CHECK:   scf.for
// CHECK-NOT: gpu.barrier
// CHECK:   gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: call @printMemrefI64
func.func private @printMemrefI64(memref<*xi64>)
func.func @independent() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  %two = arith.constant 2 : i64
  %in = memref.alloc() : memref<100xi64>
  %sq = memref.alloc() : memref<100xi64>
  %tw = memref.alloc() : memref<100xi64>
  scf.for %i = %c0 to %c100 step %c1 {
    %v = arith.index_cast %i : index to i64
    memref.store %v, %in[%i] : memref<100xi64>
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %start = arith.addi %b, %tx : index
    %stride = arith.muli %gx, %sx : index
    scf.for %i = %start to %c100 step %stride {
      %v = memref.load %in[%i] : memref<100xi64>
      %s = arith.muli %v, %v : i64
      memref.store %s, %sq[%i] : memref<100xi64>
    }
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %start = arith.addi %b, %tx : index
    %stride = arith.muli %gx, %sx : index
    scf.for %i = %start to %c100 step %stride {
      %v = memref.load %in[%i] : memref<100xi64>
      %d = arith.muli %v, %two : i64
      %t = arith.addi %d, %v : i64
      memref.store %t, %tw[%i] : memref<100xi64>
    }
    gpu.terminator
  }
  %u = memref.cast %sq : memref<100xi64> to memref<*xi64>
  call @printMemrefI64(%u) : (memref<*xi64>) -> ()
  %w = memref.cast %tw : memref<100xi64> to memref<*xi64>
  call @printMemrefI64(%w) : (memref<*xi64>) -> ()
  memref.dealloc %in : memref<100xi64>
  memref.dealloc %sq : memref<100xi64>
  memref.dealloc %tw : memref<100xi64>
  return
}

// -----

// Independent launches of one block size on grids of 2, 1 and 3 blocks:
// one launch of 3 blocks, each body on the blocks it had (a guard on the
// block id; the one-block reduction's collective stays uniform), seeing
// its own grid size (the grid-stride loop over 100 elements steps by 64,
// not 96). Each body marks the blocks that ran it.
// CHECK-LABEL: func.func @own_blocks
// CHECK: gpu.launch blocks(%[[BX:[^,]*]], {{.*}}) in ({{.*}} = %c3{{(_[0-9]+)?}}, {{.*}} = %c1, {{.*}} = %c1) threads
// CHECK:   %[[G2:.*]] = arith.constant 2 : index
// CHECK:   %[[IN2:.*]] = arith.cmpi ult, %[[BX]], %[[G2]] : index
// CHECK:   scf.if %[[IN2]] {
// CHECK:     arith.muli %[[G2]],
// CHECK:     scf.for
// CHECK:     %[[IN1:.*]] = arith.cmpi ult, %[[BX]], %{{.*}} : index
// CHECK:     scf.if %[[IN1]] {
// CHECK:       gpu.all_reduce
// CHECK:   scf.for
// CHECK:   gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: call @printMemrefI64
// RUN: ds-opt %s --split-input-file --ds-merge-gpu-launches --ds-emulate-gpu-kernels \
// RUN:   --convert-linalg-to-loops --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts 2>&1 \
// RUN: | awk '/^\/\/ -----/ { n++; next } n == 2' \
// RUN: | mlir-runner -e own_blocks -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=OWN
// sq[i] = i^2; the sum of in[0..63]; tw[i] = 3i; the blocks that ran each body.
// OWN: [0, 1, 4, 9, {{.*}}, 3969, 4096, 4225, {{.*}}, 9216, 9409, 9604, 9801]
// OWN: [2016]
// OWN: [0, 3, 6, 9, {{.*}}, 294, 297]
// OWN: [1, 1, 0]
// OWN: [1, 0, 0]
// OWN: [1, 1, 1]
func.func private @printMemrefI64(memref<*xi64>)
func.func @own_blocks() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  %zero = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  %three = arith.constant 3 : i64
  %in = memref.alloc() : memref<100xi64>
  %sq = memref.alloc() : memref<100xi64>
  %sum = memref.alloc() : memref<1xi64>
  %tw = memref.alloc() : memref<100xi64>
  %ran0 = memref.alloc() : memref<3xi64>
  %ran1 = memref.alloc() : memref<3xi64>
  %ran2 = memref.alloc() : memref<3xi64>
  scf.for %i = %c0 to %c100 step %c1 {
    %v = arith.index_cast %i : index to i64
    memref.store %v, %in[%i] : memref<100xi64>
  }
  memref.store %zero, %ran0[%c0] : memref<3xi64>
  memref.store %zero, %ran0[%c1] : memref<3xi64>
  memref.store %zero, %ran0[%c2] : memref<3xi64>
  memref.store %zero, %ran1[%c0] : memref<3xi64>
  memref.store %zero, %ran1[%c1] : memref<3xi64>
  memref.store %zero, %ran1[%c2] : memref<3xi64>
  memref.store %zero, %ran2[%c0] : memref<3xi64>
  memref.store %zero, %ran2[%c1] : memref<3xi64>
  memref.store %zero, %ran2[%c2] : memref<3xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %start = arith.addi %b, %tx : index
    %stride = arith.muli %gx, %sx : index
    scf.for %i = %start to %c100 step %stride {
      %v = memref.load %in[%i] : memref<100xi64>
      %s = arith.muli %v, %v : i64
      memref.store %s, %sq[%i] : memref<100xi64>
    }
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      memref.store %one, %ran0[%bx] : memref<3xi64>
    }
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %part = scf.for %i = %tx to %c64 step %sx iter_args(%acc = %zero) -> (i64) {
      %v = memref.load %in[%i] : memref<100xi64>
      %a = arith.addi %acc, %v : i64
      scf.yield %a : i64
    }
    %total = gpu.all_reduce add %part uniform {} : (i64) -> (i64)
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      memref.store %total, %sum[%c0] : memref<1xi64>
      memref.store %one, %ran1[%bx] : memref<3xi64>
    }
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c3, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %start = arith.addi %b, %tx : index
    %stride = arith.muli %gx, %sx : index
    scf.for %i = %start to %c100 step %stride {
      %v = memref.load %in[%i] : memref<100xi64>
      %t = arith.muli %v, %three : i64
      memref.store %t, %tw[%i] : memref<100xi64>
    }
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      memref.store %one, %ran2[%bx] : memref<3xi64>
    }
    gpu.terminator
  }
  %u = memref.cast %sq : memref<100xi64> to memref<*xi64>
  call @printMemrefI64(%u) : (memref<*xi64>) -> ()
  %m = memref.cast %sum : memref<1xi64> to memref<*xi64>
  call @printMemrefI64(%m) : (memref<*xi64>) -> ()
  %w = memref.cast %tw : memref<100xi64> to memref<*xi64>
  call @printMemrefI64(%w) : (memref<*xi64>) -> ()
  %r0 = memref.cast %ran0 : memref<3xi64> to memref<*xi64>
  call @printMemrefI64(%r0) : (memref<*xi64>) -> ()
  %r1 = memref.cast %ran1 : memref<3xi64> to memref<*xi64>
  call @printMemrefI64(%r1) : (memref<*xi64>) -> ()
  %r2 = memref.cast %ran2 : memref<3xi64> to memref<*xi64>
  call @printMemrefI64(%r2) : (memref<*xi64>) -> ()
  memref.dealloc %in : memref<100xi64>
  memref.dealloc %sq : memref<100xi64>
  memref.dealloc %sum : memref<1xi64>
  memref.dealloc %tw : memref<100xi64>
  memref.dealloc %ran0 : memref<3xi64>
  memref.dealloc %ran1 : memref<3xi64>
  memref.dealloc %ran2 : memref<3xi64>
  return
}

// -----

// One buffer, two static subviews that miss each other: an FP8 amax
// history's newest entry (one block) and the shift of the rest (2 blocks)
// run in one kernel. Subviews that overlap keep their launches apart.
// CHECK-LABEL: func.func @history
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{(_[0-9]+)?}}, {{.*}} = %c1, {{.*}} = %c1) threads
// CHECK:   scf.if
// CHECK:   scf.for
// CHECK:   gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK-LABEL: func.func @overlapping
// CHECK-COUNT-2: gpu.launch
// RUN: ds-opt %s --split-input-file --ds-merge-gpu-launches --ds-emulate-gpu-kernels \
// RUN:   --convert-linalg-to-loops --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts 2>&1 \
// RUN: | awk '/^\/\/ -----/ { n++; next } n == 3' \
// RUN: | mlir-runner -e history -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=HIST
// HIST: [99, 10, 11, 12, 13, 14, 15, 16]
func.func private @printMemrefI64(memref<*xi64>)
func.func @history() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c10 = arith.constant 10 : index
  %newest = arith.constant 99 : i64
  %old = memref.alloc() : memref<8xi64>
  %new = memref.alloc() : memref<8xi64>
  %now = memref.alloc() : memref<1xi64>
  scf.for %i = %c0 to %c8 step %c1 {
    %j = arith.addi %i, %c10 : index
    %v = arith.index_cast %j : index to i64
    memref.store %v, %old[%i] : memref<8xi64>
  }
  memref.store %newest, %now[%c0] : memref<1xi64>
  %head = memref.subview %new[0] [1] [1] : memref<8xi64> to memref<1xi64, strided<[1]>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      %v = memref.load %now[%c0] : memref<1xi64>
      memref.store %v, %head[%c0] : memref<1xi64, strided<[1]>>
    }
    gpu.terminator
  }
  %from = memref.subview %old[0] [7] [1] : memref<8xi64> to memref<7xi64, strided<[1]>>
  %to = memref.subview %new[1] [7] [1] : memref<8xi64> to memref<7xi64, strided<[1], offset: 1>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %start = arith.addi %b, %tx : index
    %stride = arith.muli %gx, %sx : index
    scf.for %i = %start to %c7 step %stride {
      %v = memref.load %from[%i] : memref<7xi64, strided<[1]>>
      memref.store %v, %to[%i] : memref<7xi64, strided<[1], offset: 1>>
    }
    gpu.terminator
  }
  %p = memref.cast %new : memref<8xi64> to memref<*xi64>
  call @printMemrefI64(%p) : (memref<*xi64>) -> ()
  memref.dealloc %old : memref<8xi64>
  memref.dealloc %new : memref<8xi64>
  memref.dealloc %now : memref<1xi64>
  return
}
func.func @overlapping(%now: memref<1xi64>, %old: memref<8xi64>, %new: memref<8xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  %head = memref.subview %new[0] [2] [1] : memref<8xi64> to memref<2xi64, strided<[1]>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %v = memref.load %now[%c0] : memref<1xi64>
    memref.store %v, %head[%c1] : memref<2xi64, strided<[1]>>
    gpu.terminator
  }
  %to = memref.subview %new[1] [7] [1] : memref<8xi64> to memref<7xi64, strided<[1], offset: 1>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %v = memref.load %old[%tx] : memref<8xi64>
    memref.store %v, %to[%tx] : memref<7xi64, strided<[1], offset: 1>>
    gpu.terminator
  }
  return
}

// -----

// Launches of the same shape that depend on each other stay apart: the
// second reads, at other indices, what the first writes.
// CHECK-LABEL: func.func @dependent
// CHECK-COUNT-2: gpu.launch
func.func @dependent(%out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c63 = arith.constant 63 : index
  %x = arith.constant 1.0 : f32
  %tmp = memref.alloc() : memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %i = arith.addi %b, %tx : index
    memref.store %x, %tmp[%i] : memref<64xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %b = arith.muli %bx, %sx : index
    %i = arith.addi %b, %tx : index
    %j = arith.subi %c63, %i : index
    %v = memref.load %tmp[%j] : memref<64xf32>
    memref.store %v, %out[%i] : memref<64xf32>
    gpu.terminator
  }
  memref.dealloc %tmp : memref<64xf32>
  return
}

// -----

// Two arguments may be one buffer, unless the function is a step (the C
// interface ds-prepare-step-abi requests) and distinct-arguments is set.
// CHECK-LABEL: func.func @arguments
// CHECK-COUNT-2: gpu.launch
// CHECK-LABEL: func.func @step_arguments
// CHECK-COUNT-2: gpu.launch
// DISTINCT-LABEL: func.func @arguments
// DISTINCT-COUNT-2: gpu.launch
// DISTINCT-LABEL: func.func @step_arguments
// DISTINCT: gpu.launch
// DISTINCT-NOT: gpu.launch
// DISTINCT: return
func.func @arguments(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    memref.store %x, %a[%tx] : memref<64xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %v = memref.load %b[%tx] : memref<64xf32>
    %w = arith.addf %v, %x : f32
    memref.store %w, %b[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}
func.func @step_arguments(%a: memref<64xf32>, %b: memref<64xf32>) attributes {llvm.emit_c_interface} {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %x = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    memref.store %x, %a[%tx] : memref<64xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %v = memref.load %b[%tx] : memref<64xf32>
    %w = arith.addf %v, %x : f32
    memref.store %w, %b[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// What stays apart: a launch of several blocks and a one-block one after
// it (the same buffer); a one-thread launch with a collective in it (on
// one thread of a larger block it would diverge); another block size; a
// copy between (it touches memory).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @kept(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %x = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    memref.store %x, %a[%tx] : memref<64xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    memref.store %x, %a[%tx] : memref<64xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %s = gpu.all_reduce add %x uniform {} : (f32) -> (f32)
    memref.store %s, %a[%tx] : memref<64xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    memref.store %x, %a[%tx] : memref<64xf32>
    gpu.terminator
  }
  memref.copy %a, %b : memref<64xf32> to memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    memref.store %x, %b[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// Before merging, a one-block launch moves next to another one-block
// launch it can be appended to, past the launches and library GEMMs that
// touch none of its buffers (a GEMM writes its third operand and reads the
// others): C (a scale from the state, like A) goes up past the GEMM and
// the cast B to A, and the two, sharing no buffer, run side by side on
// blocks 0 and 1 of one launch. E reads what B wrote, so it stays below B;
// F, which reads what E wrote, rises past G to E. Arguments overlap unless
// distinct, so only the distinct run moves them.
// DISTINCT-LABEL: func.func @gather
// DISTINCT:         gpu.launch blocks(%[[BX:[^,]*]], {{.*}} in (%{{.*}} = %c2{{(_[0-9]+)?}}, {{.*}} in (%{{.*}} = %c64,
// DISTINCT:           arith.cmpi eq, %[[BX]], %c0
// DISTINCT-NEXT:      scf.if
// DISTINCT:             memref.store {{.*}}, %[[S1:.*]][
// DISTINCT:           arith.cmpi eq, %[[BX]], %c1
// DISTINCT-NEXT:      scf.if
// DISTINCT:             memref.store {{.*}}, %[[S2:.*]][
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c4,
// DISTINCT:           memref.load %[[S1]]
// DISTINCT:         call @dsrt_cuda_matmul_f32
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c4,
// DISTINCT:           memref.load %[[S2]]
// DISTINCT:           scf.if
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c1, {{.*}} in (%{{.*}} = %c1,
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c2,
// DISTINCT-NOT:     gpu.launch
// DISTINCT:         return
func.func private @dsrt_cuda_matmul_f32(memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64)
func.func @gather(%state: memref<64xf32>, %a: memref<256xf32>, %b: memref<256xf32>, %b2: memref<256xf32>,
                  %g: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, %c: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c128 = arith.constant 128 : index
  %c64 = arith.constant 64 : index
  %s1 = memref.alloc() : memref<64xf32>
  // A: the first scale, from the state.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %state[%tx] : memref<64xf32>
    memref.store %v, %s1[%tx] : memref<64xf32>
    gpu.terminator
  }
  // B: a cast that reads it.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 64 + t)>(%bx, %tx)
    %v = memref.load %a[%i] : memref<256xf32>
    %w = memref.load %s1[%tx] : memref<64xf32>
    %x = arith.mulf %v, %w : f32
    memref.store %x, %a[%i] : memref<256xf32>
    gpu.terminator
  }
  func.call @dsrt_cuda_matmul_f32(%g, %g, %c, %c0, %c0) : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64) -> ()
  // C: the second scale, from the state too: up past the GEMM and B, to A.
  %s2 = memref.alloc() : memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %state[%tx] : memref<64xf32>
    %y = arith.addf %v, %v : f32
    memref.store %y, %s2[%tx] : memref<64xf32>
    gpu.terminator
  }
  // D: the cast that reads the second scale.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 64 + t)>(%bx, %tx)
    %v = memref.load %b[%i] : memref<256xf32>
    %w = memref.load %s2[%tx] : memref<64xf32>
    %x = arith.mulf %v, %w : f32
    memref.store %x, %b[%i] : memref<256xf32>
    gpu.terminator
  }
  // E: reads what B wrote, so it cannot go up past B; down past G, to F.
  %s3 = memref.alloc() : memref<64xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %a[%tx] : memref<256xf32>
    memref.store %v, %s3[%tx] : memref<64xf32>
    gpu.terminator
  }
  // G: touches nothing E touches (and has other blocks than E).
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 128 + t)>(%bx, %tx)
    %v = memref.load %b[%i] : memref<256xf32>
    memref.store %v, %b2[%i] : memref<256xf32>
    gpu.terminator
  }
  // F: one thread, after E.
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %s3[%tx] : memref<64xf32>
    memref.store %v, %state[%tx] : memref<64xf32>
    gpu.terminator
  }
  memref.dealloc %s1 : memref<64xf32>
  memref.dealloc %s2 : memref<64xf32>
  memref.dealloc %s3 : memref<64xf32>
  return
}

// -----

// A GEMM reads its FP8 scales through pointers (the address of a buffer):
// the launch that writes the scale stays before it, and the one that reads
// the GEMM's result after it.
// DISTINCT-LABEL: func.func @gather_scale_pointer
// DISTINCT:         gpu.launch
// DISTINCT:           memref.store {{.*}}, %[[SCALE:.*]][]
// DISTINCT:         memref.extract_aligned_pointer_as_index %[[SCALE]]
// DISTINCT:         call @dsrt_cuda_matmul_e4m3_e4m3_to_bf16
// DISTINCT:         gpu.launch
// DISTINCT-NOT:     gpu.launch
// DISTINCT:         return
func.func private @dsrt_cuda_matmul_e4m3_e4m3_to_bf16(memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, i64, i64, !llvm.ptr, !llvm.ptr)
func.func @gather_scale_pointer(%state: memref<f32>, %out: memref<f32>,
                                %a: memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>,
                                %c: memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : index
  %scale = memref.alloc() : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %state[] : memref<f32>
    memref.store %v, %scale[] : memref<f32>
    gpu.terminator
  }
  %i = memref.extract_aligned_pointer_as_index %scale : memref<f32> -> index
  %i64 = arith.index_cast %i : index to i64
  %p = llvm.inttoptr %i64 : i64 to !llvm.ptr
  %none = llvm.mlir.zero : !llvm.ptr
  func.call @dsrt_cuda_matmul_e4m3_e4m3_to_bf16(%a, %a, %c, %c0, %c0, %p, %none) : (memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf8E4M3FN, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %z = arith.constant 0 : index
    %h = memref.load %c[%z, %z, %z] : memref<?x?x?xbf16, strided<[?, ?, ?], offset: ?>>
    %v = arith.extf %h : bf16 to f32
    memref.store %v, %out[] : memref<f32>
    gpu.terminator
  }
  memref.dealloc %scale : memref<f32>
  return
}

// -----

// One-block launches that share no buffer run side by side, each on a
// block of its own; one that depends on one of them follows it in its
// block, after a barrier; one that depends on several makes their blocks
// one. P writes p[t] = t and Q q[t] = 2t; T writes 5s; R reads both,
// r[t] = p[t] + q[31 - t], so P's and Q's blocks become one (in either
// order) and R follows; S, one thread, sums r[0] + r[31] after R. Two
// blocks remain: T, and P, Q, R and S.
// CHECK-LABEL: func.func @stack
// CHECK:         gpu.launch blocks(%[[BX:[^,]*]], {{.*}} in (%{{.*}} = %c2{{(_[0-9]+)?}}, {{.*}} threads(%[[TX:[^,]*]],
// CHECK:           arith.cmpi eq, %[[BX]], %c0
// CHECK-NEXT:      scf.if
// CHECK-NEXT:        memref.store %c5_i64
// CHECK:           arith.cmpi eq, %[[BX]], %c1
// CHECK-NEXT:      scf.if
// CHECK:             memref.store {{.*}}[%[[TX]]]
// CHECK:             gpu.barrier
// CHECK:             memref.store {{.*}}[%[[TX]]]
// CHECK:             gpu.barrier
// CHECK:             memref.load
// CHECK:             memref.load
// CHECK:             gpu.barrier
// CHECK:             arith.cmpi eq, %[[TX]]
// CHECK:             scf.if
// CHECK:           gpu.terminator
// CHECK-NOT:     gpu.launch
// CHECK:         call @printMemrefI64
// RUN: ds-opt %s --split-input-file --ds-merge-gpu-launches --ds-emulate-gpu-kernels \
// RUN:   --convert-linalg-to-loops --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts 2>&1 \
// RUN: | awk '/^\/\/ -----/ { n++; next } n == 9' \
// RUN: | mlir-runner -e stack -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=STACK
// STACK: [62, 61, 60, {{.*}}, 32, 31]
// STACK: [93]
// STACK: [5, 5, 5, {{.*}}, 5, 5]
func.func private @printMemrefI64(memref<*xi64>)
func.func @stack() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c31 = arith.constant 31 : index
  %c32 = arith.constant 32 : index
  %two = arith.constant 2 : i64
  %five = arith.constant 5 : i64
  %p = memref.alloc() : memref<32xi64>
  %q = memref.alloc() : memref<32xi64>
  %r = memref.alloc() : memref<32xi64>
  %s = memref.alloc() : memref<1xi64>
  %t = memref.alloc() : memref<32xi64>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %v = arith.index_cast %tx : index to i64
    memref.store %v, %p[%tx] : memref<32xi64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %v = arith.index_cast %tx : index to i64
    %w = arith.muli %v, %two : i64
    memref.store %w, %q[%tx] : memref<32xi64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    memref.store %five, %t[%tx] : memref<32xi64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %j = arith.subi %c31, %tx : index
    %a = memref.load %p[%tx] : memref<32xi64>
    %b = memref.load %q[%j] : memref<32xi64>
    %v = arith.addi %a, %b : i64
    memref.store %v, %r[%tx] : memref<32xi64>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %a = memref.load %r[%c0] : memref<32xi64>
    %b = memref.load %r[%c31] : memref<32xi64>
    %v = arith.addi %a, %b : i64
    memref.store %v, %s[%c0] : memref<1xi64>
    gpu.terminator
  }
  %ur = memref.cast %r : memref<32xi64> to memref<*xi64>
  call @printMemrefI64(%ur) : (memref<*xi64>) -> ()
  %us = memref.cast %s : memref<1xi64> to memref<*xi64>
  call @printMemrefI64(%us) : (memref<*xi64>) -> ()
  %ut = memref.cast %t : memref<32xi64> to memref<*xi64>
  call @printMemrefI64(%ut) : (memref<*xi64>) -> ()
  memref.dealloc %p : memref<32xi64>
  memref.dealloc %q : memref<32xi64>
  memref.dealloc %r : memref<32xi64>
  memref.dealloc %s : memref<1xi64>
  memref.dealloc %t : memref<32xi64>
  return
}

// -----

// A one-block launch goes down past a free of a buffer it reads (the free
// moves after it) and a launch that touches none of its buffers, to the
// one-block launch it can join: X reads what B wrote, so it cannot rise;
// Y reads what H wrote. X and Y then run side by side, before the free.
// DISTINCT-LABEL: func.func @sink_past_free
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c4,
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c4, {{.*}} in (%{{.*}} = %c128,
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c2{{(_[0-9]+)?}}, {{.*}} in (%{{.*}} = %c64,
// DISTINCT:           memref.load %[[TMP:alloc[_0-9]*]][
// DISTINCT:         memref.dealloc %[[TMP]]
// DISTINCT-NEXT:    return
func.func @sink_past_free(%a: memref<256xf32>, %out1: memref<64xf32>, %h: memref<512xf32>, %out2: memref<64xf32>) attributes {llvm.emit_c_interface} {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %tmp = memref.alloc() : memref<256xf32>
  // B
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 64 + t)>(%bx, %tx)
    %v = memref.load %a[%i] : memref<256xf32>
    memref.store %v, %tmp[%i] : memref<256xf32>
    gpu.terminator
  }
  // X
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %tmp[%tx] : memref<256xf32>
    memref.store %v, %out1[%tx] : memref<64xf32>
    gpu.terminator
  }
  memref.dealloc %tmp : memref<256xf32>
  // H
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 128 + t)>(%bx, %tx)
    %v = memref.load %h[%i] : memref<512xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %h[%i] : memref<512xf32>
    gpu.terminator
  }
  // Y
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %h[%tx] : memref<512xf32>
    memref.store %v, %out2[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

// A grid-stride loop over as many rows as the launch has blocks runs once
// per block: it goes, the row being the block id. Over fewer rows, it
// becomes a guard on the block id.
// CHECK-LABEL: func.func @one_trip_loops
// CHECK:         gpu.launch blocks(%[[BX:[^,]*]],
// CHECK-NOT:       scf.for
// CHECK:           memref.store {{.*}}[%[[BX]], %{{.*}}]
// CHECK:           %[[IN:.*]] = arith.cmpi ult, %[[BX]], %c3
// CHECK-NEXT:      scf.if %[[IN]]
// CHECK-NEXT:        memref.store {{.*}}[%[[BX]], %{{.*}}]
// CHECK-NOT:       scf.for
// CHECK:           gpu.terminator
func.func @one_trip_loops(%a: memref<4x64xf32>, %b: memref<4x64xf32>) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %x = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    scf.for %r = %bx to %c4 step %gx {
      memref.store %x, %a[%r, %tx] : memref<4x64xf32>
    }
    scf.for %r = %bx to %c3 step %gx {
      memref.store %x, %b[%r, %tx] : memref<4x64xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// A launch joins an earlier launch across launches it cannot join (of
// another block size here) when it touches nothing they write and writes
// nothing they touch: C goes into A past B; D reads what B wrote, so it
// stays after B (and joins nothing: B has another block size).
// DISTINCT-LABEL: func.func @look_back
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c4, {{.*}} in (%{{.*}} = %c64,
// DISTINCT:           memref.store {{.*}}, %arg0[
// DISTINCT:           memref.store {{.*}}, %arg2[
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c2, {{.*}} in (%{{.*}} = %c128,
// DISTINCT:           memref.store {{.*}}, %arg1[
// DISTINCT:         gpu.launch {{.*}} in (%{{.*}} = %c4, {{.*}} in (%{{.*}} = %c64,
// DISTINCT:           memref.load %arg1[
// DISTINCT-NOT:     gpu.launch
// DISTINCT:         return
func.func @look_back(%a: memref<256xf32>, %b: memref<256xf32>, %c: memref<256xf32>, %d: memref<256xf32>) attributes {llvm.emit_c_interface} {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %x = arith.constant 1.0 : f32
  // A
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 64 + t)>(%bx, %tx)
    memref.store %x, %a[%i] : memref<256xf32>
    gpu.terminator
  }
  // B
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 128 + t)>(%bx, %tx)
    memref.store %x, %b[%i] : memref<256xf32>
    gpu.terminator
  }
  // C
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 64 + t)>(%bx, %tx)
    memref.store %x, %c[%i] : memref<256xf32>
    gpu.terminator
  }
  // D
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<(b, t) -> (b * 64 + t)>(%bx, %tx)
    %v = memref.load %b[%i] : memref<256xf32>
    memref.store %v, %d[%i] : memref<256xf32>
    gpu.terminator
  }
  return
}

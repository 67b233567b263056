// RUN: ds-opt %s --ds-emulate-gpu-kernels --split-input-file --verify-diagnostics | FileCheck %s

// A block-wide sum: a loop over the blocks; the code before gpu.all_reduce
// runs for every thread and keeps its value per thread; the all-reduce
// folds them in thread order; the code after it runs for every thread
// again, with the total. Blocks and threads run last first (n - 1 - i).
// CHECK-LABEL: func.func @block_sum
// CHECK:         %[[PART:.*]] = memref.alloc() : memref<128xf32>
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step
// CHECK:           %[[L:.*]] = arith.subi %{{.*}}, %[[I]]
// CHECK:           %[[B:.*]] = arith.remui %[[L]]
// CHECK:           scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step
// CHECK:             %[[T:.*]] = arith.subi %{{.*}}, %[[J]]
// CHECK:             %[[TX:.*]] = arith.remui %[[T]]
// CHECK:             memref.load %[[IN:.*]][%[[B]], %[[TX]]]
// CHECK:             memref.store %{{.*}}, %[[PART]][%[[T]]]
// CHECK:           %[[FIRST:.*]] = memref.load %[[PART]][%{{.*}}]
// CHECK:           %[[SUM:.*]] = scf.for %[[U:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[FIRST]])
// CHECK:             %[[NEXT:.*]] = memref.load %[[PART]][%[[U]]]
// CHECK:             %[[ADD:.*]] = arith.addf %[[ACC]], %[[NEXT]]
// CHECK:             scf.yield %[[ADD]]
// CHECK:           scf.for
// CHECK:             scf.if
// CHECK:               memref.store %[[SUM]], %{{.*}}[%{{.*}}]
// CHECK:         memref.dealloc %[[PART]]
// CHECK-NOT:     gpu.launch
func.func @block_sum(%in: memref<4x128xf32>, %out: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c128 = arith.constant 128 : index
  %c0 = arith.constant 0 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %x = memref.load %in[%bx, %tx] : memref<4x128xf32>
    %s = gpu.all_reduce add %x uniform {} : (f32) -> (f32)
    %first = arith.cmpi eq, %tx, %c0 : index
    scf.if %first {
      memref.store %s, %out[%bx] : memref<4xf32>
    }
    gpu.terminator
  }
  return
}

// -----

func.func @shuffle(%out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %w = arith.constant 32 : i32
  %o = arith.constant 1 : i32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %v = memref.load %out[%tx] : memref<64xf32>
    // expected-error @+1 {{ds-emulate-gpu-kernels: cannot run 'gpu.shuffle'}}
    %r, %ok = gpu.shuffle xor %v, %o, %w : f32
    memref.store %r, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

func.func @region_reduce(%out: memref<f32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{cannot run an all-reduce with a region}}
    %s = gpu.all_reduce %one {
    ^bb(%a: f32, %b: f32):
      %m = arith.mulf %a, %b : f32
      "gpu.yield"(%m) : (f32) -> ()
    } : (f32) -> (f32)
    memref.store %s, %out[] : memref<f32>
    gpu.terminator
  }
  return
}

// -----

func.func @carried(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{cannot run a loop that carries values across a synchronisation}}
    %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %one) -> (f32) {
      %s = gpu.all_reduce add %acc uniform {} : (f32) -> (f32)
      scf.yield %s : f32
    }
    memref.store %r, %out[] : memref<f32>
    gpu.terminator
  }
  return
}

// -----

func.func @thread_bound(%out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  // expected-error @+1 {{a synchronisation depends on the thread id}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    scf.for %i = %c0 to %tx step %c1 {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// Shared memory (a workgroup attribution) is one host buffer, allocated
// before the loop over blocks, which use it in turn, and freed after.
// CHECK-LABEL: func.func @shared
// CHECK:         %[[W:.*]] = memref.alloc() : memref<64xf32>
// CHECK:         scf.for
// CHECK:           memref.store %{{.*}}, %[[W]]
// CHECK:           memref.load %[[W]]
// CHECK:         memref.dealloc %[[W]]
func.func @shared(%out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c63 = arith.constant 63 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1)
             workgroup(%w : memref<64xf32, #gpu.address_space<workgroup>>) {
    memref.store %one, %w[%tx] : memref<64xf32, #gpu.address_space<workgroup>>
    gpu.barrier
    %mirror = arith.subi %c63, %tx : index
    %v = memref.load %w[%mirror] : memref<64xf32, #gpu.address_space<workgroup>>
    memref.store %v, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

// -----

func.func @private(%out: memref<f32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  // expected-error @+1 {{cannot run a launch with private memory attributions}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1)
             private(%p : memref<4xf32, #gpu.address_space<private>>) {
    gpu.terminator
  }
  return
}

// -----

func.func @several_blocks(%out: memref<4xi64>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  // expected-error @+1 {{cannot run a launch body of several blocks}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %i = arith.index_cast %tx : index to i64
    cf.br ^bb1(%i : i64)
  ^bb1(%v: i64):
    memref.store %v, %out[%tx] : memref<4xi64>
    gpu.terminator
  }
  return
}

// -----

func.func @lane_id(%out: memref<64xindex>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{cannot run 'gpu.lane_id'}}
    %l = gpu.lane_id
    memref.store %l, %out[%tx] : memref<64xindex>
    gpu.terminator
  }
  return
}

// -----

func.func @clustered(%out: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{cannot run a clustered or vector subgroup_reduce}}
    %s = gpu.subgroup_reduce add %one uniform cluster(size = 4) : (f32) -> f32
    memref.store %s, %out[%tx] : memref<64xf32>
    gpu.terminator
  }
  return
}

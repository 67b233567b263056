// RUN: ds-opt %s --convert-linalg-to-ds-gpu=vectorize=false --canonicalize --split-input-file | FileCheck %s
// RUN: ds-opt %s --convert-linalg-to-ds-gpu="unroll=1 vectorize=false" --canonicalize --split-input-file | FileCheck %s --check-prefix=ONE
// RUN: ds-opt %s --convert-linalg-to-ds-gpu="unroll=3 vectorize=false" --canonicalize --split-input-file | FileCheck %s --check-prefix=THREE
// RUN: not ds-opt %s --convert-linalg-to-ds-gpu=unroll=17 --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// Without 16-byte vectors (vectorize=false; vector-elementwise.mlir has
// them), and where a kernel's buffers are not aligned for them: an
// elementwise kernel's thread takes several elements a grid stride
// apart per iteration and loads them all before it stores any, so that
// it has that many loads in flight (a store would stop a later load from
// passing it: the buffers may alias); the elements past the last full
// group run one at a time. The grid shrinks by the same factor.
//
// f32: 16 bytes' worth, 4 elements; 64000 / (256 x 4) -> 63 blocks.
// CHECK-LABEL: func.func @f32
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c63{{.*}}, {{.*}} threads({{.*}}) in (%{{.*}} = %c256
// CHECK:           %[[REST:.*]] = scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (index) {
// CHECK-COUNT-4:     memref.load %arg0
// CHECK-NOT:         memref.load
// CHECK-COUNT-4:     memref.store {{.*}}, %arg1
// CHECK-NOT:         memref.store
// CHECK:             scf.yield
// CHECK:           scf.for %{{.*}} = %[[REST]] to %c64000 step
// CHECK-COUNT-1:     memref.load %arg0
// CHECK-COUNT-1:     memref.store
// ONE-LABEL: func.func @f32
// ONE:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c250{{.*}}, {{.*}} threads({{.*}}) in (%{{.*}} = %c256
// ONE-NOT:       iter_args
// ONE:           scf.for %{{.*}} = %{{.*}} to %c64000 step
// ONE-COUNT-1:     memref.load %arg0
// ONE-NOT:         memref.load
// ONE:           gpu.terminator
// THREE-LABEL: func.func @f32
// THREE:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c84{{.*}}, {{.*}} threads
// THREE:           scf.for {{.*}} iter_args
// THREE-COUNT-3:     memref.load %arg0
// THREE-NOT:         memref.load
// THREE-COUNT-3:     memref.store
// BAD: convert-linalg-to-ds-gpu: block-size must be a multiple of 32 in [32, 1024], max-blocks positive and unroll in [0, 16] (got 256, 4096, 17)
func.func @f32(%x: memref<64x1000xf32>, %y: memref<64x1000xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x1000xf32>) outs(%y : memref<64x1000xf32>) {
  ^bb0(%a: f32, %b: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// bf16 in and out: 8 elements (16 bytes); 64000 / (256 x 8) -> 32 blocks.
// CHECK-LABEL: func.func @bf16
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c32{{.*}}, {{.*}} threads
// CHECK:           scf.for {{.*}} iter_args
// CHECK-COUNT-8:     memref.load %arg0
// CHECK-NOT:         memref.load
// CHECK-COUNT-8:     memref.store {{.*}}, %arg1
func.func @bf16(%x: memref<64000xbf16>, %y: memref<64000xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<64000xbf16>) outs(%y : memref<64000xbf16>) {
  ^bb0(%a: bf16, %b: bf16):
    %e = arith.negf %a : bf16
    linalg.yield %e : bf16
  }
  return
}

// -----

// An optimizer's update, in place: four tensors read and three written
// per element (the learning rate, a scalar, is one load for all) would be
// 28 accesses at 4 elements, which cost more registers than they repay:
// at most 16 a group, so 2 elements (32 bytes read a thread).
// CHECK-LABEL: func.func @update
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c137
// CHECK:           scf.for {{.*}} iter_args
// CHECK-COUNT-2:     memref.load %arg0
// CHECK-NOT:         memref.store
// CHECK:             memref.load %arg3
// CHECK-COUNT-6:     memref.store
// CHECK-NOT:         memref.store
// CHECK:             scf.yield
func.func @update(%p: memref<70000xf32>, %g: memref<70000xf32>, %m: memref<70000xf32>,
                  %v: memref<70000xf32>, %lr: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>,
                                   affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                                   affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%g, %lr : memref<70000xf32>, memref<f32>) outs(%p, %m, %v : memref<70000xf32>, memref<70000xf32>, memref<70000xf32>) {
  ^bb0(%gi: f32, %l: f32, %pi: f32, %mi: f32, %vi: f32):
    %m2 = arith.addf %mi, %gi : f32
    %g2 = arith.mulf %gi, %gi : f32
    %v2 = arith.addf %vi, %g2 : f32
    %s = math.sqrt %v2 : f32
    %u = arith.divf %m2, %s : f32
    %d = arith.mulf %l, %u : f32
    %p2 = arith.subf %pi, %d : f32
    linalg.yield %p2, %m2, %v2 : f32, f32, f32
  }
  return
}

// -----

// A one-block launch (4096 elements) keeps one element at a time: such
// launches join the step's one-block chains (ds-merge-gpu-launches),
// whose registers would add up.
// CHECK-LABEL: func.func @one_block
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c1{{.*}}, {{.*}} threads
// CHECK-NOT:       iter_args
// CHECK:         gpu.terminator
func.func @one_block(%x: memref<4096xf32>, %y: memref<4096xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<4096xf32>) outs(%y : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A short reduction runs serially in each thread (a loop inside the
// element's work): no unrolling.
// CHECK-LABEL: func.func @short_rows
// CHECK:         gpu.launch
// CHECK-NOT:       iter_args(%{{.*}} = %{{.*}}) -> (index)
// CHECK:         gpu.terminator
func.func @short_rows(%x: memref<10000x4xf32>, %y: memref<10000xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<10000x4xf32>) outs(%y : memref<10000xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row group's elementwise member (a softmax's normalisation) loops over
// the row's elements in the same groups. The row's maximum and sum are
// loaded at the row's index, the same for every element: they do not
// count against the 16 accesses a group (one load, one store per
// element), so 4 f32 elements a group.
// CHECK-LABEL: func.func @row_member
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce maximumf
// CHECK:           gpu.barrier
// CHECK:           scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (index) {
// CHECK-COUNT-4:     memref.load %arg0
// CHECK-NOT:         memref.store
// CHECK-COUNT-4:     memref.store {{.*}}, %arg3
// CHECK:             scf.yield
// CHECK:           scf.for
// CHECK:             memref.load %arg0
// CHECK:             memref.store {{.*}}, %arg3
func.func @row_member(%x: memref<4096x512xf32>, %m: memref<4096xf32>, %s: memref<4096xf32>,
                      %y: memref<4096x512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x512xf32>) outs(%m : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %m, %s : memref<4096x512xf32>, memref<4096xf32>, memref<4096xf32>)
      outs(%y : memref<4096x512xf32>) {
  ^bb0(%a: f32, %mx: f32, %sum: f32, %o: f32):
    %d = arith.subf %a, %mx : f32
    %e = math.exp %d : f32
    %r = arith.divf %e, %sum : f32
    linalg.yield %r : f32
  }
  return
}

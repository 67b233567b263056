// RUN: ds-opt %s --convert-linalg-to-ds-gpu --canonicalize --split-input-file | FileCheck %s
// RUN: ds-opt %s --convert-linalg-to-ds-gpu=vectorize=false --canonicalize --split-input-file | FileCheck %s --check-prefix=SCALAR

// An elementwise kernel whose buffers are contiguous along the innermost
// dimension moves 16-byte vectors (VectorKernels.h): each thread takes one
// vector of the innermost dimension an iteration, vectors a grid stride
// apart, and runs the body once per lane. Whether every buffer is 16-byte
// aligned is checked once, at run time; if one is not, the kernel takes
// the scalar loop (unroll-elementwise.mlir). With vectorize=false there
// are no vectors at all.
// SCALAR-NOT: vector.load
// SCALAR-NOT: vector.store

// f32: 4 elements a vector; 64000 / 4 / 256 -> 63 blocks. The innermost
// 1000 elements are 250 vectors: one division and one remainder per
// vector, the innermost index 4 times the vector's.
// CHECK-LABEL: func.func @f32
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c63{{.*}} threads({{.*}}) in (%{{.*}} = %c256
// CHECK-DAG:       %[[PX:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK-DAG:       %[[PY:.*]] = memref.extract_aligned_pointer_as_index %arg1
// CHECK:           %[[OR:.*]] = arith.ori %[[PX]], %[[PY]]
// CHECK:           %[[LOW:.*]] = arith.andi %[[OR]], %c15
// CHECK:           %[[ALIGNED:.*]] = arith.cmpi eq, %[[LOW]], %c0
// CHECK:           scf.if %[[ALIGNED]] {
// CHECK:             scf.for %[[G:.*]] = %{{.*}} to %c16000 step
// CHECK:               %[[J:.*]] = arith.remui %[[G]], %c250
// CHECK:               %[[I:.*]] = arith.divui %[[G]], %c250
// CHECK:               %[[J4:.*]] = arith.muli %[[J]], %c4
// CHECK:               %[[V:.*]] = vector.load %arg0[%[[I]], %[[J4]]] {alignment = 16 : i64} : memref<64x1000xf32>, vector<4xf32>
// CHECK-COUNT-4:       math.exp
// CHECK:               %[[R:.*]] = vector.from_elements
// CHECK:               vector.store %[[R]], %arg1[%[[I]], %[[J4]]] {alignment = 16 : i64} : memref<64x1000xf32>, vector<4xf32>
// CHECK:           } else {
// CHECK:             scf.for {{.*}} iter_args
// CHECK-COUNT-4:       memref.load %arg0
// CHECK-NOT:       vector.load
// CHECK:           gpu.terminator
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

// bf16: 8 elements a vector (16 bytes); 64000 / 8 / 256 -> 32 blocks.
// CHECK-LABEL: func.func @bf16
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c32{{.*}} threads
// CHECK:           vector.load %arg0[%{{.*}}] {alignment = 16 : i64} : memref<64000xbf16>, vector<8xbf16>
// CHECK-COUNT-8:   arith.negf
// CHECK:           vector.store %{{.*}}, %arg1[%{{.*}}] {alignment = 16 : i64} : memref<64000xbf16>, vector<8xbf16>
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

// A bias along the rows (indexed by the innermost dimension) is a vector
// too; a per-row scale is one load for the vector's lanes. The widest
// element (f32) sets 4 lanes, so the bf16 output's vector is 8 bytes.
// CHECK-LABEL: func.func @bias_rows
// CHECK:         scf.if
// CHECK:           scf.for
// CHECK:             %[[J:.*]] = arith.remui %{{.*}}, %c256
// CHECK:             %[[I:.*]] = arith.divui %{{.*}}, %c256
// CHECK:             %[[J4:.*]] = arith.muli %[[J]], %c4
// CHECK-DAG:         vector.load %arg0[%[[I]], %[[J4]]] {alignment = 16 : i64} : memref<64x1024xf32>, vector<4xf32>
// CHECK-DAG:         vector.load %arg1[%[[J4]]] {alignment = 16 : i64} : memref<1024xf32>, vector<4xf32>
// CHECK-DAG:         memref.load %arg2[%[[I]]] : memref<64xf32>
// CHECK-NOT:         memref.load
// CHECK:             vector.store %{{.*}}, %arg3[%[[I]], %[[J4]]] {alignment = 8 : i64} : memref<64x1024xbf16>, vector<4xbf16>
// CHECK:         } else {
func.func @bias_rows(%x: memref<64x1024xf32>, %b: memref<1024xf32>, %s: memref<64xf32>, %y: memref<64x1024xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                   affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %b, %s : memref<64x1024xf32>, memref<1024xf32>, memref<64xf32>) outs(%y : memref<64x1024xbf16>) {
  ^bb0(%a: f32, %bb: f32, %ss: f32, %o: bf16):
    %t = arith.addf %a, %bb : f32
    %u = arith.mulf %t, %ss : f32
    %v = arith.truncf %u : f32 to bf16
    linalg.yield %v : bf16
  }
  return
}

// -----

// Attention's head split permutes the outer dimensions and keeps the
// innermost: vectors of 8 bf16 on both sides.
// CHECK-LABEL: func.func @heads
// CHECK:         %[[V:.*]] = vector.load %arg0[%[[B:.*]], %[[S:.*]], %[[H:.*]], %[[D:.*]]] {alignment = 16 : i64} : memref<8x128x16x64xbf16>, vector<8xbf16>
// CHECK:         vector.store %[[V]], %arg1[%[[B]], %[[H]], %[[S]], %[[D]]] {alignment = 16 : i64} : memref<8x16x128x64xbf16>, vector<8xbf16>
func.func @heads(%x: memref<8x128x16x64xbf16>, %y: memref<8x16x128x64xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(b, h, s, d) -> (b, s, h, d)>, affine_map<(b, h, s, d) -> (b, h, s, d)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<8x128x16x64xbf16>) outs(%y : memref<8x16x128x64xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    linalg.yield %a : bf16
  }
  return
}

// -----

// An embedding lookup: the row comes from a token loaded once per vector,
// the row's elements are a vector.
// CHECK-LABEL: func.func @gather
// CHECK:         scf.if
// CHECK:           %[[T:.*]] = memref.load %arg0[%[[I:.*]]] : memref<512xi64>
// CHECK:           %[[R:.*]] = arith.index_cast %[[T]]
// CHECK:           %[[V:.*]] = vector.load %arg1[%[[R]], %[[J:.*]]] {alignment = 16 : i64} : memref<1000x256xf32>, vector<4xf32>
// CHECK:           vector.store %[[V]], %arg2[%[[I]], %[[J]]]
func.func @gather(%tok: memref<512xi64>, %table: memref<1000x256xf32>, %y: memref<512x256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%tok : memref<512xi64>) outs(%y : memref<512x256xf32>) {
  ^bb0(%t: i64, %o: f32):
    %j = linalg.index 1 : index
    %r = arith.index_cast %t : i64 to index
    %v = memref.load %table[%r, %j] : memref<1000x256xf32>
    linalg.yield %v : f32
  }
  return
}

// -----

// An optimizer's update in place: 4 vectors loaded and 3 stored (7 x 16
// bytes, within kAccessesPerGroup vectors' worth), the learning rate one
// load for all lanes.
// CHECK-LABEL: func.func @update
// CHECK:         scf.if
// CHECK:           vector.load %arg1{{.*}} vector<4xf32>
// CHECK:           memref.load %arg4[]
// CHECK-COUNT-3:   vector.load {{.*}} vector<4xf32>
// CHECK-NOT:       memref.load
// CHECK-COUNT-3:   vector.store {{.*}} vector<4xf32>
// CHECK:         } else {
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

// A fill stores a splat.
// CHECK-LABEL: func.func @fill
// CHECK:         %[[C:.*]] = arith.constant dense<1.500000e+00> : vector<4xf32>
// CHECK:         vector.store %[[C]], %arg0
func.func @fill(%y: memref<10000xf32>) {
  %c = arith.constant 1.5 : f32
  linalg.fill ins(%c : f32) outs(%y : memref<10000xf32>)
  return
}

// -----

// A view at an offset of 2 f32 elements holds vectors of 2 (8 bytes).
// CHECK-LABEL: func.func @offset2
// CHECK:         vector.load %arg0[%{{.*}}] {alignment = 8 : i64} : memref<10000xf32, strided<[1], offset: 2>>, vector<2xf32>
func.func @offset2(%x: memref<10000xf32, strided<[1], offset: 2>>, %y: memref<10000xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<10000xf32, strided<[1], offset: 2>>) outs(%y : memref<10000xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// A row group (a block per row here): its members over the row move
// vectors too, behind one alignment check for all of them. The row's
// maximum folds each thread's vectors lane by lane; where the buffers are
// misaligned, the vector loop runs no iteration and the scalar one the
// whole row (both bounds are selects, not a branch). The normalisation
// reads the row's maximum once for its 4 lanes.
// CHECK-LABEL: func.func @row_group
// CHECK:         gpu.launch
// CHECK:           arith.andi %{{.*}}, %c15
// CHECK-NEXT:      %[[ALIGNED:.*]] = arith.cmpi eq
// CHECK:           %[[NV:.*]] = arith.select %[[ALIGNED]], %c128, %c0
// CHECK:           %[[PART:.*]] = scf.for %{{.*}} = %{{.*}} to %[[NV]] step %{{.*}} iter_args
// CHECK:             vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<4096x512xf32>, vector<4xf32>
// CHECK-COUNT-4:     arith.maximumf
// CHECK:           %[[NS:.*]] = arith.select %[[ALIGNED]], %c0, %c512
// CHECK:           %[[ALL:.*]] = scf.for %{{.*}} = %{{.*}} to %[[NS]] step %{{.*}} iter_args(%{{.*}} = %[[PART]])
// CHECK:             memref.load %arg0
// CHECK:           gpu.all_reduce maximumf %[[ALL]]
// CHECK:           gpu.barrier
// CHECK:           scf.if %[[ALIGNED]] {
// CHECK:             scf.for %{{.*}} = %{{.*}} to %c128 step
// CHECK:               vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<4096x512xf32>, vector<4xf32>
// CHECK-NEXT:          memref.load %arg1
// CHECK-NOT:           memref.load
// CHECK:               vector.store %{{.*}}, %arg2[{{.*}}] {alignment = 8 : i64} : memref<4096x512xbf16>, vector<4xbf16>
// CHECK:           } else {
func.func @row_group(%x: memref<4096x512xf32>, %m: memref<4096xf32>, %y: memref<4096x512xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x512xf32>) outs(%m : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<4096x512xf32>, memref<4096xf32>)
      outs(%y : memref<4096x512xbf16>) {
  ^bb0(%a: f32, %mx: f32, %o: bf16):
    %d = arith.subf %a, %mx : f32
    %e = math.exp %d : f32
    %t = arith.truncf %e : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// No vectors: an odd offset; an innermost extent of 3; a buffer read
// across the innermost dimension; i1 elements; the loop's indices used as
// values; a one-block launch (4096 elements).
// CHECK-LABEL: func.func @offset1
// CHECK-NOT:     vector.
// CHECK-LABEL: func.func @odd
// CHECK-NOT:     vector.
// CHECK-LABEL: func.func @transposed
// CHECK-NOT:     vector.
// CHECK-LABEL: func.func @mask
// CHECK-NOT:     vector.
// CHECK-LABEL: func.func @iota
// CHECK-NOT:     vector.
// CHECK-LABEL: func.func @one_block
// CHECK-NOT:     vector.
func.func @offset1(%x: memref<10000xf32, strided<[1], offset: 1>>, %y: memref<10000xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<10000xf32, strided<[1], offset: 1>>) outs(%y : memref<10000xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}
func.func @odd(%x: memref<5000x3xf32>, %y: memref<5000x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<5000x3xf32>) outs(%y : memref<5000x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}
func.func @transposed(%x: memref<128x128xf32>, %z: memref<128x128xf32>, %y: memref<128x128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %z : memref<128x128xf32>, memref<128x128xf32>) outs(%y : memref<128x128xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %t = arith.addf %a, %c : f32
    linalg.yield %t : f32
  }
  return
}
func.func @mask(%x: memref<10000xi1>, %y: memref<10000xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<10000xi1>) outs(%y : memref<10000xf32>) {
  ^bb0(%a: i1, %o: f32):
    %c1 = arith.constant 1.0 : f32
    %c0 = arith.constant 0.0 : f32
    %s = arith.select %a, %c1, %c0 : f32
    linalg.yield %s : f32
  }
  return
}
func.func @iota(%y: memref<64x1024xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<64x1024xf32>) {
  ^bb0(%o: f32):
    %j = linalg.index 1 : index
    %c = arith.index_cast %j : index to i64
    %f = arith.sitofp %c : i64 to f32
    linalg.yield %f : f32
  }
  return
}
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

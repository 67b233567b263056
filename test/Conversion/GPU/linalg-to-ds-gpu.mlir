// RUN: ds-opt %s --convert-linalg-to-ds-gpu --split-input-file --verify-diagnostics | FileCheck %s
// RUN: ds-opt %s --convert-linalg-to-ds-gpu=fuse-rows=false --split-input-file --verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=UNFUSED
// RUN: ds-opt %s --convert-linalg-to-ds-gpu=row-columns=false --split-input-file --verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=APART

// Elementwise: one grid-stride kernel of 256 threads per block over the
// flattened iteration space (64 x 1000 = 64000 elements), 4 f32 elements
// per thread and iteration (-> 63 blocks), then the rest one at a time
// (unroll-elementwise.mlir has the details).
// CHECK-LABEL: func.func @elementwise
// CHECK-DAG:     %[[T:.*]] = arith.constant 256 : index
// CHECK:         gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%[[BD:.*]] = %[[T]],
// CHECK:           %[[SCALED:.*]] = arith.muli %[[BX]], %[[BD]]
// CHECK:           %[[FIRST:.*]] = arith.addi %[[SCALED]], %[[TX]]
// CHECK:           %[[STRIDE:.*]] = arith.muli %{{.*}}, %[[BD]]
// CHECK:           %[[REST:.*]] = scf.for %{{.*}} = %[[FIRST]] to %{{.*}} step %{{.*}} iter_args
// CHECK-COUNT-4:     math.exp
// CHECK:           scf.for %{{.*}} = %[[REST]] to %{{.*}} step %[[STRIDE]]
// CHECK:             arith.remui
// CHECK:             arith.divui
// CHECK:             math.exp
// CHECK:         gpu.terminator
func.func @elementwise(%x: memref<64x1000xf32>, %y: memref<64x1000xf32>) {
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

// A row reduction (softmax's max, layer norm's sums): a block per row,
// threads striding over the row, a block-wide all-reduce, thread 0 folds
// the total into the output. The threads fold 16-byte vectors of the row
// where the row is aligned, else (the bounds select which loop runs)
// elements one at a time.
// CHECK-LABEL: func.func @row_max
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}},
// CHECK:           %[[ALIGNED:.*]] = arith.cmpi eq
// CHECK:           scf.for
// CHECK:             %[[NV:.*]] = arith.select %[[ALIGNED]], %c128, %c0
// CHECK:             %[[V:.*]] = scf.for {{.*}} to %[[NV]] {{.*}} iter_args
// CHECK:               vector.load %arg0{{.*}} vector<4xf32>
// CHECK:             %[[NE:.*]] = arith.select %[[ALIGNED]], %c0{{.*}}, %c512
// CHECK:             %[[P:.*]] = scf.for {{.*}} to %[[NE]] {{.*}} iter_args(%[[ACC:.*]] = %[[V]]) -> (f32)
// CHECK:               memref.load
// CHECK:               arith.maximumf %[[ACC]]
// CHECK:             %[[TOT:.*]] = gpu.all_reduce maximumf %[[P]] uniform
// CHECK:             scf.if
// CHECK:               %[[OLD:.*]] = memref.load
// CHECK:               arith.maximumf %[[OLD]], %[[TOT]]
// CHECK:               memref.store
func.func @row_max(%x: memref<32x512xf32>, %m: memref<32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<32x512xf32>) outs(%m : memref<32xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %b, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Many short rows (8196 of 512: warps alone fill the GPU): a warp per row,
// blocks of 32 x 8 threads, the lanes combining with a subgroup reduction
// (shuffles, no shared memory or barrier). 8196 is not a multiple of 8: a
// warp past the last row rereads it and writes nothing.
// CHECK-LABEL: func.func @row_max_warps
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}}) threads(%[[LANE:[^,]*]], %[[WARP:[^,]*]], %{{.*}}) in (%[[SX:[^ ]*]] = %c32{{.*}}, %{{.*}} = %c8{{.*}},
// CHECK:           scf.for %[[BASE:[^ ]*]] =
// CHECK:             %[[R:.*]] = arith.addi %[[BASE]], %[[WARP]]
// CHECK:             %[[REAL:.*]] = arith.cmpi ule, %[[R]], %c8195
// CHECK:             %[[ROW:.*]] = arith.minui %[[R]], %c8195
// CHECK:             %[[LEAD:.*]] = arith.andi %{{.*}}, %[[REAL]]
// CHECK:             %[[V:.*]] = scf.for %{{.*}} = %[[LANE]] to %{{.*}} step %[[SX]] iter_args
// CHECK:               vector.load %arg0[%[[ROW]],
// CHECK:             %[[P:.*]] = scf.for %{{.*}} = %[[LANE]] to %{{.*}} step %[[SX]] iter_args(%{{.*}} = %[[V]])
// CHECK:               memref.load %arg0[%[[ROW]],
// CHECK:             %[[TOT:.*]] = gpu.subgroup_reduce maximumf %[[P]] uniform
// CHECK:             scf.if %[[LEAD]]
// CHECK:               arith.maximumf %{{.*}}, %[[TOT]]
// CHECK:               memref.store %{{.*}}, %arg1[%[[ROW]]]
// CHECK-NOT:     gpu.all_reduce
func.func @row_max_warps(%x: memref<8196x512xf32>, %m: memref<8196xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8196x512xf32>) outs(%m : memref<8196xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %b, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A row group over 16384 rows of 64 (attention's softmax, scaled down):
// a warp per row, subgroup reductions, every row its warp's own (16384 is
// a multiple of 8: no guard), a barrier between the passes. Both passes
// read the row, so each lane loads its part once and both passes use it
// from registers, unrolled: where the buffers are 16-byte aligned, vector
// `lane` of 2 elements (a vector a lane: 4 would leave half the lanes
// idle), else its elements lane and lane + 32.
// CHECK-LABEL: func.func @softmax_warp_rows
// CHECK:         gpu.launch {{.*}} threads(%[[LANE:[^,]*]], %{{.*}}) in (%{{.*}} = %c32{{.*}}, %{{.*}} = %c8{{.*}},
// CHECK-NOT:       arith.minui
// CHECK:           scf.if %{{.*}} {
// CHECK:             %[[V0:.*]] = arith.muli %{{.*}}, %c2
// CHECK:             %[[X:.*]] = vector.load %arg0[%[[VROW:.*]], %[[V0]]] {alignment = 8 : i64} : memref<16384x64xf32>, vector<2xf32>
// CHECK:             gpu.subgroup_reduce maximumf
// CHECK:             gpu.barrier
// CHECK-NOT:         vector.load %arg0
// CHECK:             vector.extract %[[X]][0]
// CHECK:             arith.divf
// CHECK:             vector.extract %[[X]][1]
// CHECK:             arith.divf
// CHECK:             vector.store %{{.*}}, %arg2[%[[VROW]], %[[V0]]] {alignment = 8 : i64}
// CHECK:           } else {
// CHECK:           %[[X0:.*]] = memref.load %arg0[%[[ROW:.*]], %[[C0:.*]]] : memref<16384x64xf32>
// CHECK:           %[[C1:.*]] = arith.addi %[[LANE]], %c32
// CHECK:           %[[X1:.*]] = memref.load %arg0[%[[ROW]], %[[C1]]]
// CHECK:           %[[M0:.*]] = arith.maximumf %{{.*}}, %[[X0]]
// CHECK:           %[[M1:.*]] = arith.maximumf %[[M0]], %[[X1]]
// CHECK:           gpu.subgroup_reduce maximumf %[[M1]]
// CHECK:           gpu.barrier
// CHECK-NOT:       memref.load %arg0
// CHECK:           arith.divf %[[X0]]
// CHECK:           memref.store %{{.*}}, %arg2[%[[ROW]], %[[C0]]]
// CHECK:           arith.divf %[[X1]]
// CHECK:           memref.store %{{.*}}, %arg2[%[[ROW]], %[[C1]]]
// CHECK-NOT:     gpu.all_reduce
func.func @softmax_warp_rows(%x: memref<16384x64xf32>, %m: memref<16384xf32>,
                             %y: memref<16384x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<16384x64xf32>) outs(%m : memref<16384xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<16384x64xf32>, memref<16384xf32>) outs(%y : memref<16384x64xf32>) {
  ^bb0(%a: f32, %mx: f32, %o: f32):
    %r = arith.divf %a, %mx : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A softmax's three passes over each row (the max, the sum of exponentials
// into an accumulator filled and copied per row, the normalisation) run as
// one block-per-row launch: a barrier between consecutive ops, thread 0
// running the ops with one element per row, so each row is read from DRAM
// once. The fill before the group stays a kernel of its own.
// CHECK-LABEL: func.func @softmax_rows
// CHECK:         gpu.launch
// CHECK:         gpu.launch
// CHECK:           scf.for %[[ROW:[^ ]*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             gpu.all_reduce maximumf
// CHECK:             scf.if
// CHECK:               memref.store %{{.*}}, %arg1[%[[ROW]]]
// CHECK:             gpu.barrier
// CHECK:             scf.if
// CHECK:               memref.store %{{.*}}, %arg2[%[[ROW]]]
// CHECK:             gpu.barrier
// CHECK:             scf.if
// CHECK:               memref.load %arg2[%[[ROW]]]
// CHECK:               memref.store %{{.*}}, %[[ACC:.*]][%[[ROW]]]
// CHECK:             gpu.barrier
// CHECK:             gpu.all_reduce add
// CHECK:             gpu.barrier
// CHECK:             scf.for %[[C:[^ ]*]] = %{{.*}} to %{{.*}} step
// CHECK:               memref.load %arg0[%[[ROW]], %[[C]]]
// CHECK:               arith.divf
// CHECK:               memref.store %{{.*}}, %arg3[%[[ROW]], %[[C]]]
// CHECK-NOT:     gpu.launch
// With fuse-rows=false: a launch per op (the copy of 4096 elements too: a
// kernel, not a DMA), no barrier.
// UNFUSED-LABEL: func.func @softmax_rows
// UNFUSED-COUNT-6: gpu.launch
// UNFUSED-NOT:     gpu.memcpy
// UNFUSED-NOT:     gpu.barrier
// UNFUSED-LABEL: func.func @cross_row
func.func @softmax_rows(%x: memref<4096x512xf32>, %m: memref<4096xf32>, %z: memref<4096xf32>,
                        %y: memref<4096x512xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%ninf : f32) outs(%m : memref<4096xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x512xf32>) outs(%m : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.fill ins(%zero : f32) outs(%z : memref<4096xf32>)
  %s = memref.alloc() : memref<4096xf32>
  memref.copy %z, %s : memref<4096xf32> to memref<4096xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4096x512xf32>, memref<4096xf32>) outs(%s : memref<4096xf32>) {
  ^bb0(%a: f32, %mx: f32, %b: f32):
    %d = arith.subf %a, %mx : f32
    %e = math.exp %d : f32
    %r = arith.addf %b, %e : f32
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
  memref.dealloc %s : memref<4096xf32>
  return
}

// -----

// An op after a row reduction that gathers from the reduction's output (a
// pointer jump, next[next[p]], in the embedding gradient's linked rows)
// reads other rows' results, which other blocks write in the same launch:
// it is not a member of the reduction's row group but a launch of its own,
// after the reduction's. The second reduction, over the same rows, would
// have joined the group with the gather in it.
// CHECK-LABEL: func.func @row_reduction_then_gather
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce minsi
// CHECK-NOT:       gpu.barrier
// CHECK:           gpu.terminator
// CHECK:         gpu.launch
// CHECK:           memref.load %arg1[%[[P:.*]]] : memref<8192xi64>
// CHECK:           %[[TWICE:.*]] = memref.load %arg1[%{{.*}}] : memref<8192xi64>
// CHECK:           memref.store %[[TWICE]], %arg2[%[[P]]]
// CHECK:           gpu.terminator
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
func.func @row_reduction_then_gather(%rows: memref<8192xi64>, %next: memref<8192xi64>,
                                     %jump: memref<8192xi64>, %rank: memref<8192xi64>) {
  linalg.generic {indexing_maps = [affine_map<(p, q) -> (q)>, affine_map<(p, q) -> (p)>,
                                   affine_map<(p, q) -> (p)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%rows, %rows : memref<8192xi64>, memref<8192xi64>) outs(%next : memref<8192xi64>) {
  ^bb0(%rq: i64, %rp: i64, %acc: i64):
    %p = linalg.index 0 : index
    %q = linalg.index 1 : index
    %pi = arith.index_cast %p : index to i64
    %qi = arith.index_cast %q : index to i64
    %same = arith.cmpi eq, %rq, %rp : i64
    %later = arith.cmpi sgt, %qi, %pi : i64
    %link = arith.andi %same, %later : i1
    %none = arith.constant 8192 : i64
    %cand = arith.select %link, %qi, %none : i64
    %m = arith.minsi %acc, %cand : i64
    linalg.yield %m : i64
  }
  linalg.generic {indexing_maps = [affine_map<(p) -> (p)>, affine_map<(p) -> (p)>],
                  iterator_types = ["parallel"]}
      ins(%next : memref<8192xi64>) outs(%jump : memref<8192xi64>) {
  ^bb0(%n: i64, %o: i64):
    %last = arith.constant 8191 : i64
    %c = arith.minsi %n, %last : i64
    %at = arith.index_cast %c : i64 to index
    %twice = memref.load %next[%at] : memref<8192xi64>
    linalg.yield %twice : i64
  }
  linalg.generic {indexing_maps = [affine_map<(p, q) -> (q)>, affine_map<(p, q) -> (p)>,
                                   affine_map<(p, q) -> (p)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%rows, %rows : memref<8192xi64>, memref<8192xi64>) outs(%rank : memref<8192xi64>) {
  ^bb0(%rq: i64, %rp: i64, %acc: i64):
    %same = arith.cmpi eq, %rq, %rp : i64
    %one = arith.extui %same : i1 to i64
    %s = arith.addi %acc, %one : i64
    linalg.yield %s : i64
  }
  return
}

// -----

// A row's result read back through a reshape that adds a unit dimension
// (softmax's gradient: the row sums as [rows, 1]) is still that row's
// element: the view does not end the group. A reshape that moves elements
// between rows (rows regrouped in pairs) does.
// CHECK-LABEL: func.func @unit_reshape_rows
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
// CHECK:           gpu.barrier
// CHECK:           memref.load %{{.*}} : memref<4096x1xf32>
// CHECK-NOT:     gpu.launch
// CHECK-LABEL: func.func @regrouped_rows
// CHECK-NOT:     gpu.barrier
func.func @unit_reshape_rows(%x: memref<4096x512xf32>, %s: memref<4096xf32>,
                             %y: memref<4096x512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x512xf32>) outs(%s : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  %s2 = memref.expand_shape %s [[0, 1]] output_shape [4096, 1] : memref<4096xf32> into memref<4096x1xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, 0)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %s2 : memref<4096x512xf32>, memref<4096x1xf32>) outs(%y : memref<4096x512xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %r = arith.subf %a, %t : f32
    linalg.yield %r : f32
  }
  return
}

// -----

func.func @regrouped_rows(%x: memref<4096x512xf32>, %s: memref<4096xf32>,
                          %y: memref<4096x512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x512xf32>) outs(%s : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  // Row i reads row (i + 2048) mod 4096's sum.
  %s2 = memref.expand_shape %s [[0, 1]] output_shape [2, 2048] : memref<4096xf32> into memref<2x2048xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                   affine_map<(i, j) -> (1 - i floordiv 2048, i mod 2048)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %s2 : memref<4096x512xf32>, memref<2x2048xf32>) outs(%y : memref<4096x512xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %r = arith.subf %a, %t : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A second pass that reads another row's result (row 0's maximum) cannot
// share the first one's launch: blocks run their rows independently.
// CHECK-LABEL: func.func @cross_row
// CHECK-NOT:     gpu.barrier
func.func @cross_row(%x: memref<4096x512xf32>, %m: memref<4096xf32>, %s: memref<4096xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x512xf32>) outs(%m : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (0)>,
                                   affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4096x512xf32>, memref<4096xf32>) outs(%s : memref<4096xf32>) {
  ^bb0(%a: f32, %mx: f32, %b: f32):
    %d = arith.subf %a, %mx : f32
    %r = arith.addf %b, %d : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// The same loop sizes cut differently ([8 x 32] rows of 40 elements, then
// 8 rows of 32 x 40) are not the same rows: no group. Rows of 40 get
// blocks of 64 threads (whole warps), not 256 of which 216 would idle.
// CHECK-LABEL: func.func @other_rows
// CHECK-NOT:     gpu.barrier
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}}) threads({{.*}}) in (%{{.*}} = %c64,
// CHECK-NOT:     gpu.barrier
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}}) threads({{.*}}) in (%{{.*}} = %c256,
// CHECK-NOT:     gpu.barrier
func.func @other_rows(%x: memref<8x32x40xf32>, %m: memref<8x32xf32>, %s: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i, j)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : memref<8x32x40xf32>) outs(%m : memref<8x32xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.maximumf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (i)>],
                  iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<8x32x40xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A full reduction (the loss, a gradient norm) with a reduction dimension
// first. One output of 8192 elements would leave one block to do it all:
// the range is split over 4 blocks (at least 8 elements per thread), each
// writing its partial sum, and a second one-block launch adds the partials
// into the output.
// CHECK-LABEL: func.func @full_sum
// CHECK:         %[[PART:.*]] = gpu.alloc () : memref<4xf32>
// CHECK:         gpu.launch
// CHECK:           %[[SUM:.*]] = gpu.all_reduce add %{{.*}} uniform
// CHECK:           scf.if
// CHECK:             memref.store %[[SUM]], %[[PART]][%{{.*}}]
// CHECK:         gpu.launch
// CHECK:             memref.load %[[PART]]
// CHECK:           %[[TOT:.*]] = gpu.all_reduce add %{{.*}} uniform
// CHECK:           scf.if
// CHECK:             %[[OLD:.*]] = memref.load %arg1[]
// CHECK:             %[[NEW:.*]] = arith.addf %[[OLD]], %[[TOT]]
// CHECK:             memref.store %[[NEW]], %arg1[]
// CHECK:         gpu.dealloc %[[PART]]
func.func @full_sum(%x: memref<128x64xf32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<128x64xf32>) outs(%s : memref<f32>) {
  ^bb0(%a: f32, %b: f32):
    %sq = arith.mulf %a, %a : f32
    %r = arith.addf %b, %sq : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A column reduction (a bias or layer-norm weight gradient: [tokens,
// features] summed over the tokens) reads its rows contiguously along the
// outputs, so a thread per output, consecutive threads on consecutive
// features, rather than a block per output reading one element per row.
// Where the buffers are 16-byte aligned, a thread takes a vector of 4
// consecutive outputs instead: a 16-byte load a row, an accumulator a
// lane, the same sums in the same order. 64 vectors of outputs would fill
// 64 threads: each column is cut into 64 runs of 32 rows (4096 threads),
// each thread folds its run in order into partial results, and a second
// launch (a block per output: the partials are contiguous) folds the
// partials into the output. The per-row scalar (%r, the same for every
// thread of a row) is read in place. Misaligned, the same runs a thread
// per output, in more trips of the grid-stride loop.
// CHECK-LABEL: func.func @column_sum
// CHECK:         %[[PART:.*]] = gpu.alloc{{ +}}() : memref<256x64xf32>
// CHECK:         %[[LEN:.*]] = arith.constant 32 : index
// CHECK:         %[[TASKS:.*]] = arith.constant 4096 : index
// CHECK:         gpu.launch
// CHECK-NOT:       gpu.all_reduce
// CHECK:           %[[ALIGNED:.*]] = arith.cmpi eq
// CHECK:           scf.if %[[ALIGNED]] {
// CHECK:             scf.for %[[T:[^ ]*]] = %{{.*}} to %[[TASKS]]
// CHECK:               %[[V:.*]] = arith.remui %[[T]], %[[NV:.*]] : index
// CHECK:               %[[G:.*]] = arith.divui %[[T]], %[[NV]] : index
// CHECK:               %[[O:.*]] = arith.muli %[[V]], %c4
// CHECK:               %[[LO:.*]] = arith.muli %[[G]], %[[LEN]]
// CHECK:               %[[HI0:.*]] = arith.addi %[[LO]], %[[LEN]]
// CHECK:               %[[HI:.*]] = arith.minui %[[HI0]]
// CHECK:               %[[S:.*]]:4 = scf.for %[[R:[^ ]*]] = %[[LO]] to %[[HI]] step %{{.*}} iter_args
// CHECK:                 vector.load %arg0[%[[R]], %[[O]]] {alignment = 16 : i64} : memref<2048x256xf32>, vector<4xf32>
// CHECK:                 memref.load %arg1[%[[R]]]
// CHECK:               memref.store %[[S]]#0, %[[PART]][%[[O]], %[[G]]]
// CHECK:               %[[O3:.*]] = arith.addi %[[O]], %c3
// CHECK:               memref.store %[[S]]#3, %[[PART]][%[[O3]], %[[G]]]
// CHECK:           } else {
// CHECK:             scf.for %[[T:[^ ]*]] =
// CHECK:               %[[O:.*]] = arith.remui %[[T]], %[[N:.*]] : index
// CHECK:               %[[G:.*]] = arith.divui %[[T]], %[[N]] : index
// CHECK:               %[[LO:.*]] = arith.muli %[[G]], %[[LEN]]
// CHECK:               %[[HI0:.*]] = arith.addi %[[LO]], %[[LEN]]
// CHECK:               %[[HI:.*]] = arith.minui %[[HI0]]
// CHECK:               %[[S:.*]] = scf.for %[[R:[^ ]*]] = %[[LO]] to %[[HI]] step %{{.*}} iter_args
// CHECK:                 memref.load %arg0[%[[R]], %[[O]]]
// CHECK:                 memref.load %arg1[%[[R]]]
// CHECK:               memref.store %[[S]], %[[PART]][%[[O]], %[[G]]]
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
// CHECK:         gpu.dealloc %[[PART]]
func.func @column_sum(%x: memref<2048x256xf32>, %r: memref<2048xf32>, %g: memref<256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(t, f) -> (t, f)>, affine_map<(t, f) -> (t)>,
                                   affine_map<(t, f) -> (f)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %r : memref<2048x256xf32>, memref<2048xf32>) outs(%g : memref<256xf32>) {
  ^bb0(%a: f32, %s: f32, %b: f32):
    %p = arith.mulf %a, %s : f32
    %n = arith.addf %b, %p : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// Enough outputs to fill the GPU (300000 vectors of 4): no split, each
// thread folds its whole columns from the identity and then into the
// outputs.
// CHECK-LABEL: func.func @column_max_unsplit
// CHECK-NOT:     gpu.alloc
// CHECK:         gpu.launch
// CHECK-NOT:       gpu.all_reduce
// CHECK:           %[[M:.*]]:4 = scf.for {{.*}} iter_args
// CHECK:             vector.load %arg0
// CHECK-COUNT-4:     arith.maximumf
// CHECK:           %[[OLD:.*]] = memref.load %arg1
// CHECK:           %[[NEW:.*]] = arith.maximumf %[[OLD]], %[[M]]#0
// CHECK:           memref.store %[[NEW]], %arg1
// CHECK:         } else {
// CHECK:           %[[M:.*]] = scf.for {{.*}} iter_args
// CHECK:             arith.maximumf
// CHECK:           %[[OLD:.*]] = memref.load %arg1
// CHECK:           %[[NEW:.*]] = arith.maximumf %[[OLD]], %[[M]]
// CHECK:           memref.store %[[NEW]], %arg1
// CHECK-NOT:     gpu.launch
func.func @column_max_unsplit(%x: memref<64x1200000xf32>, %m: memref<1200000xf32>) {
  linalg.generic {indexing_maps = [affine_map<(t, f) -> (t, f)>, affine_map<(t, f) -> (f)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x1200000xf32>) outs(%m : memref<1200000xf32>) {
  ^bb0(%a: f32, %b: f32):
    %n = arith.maximumf %b, %a : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// One input contiguous along the outputs, the other along the reduced
// dimension: neither shape reads both in order, so a block per output.
// CHECK-LABEL: func.func @mixed_layouts
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
func.func @mixed_layouts(%x: memref<512x128xf32>, %y: memref<128x512xf32>, %s: memref<128xf32>) {
  linalg.generic {indexing_maps = [affine_map<(t, f) -> (t, f)>, affine_map<(t, f) -> (f, t)>,
                                   affine_map<(t, f) -> (f)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %y : memref<512x128xf32>, memref<128x512xf32>) outs(%s : memref<128xf32>) {
  ^bb0(%a: f32, %c: f32, %b: f32):
    %p = arith.mulf %a, %c : f32
    %n = arith.addf %b, %p : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// A swap of the two innermost dimensions (the FP8 GEMMs' TN copies) moves
// tiles through shared memory: a warp reads a tile row, then, after a
// barrier, writes a tile column, so both sides coalesce. The tile holds
// the raw bits widened to 32, one bank word each, with a padding column.
// Where the buffers are 16-byte aligned, each lane reads a vector of 4 of
// the row (a tile of 32 rows x 128 columns: 8192 x 1024 is 256 x 8 tiles,
// in a grid-stride loop) and puts lane l's element in tile column
// l*32 + x; the out-phase takes tile column q as the input's column
// (q mod 32)*4 + q/32. A thread loads its 4 rows of a tile (at indices
// clamped into range) before it stores any. Out, pairs of lanes write a
// column's 32 rows as two 16-byte vectors, a warp 16 columns. Misaligned,
// the same with one element a lane, in and out (256 x 32 tiles of 32
// columns).
// CHECK-LABEL: func.func @fp8_transpose
// CHECK:         gpu.launch {{.*}} workgroup(%[[TILE:.*]] : memref<32x129xi32, #gpu.address_space<workgroup>>)
// CHECK:           memref.extract_aligned_pointer_as_index %arg0
// CHECK:           memref.extract_aligned_pointer_as_index %arg1
// CHECK:           %[[ALIGNED:.*]] = arith.cmpi eq
// CHECK:           scf.if %[[ALIGNED]] {
// CHECK:             scf.for %{{.*}} = %{{.*}} to %c2048{{.*}} step
// CHECK:               scf.for
// CHECK-COUNT-4:         vector.load %arg0{{.*}} vector<4xf8E4M3FN>
// CHECK-NOT:             memref.store
// CHECK:                 scf.if
// CHECK:                   %[[B:.*]] = arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK:                   %[[W:.*]] = arith.extui %[[B]] : i8 to i32
// CHECK:                   memref.store %[[W]], %[[TILE]][%[[K:.*]], %[[X:.*]]]
// CHECK:                   %[[X1:.*]] = arith.addi %[[X]], %c32
// CHECK:                   memref.store %{{.*}}, %[[TILE]][%[[K]], %[[X1]]]
// CHECK-COUNT-3:         scf.if
// CHECK:               gpu.barrier
// CHECK:               scf.for %[[STEP:.*]] = %{{.*}} to %c128 step
// CHECK:                 %[[Q:.*]] = arith.addi %[[STEP]],
// CHECK:                 %[[QX:.*]] = arith.remui %[[Q]], %c32
// CHECK:                 %[[QL:.*]] = arith.divui %[[Q]], %c32
// CHECK:                 scf.if
// CHECK-COUNT-16:          memref.load %[[TILE]][%{{.*}}, %[[Q]]]
// CHECK-NOT:               memref.store
// CHECK:                   %[[V:.*]] = vector.from_elements {{.*}} : vector<16xf8E4M3FN>
// CHECK:                   vector.store %[[V]], %arg1[{{.*}}] {alignment = 16 : i64}
// CHECK:               gpu.barrier
// CHECK:           } else {
// CHECK:             scf.for %{{.*}} = %{{.*}} to %c8192{{.*}} step
// CHECK:               scf.for
// CHECK-COUNT-4:         memref.load %arg0
// CHECK-NOT:             memref.store
// CHECK:                 scf.if
// CHECK:                   %[[B:.*]] = arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK:                   %[[W:.*]] = arith.extui %[[B]] : i8 to i32
// CHECK:                   memref.store %[[W]], %[[TILE]]
// CHECK-COUNT-3:         scf.if
// CHECK:               gpu.barrier
// CHECK:               scf.for
// CHECK:                 scf.if
// CHECK:                   memref.load %[[TILE]]
// CHECK:                   memref.store {{.*}}, %arg1
// CHECK:               gpu.barrier
func.func @fp8_transpose(%x: memref<8192x1024xf8E4M3FN>, %y: memref<1024x8192xf8E4M3FN>) {
  linalg.transpose ins(%x : memref<8192x1024xf8E4M3FN>) outs(%y : memref<1024x8192xf8E4M3FN>)
      permutation = [1, 0]
  return
}

// -----

// A permutation that keeps the innermost dimension (attention's heads)
// already reads and writes runs of it: a grid-stride loop.
// CHECK-LABEL: func.func @head_permutation
// CHECK-NOT:     workgroup
// CHECK-NOT:     gpu.barrier
func.func @head_permutation(%x: memref<8x64x4x16xf32>, %y: memref<8x4x64x16xf32>) {
  linalg.transpose ins(%x : memref<8x64x4x16xf32>) outs(%y : memref<8x4x64x16xf32>)
      permutation = [0, 2, 1, 3]
  return
}

// -----

// Bufferization starts each reduction from a copy of a buffer filled with
// its start value. The copy (a device memcpy per reduction) goes: the
// kernel folds the constant in instead of reading the output. The filled
// buffer is the output of a later reduction, the next op to use it once
// the copy has gone: its fill goes as well, that reduction folding the
// constant in too.
// CHECK-LABEL: func.func @constant_init
// CHECK:         %[[T:.*]] = gpu.alloc{{ +}}() : memref<f32>
// CHECK-NOT:     gpu.memcpy
// CHECK:         gpu.launch
// CHECK:           %[[TOT:.*]] = gpu.all_reduce add
// CHECK:           scf.if
// CHECK:             %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:             %[[NEW:.*]] = arith.addf %[[ZERO]], %[[TOT]]
// CHECK:             memref.store %[[NEW]], %[[A:.*]][]
// CHECK:         gpu.launch
// CHECK:         gpu.launch
// CHECK:           %[[TOT2:.*]] = gpu.all_reduce add
// CHECK-NOT:         memref.load %[[T]][]
// CHECK:             %[[ZERO2:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:             arith.addf %[[ZERO2]], %[[TOT2]]
// CHECK:             memref.store %{{.*}}, %[[T]][]
func.func @constant_init(%x: memref<1024xf32>, %s: memref<f32>, %u: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<f32>
  linalg.fill ins(%zero : f32) outs(%t : memref<f32>)
  %a = memref.alloc() : memref<f32>
  memref.copy %t, %a : memref<f32> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<1024xf32>) outs(%a : memref<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  }
  memref.copy %a, %s : memref<f32> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<1024xf32>) outs(%t : memref<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  }
  memref.copy %t, %u : memref<f32> to memref<f32>
  memref.dealloc %a : memref<f32>
  memref.dealloc %t : memref<f32>
  return
}

// -----

// A step whose results are the reductions' accumulators themselves (the
// lowering cases' column sums): the copy into a result goes, in a step, as
// a copy into an allocation does, and so does the fill of the result that
// the last reduction accumulates into.
// CHECK-LABEL: func.func @constant_init_results
// CHECK-NOT:     linalg.fill
// CHECK-NOT:     gpu.memcpy
// CHECK:         gpu.launch
// CHECK:           arith.constant 0.000000e+00 : f32
// CHECK-NOT:       memref.load %arg1[]
// CHECK:           memref.store %{{.*}}, %arg1[]
// CHECK:         gpu.launch
// CHECK:           arith.constant 0.000000e+00 : f32
// CHECK-NOT:       memref.load %arg2[]
// CHECK:           memref.store %{{.*}}, %arg2[]
// CHECK:         return
func.func @constant_init_results(%x: memref<1024xf32>, %s: memref<f32>, %t: memref<f32>)
    attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%t : memref<f32>)
  memref.copy %t, %s : memref<f32> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<1024xf32>) outs(%s : memref<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<1024xf32>) outs(%t : memref<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// The filled buffer may be a step's own result (an argument): bufferization
// fills a zero gradient's buffer and copies it into the accumulators of
// other reductions. In a step (llvm.emit_c_interface: no other argument
// shares its memory) the copy goes as well, and the fill stays, since it is
// the result. Elsewhere another argument might alias it: the copy stays.
// CHECK-LABEL: func.func @constant_init_argument
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg2[] : memref<f32>
// CHECK-NOT:       memref.load %arg2
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
// CHECK:             arith.constant 0.000000e+00 : f32
// CHECK:         return
// CHECK-LABEL: func.func @constant_init_not_a_step
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg2[] : memref<f32>
// CHECK:           memref.load %arg2[] : memref<f32>
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
func.func @constant_init_argument(%x: memref<1024xf32>, %s: memref<f32>, %zero_grad: memref<f32>)
    attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%zero_grad : memref<f32>)
  %a = memref.alloc() : memref<f32>
  memref.copy %zero_grad, %a : memref<f32> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<1024xf32>) outs(%a : memref<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  }
  memref.copy %a, %s : memref<f32> to memref<f32>
  memref.dealloc %a : memref<f32>
  return
}
func.func @constant_init_not_a_step(%x: memref<1024xf32>, %s: memref<f32>, %zero_grad: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%zero_grad : memref<f32>)
  %a = memref.alloc() : memref<f32>
  memref.copy %zero_grad, %a : memref<f32> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<1024xf32>) outs(%a : memref<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  }
  memref.copy %a, %s : memref<f32> to memref<f32>
  memref.dealloc %a : memref<f32>
  return
}

// -----

// Something else reads the copy before the reduction: the copy stays (in
// a kernel: a copy of a few elements is not worth a DMA).
// CHECK-LABEL: func.func @init_read_first
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg2[] : memref<f32>
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce
func.func @init_read_first(%x: memref<4096xf32>, %s: memref<f32>, %seen: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<f32>
  linalg.fill ins(%zero : f32) outs(%t : memref<f32>)
  %a = memref.alloc() : memref<f32>
  memref.copy %t, %a : memref<f32> to memref<f32>
  memref.copy %a, %seen : memref<f32> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<4096xf32>) outs(%a : memref<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  }
  memref.copy %a, %s : memref<f32> to memref<f32>
  return
}

// -----

// A short reduction (10 classes) loops inside each thread instead: the
// reduction dimension moved inside the parallel one, no all-reduce.
// CHECK-LABEL: func.func @short_rows
// CHECK:         gpu.launch
// CHECK:           scf.for
// CHECK:             scf.for
// CHECK-NOT:     gpu.all_reduce
func.func @short_rows(%x: memref<10x4096xf32>, %m: memref<4096xf32>) {
  linalg.generic {indexing_maps = [affine_map<(k, i) -> (k, i)>, affine_map<(k, i) -> (i)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<10x4096xf32>) outs(%m : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Host scalar code on buffers (a loss-scale update) becomes a one-thread
// kernel; a scalar read from a buffer the step never writes (the step
// counter) is recomputed inside it; buffers move to the device, and the
// copy (a kernel: one element is not worth a DMA) joins the scalar code.
// CHECK-LABEL: func.func @scalars
// CHECK-NOT:     memref.alloc
// CHECK:         %[[BUF:.*]] = gpu.alloc () : memref<f32>
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} threads({{.*}}) in (%{{.*}} = %c1{{(_[0-9]+)?}},
// CHECK:           memref.load %arg0[]
// CHECK:           arith.sitofp
// CHECK:           memref.store %{{.*}}, %[[BUF]][]
// CHECK:           %[[V:.*]] = memref.load %[[BUF]][]
// CHECK:           memref.store %[[V]], %arg1[]
// CHECK:           gpu.terminator
// CHECK-NOT:     gpu.memcpy
// CHECK:         gpu.dealloc %[[BUF]]
// CHECK-NOT:     memref.load
func.func @scalars(%step: memref<i64>, %out: memref<f32>) {
  %n = memref.load %step[] : memref<i64>
  %f = arith.sitofp %n : i64 to f32
  %buf = memref.alloc() : memref<f32>
  memref.store %f, %buf[] : memref<f32>
  memref.copy %buf, %out : memref<f32> to memref<f32>
  memref.dealloc %buf : memref<f32>
  return
}

// -----

// The host cannot branch on a device value.
func.func @host_branch(%flag: memref<i1>, %x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 1.0 : f32
  memref.store %cst, %x[%c0] : memref<4xf32>
  %b = memref.load %x[%c0] : memref<4xf32>
  %n = arith.fptosi %b : f32 to i64
  // expected-error @+1 {{not supported by ds-gpu-pipeline: a value of type 'index' computed from device memory is needed later on the host}}
  %i = arith.index_cast %n : i64 to index
  %m = memref.alloc(%i) : memref<?xf32>
  memref.dealloc %m : memref<?xf32>
  return
}

// -----

// A parallel dimension the output does not index: its iterations would
// write the same elements from different threads (a race), where the CPU's
// loops write them in order. Refused by name.
func.func @racy(%x: memref<8x16xf32>, %y: memref<16xf32>) {
  // expected-error @+1 {{not supported by ds-gpu-pipeline: 'linalg.generic': parallel dimension 0 does not index output 1 (its iterations would race on the same elements)}}
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x16xf32>) outs(%y : memref<16xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// An output map that is not a projection: iterations i = 2k and 2k + 1
// write the same element.
func.func @racy_map(%x: memref<8xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{not supported by ds-gpu-pipeline: 'linalg.generic': the indexing map of output 1 is not a projection of the loop dimensions}}
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i floordiv 2)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<8xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}

// -----

// A layer norm gradient's shape: row statistics, then column sums that read
// them (the weight's gradient), then the rows' own results. The column sums
// join the group: each block folds its rows into sums in shared memory, a
// column a thread, and writes them as a row of partial sums ([blocks,
// columns]: 4096 rows a block of 256 threads each, at least 8 rows a
// block), which a second launch folds into the output. The rows are read
// from memory once for all three ops.
// When what lies between writes a buffer a later member reads (@row_group_
// blocked), the group ends there.
// CHECK-LABEL: func.func @row_group_past_column_sum
// CHECK:         %[[PARTIAL:.*]] = gpu.alloc () : memref<512x512xf32>
// CHECK:         gpu.launch {{.*}} workgroup(%[[SUMS:.*]] : memref<1x512xf32, #gpu.address_space<workgroup>>)
// CHECK:           memref.store %cst, %[[SUMS]]
// CHECK:           gpu.barrier
// CHECK:           gpu.all_reduce add
// CHECK:           gpu.barrier
// CHECK:           memref.load %[[SUMS]]
// CHECK:           arith.mulf
// CHECK:           memref.store %{{.*}}, %[[SUMS]]
// CHECK:           gpu.barrier
// CHECK:           arith.divf
// CHECK:           memref.store %{{.*}}, %arg3
// CHECK:           gpu.barrier
// CHECK:           memref.load %[[SUMS]]
// CHECK:           memref.store %{{.*}}, %[[PARTIAL]]
// CHECK:         gpu.launch {{.*}} workgroup(%{{.*}} : memref<8x32xf32, #gpu.address_space<workgroup>>)
// CHECK:           memref.load %[[PARTIAL]]
// CHECK:           memref.store %{{.*}}, %arg2
// CHECK:         gpu.dealloc %[[PARTIAL]]
// CHECK-NOT:     gpu.launch
// CHECK:         return
// With row-columns=false the column sums move after the group and read the
// rows again in a launch of their own.
// APART-LABEL: func.func @row_group_past_column_sum
// APART:         gpu.launch
// APART-NOT:       workgroup
// APART:           gpu.all_reduce add
// APART:           arith.divf
// APART:           memref.store %{{.*}}, %arg3
// APART:         gpu.launch
// APART:           arith.mulf
// APART:           memref.store %{{.*}}, %arg2
// APART-NOT:       arith.divf
// APART:         return
// CHECK-LABEL: func.func @row_group_blocked
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
// CHECK-NOT:       arith.divf
// CHECK:         gpu.launch
// CHECK:           arith.mulf
// CHECK:         gpu.launch
// CHECK:           arith.divf
func.func @row_group_past_column_sum(%x: memref<4096x512xf32>, %s: memref<4096xf32>,
                                     %c: memref<512xf32>, %y: memref<4096x512xf32>)
    attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x512xf32>) outs(%s : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %s : memref<4096x512xf32>, memref<4096xf32>) outs(%c : memref<512xf32>) {
  ^bb0(%a: f32, %sum: f32, %b: f32):
    %p = arith.mulf %a, %sum : f32
    %r = arith.addf %b, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<4096x512xf32>, memref<4096xf32>) outs(%y : memref<4096x512xf32>) {
  ^bb0(%a: f32, %sum: f32, %o: f32):
    %r = arith.divf %a, %sum : f32
    linalg.yield %r : f32
  }
  return
}
func.func @row_group_blocked(%x: memref<4096x512xf32>, %s: memref<4096xf32>,
                             %v: memref<512xf32>, %y: memref<4096x512xf32>)
    attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4096x512xf32>) outs(%s : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(j) -> (j)>, affine_map<(j) -> (j)>],
                  iterator_types = ["parallel"]}
      ins(%v : memref<512xf32>) outs(%v : memref<512xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %s, %v : memref<4096x512xf32>, memref<4096xf32>, memref<512xf32>)
      outs(%y : memref<4096x512xf32>) {
  ^bb0(%a: f32, %sum: f32, %w: f32, %o: f32):
    %d = arith.divf %a, %sum : f32
    %r = arith.divf %d, %w : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Column members in a warp-per-row group (8192 rows): each warp is a team
// with its own sums. Two members of rows of 64 f32 take 512 bytes a team,
// so a block keeps its 8 warps, and the grid is 128 blocks (at least 8 rows
// a warp). Three members of rows of 1024 take 12 KiB a team: 2 warps a
// block fit in kMaxColumnSumBytes (32 KiB), 512 blocks. Both fold their
// partial sums in one launch after the group.
// CHECK-LABEL: func.func @row_group_column_warps
// CHECK:         gpu.alloc () : memref<128x64xf32>
// CHECK:         gpu.alloc () : memref<128x64xf32>
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c32, %{{.*}} = %c8, {{.*}}) workgroup(%{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<8x64xf32, #gpu.address_space<workgroup>>)
// CHECK:           gpu.subgroup_reduce add
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg2
// CHECK:           memref.store %{{.*}}, %arg3
// CHECK-NOT:     gpu.launch
// CHECK-LABEL: func.func @row_group_column_wide_rows
// CHECK-COUNT-3: gpu.alloc () : memref<512x1024xf32>
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c32, %{{.*}} = %c2, {{.*}}) workgroup(%{{.*}} : memref<2x1024xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2x1024xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<2x1024xf32, #gpu.address_space<workgroup>>)
// CHECK:         gpu.launch
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func @row_group_column_warps(%x: memref<8192x64xf32>, %s: memref<8192xf32>,
                                  %c: memref<64xf32>, %d: memref<64xf32>,
                                  %y: memref<8192x64xf32>)
    attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8192x64xf32>) outs(%s : memref<8192xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<8192x64xf32>, memref<8192xf32>) outs(%y : memref<8192x64xf32>) {
  ^bb0(%a: f32, %sum: f32, %o: f32):
    %r = arith.divf %a, %sum : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %s : memref<8192x64xf32>, memref<8192xf32>) outs(%c : memref<64xf32>) {
  ^bb0(%a: f32, %sum: f32, %b: f32):
    %p = arith.mulf %a, %sum : f32
    %r = arith.addf %b, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%y : memref<8192x64xf32>) outs(%d : memref<64xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  return
}
func.func @row_group_column_wide_rows(%x: memref<8192x1024xf32>, %s: memref<8192xf32>,
                                      %c: memref<1024xf32>, %d: memref<1024xf32>,
                                      %e: memref<1024xf32>)
    attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8192x1024xf32>) outs(%s : memref<8192xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %s : memref<8192x1024xf32>, memref<8192xf32>) outs(%c : memref<1024xf32>) {
  ^bb0(%a: f32, %sum: f32, %b: f32):
    %p = arith.mulf %a, %sum : f32
    %r = arith.addf %b, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<8192x1024xf32>) outs(%d : memref<1024xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %s : memref<8192x1024xf32>, memref<8192xf32>) outs(%e : memref<1024xf32>) {
  ^bb0(%a: f32, %sum: f32, %b: f32):
    %p = arith.subf %a, %sum : f32
    %r = arith.addf %b, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Column members' sums take at most 32 KiB a team: of two members over rows
// of 8192 f32 (a block each), the first fills it, and the second runs after
// the group, on its own.
// CHECK-LABEL: func.func @row_group_column_budget
// CHECK:         gpu.launch {{.*}} workgroup(%{{.*}} : memref<1x8192xf32, #gpu.address_space<workgroup>>)
// CHECK:           gpu.all_reduce add
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg2
// CHECK:         gpu.launch
// CHECK-NOT:       workgroup
// CHECK:         return
func.func @row_group_column_budget(%x: memref<1024x8192xf32>, %s: memref<1024xf32>,
                                   %c: memref<8192xf32>, %d: memref<8192xf32>)
    attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<1024x8192xf32>) outs(%s : memref<1024xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %s : memref<1024x8192xf32>, memref<1024xf32>) outs(%c : memref<8192xf32>) {
  ^bb0(%a: f32, %sum: f32, %b: f32):
    %p = arith.mulf %a, %sum : f32
    %r = arith.addf %b, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<1024x8192xf32>) outs(%d : memref<8192xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %b, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// The op just before a row group that writes what the group reads (a
// residual sum before a layer norm's statistics) runs as the group's first
// member: the statistics read the rows it has just written from the cache.
// A sum whose result the group does not read stays a launch of its own.
// CHECK-LABEL: func.func @row_group_producer
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg2
// CHECK:           gpu.barrier
// CHECK:           gpu.all_reduce add
// CHECK:           gpu.barrier
// CHECK:           arith.divf
// CHECK:           memref.store %{{.*}}, %arg4
// CHECK-NOT:     gpu.launch
// CHECK:         return
// CHECK-LABEL: func.func @row_group_unrelated_producer
// CHECK:         gpu.launch
// CHECK-NOT:       gpu.all_reduce
// CHECK:           memref.store %{{.*}}, %arg5
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
func.func @row_group_producer(%x: memref<4096x512xf32>, %r: memref<4096x512xf32>,
                              %h: memref<4096x512xf32>, %s: memref<4096xf32>,
                              %y: memref<4096x512xf32>)
    attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %r : memref<4096x512xf32>, memref<4096x512xf32>) outs(%h : memref<4096x512xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<4096x512xf32>) outs(%s : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %v = arith.addf %b, %a : f32
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%h, %s : memref<4096x512xf32>, memref<4096xf32>) outs(%y : memref<4096x512xf32>) {
  ^bb0(%a: f32, %sum: f32, %o: f32):
    %v = arith.divf %a, %sum : f32
    linalg.yield %v : f32
  }
  return
}
func.func @row_group_unrelated_producer(%x: memref<4096x512xf32>, %r: memref<4096x512xf32>,
                                        %h: memref<4096x512xf32>, %s: memref<4096xf32>,
                                        %y: memref<4096x512xf32>, %u: memref<4096x512xf32>)
    attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %r : memref<4096x512xf32>, memref<4096x512xf32>) outs(%u : memref<4096x512xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%h : memref<4096x512xf32>) outs(%s : memref<4096xf32>) {
  ^bb0(%a: f32, %b: f32):
    %v = arith.addf %b, %a : f32
    linalg.yield %v : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%h, %s : memref<4096x512xf32>, memref<4096xf32>) outs(%y : memref<4096x512xf32>) {
  ^bb0(%a: f32, %sum: f32, %o: f32):
    %v = arith.divf %a, %sum : f32
    linalg.yield %v : f32
  }
  return
}

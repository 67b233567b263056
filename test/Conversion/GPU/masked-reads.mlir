// RUN: ds-opt %s --convert-linalg-to-ds-gpu --split-input-file | FileCheck %s
// RUN: ds-opt %s --convert-linalg-to-ds-gpu --ds-gpu-launch-report --split-input-file -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REPORT

// Elements a select discards are not loaded (MaskedReads.h): a causal
// softmax's max and exp over rows of 64, whose scores above the diagonal
// (j > i) are selected away. Each load of %x, in vectors (all four lanes
// above it) or one element at a time, runs only where the element is used,
// and gives zeros elsewhere; the launch report counts the 2080 of 4096
// elements read (0.5078125).
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @causal_rows
// The max: vectors where aligned, then elements.
// CHECK:         gpu.launch
// The condition grows with the lanes' index: the first lane and the last
// decide for the vector.
// CHECK:           %[[V:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK:           %[[A0:.*]] = arith.cmpi sgt, %[[V]], %[[ROW:.*]] : index
// CHECK:           %[[V3:.*]] = arith.addi %[[V]], %c3 : index
// CHECK-NEXT:      %[[A3:.*]] = arith.cmpi sgt, %[[V3]], %[[ROW]] : index
// CHECK-NEXT:      %[[B:.*]] = arith.andi %[[A0]], %[[A3]] : i1
// CHECK-NEXT:      %[[XV:.*]] = scf.if %[[B]] -> (vector<4xf32>) {
// CHECK:             scf.yield %{{.*}} : vector<4xf32>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        %[[L:.*]] = vector.load %arg0[%[[ROW]], %[[V]]] {alignment = 16 : i64, ds.read_fraction = 0.5078125 : f64}
// CHECK-NEXT:        scf.yield %[[L]] : vector<4xf32>
// CHECK:           vector.extract %[[XV]][0]
// CHECK:           scf.for %[[J:.*]] = %{{.*}} to
// CHECK-NEXT:        %[[ABOVE:.*]] = arith.cmpi sgt, %[[J]], %[[ROW]] : index
// CHECK-NEXT:        %[[X:.*]] = scf.if %[[ABOVE]] -> (f32) {
// CHECK:             scf.yield %{{.*}} : f32
// CHECK-NEXT:      } else {
// CHECK-NEXT:        memref.load %arg0[%[[ROW]], %[[J]]] {ds.read_fraction = 0.5078125 : f64}
// CHECK:           gpu.all_reduce maximumf
// The exp the same way; the row's max is read at every element.
// CHECK:           gpu.barrier
// CHECK:           vector.load %arg0{{.*}}ds.read_fraction
// CHECK:           memref.load %arg1[%[[ROW]]] : memref<64xf32>
// CHECK:           memref.load %arg0{{.*}}ds.read_fraction
// CHECK-NOT:       memref.load %arg0
// CHECK:           gpu.terminator
// REPORT: @causal_rows: 2 kernel launches
// Reads: %x's 16384 bytes x 0.5078125 (8320) and the max's 256.
// REPORT: 2 kernel ?,1,1 x 64,1,1 0.009 0.017
func.func @causal_rows(%x: memref<64x64xf32>, %m: memref<64xf32>,
                       %y: memref<64x64xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  linalg.fill ins(%ninf : f32) outs(%m : memref<64xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x64xf32>) outs(%m : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %above = arith.cmpi sgt, %j, %i : index
    %s = arith.select %above, %ninf, %in : f32
    %r = arith.maximumf %out, %s : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<64x64xf32>, memref<64xf32>) outs(%y : memref<64x64xf32>) {
  ^bb0(%in: f32, %max: f32, %out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %above = arith.cmpi sgt, %j, %i : index
    %s = arith.select %above, %ninf, %in : f32
    %d = arith.subf %s, %max : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// The element in the select's true arm (kept on and below the diagonal):
// unused where the condition is false. A widening and a scaling on the way
// to the select are pure, so they do not keep the load.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @true_arm
// CHECK:         %[[KEEP:.*]] = arith.cmpi sle, %[[J:.*]], %[[I:.*]] : index
// CHECK:         %[[UNUSED:.*]] = arith.xori %[[KEEP]], %{{.*}} : i1
// CHECK:         scf.if %{{.*}} -> (vector<8xbf16>) {
// CHECK:           vector.load %arg0{{.*}}ds.read_fraction = 0.5078125
// CHECK:         scf.for %[[J1:.*]] = %{{.*}} to
// CHECK-NEXT:      %[[KEEP1:.*]] = arith.cmpi sle, %[[J1]], %[[I1:.*]] : index
// CHECK:           %[[UNUSED1:.*]] = arith.xori %[[KEEP1]], %{{.*}} : i1
// CHECK-NEXT:      scf.if %[[UNUSED1]] -> (bf16) {
// CHECK:           memref.load %arg0[%[[I1]], %[[J1]]] {ds.read_fraction = 0.5078125
func.func @true_arm(%x: memref<64x64xbf16>, %m: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x64xbf16>) outs(%m : memref<64xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %w = arith.extf %in : bf16 to f32
    %h = arith.mulf %w, %half : f32
    %keep = arith.cmpi sle, %j, %i : index
    %s = arith.select %keep, %h, %zero : f32
    %r = arith.addf %out, %s : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A condition that is not monotone along the vector's lanes (every third
// column selected away): each lane's decides. 42 of 64 columns are used.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @every_third
// CHECK:         %[[V:.*]] = arith.muli %{{.*}}, %c4 : index
// CHECK:         %[[R0:.*]] = arith.remui %[[V]], %c3
// CHECK:         %[[U0:.*]] = arith.cmpi eq, %[[R0]], %c0
// CHECK:         %[[U1:.*]] = arith.cmpi eq,
// CHECK-NEXT:    %[[B1:.*]] = arith.andi %[[U0]], %[[U1]] : i1
// CHECK:         %[[U2:.*]] = arith.cmpi eq,
// CHECK-NEXT:    %[[B2:.*]] = arith.andi %[[B1]], %[[U2]] : i1
// CHECK:         %[[U3:.*]] = arith.cmpi eq,
// CHECK-NEXT:    %[[B3:.*]] = arith.andi %[[B2]], %[[U3]] : i1
// CHECK:         scf.if %[[B3]] -> (vector<4xf32>) {
// CHECK:           vector.load %arg0{{.*}}ds.read_fraction = 6.562500e-01
func.func @every_third(%x: memref<64x64xf32>, %m: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %c3 = arith.constant 3 : index
  %c0 = arith.constant 0 : index
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x64xf32>) outs(%m : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %j = linalg.index 1 : index
    %r = arith.remui %j, %c3 : index
    %third = arith.cmpi eq, %r, %c0 : index
    %s = arith.select %third, %zero, %in : f32
    %t = arith.addf %out, %s : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// Loaded everywhere: the element also reaches the result outside the select
// (@used_outside), the condition reads a tensor (@data_condition), or the
// element is a row's (a broadcast read at every element of its row, which
// a masked load would not make cheaper: @broadcast).
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @used_outside
// CHECK-NOT:     ds.read_fraction
// CHECK-LABEL: func.func @data_condition
// CHECK-NOT:     ds.read_fraction
// CHECK-LABEL: func.func @broadcast
// CHECK-NOT:     ds.read_fraction
// CHECK:         return
func.func @used_outside(%x: memref<64x64xf32>, %m: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x64xf32>) outs(%m : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %above = arith.cmpi sgt, %j, %i : index
    %s = arith.select %above, %zero, %in : f32
    %t = arith.addf %s, %in : f32
    %r = arith.addf %out, %t : f32
    linalg.yield %r : f32
  }
  return
}
func.func @data_condition(%x: memref<64x64xf32>, %c: memref<64x64xi1>,
                          %m: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %c : memref<64x64xf32>, memref<64x64xi1>) outs(%m : memref<64xf32>) {
  ^bb0(%in: f32, %drop: i1, %out: f32):
    %s = arith.select %drop, %zero, %in : f32
    %r = arith.addf %out, %s : f32
    linalg.yield %r : f32
  }
  return
}
func.func @broadcast(%x: memref<64x64xf32>, %b: memref<64xf32>,
                     %y: memref<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : memref<64x64xf32>, memref<64xf32>) outs(%y : memref<64x64xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %above = arith.cmpi sgt, %j, %i : index
    %s = arith.select %above, %zero, %bias : f32
    %t = arith.addf %s, %in : f32
    linalg.yield %t : f32
  }
  return
}

// RUN: ds-opt %s --convert-linalg-to-ds-gpu --split-input-file | FileCheck %s
// RUN: ds-opt %s --convert-linalg-to-ds-gpu --ds-gpu-launch-report --split-input-file -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REPORT

// An elementwise loop whose one store writes back its own element unless a
// condition that is the same at every iteration says otherwise
// (UniformGuards.h): the kernel tests the condition once per thread, and
// the loop runs only where it holds. The data-parallel mask in place is
// one: zeros when the bucket's probe is NaN. Exact, since where the
// condition fails the store writes what it loaded.
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @mask_in_place
// CHECK:         gpu.launch
// CHECK-NEXT:      %[[P:.*]] = memref.load %[[PROBE:.*]][] : memref<f32>
// CHECK-NEXT:      %[[NAN:.*]] = arith.cmpf uno, %[[P]], %[[P]] : f32
// CHECK-NEXT:      scf.if %[[NAN]] {
// CHECK:             scf.for
// CHECK:               memref.load %[[PROBE]][] : memref<f32>
// CHECK:               memref.load {{.*}}ds.read_fraction = 0.0
// CHECK:               memref.store {{.*}}ds.write_fraction = 0.0
// CHECK:           gpu.terminator
// REPORT: @mask_in_place: 1 kernel launches
// The finite case: the bucket neither read nor written.
// REPORT: 1 kernel {{.*}} 0.000 0.000
func.func @mask_in_place() -> (memref<4096xf32>, memref<f32>) {
  %bucket = memref.alloc() : memref<4096xf32>
  %probe = memref.alloc() : memref<f32>
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel"]}
      ins(%probe : memref<f32>) outs(%bucket : memref<4096xf32>) {
  ^bb0(%p: f32, %x: f32):
    %bad = arith.cmpf uno, %p, %p : f32
    %y = arith.select %bad, %zero, %x : f32
    linalg.yield %y : f32
  }
  return %bucket, %probe : memref<4096xf32>, memref<f32>
}

// -----

// The element kept in the true arm: the loop runs where the condition
// fails.
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @keep_when_true
// CHECK:         gpu.launch
// CHECK-NEXT:      %[[F:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK-NEXT:      %[[OK:.*]] = arith.cmpf ord, %[[F]], %[[F]] : f32
// CHECK-NEXT:      %[[TRUE:.*]] = arith.constant true
// CHECK-NEXT:      %[[NOT:.*]] = arith.xori %[[OK]], %[[TRUE]] : i1
// CHECK-NEXT:      scf.if %[[NOT]] {
func.func @keep_when_true() -> (memref<4096xf32>, memref<f32>) {
  %bucket = memref.alloc() : memref<4096xf32>
  %flag = memref.alloc() : memref<f32>
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel"]}
      ins(%flag : memref<f32>) outs(%bucket : memref<4096xf32>) {
  ^bb0(%f: f32, %x: f32):
    %ok = arith.cmpf ord, %f, %f : f32
    %y = arith.select %ok, %x, %zero : f32
    linalg.yield %y : f32
  }
  return %bucket, %flag : memref<4096xf32>, memref<f32>
}

// -----

// Not guarded: the condition differs between elements (a causal mask),
// reads the buffer the loop writes (the probe a view of the bucket), or
// reads a buffer the function was given (which may be the written one).
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @not_uniform
// CHECK-NOT:     scf.if
// CHECK:         return
func.func @not_uniform(%given: memref<f32>) -> (memref<4096xf32>, memref<4096xf32>) {
  %bucket = memref.alloc() : memref<4096xf32>
  %zero = arith.constant 0.0 : f32
  %c100 = arith.constant 100 : index
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel"]}
      outs(%bucket : memref<4096xf32>) {
  ^bb0(%x: f32):
    %i = linalg.index 0 : index
    %low = arith.cmpi ult, %i, %c100 : index
    %y = arith.select %low, %zero, %x : f32
    linalg.yield %y : f32
  }
  %first = memref.subview %bucket[0] [1] [1] : memref<4096xf32> to memref<f32, strided<[], offset: 0>>
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel"]}
      ins(%first : memref<f32, strided<[], offset: 0>>) outs(%bucket : memref<4096xf32>) {
  ^bb0(%p: f32, %x: f32):
    %bad = arith.cmpf uno, %p, %p : f32
    %y = arith.select %bad, %zero, %x : f32
    linalg.yield %y : f32
  }
  %other = memref.alloc() : memref<4096xf32>
  linalg.generic {indexing_maps = [#scalar, #id], iterator_types = ["parallel"]}
      ins(%given : memref<f32>) outs(%other : memref<4096xf32>) {
  ^bb0(%p: f32, %x: f32):
    %bad = arith.cmpf uno, %p, %p : f32
    %y = arith.select %bad, %zero, %x : f32
    linalg.yield %y : f32
  }
  return %bucket, %other : memref<4096xf32>, memref<4096xf32>
}

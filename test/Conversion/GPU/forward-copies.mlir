// ds-forward-copies: the readers of a whole-buffer copy read its source,
// and the copy goes, only while nothing writes the source and nothing else
// touches the copy. Structure first, then the first function run with and
// without the pass on the CPU: the same values, worked out by hand.
// RUN: ds-opt %s --ds-forward-copies --split-input-file | FileCheck %s
// RUN: ds-opt %s --ds-forward-copies=distinct-arguments --split-input-file | FileCheck %s --check-prefix=DISTINCT

// RUN: ds-opt %s --split-input-file --ds-forward-copies --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts 2>&1 \
// RUN: | awk '/^\/\/ -----/ { n++; next } n == 0' \
// RUN: | mlir-runner -e heads -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=EXEC
// RUN: ds-opt %s --split-input-file --convert-linalg-to-loops \
// RUN:   --expand-strided-metadata --lower-affine --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts 2>&1 \
// RUN: | awk '/^\/\/ -----/ { n++; next } n == 0' \
// RUN: | mlir-runner -e heads -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s --check-prefix=EXEC
// p[i][j] = 10i + j (2 x 4); the copy of p split into 2 heads of 2 and
// transposed: t[h][i][d] = p[i][2h + d]. Then the buffer is reused: q (p
// doubled, written over the copy) transposed the same way.
// EXEC: {{\[}}[0,   1],
// EXEC-NEXT: [10,   11]],
// EXEC-NEXT: {{\[}}[2,   3],
// EXEC-NEXT: [12,   13]]]
// EXEC: {{\[}}[0,   2],
// EXEC-NEXT: [20,   22]],
// EXEC-NEXT: {{\[}}[4,   6],
// EXEC-NEXT: [24,   26]]]

#id2 = affine_map<(i, j) -> (i, j)>
#scalar = affine_map<(i, j) -> ()>
func.func private @printMemrefF32(memref<*xf32>)

// The copy (an identity generic whose other input, a scale, is unused)
// goes; the head split's view is rebuilt on the source. The second copy
// writes the buffer whole: the first copy's value ends there, and the
// second copy goes too.
// CHECK-LABEL: func.func @heads
// CHECK: %[[P:.*]] = memref.alloc() : memref<2x4xf32>
// CHECK: %[[Q:.*]] = memref.alloc() : memref<2x4xf32>
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// CHECK: %[[PV:.*]] = memref.expand_shape %[[P]] {{\[}}
// CHECK: linalg.transpose ins(%[[PV]] : memref<2x2x2xf32>)
// CHECK-NOT: memref.copy
// CHECK: %[[QV:.*]] = memref.expand_shape %[[Q]] {{\[}}
// CHECK: linalg.transpose ins(%[[QV]] : memref<2x2x2xf32>)
func.func @heads() {
  %p = memref.alloc() : memref<2x4xf32>
  %q = memref.alloc() : memref<2x4xf32>
  %scale = memref.alloc() : memref<f32>
  linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%p : memref<2x4xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ten = arith.constant 10 : index
    %v = arith.muli %i, %ten : index
    %w = arith.addi %v, %j : index
    %x = arith.index_cast %w : index to i64
    %f = arith.sitofp %x : i64 to f32
    linalg.yield %f : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<2x4xf32>) outs(%q : memref<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.addf %in, %in : f32
    linalg.yield %d : f32
  }
  %copy = memref.alloc() : memref<2x4xf32>
  %view = memref.expand_shape %copy [[0], [1, 2]] output_shape [2, 2, 2] : memref<2x4xf32> into memref<2x2x2xf32>
  linalg.generic {indexing_maps = [#id2, #scalar, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p, %scale : memref<2x4xf32>, memref<f32>) outs(%copy : memref<2x4xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    linalg.yield %in : f32
  }
  %t = memref.alloc() : memref<2x2x2xf32>
  linalg.transpose ins(%view : memref<2x2x2xf32>) outs(%t : memref<2x2x2xf32>) permutation = [1, 0, 2]
  memref.copy %q, %copy : memref<2x4xf32> to memref<2x4xf32>
  %u = memref.alloc() : memref<2x2x2xf32>
  linalg.transpose ins(%view : memref<2x2x2xf32>) outs(%u : memref<2x2x2xf32>) permutation = [1, 0, 2]
  %tu = memref.cast %t : memref<2x2x2xf32> to memref<*xf32>
  call @printMemrefF32(%tu) : (memref<*xf32>) -> ()
  %uu = memref.cast %u : memref<2x2x2xf32> to memref<*xf32>
  call @printMemrefF32(%uu) : (memref<*xf32>) -> ()
  return
}

// -----

#id2 = affine_map<(i, j) -> (i, j)>

// The source is written before the copy's reader: the copy stays.
// CHECK-LABEL: func.func @source_written
// CHECK: linalg.generic
// CHECK: linalg.fill
// CHECK: linalg.transpose ins(%{{.*}} : memref<4x4xf32>)
func.func @source_written(%out: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<4x4xf32>
  %copy = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<4x4xf32>) outs(%copy : memref<4x4xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  linalg.fill ins(%zero : f32) outs(%p : memref<4x4xf32>)
  linalg.transpose ins(%copy : memref<4x4xf32>) outs(%out : memref<4x4xf32>) permutation = [1, 0]
  return
}

// -----

#id2 = affine_map<(i, j) -> (i, j)>

// The copy is updated in place (read and written) before it is read: it
// stays. So does a copy into a step's result (not an allocation).
// CHECK-LABEL: func.func @updated
// CHECK: memref.copy
// CHECK: linalg.generic
// CHECK: linalg.transpose
// CHECK: memref.copy
func.func @updated(%p: memref<4x4xf32>, %out: memref<4x4xf32>, %res: memref<4x4xf32>) {
  %copy = memref.alloc() : memref<4x4xf32>
  memref.copy %p, %copy : memref<4x4xf32> to memref<4x4xf32>
  linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%copy : memref<4x4xf32>) {
  ^bb0(%o: f32):
    %d = arith.addf %o, %o : f32
    linalg.yield %d : f32
  }
  linalg.transpose ins(%copy : memref<4x4xf32>) outs(%out : memref<4x4xf32>) permutation = [1, 0]
  memref.copy %p, %res : memref<4x4xf32> to memref<4x4xf32>
  return
}

// -----

// A library GEMM between the copy and its reader: it writes its third
// memref, and reads the others and the buffer behind its scale pointer.
// Writing another buffer, it lets the copy go; writing the source, it
// keeps it.
func.func private @dsrt_cuda_matmul_f8_to_bf16(memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64, !llvm.ptr, !llvm.ptr)
func.func private @opaque(memref<1x4x4xf32>)

// CHECK-LABEL: func.func @gemm_between
// CHECK: %[[P:.*]] = memref.alloc() : memref<1x4x4xf32>
// CHECK-NOT: memref.copy
// CHECK: call @dsrt_cuda_matmul_f8_to_bf16
// CHECK: call @dsrt_cuda_matmul_f8_to_bf16
// CHECK: %[[V:.*]] = memref.collapse_shape %[[P]] {{\[}}
// CHECK: linalg.transpose ins(%[[V]] : memref<4x4xf32>)
// CHECK-LABEL: func.func @gemm_writes_source
// CHECK: memref.copy
// CHECK: call @dsrt_cuda_matmul_f8_to_bf16
// CHECK: linalg.transpose ins(%{{.*}} : memref<4x4xf32>)
// CHECK-LABEL: func.func @opaque_between
// CHECK: memref.copy
// CHECK: call @opaque
func.func @gemm_between(%a: memref<1x4x4xf32>, %b: memref<1x4x4xf32>, %out: memref<4x4xf32>) {
  %c0 = arith.constant 0 : i64
  %null = llvm.mlir.zero : !llvm.ptr
  %ca = memref.cast %a : memref<1x4x4xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  %cb = memref.cast %b : memref<1x4x4xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  %p = memref.alloc() : memref<1x4x4xf32>
  %cp = memref.cast %p : memref<1x4x4xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  call @dsrt_cuda_matmul_f8_to_bf16(%ca, %cb, %cp, %c0, %c0, %null, %null) : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
  %copy = memref.alloc() : memref<1x4x4xf32>
  memref.copy %p, %copy : memref<1x4x4xf32> to memref<1x4x4xf32>
  %scale = memref.alloc() : memref<f32>
  %ip = memref.extract_aligned_pointer_as_index %scale : memref<f32> -> index
  %i = arith.index_cast %ip : index to i64
  %sp = llvm.inttoptr %i : i64 to !llvm.ptr
  %c = memref.alloc() : memref<1x4x4xf32>
  %cc = memref.cast %c : memref<1x4x4xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  call @dsrt_cuda_matmul_f8_to_bf16(%cp, %cb, %cc, %c0, %c0, %sp, %null) : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
  %v = memref.collapse_shape %copy [[0, 1], [2]] : memref<1x4x4xf32> into memref<4x4xf32>
  linalg.transpose ins(%v : memref<4x4xf32>) outs(%out : memref<4x4xf32>) permutation = [1, 0]
  return
}
func.func @gemm_writes_source(%a: memref<1x4x4xf32>, %b: memref<1x4x4xf32>, %out: memref<4x4xf32>) {
  %c0 = arith.constant 0 : i64
  %null = llvm.mlir.zero : !llvm.ptr
  %ca = memref.cast %a : memref<1x4x4xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  %cb = memref.cast %b : memref<1x4x4xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  %p = memref.alloc() : memref<1x4x4xf32>
  %cp = memref.cast %p : memref<1x4x4xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
  %copy = memref.alloc() : memref<1x4x4xf32>
  memref.copy %p, %copy : memref<1x4x4xf32> to memref<1x4x4xf32>
  call @dsrt_cuda_matmul_f8_to_bf16(%ca, %cb, %cp, %c0, %c0, %null, %null) : (memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, i64, i64, !llvm.ptr, !llvm.ptr) -> ()
  %v = memref.collapse_shape %copy [[0, 1], [2]] : memref<1x4x4xf32> into memref<4x4xf32>
  linalg.transpose ins(%v : memref<4x4xf32>) outs(%out : memref<4x4xf32>) permutation = [1, 0]
  return
}
func.func @opaque_between(%a: memref<1x4x4xf32>, %b: memref<1x4x4xf32>, %out: memref<4x4xf32>) {
  %p = memref.alloc() : memref<1x4x4xf32>
  %copy = memref.alloc() : memref<1x4x4xf32>
  memref.copy %p, %copy : memref<1x4x4xf32> to memref<1x4x4xf32>
  call @opaque(%b) : (memref<1x4x4xf32>) -> ()
  %v = memref.collapse_shape %copy [[0, 1], [2]] : memref<1x4x4xf32> into memref<4x4xf32>
  linalg.transpose ins(%v : memref<4x4xf32>) outs(%out : memref<4x4xf32>) permutation = [1, 0]
  return
}

// -----

#id2 = affine_map<(i, j) -> (i, j)>

// The reader writes the source (in place): it would read what it writes.
// Two arguments may be one buffer, unless the step ABI says otherwise: a
// write to another argument keeps the copy of the first, then lets it go.
// CHECK-LABEL: func.func @reader_writes_source
// CHECK: memref.copy
// CHECK-LABEL: func.func @other_argument_written
// CHECK: memref.copy
// DISTINCT-LABEL: func.func @other_argument_written
// DISTINCT-NOT: memref.copy
// DISTINCT: linalg.transpose ins(%arg0
func.func @reader_writes_source(%p: memref<4x4xf32>) {
  %copy = memref.alloc() : memref<4x4xf32>
  memref.copy %p, %copy : memref<4x4xf32> to memref<4x4xf32>
  linalg.transpose ins(%copy : memref<4x4xf32>) outs(%p : memref<4x4xf32>) permutation = [1, 0]
  return
}
func.func @other_argument_written(%p: memref<4x4xf32>, %r: memref<4x4xf32>, %out: memref<4x4xf32>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %copy = memref.alloc() : memref<4x4xf32>
  memref.copy %p, %copy : memref<4x4xf32> to memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%r : memref<4x4xf32>)
  linalg.transpose ins(%copy : memref<4x4xf32>) outs(%out : memref<4x4xf32>) permutation = [1, 0]
  return
}

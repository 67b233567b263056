// RUN: ds-opt %s --convert-linalg-to-ds-gpu --split-input-file | FileCheck %s
// RUN: ds-opt %s --convert-linalg-to-ds-gpu=fuse-siblings=false --split-input-file \
// RUN:   | FileCheck %s --check-prefix=UNFUSED
// RUN: ds-opt %s --convert-linalg-to-ds-gpu --split-input-file | FileCheck %s --check-prefix=VEC

// The FP8 policy's quantisation: an amax over every element of x, a history
// update that reads it, then the scaled cast of x. The cast runs in the
// amax's kernel (x loaded once per element for both); the history update,
// which needs the whole amax, moves after it.
// CHECK-LABEL: func.func @amax_and_cast
// CHECK:         gpu.launch
// CHECK:           scf.for
// CHECK:             %[[X:.*]] = memref.load %arg0[%[[I:.*]], %[[J:.*]]] : memref<256x512xf32>
// CHECK-NEXT:        math.absf %[[X]]
// CHECK-NEXT:        arith.maximumf
// CHECK-NOT:         memref.load %arg0
// CHECK:             %[[P:.*]] = arith.mulf %[[X]],
// CHECK-NEXT:        %[[T:.*]] = arith.truncf %[[P]] : f32 to f8E4M3FN
// CHECK-NEXT:        memref.store %[[T]], %arg3[%[[I]], %[[J]]]
// CHECK:           gpu.all_reduce maximumf
// The partial results folded, then the history.
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce maximumf
// CHECK:         gpu.launch
// CHECK:           arith.minimumf
// CHECK-NOT:     arith.truncf
// CHECK:         return
// UNFUSED-LABEL: func.func @amax_and_cast
// UNFUSED:         gpu.launch
// UNFUSED-NOT:       arith.truncf
// UNFUSED:           gpu.all_reduce maximumf
// UNFUSED:         gpu.launch
// UNFUSED:         gpu.launch
// UNFUSED:           arith.minimumf
// UNFUSED:         gpu.launch
// UNFUSED:           arith.truncf
// Where x and q are 16-byte aligned, each thread takes vectors of 4 of x:
// their amax, then the cast of the same vector (not loaded again) stored as
// 4 bytes of q. Elsewhere the elements one at a time, as above.
// VEC-LABEL: func.func @amax_and_cast
// VEC:         gpu.launch
// VEC:           %[[ALIGNED:.*]] = arith.cmpi eq
// VEC:             %[[NV:.*]] = arith.select %[[ALIGNED]], %c32768, %c0
// VEC:             scf.for %{{.*}} to %[[NV]] {{.*}} iter_args
// VEC:               %[[X:.*]] = vector.load %arg0[%[[I:.*]], %[[J:.*]]] {alignment = 16 : i64} : memref<256x512xf32>, vector<4xf32>
// VEC-COUNT-4:       math.absf
// VEC-NOT:           vector.load
// VEC:               vector.extract %[[X]][3]
// VEC:               arith.truncf {{.*}} : f32 to f8E4M3FN
// VEC:               %[[Q:.*]] = vector.from_elements {{.*}} : vector<4xf8E4M3FN>
// VEC-NEXT:          vector.store %[[Q]], %arg3[%[[I]], %[[J]]] {alignment = 4 : i64}
// VEC:             %[[NE:.*]] = arith.select %[[ALIGNED]], %c0{{.*}}, %c131072
// VEC:             scf.for %{{.*}} to %[[NE]] {{.*}} iter_args
// VEC:               memref.load %arg0
// VEC:               memref.store %{{.*}}, %arg3
// VEC:           gpu.all_reduce maximumf
#id2 = affine_map<(i, j) -> (i, j)>
#all2 = affine_map<(i, j) -> ()>
#s = affine_map<() -> ()>
func.func @amax_and_cast(%x: memref<256x512xf32>, %hist: memref<f32>,
                         %scale: memref<f32>, %q: memref<256x512xf8E4M3FN>,
                         %newhist: memref<f32>) attributes {llvm.emit_c_interface} {
  %m = memref.alloc() : memref<f32>
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<256x512xf32>) outs(%m : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %abs = math.absf %a : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  }
  linalg.generic {indexing_maps = [#s, #s, #s], iterator_types = []}
      ins(%m, %hist : memref<f32>, memref<f32>) outs(%newhist : memref<f32>) {
  ^bb0(%a: f32, %h: f32, %o: f32):
    %mx = arith.minimumf %a, %h : f32
    linalg.yield %mx : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %scale : memref<256x512xf32>, memref<f32>) outs(%q : memref<256x512xf8E4M3FN>) {
  ^bb0(%a: f32, %s: f32, %o: f8E4M3FN):
    %p = arith.mulf %a, %s : f32
    %t = arith.truncf %p : f32 to f8E4M3FN
    linalg.yield %t : f8E4M3FN
  }
  memref.dealloc %m : memref<f32>
  return
}

// -----

// A cotangent's amax over [B, T, N] and its cast as [B*T, N]: the same
// elements in the same order, so iteration k of the reduction runs
// iteration k of the cast, its indices taken apart in the cast's shape.
// CHECK-LABEL: func.func @reshaped
// CHECK:         gpu.launch
// CHECK:           scf.for %[[K:[a-z0-9]+]] = {{.*}} iter_args
// CHECK:             %[[X:.*]] = memref.load %arg0[
// CHECK:             arith.maximumf
// CHECK:             %[[J:.*]] = arith.remui %[[K]], %{{.*}}
// CHECK:             %[[I:.*]] = arith.divui %[[K]], %{{.*}}
// CHECK:             arith.truncf %[[X]] : f32 to f8E5M2
// CHECK:             memref.store %{{.*}}, %arg1[%[[I]], %[[J]]] : memref<256x512xf8E5M2>
// CHECK:         gpu.launch
// CHECK-NOT:     gpu.launch
// CHECK:         return
// In vectors: the cast's indices are vector k's first element's, taken
// apart in the cast's shape.
// VEC-LABEL: func.func @reshaped
// VEC:             scf.for %[[V:[a-z0-9]+]] = {{.*}} iter_args
// VEC:               %[[K:.*]] = arith.muli %[[V]], %c4
// VEC:               vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<2x128x512xf32>, vector<4xf32>
// VEC-NOT:           vector.load
// VEC:               %[[J:.*]] = arith.remui %[[K]], %c512
// VEC:               %[[I:.*]] = arith.divui %[[K]], %c512
// VEC:               vector.store %{{.*}}, %arg1[%[[I]], %[[J]]] {alignment = 4 : i64} : memref<256x512xf8E5M2>, vector<4xf8E5M2>
#id3 = affine_map<(b, t, n) -> (b, t, n)>
#all3 = affine_map<(b, t, n) -> ()>
#id2 = affine_map<(i, j) -> (i, j)>
func.func @reshaped(%x: memref<2x128x512xf32>, %q: memref<256x512xf8E5M2>,
                    %m: memref<f32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id3, #all3], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%x : memref<2x128x512xf32>) outs(%m : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %abs = math.absf %a : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  }
  %v = memref.collapse_shape %x [[0, 1], [2]] : memref<2x128x512xf32> into memref<256x512xf32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<256x512xf32>) outs(%q : memref<256x512xf8E5M2>) {
  ^bb0(%a: f32, %o: f8E5M2):
    %t = arith.truncf %a : f32 to f8E5M2
    linalg.yield %t : f8E5M2
  }
  return
}

// -----

// Left apart: an elementwise op that needs the reduction's result (it
// would read it before the kernel wrote it), one that writes the
// reduction's input in place, one with a call between that may write the
// input, and a reduction too small to be worth it (fewer than 65536
// elements: its second read hits the cache).
// CHECK-LABEL: func.func @apart
// CHECK:         gpu.launch
// CHECK-NOT:       arith.divf
// CHECK:           gpu.all_reduce
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce
// CHECK:         gpu.launch
// CHECK:           arith.divf
// CHECK:         gpu.launch
// CHECK-NOT:       arith.mulf
// CHECK:           gpu.all_reduce
// CHECK:         gpu.launch
// CHECK:         gpu.launch
// CHECK:           arith.mulf
// CHECK:         gpu.launch
// CHECK-NOT:       arith.negf
// CHECK:           gpu.all_reduce
// CHECK:         gpu.launch
// CHECK:         call @touch
// CHECK:         gpu.launch
// CHECK:           arith.negf
// CHECK:         gpu.launch
// CHECK-NOT:       arith.truncf
// CHECK:           gpu.all_reduce
// CHECK:         gpu.launch
// CHECK:           arith.truncf
#id2 = affine_map<(i, j) -> (i, j)>
#all2 = affine_map<(i, j) -> ()>
func.func private @touch(memref<256x512xf32>)
func.func @apart(%x: memref<256x512xf32>, %y: memref<256x512xf32>,
                 %small: memref<64x64xf32>, %qs: memref<64x64xbf16>,
                 %m: memref<f32>, %n: memref<f32>, %o: memref<f32>,
                 %p: memref<f32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<256x512xf32>) outs(%m : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %mx = arith.maximumf %acc, %a : f32
    linalg.yield %mx : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<256x512xf32>, memref<f32>) outs(%y : memref<256x512xf32>) {
  ^bb0(%a: f32, %s: f32, %r: f32):
    %d = arith.divf %a, %s : f32
    linalg.yield %d : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%y : memref<256x512xf32>) outs(%n : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<256x512xf32>) outs(%y : memref<256x512xf32>) {
  ^bb0(%a: f32, %r: f32):
    %t = arith.mulf %a, %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<256x512xf32>) outs(%o : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.minimumf %acc, %a : f32
    linalg.yield %s : f32
  }
  call @touch(%x) : (memref<256x512xf32>) -> ()
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<256x512xf32>) outs(%y : memref<256x512xf32>) {
  ^bb0(%a: f32, %r: f32):
    %t = arith.negf %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%small : memref<64x64xf32>) outs(%p : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %mx = arith.maximumf %acc, %a : f32
    linalg.yield %mx : f32
  }
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%small : memref<64x64xf32>) outs(%qs : memref<64x64xbf16>) {
  ^bb0(%a: f32, %r: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// A cast-transpose (ds-fuse-transposes): the cast writes the FP8 tensor and
// its transpose. Beside the amax, one launch over tiles: a warp casts a
// tile row, stores q directly and the transposed copy's elements into a
// shared-memory tile; after a barrier it writes a tile column of qt. The
// buffers aligned, a lane takes a vector of 4 of the row (tiles of 32 x
// 128: 32 here), the amax and the cast on the same vector, and writes 16
// rows of a tile column as one vector. A thread loads
// its 4 rows of a tile before it stores any (a row out of range loads a
// valid element and leaves the maximum as it was). Each thread's running
// maximum waits in shared memory between tiles; the blocks' partial
// results (one per block) are folded by a second launch. Misaligned, the
// same with one element a lane.
// CHECK-LABEL: func.func @amax_and_cast_transpose
// CHECK:         %[[P:.*]] = gpu.alloc () : memref<32xf32>
// CHECK:         gpu.launch {{.*}} workgroup(%[[TILE:.*]] : memref<32x129xi32, #gpu.address_space<workgroup>>, %[[ACC:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.if
// CHECK:             scf.for
// CHECK:               memref.load %[[ACC]]
// CHECK:               scf.for
// CHECK:                 %[[X:.*]] = vector.load %arg0[{{.*}} : memref<256x512xf32>, vector<4xf32>
// CHECK-COUNT-4:         arith.maximumf
// CHECK-NOT:             vector.load
// CHECK:                 %[[T:.*]] = arith.truncf
// CHECK:                 vector.extract %[[X]][3]
// CHECK-COUNT-3:         vector.load %arg0[
// CHECK-NOT:             memref.store
// CHECK:                 scf.if
// CHECK:                   %[[Q:.*]] = vector.from_elements %[[T]], {{.*}} : vector<4xf8E4M3FN>
// CHECK:                   vector.store %[[Q]], %arg2[
// CHECK:                   %[[B:.*]] = arith.bitcast %[[T]] : f8E4M3FN to i8
// CHECK:                   %[[W:.*]] = arith.extui %[[B]] : i8 to i32
// CHECK:                   memref.store %[[W]], %[[TILE]][
// CHECK:               memref.store %{{.*}}, %[[ACC]]
// CHECK:               gpu.barrier
// CHECK:               scf.for
// CHECK-COUNT-16:          memref.load %[[TILE]]
// CHECK:                 %[[QT:.*]] = vector.from_elements {{.*}} : vector<16xf8E4M3FN>
// CHECK:                 vector.store %[[QT]], %arg3[
// CHECK:               gpu.barrier
// CHECK:           } else {
// CHECK:             scf.for
// CHECK:               memref.load %[[ACC]]
// CHECK:               scf.for
// CHECK:                 %[[X:.*]] = memref.load %arg0[
// CHECK:                 arith.maximumf
// CHECK:                 %[[T:.*]] = arith.truncf
// CHECK-COUNT-3:         memref.load %arg0[
// CHECK-NOT:             memref.store
// CHECK:                 scf.if
// CHECK:                   memref.store %[[T]], %arg2[
// CHECK:                   %[[B:.*]] = arith.bitcast %[[T]] : f8E4M3FN to i8
// CHECK:                   %[[W:.*]] = arith.extui %[[B]] : i8 to i32
// CHECK:                   memref.store %[[W]], %[[TILE]][
// CHECK:               memref.store %{{.*}}, %[[ACC]]
// CHECK:               gpu.barrier
// CHECK:               scf.for
// CHECK:                 memref.load %[[TILE]]
// CHECK:                 memref.store %{{.*}}, %arg3[
// CHECK:               gpu.barrier
// CHECK:           gpu.all_reduce maximumf
// CHECK:           memref.store %{{.*}}, %[[P]][
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce maximumf
// CHECK-NOT:     gpu.launch
// CHECK:         return
#id2 = affine_map<(i, j) -> (i, j)>
#tr2 = affine_map<(i, j) -> (j, i)>
#all2 = affine_map<(i, j) -> ()>
func.func @amax_and_cast_transpose(%x: memref<256x512xf32>, %scale: memref<f32>,
                                   %q: memref<256x512xf8E4M3FN>, %qt: memref<512x256xf8E4M3FN>,
                                   %m: memref<f32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<256x512xf32>) outs(%m : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %abs = math.absf %a : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2, #id2, #tr2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %scale : memref<256x512xf32>, memref<f32>) outs(%q, %qt : memref<256x512xf8E4M3FN>, memref<512x256xf8E4M3FN>) {
  ^bb0(%a: f32, %s: f32, %o: f8E4M3FN, %ot: f8E4M3FN):
    %p = arith.mulf %a, %s : f32
    %t = arith.truncf %p : f32 to f8E4M3FN
    linalg.yield %t, %t : f8E4M3FN, f8E4M3FN
  }
  return
}

// -----

// Alone, the cast-transpose gets the same tiles, without a reduction.
// CHECK-LABEL: func.func @cast_transpose
// CHECK:         gpu.launch {{.*}} workgroup(%[[TILE:.*]] : memref<32x33xi32, #gpu.address_space<workgroup>>)
// CHECK:           arith.truncf
// CHECK:           memref.store %{{.*}}, %[[TILE]][
// CHECK:           gpu.barrier
// CHECK:           memref.load %[[TILE]]
// CHECK:           memref.store %{{.*}}, %arg1[
// CHECK-NOT:     gpu.all_reduce
// CHECK:         return
#id2 = affine_map<(i, j) -> (i, j)>
#tr2 = affine_map<(i, j) -> (j, i)>
func.func @cast_transpose(%x: memref<70x45xf32>, %qt: memref<45x70xbf16>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id2, #tr2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<70x45xf32>) outs(%qt : memref<45x70xbf16>) {
  ^bb0(%a: f32, %ot: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// A bias gradient (the column sums of a cotangent) beside the cotangent's
// amax and FP8 cast-transpose runs over the cast's tiles too (Transformer
// Engine's cast_transpose_dbias): the bf16 vector each lane loads serves
// the amax, the cast and a sum per lane. Each thread keeps its columns'
// sums over its rows of the tile, the warps' sums meet in shared memory
// (8 warps x 128 columns), and the first 128 threads fold them in warp
// order into the tile row's partial sums, [8 tile rows, 512]. A second
// launch folds those, a lane per column and the block's warps over the
// tile rows, then the amax's partials as before.
// CHECK-LABEL: func.func @amax_cast_transpose_dbias
// CHECK:         %[[P:.*]] = gpu.alloc () : memref<32xf32>
// CHECK:         %[[CP:.*]] = gpu.alloc () : memref<8x512xf32>
// CHECK:         gpu.launch {{.*}} workgroup(%[[TILE:.*]] : memref<32x129xi32, #gpu.address_space<workgroup>>, %[[ACC:.*]] : memref<256xf32, #gpu.address_space<workgroup>>, %[[SUMS:.*]] : memref<8x128xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.if
// CHECK:             scf.for
// CHECK:               memref.load %[[ACC]]
// CHECK:               scf.for
// CHECK:                 %[[X:.*]] = vector.load %arg0[{{.*}} : memref<256x512xbf16>, vector<4xbf16>
// CHECK-COUNT-4:         arith.maximumf
// CHECK-NOT:             vector.load
// CHECK-COUNT-4:         arith.truncf
// CHECK-NOT:             vector.load
// CHECK-COUNT-4:         arith.addf
// CHECK:                 vector.load %arg0[
// CHECK:               memref.store %{{.*}}, %[[ACC]]
// CHECK-COUNT-4:       memref.store %{{.*}}, %[[SUMS]]
// CHECK:               gpu.barrier
// CHECK:               scf.if
// CHECK-COUNT-8:         memref.load %[[SUMS]]
// CHECK:                 memref.store %{{.*}}, %[[CP]][
// CHECK:               scf.for
// CHECK:               gpu.barrier
// CHECK:           } else {
// CHECK:             scf.for
// CHECK:               scf.for
// CHECK:                 %[[X:.*]] = memref.load %arg0[
// CHECK:                 arith.maximumf
// CHECK:                 arith.truncf
// CHECK:                 arith.addf
// CHECK:               memref.store %{{.*}}, %[[SUMS]]
// CHECK-NOT:           memref.store %{{.*}}, %[[SUMS]]
// CHECK:               gpu.barrier
// CHECK:           gpu.all_reduce maximumf
// CHECK:         gpu.launch {{.*}} workgroup(%[[WARPS:.*]] : memref<8x32xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.for
// CHECK:             memref.load %[[CP]]
// CHECK:             arith.addf
// CHECK:           memref.store %{{.*}}, %[[WARPS]]
// CHECK:           gpu.barrier
// CHECK:           scf.if
// CHECK-COUNT-8:     memref.load %[[WARPS]]
// CHECK:             memref.store %{{.*}}, %arg5[
// CHECK:         gpu.dealloc %[[CP]]
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce maximumf
// CHECK-NOT:     gpu.launch
// CHECK:         return
// UNFUSED-LABEL: func.func @amax_cast_transpose_dbias
// UNFUSED-NOT:     memref<8x128xf32, #gpu.address_space<workgroup>>
// UNFUSED:         return
#id2 = affine_map<(i, j) -> (i, j)>
#tr2 = affine_map<(i, j) -> (j, i)>
#all2 = affine_map<(i, j) -> ()>
#col2 = affine_map<(i, j) -> (j)>
func.func @amax_cast_transpose_dbias(%x: memref<256x512xbf16>, %scale: memref<f32>,
                                     %q: memref<256x512xf8E5M2>, %qt: memref<512x256xf8E5M2>,
                                     %m: memref<f32>, %db: memref<512xf32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x512xbf16>) outs(%db : memref<512xf32>) {
  ^bb0(%a: bf16, %acc: f32):
    %w = arith.extf %a : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<256x512xbf16>) outs(%m : memref<f32>) {
  ^bb0(%a: bf16, %acc: f32):
    %w = arith.extf %a : bf16 to f32
    %abs = math.absf %w : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2, #id2, #tr2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %scale : memref<256x512xbf16>, memref<f32>) outs(%q, %qt : memref<256x512xf8E5M2>, memref<512x256xf8E5M2>) {
  ^bb0(%a: bf16, %s: f32, %o: f8E5M2, %ot: f8E5M2):
    %w = arith.extf %a : bf16 to f32
    %p = arith.mulf %w, %s : f32
    %t = arith.truncf %p : f32 to f8E5M2
    linalg.yield %t, %t : f8E5M2, f8E5M2
  }
  return
}

// -----

// A column sum after the cast-transpose, or over a map of its own (here
// the transposed tensor's columns), keeps its own kernel.
// CHECK-LABEL: func.func @dbias_not_joined
// CHECK:         gpu.launch
// CHECK:           gpu.all_reduce add
// CHECK:         gpu.launch {{.*}} workgroup(%{{.*}} : memref<32x129xi32, #gpu.address_space<workgroup>>) {
// CHECK-NOT:       arith.addf
// CHECK:         gpu.launch
// CHECK:           arith.addf
// CHECK:         return
#id2 = affine_map<(i, j) -> (i, j)>
#tr2 = affine_map<(i, j) -> (j, i)>
#col2 = affine_map<(i, j) -> (j)>
func.func @dbias_not_joined(%x: memref<256x512xbf16>, %qt: memref<512x256xbf16>,
                            %db: memref<512xf32>, %dbt: memref<256xf32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#tr2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x512xbf16>) outs(%dbt : memref<256xf32>) {
  ^bb0(%a: bf16, %acc: f32):
    %w = arith.extf %a : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id2, #tr2], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<256x512xbf16>) outs(%qt : memref<512x256xbf16>) {
  ^bb0(%a: bf16, %ot: bf16):
    linalg.yield %a : bf16
  }
  linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x512xbf16>) outs(%db : memref<512xf32>) {
  ^bb0(%a: bf16, %acc: f32):
    %w = arith.extf %a : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A layer norm's weight and bias gradients: two column sums of the same
// cotangent, with the second's accumulator allocated between them. One
// launch folds both, a thread's two accumulators per output side by side
// (per lane of a vector), loading the cotangent once; each writes its own
// partial sums, which two launches fold. A third column sum of another
// tensor keeps its own launch.
// CHECK-LABEL: func.func @column_group
// CHECK:         %[[P1:.*]] = gpu.alloc () : memref<128x{{[0-9]+}}xf32>
// CHECK:         %[[P2:.*]] = gpu.alloc () : memref<128x{{[0-9]+}}xf32>
// CHECK:         gpu.launch
// CHECK:           scf.if
// CHECK:             scf.for
// CHECK:               scf.for {{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK:                 vector.load %arg0[{{.*}} : memref<512x128xf32>, vector<4xf32>
// CHECK:                 vector.load %arg1[
// CHECK-NOT:             vector.load
// CHECK-COUNT-8:         arith.addf
// CHECK:               memref.store %{{.*}}, %[[P1]][
// CHECK:               memref.store %{{.*}}, %[[P2]][
// CHECK:           } else {
// CHECK:               scf.for {{.*}} -> (f32, f32)
// CHECK:                 memref.load %arg0[
// CHECK:                 memref.load %arg1[
// CHECK-NOT:             memref.load %arg0[
// CHECK:         gpu.launch
// CHECK:           memref.load %[[P1]]
// CHECK:         gpu.launch
// CHECK:           memref.load %[[P2]]
// CHECK:         gpu.launch
// CHECK-NOT:       memref.load %arg0[
// CHECK:           memref.load %arg4[
// CHECK:         return
// UNFUSED-LABEL: func.func @column_group
// UNFUSED-COUNT-3: gpu.alloc () : memref<128x{{[0-9]+}}xf32>
// UNFUSED-NOT:     gpu.alloc () : memref<128x{{[0-9]+}}xf32>
// UNFUSED:         return
#id2 = affine_map<(i, j) -> (i, j)>
#col2 = affine_map<(i, j) -> (j)>
func.func @column_group(%dy: memref<512x128xf32>, %xhat: memref<512x128xf32>,
                        %dw: memref<128xf32>, %db: memref<128xf32>,
                        %other: memref<512x128xf32>, %do: memref<128xf32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id2, #id2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %xhat : memref<512x128xf32>, memref<512x128xf32>) outs(%dw : memref<128xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  %t = memref.alloc() : memref<128xf32>
  linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%dy : memref<512x128xf32>) outs(%t : memref<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  memref.copy %t, %db : memref<128xf32> to memref<128xf32>
  linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%other : memref<512x128xf32>) outs(%do : memref<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A GELU's gradient, which the next GEMM reads, and the bias gradient that
// sums it over the rows: the producer runs in the column sum's launch, each
// thread computing the elements it folds, storing them and folding the
// values it stored (never loading x back), in vectors where the buffers
// are aligned and elements where not. Apart (fuse-siblings=false): a
// launch each, the sum reading x again.
// CHECK-LABEL: func.func @column_producer
// CHECK:         gpu.launch
// CHECK:           scf.if
// CHECK:             scf.for
// CHECK:               scf.for
// CHECK:                 vector.load %arg0[{{.*}} : memref<256x512xbf16>, vector<8xbf16>
// CHECK:                 vector.load %arg1[{{.*}} : memref<256x512xbf16>, vector<8xbf16>
// CHECK:                 vector.store %{{.*}}, %arg2[{{.*}} : memref<256x512xbf16>, vector<8xbf16>
// CHECK-NOT:             vector.load
// CHECK-COUNT-8:         arith.addf
// CHECK:           } else {
// CHECK:                 memref.load %arg0[
// CHECK:                 memref.load %arg1[
// CHECK:                 memref.store %{{.*}}, %arg2[
// CHECK-NOT:             memref.load %arg2[
// CHECK:                 arith.addf
// CHECK:         gpu.launch
// CHECK-NOT:     gpu.launch
// CHECK:         return
// UNFUSED-LABEL: func.func @column_producer
// UNFUSED:         gpu.launch
// UNFUSED:           memref.store %{{.*}}, %arg2[
// UNFUSED:         gpu.launch
// UNFUSED:           memref.load %arg2[
// UNFUSED:         return
#id2 = affine_map<(i, j) -> (i, j)>
#col2 = affine_map<(i, j) -> (j)>
func.func @column_producer(%h: memref<256x512xbf16>, %g: memref<256x512xbf16>,
                           %x: memref<256x512xbf16>, %db: memref<512xf32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h, %g : memref<256x512xbf16>, memref<256x512xbf16>) outs(%x : memref<256x512xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %wa = arith.extf %a : bf16 to f32
    %wb = arith.extf %b : bf16 to f32
    %t = math.tanh %wa : f32
    %p = arith.mulf %t, %wb : f32
    %r = arith.truncf %p : f32 to bf16
    linalg.yield %r : bf16
  }
  linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x512xbf16>) outs(%db : memref<512xf32>) {
  ^bb0(%a: bf16, %acc: f32):
    %w = arith.extf %a : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Where the sum reads the producer's output at other elements than the
// producer writes there (transposed), or the producer reads what the sum
// writes, each keeps its own launch.
// CHECK-LABEL: func.func @column_producer_transposed
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg1[
// CHECK:         gpu.launch
// CHECK:           memref.load %arg1[
// CHECK-LABEL: func.func @column_producer_reads_sum
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %arg1[
// CHECK:         gpu.launch
// CHECK:           memref.load %arg1[
#id2 = affine_map<(i, j) -> (i, j)>
#tr2 = affine_map<(i, j) -> (j, i)>
#col2 = affine_map<(i, j) -> (j)>
func.func @column_producer_transposed(%h: memref<512x512xf32>, %x: memref<512x512xf32>,
                                      %db: memref<512xf32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h : memref<512x512xf32>) outs(%x : memref<512x512xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#tr2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<512x512xf32>) outs(%db : memref<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
func.func @column_producer_reads_sum(%h: memref<512x512xf32>, %x: memref<512x512xf32>,
                                     %db: memref<512xf32>) attributes {llvm.emit_c_interface} {
  linalg.generic {indexing_maps = [#id2, #col2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h, %db : memref<512x512xf32>, memref<512xf32>) outs(%x : memref<512x512xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.mulf %a, %b : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<512x512xf32>) outs(%db : memref<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// The cotangent is a temporary computed from two tensors (a GELU's
// gradient) and read by the amax, the bias gradient and the cast-transpose
// alone: its producer's body moves into all three, which read the two
// tensors (one bf16 vector each, shared) instead, and the temporary is
// never written (Transformer Engine's dact_cast_transpose_dbias). Kept as
// a kernel of its own when something else reads the temporary after.
// CHECK-LABEL: func.func @dact_cast_transpose_dbias
// CHECK-NOT:     alloc{{.*}} : memref<256x512xbf16>
// CHECK:         gpu.launch {{.*}} workgroup(
// CHECK:           scf.if
// CHECK:             vector.load %arg0[{{.*}} : memref<256x512xbf16>, vector<4xbf16>
// CHECK:             vector.load %arg1[{{.*}} : memref<256x512xbf16>, vector<4xbf16>
// CHECK-NOT:         vector.load %arg{{[01]}}[
// CHECK:             arith.truncf {{.*}} : f32 to f8E5M2
// CHECK:         return
// CHECK-LABEL: func.func @dact_read_after
// CHECK:         gpu.launch
// CHECK:           memref.store %{{.*}}, %[[T:.*]][
// CHECK:         gpu.launch {{.*}} workgroup(
// CHECK:           vector.load %[[T]][
#id2 = affine_map<(i, j) -> (i, j)>
#tr2 = affine_map<(i, j) -> (j, i)>
#all2 = affine_map<(i, j) -> ()>
#col2 = affine_map<(i, j) -> (j)>
func.func @dact_cast_transpose_dbias(%h: memref<256x512xbf16>, %g: memref<256x512xbf16>, %scale: memref<f32>,
                                     %q: memref<256x512xf8E5M2>, %qt: memref<512x256xf8E5M2>,
                                     %m: memref<f32>, %db: memref<512xf32>) attributes {llvm.emit_c_interface} {
  %x = memref.alloc() : memref<256x512xbf16>
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h, %g : memref<256x512xbf16>, memref<256x512xbf16>) outs(%x : memref<256x512xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %wa = arith.extf %a : bf16 to f32
    %wb = arith.extf %b : bf16 to f32
    %p = arith.mulf %wa, %wb : f32
    %r = arith.truncf %p : f32 to bf16
    linalg.yield %r : bf16
  }
  linalg.generic {indexing_maps = [#id2, #col2], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x512xbf16>) outs(%db : memref<512xf32>) {
  ^bb0(%a: bf16, %acc: f32):
    %w = arith.extf %a : bf16 to f32
    %s = arith.addf %acc, %w : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<256x512xbf16>) outs(%m : memref<f32>) {
  ^bb0(%a: bf16, %acc: f32):
    %w = arith.extf %a : bf16 to f32
    %abs = math.absf %w : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2, #id2, #tr2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %scale : memref<256x512xbf16>, memref<f32>) outs(%q, %qt : memref<256x512xf8E5M2>, memref<512x256xf8E5M2>) {
  ^bb0(%a: bf16, %s: f32, %o: f8E5M2, %ot: f8E5M2):
    %w = arith.extf %a : bf16 to f32
    %p = arith.mulf %w, %s : f32
    %t = arith.truncf %p : f32 to f8E5M2
    linalg.yield %t, %t : f8E5M2, f8E5M2
  }
  memref.dealloc %x : memref<256x512xbf16>
  return
}
func.func @dact_read_after(%h: memref<256x512xbf16>, %g: memref<256x512xbf16>, %scale: memref<f32>,
                           %q: memref<256x512xf8E5M2>, %qt: memref<512x256xf8E5M2>,
                           %m: memref<f32>, %keep: memref<256x512xbf16>) attributes {llvm.emit_c_interface} {
  %x = memref.alloc() : memref<256x512xbf16>
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h, %g : memref<256x512xbf16>, memref<256x512xbf16>) outs(%x : memref<256x512xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %wa = arith.extf %a : bf16 to f32
    %wb = arith.extf %b : bf16 to f32
    %p = arith.mulf %wa, %wb : f32
    %r = arith.truncf %p : f32 to bf16
    linalg.yield %r : bf16
  }
  linalg.generic {indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<256x512xbf16>) outs(%m : memref<f32>) {
  ^bb0(%a: bf16, %acc: f32):
    %w = arith.extf %a : bf16 to f32
    %abs = math.absf %w : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  }
  linalg.generic {indexing_maps = [#id2, #all2, #id2, #tr2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %scale : memref<256x512xbf16>, memref<f32>) outs(%q, %qt : memref<256x512xf8E5M2>, memref<512x256xf8E5M2>) {
  ^bb0(%a: bf16, %s: f32, %o: f8E5M2, %ot: f8E5M2):
    %w = arith.extf %a : bf16 to f32
    %p = arith.mulf %w, %s : f32
    %t = arith.truncf %p : f32 to f8E5M2
    linalg.yield %t, %t : f8E5M2, f8E5M2
  }
  memref.copy %x, %keep : memref<256x512xbf16> to memref<256x512xbf16>
  memref.dealloc %x : memref<256x512xbf16>
  return
}

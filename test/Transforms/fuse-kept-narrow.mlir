// RUN: ds-opt %s --pass-pipeline="builtin.module(func.func(ds-fuse-elementwise))" | FileCheck %s

// A value a policy keeps narrow (`storage: bf16`) is rounded once and read
// widened. ds-fuse-elementwise makes its producer write the narrow tensor
// and its readers widen it, wherever the readers allow.

#id2 = affine_map<(i, j) -> (i, j)>
#id3 = affine_map<(b, t, n) -> (b, t, n)>
#all3 = affine_map<(b, t, n) -> ()>

// The GELU's output rounded twice, for the next GEMM ([B, T, F]) and,
// flattened to [B*T, F], for its weight gradient: one rounding, fused into
// the GELU, which writes bf16; the flattening reshapes the bf16 tensor.
// CHECK-LABEL: func.func @rounded_twice
// CHECK:      %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x3x8xbf16>)
// CHECK:        math.tanh
// CHECK:        arith.truncf {{.*}} : f32 to bf16
// CHECK-NOT:  linalg.generic
// CHECK:      %[[F:.*]] = tensor.collapse_shape %[[G]] {{.*}} into tensor<6x8xbf16>
// CHECK:      return %[[G]], %[[F]]
func.func @rounded_twice(%x: tensor<2x3x8xf32>) -> (tensor<2x3x8xbf16>, tensor<6x8xbf16>) {
  %e = tensor.empty() : tensor<2x3x8xf32>
  %g = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x3x8xf32>) outs(%e : tensor<2x3x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<2x3x8xf32>
  %ne = tensor.empty() : tensor<2x3x8xbf16>
  %r = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g : tensor<2x3x8xf32>) outs(%ne : tensor<2x3x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x3x8xbf16>
  %f = tensor.collapse_shape %g [[0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
  %fe = tensor.empty() : tensor<6x8xbf16>
  %fr = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%f : tensor<6x8xf32>) outs(%fe : tensor<6x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<6x8xbf16>
  return %r, %fr : tensor<2x3x8xbf16>, tensor<6x8xbf16>
}

// An FP8 policy's GELU output, kept in bf16 and read widened by its amax,
// its scaled cast and (flattened) the weight gradient's cast: the GELU
// writes bf16, the widening moves past the reshape, and every reader
// widens the bf16 element itself.
// CHECK-LABEL: func.func @widened_readers
// CHECK:      %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x3x8xbf16>)
// CHECK:        math.tanh
// CHECK:        %[[R:.*]] = arith.truncf {{.*}} : f32 to bf16
// CHECK-NEXT:   linalg.yield %[[R]] : bf16
// CHECK:      linalg.generic {{.*}} ins(%[[G]] : tensor<2x3x8xbf16>) outs(%{{.*}} : tensor<f32>)
// CHECK:        arith.extf
// CHECK:        math.absf
// CHECK:      linalg.generic {{.*}} ins(%[[G]], %{{.*}} : tensor<2x3x8xbf16>, tensor<f32>)
// CHECK:        arith.extf
// CHECK:      %[[F:.*]] = tensor.collapse_shape %[[G]] {{.*}} into tensor<6x8xbf16>
// CHECK:      linalg.generic {{.*}} ins(%[[F]], %{{.*}} : tensor<6x8xbf16>, tensor<f32>)
// CHECK:        arith.extf
func.func @widened_readers(%x: tensor<2x3x8xf32>, %s: tensor<f32>)
    -> (tensor<f32>, tensor<2x3x8xf8E4M3FN>, tensor<6x8xf8E4M3FN>) {
  %e = tensor.empty() : tensor<2x3x8xf32>
  %g = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x3x8xf32>) outs(%e : tensor<2x3x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<2x3x8xf32>
  %ne = tensor.empty() : tensor<2x3x8xbf16>
  %r = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g : tensor<2x3x8xf32>) outs(%ne : tensor<2x3x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x3x8xbf16>
  %w = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r : tensor<2x3x8xbf16>) outs(%e : tensor<2x3x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<2x3x8xf32>
  %a = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%w : tensor<2x3x8xf32>) outs(%e : tensor<2x3x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.absf %in : f32
    linalg.yield %0 : f32
  } -> tensor<2x3x8xf32>
  %zero = arith.constant 0.0 : f32
  %z = tensor.empty() : tensor<f32>
  %zf = linalg.fill ins(%zero : f32) outs(%z : tensor<f32>) -> tensor<f32>
  %amax = linalg.generic {indexing_maps = [#id3, #all3], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%a : tensor<2x3x8xf32>) outs(%zf : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<f32>
  %qe = tensor.empty() : tensor<2x3x8xf8E4M3FN>
  %q = linalg.generic {indexing_maps = [#id3, #all3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%w, %s : tensor<2x3x8xf32>, tensor<f32>) outs(%qe : tensor<2x3x8xf8E4M3FN>) {
  ^bb0(%in: f32, %sc: f32, %out: f8E4M3FN):
    %0 = arith.mulf %in, %sc : f32
    %1 = arith.truncf %0 : f32 to f8E4M3FN
    linalg.yield %1 : f8E4M3FN
  } -> tensor<2x3x8xf8E4M3FN>
  %f = tensor.collapse_shape %w [[0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
  %fe = tensor.empty() : tensor<6x8xf8E4M3FN>
  %fq = linalg.generic {indexing_maps = [#id2, affine_map<(i, j) -> ()>, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%f, %s : tensor<6x8xf32>, tensor<f32>) outs(%fe : tensor<6x8xf8E4M3FN>) {
  ^bb0(%in: f32, %sc: f32, %out: f8E4M3FN):
    %0 = arith.mulf %in, %sc : f32
    %1 = arith.truncf %0 : f32 to f8E4M3FN
    linalg.yield %1 : f8E4M3FN
  } -> tensor<6x8xf8E4M3FN>
  return %amax, %q, %fq : tensor<f32>, tensor<2x3x8xf8E4M3FN>, tensor<6x8xf8E4M3FN>
}

// Where a reader needs the widened tensor in memory (here the function's
// result), the widening stays with the producer: one f32 tensor written,
// not a bf16 one and an f32 one.
// CHECK-LABEL: func.func @widened_needed
// CHECK:      %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x3x8xf32>)
// CHECK:        math.tanh
// CHECK:        arith.truncf
// CHECK:        arith.extf
// CHECK:      return %[[G]]
func.func @widened_needed(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %e = tensor.empty() : tensor<2x3x8xf32>
  %g = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<2x3x8xf32>) outs(%e : tensor<2x3x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<2x3x8xf32>
  %ne = tensor.empty() : tensor<2x3x8xbf16>
  %r = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g : tensor<2x3x8xf32>) outs(%ne : tensor<2x3x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  } -> tensor<2x3x8xbf16>
  %w = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r : tensor<2x3x8xbf16>) outs(%e : tensor<2x3x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<2x3x8xf32>
  return %w : tensor<2x3x8xf32>
}

// Attention's context: a batched GEMM's bf16 result read widened through
// the head merge (a transpose and a reshape) by an amax and a scaled FP8
// cast. The transpose moves the bf16 tensor, and each reader widens the
// element it loads; no f32 tensor is left.
// CHECK-LABEL: func.func @widened_through_transpose
// CHECK:      %[[T:.*]] = linalg.transpose ins(%{{.*}} : tensor<2x4x3x8xbf16>) outs(%{{.*}} : tensor<2x3x4x8xbf16>)
// CHECK:      linalg.generic {{.*}} ins(%[[T]] : tensor<2x3x4x8xbf16>) outs(%{{.*}} : tensor<f32>)
// CHECK:        arith.extf
// CHECK:        math.absf
// CHECK:      %[[F:.*]] = tensor.collapse_shape %[[T]] {{.*}} into tensor<2x3x32xbf16>
// CHECK:      linalg.generic {{.*}} ins(%[[F]], %{{.*}} : tensor<2x3x32xbf16>, tensor<f32>)
// CHECK:        arith.extf
// CHECK-NOT:  tensor<2x3x4x8xf32>
// CHECK:      return
#id4 = affine_map<(b, h, t, d) -> (b, h, t, d)>
#all4 = affine_map<(b, h, t, d) -> ()>
#all3b = affine_map<(b, t, n) -> ()>
func.func @widened_through_transpose(%p: tensor<2x4x3x8xbf16>, %s: tensor<f32>)
    -> (tensor<f32>, tensor<2x3x32xf8E4M3FN>) {
  %e = tensor.empty() : tensor<2x4x3x8xf32>
  %w = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%p : tensor<2x4x3x8xbf16>) outs(%e : tensor<2x4x3x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<2x4x3x8xf32>
  %te = tensor.empty() : tensor<2x3x4x8xf32>
  %t = linalg.transpose ins(%w : tensor<2x4x3x8xf32>) outs(%te : tensor<2x3x4x8xf32>) permutation = [0, 2, 1, 3]
  %zero = arith.constant 0.0 : f32
  %z = tensor.empty() : tensor<f32>
  %zf = linalg.fill ins(%zero : f32) outs(%z : tensor<f32>) -> tensor<f32>
  %amax = linalg.generic {indexing_maps = [#id4, #all4], iterator_types = ["reduction", "reduction", "reduction", "reduction"]}
      ins(%t : tensor<2x3x4x8xf32>) outs(%zf : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.absf %in : f32
    %1 = arith.maximumf %0, %out : f32
    linalg.yield %1 : f32
  } -> tensor<f32>
  %f = tensor.collapse_shape %t [[0], [1], [2, 3]] : tensor<2x3x4x8xf32> into tensor<2x3x32xf32>
  %qe = tensor.empty() : tensor<2x3x32xf8E4M3FN>
  %q = linalg.generic {indexing_maps = [#id3, #all3b, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%f, %s : tensor<2x3x32xf32>, tensor<f32>) outs(%qe : tensor<2x3x32xf8E4M3FN>) {
  ^bb0(%in: f32, %sc: f32, %out: f8E4M3FN):
    %0 = arith.mulf %in, %sc : f32
    %1 = arith.truncf %0 : f32 to f8E4M3FN
    linalg.yield %1 : f8E4M3FN
  } -> tensor<2x3x32xf8E4M3FN>
  return %amax, %q : tensor<f32>, tensor<2x3x32xf8E4M3FN>
}

// A transposed widening that a reader needs in memory (the return) stays
// where it is: the transpose moves f32.
// CHECK-LABEL: func.func @transposed_widening_needed
// CHECK:      %[[W:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4x3x8xf32>)
// CHECK:        arith.extf
// CHECK:      linalg.transpose ins(%[[W]] : tensor<2x4x3x8xf32>)
func.func @transposed_widening_needed(%p: tensor<2x4x3x8xbf16>) -> tensor<2x3x4x8xf32> {
  %e = tensor.empty() : tensor<2x4x3x8xf32>
  %w = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%p : tensor<2x4x3x8xbf16>) outs(%e : tensor<2x4x3x8xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %0 = arith.extf %in : bf16 to f32
    linalg.yield %0 : f32
  } -> tensor<2x4x3x8xf32>
  %te = tensor.empty() : tensor<2x3x4x8xf32>
  %t = linalg.transpose ins(%w : tensor<2x4x3x8xf32>) outs(%te : tensor<2x3x4x8xf32>) permutation = [0, 2, 1, 3]
  return %t : tensor<2x3x4x8xf32>
}

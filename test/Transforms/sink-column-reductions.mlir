// RUN: ds-opt %s --pass-pipeline='builtin.module(func.func(ds-sink-column-reductions))' --split-input-file | FileCheck %s
// RUN: ds-opt %s --pass-pipeline='builtin.module(func.func(ds-sink-column-reductions),one-shot-bufferize{bufferize-function-boundaries})' --split-input-file | FileCheck %s --check-prefix=BUF
// RUN: ds-opt %s --pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries})' --split-input-file | FileCheck %s --check-prefix=INPLACE

// A layer norm's gradient: the weight and bias gradients (column sums of
// the cotangent %dy) come before the input gradient, which reads %dy and
// the rows' statistic %r. They move after it, in their order. Bufferized,
// the input gradient then writes a buffer of its own; without the pass it
// overwrites %dy's (both are computed into the same tensor.empty), which
// keeps it out of the statistics' row group on the GPU.
// CHECK-LABEL: func.func @layer_norm_grad
// CHECK:         %[[DY:.*]] = linalg.generic
// CHECK:         %[[DX:.*]] = linalg.generic {{.*}}ins(%[[DY]], %arg2 :
// CHECK:         %[[DW:.*]] = linalg.generic {{.*}}ins(%[[DY]], %arg1 :
// CHECK:         %[[DB:.*]] = linalg.generic {{.*}}ins(%[[DY]] :
// CHECK:         return %[[DX]], %[[DW]], %[[DB]]
// BUF-LABEL: func.func @layer_norm_grad
// BUF:         %[[DX:.*]] = memref.alloc() {{.*}} : memref<64x128xf32>
// BUF:         %[[DY:.*]] = memref.alloc() {{.*}} : memref<64x128xf32>
// BUF:         linalg.generic {{.*}} outs(%[[DY]] :
// BUF:         linalg.generic {{.*}} ins(%[[DY]], %arg2 : {{.*}}) outs(%[[DX]] :
// BUF:         linalg.generic {{.*}} ins(%[[DY]], %arg1 :
// INPLACE-LABEL: func.func @layer_norm_grad
// INPLACE:         %[[A:.*]] = memref.alloc() {{.*}} : memref<64x128xf32>
// INPLACE-NOT:     memref.alloc() {{.*}} : memref<64x128xf32>
// INPLACE:         linalg.generic {{.*}} ins(%[[A]], %arg2 : {{.*}}) outs(%[[A]] :
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
func.func @layer_norm_grad(%g: tensor<64x128xf32>, %xhat: tensor<64x128xf32>, %r: tensor<64xf32>)
    -> (tensor<64x128xf32>, tensor<128xf32>, tensor<128xf32>) {
  %zero = arith.constant 0.0 : f32
  %ex = tensor.empty() : tensor<64x128xf32>
  %dy = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<64x128xf32>) outs(%ex : tensor<64x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.addf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<64x128xf32>
  %e = tensor.empty() : tensor<128xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<128xf32>) -> tensor<128xf32>
  %dw = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %xhat : tensor<64x128xf32>, tensor<64x128xf32>) outs(%z : tensor<128xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<128xf32>
  %db = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<64x128xf32>) outs(%z : tensor<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<128xf32>
  %dx = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %r : tensor<64x128xf32>, tensor<64xf32>) outs(%ex : tensor<64x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<64x128xf32>
  return %dx, %dw, %db : tensor<64x128xf32>, tensor<128xf32>, tensor<128xf32>
}

// -----

// What stays: a reader that uses the column sum, a cast-transpose (a
// transposed output: the column sum joins its tiles instead), and a reader
// without a value per row.
// CHECK-LABEL: func.func @stays
// CHECK:         %[[DB:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// CHECK:         linalg.generic {{.*}}ins(%arg0, %[[DB]] :
// CHECK:         linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// CHECK:         linalg.generic {{.*}}outs(%{{.*}}, %{{.*}} : tensor<64x128xbf16>, tensor<128x64xbf16>)
// CHECK:         linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// CHECK:         linalg.generic {{.*}}ins(%arg0 : tensor<64x128xf32>)
// CHECK:         return
#id = affine_map<(i, j) -> (i, j)>
#tr = affine_map<(i, j) -> (j, i)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
func.func @stays(%dy: tensor<64x128xf32>, %r: tensor<64xf32>)
    -> (tensor<64x128xf32>, tensor<64x128xbf16>, tensor<128x64xbf16>, tensor<64x128xf32>, tensor<128xf32>, tensor<128xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<128xf32>) -> tensor<128xf32>
  %ex = tensor.empty() : tensor<64x128xf32>
  %db = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<64x128xf32>) outs(%z : tensor<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<128xf32>
  %u = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %db : tensor<64x128xf32>, tensor<128xf32>) outs(%ex : tensor<64x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<64x128xf32>
  %db2 = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<64x128xf32>) outs(%z : tensor<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<128xf32>
  %eq = tensor.empty() : tensor<64x128xbf16>
  %eqt = tensor.empty() : tensor<128x64xbf16>
  %q:2 = linalg.generic {indexing_maps = [#id, #row, #id, #tr], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %r : tensor<64x128xf32>, tensor<64xf32>) outs(%eq, %eqt : tensor<64x128xbf16>, tensor<128x64xbf16>) {
  ^bb0(%a: f32, %b: f32, %o: bf16, %ot: bf16):
    %m = arith.mulf %a, %b : f32
    %t = arith.truncf %m : f32 to bf16
    linalg.yield %t, %t : bf16, bf16
  } -> (tensor<64x128xbf16>, tensor<128x64xbf16>)
  %db3 = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<64x128xf32>) outs(%z : tensor<128xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<128xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy : tensor<64x128xf32>) outs(%ex : tensor<64x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<64x128xf32>
  return %u, %q#0, %q#1, %n, %db2, %db3 : tensor<64x128xf32>, tensor<64x128xbf16>, tensor<128x64xbf16>, tensor<64x128xf32>, tensor<128xf32>, tensor<128xf32>
}

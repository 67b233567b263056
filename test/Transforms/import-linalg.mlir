// RUN: ds-opt %s --allow-unregistered-dialect --ds-import-linalg 2>/dev/null | FileCheck %s
// RUN: ds-opt %s --allow-unregistered-dialect --ds-import-linalg 2>&1 >/dev/null | FileCheck %s --check-prefix=REPORT
// RUN: ds-opt %s --allow-unregistered-dialect --ds-import-linalg="func=step args=param:w,param:b,input:x,input:labels results=loss" 2>/dev/null | FileCheck %s --check-prefix=CONTRACT

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#col0 = affine_map<(d0, d1) -> (d0, 0)>
#d0 = affine_map<(d0, d1) -> (d0)>
#id1 = affine_map<(d0) -> (d0)>
#scalar1 = affine_map<(d0) -> ()>

// The exporter's form: generic ops, printed generically. A bias broadcast
// along rows (map (d1)) becomes a reshape to 1xN and a broadcasting add.
// CHECK-LABEL: func @bias_add
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[R:.*]] = ds.reshape %[[B]] : tensor<8xf32> -> tensor<1x8xf32>
// CHECK: %[[S:.*]] = ds.add %[[X]], %[[R]] : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
// CHECK: return %[[S]]
"func.func"() <{function_type = (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>, sym_name = "bias_add"}> ({
^bb0(%x: tensor<4x8xf32>, %b: tensor<8xf32>):
  %e = "tensor.empty"() : () -> tensor<4x8xf32>
  %r = "linalg.generic"(%x, %b, %e) <{indexing_maps = [#id2, #row, #id2], iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>], operandSegmentSizes = array<i32: 2, 1>}> ({
  ^bb0(%in: f32, %in1: f32, %out: f32):
    %s = "arith.addf"(%in, %in1) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    "linalg.yield"(%s) : (f32) -> ()
  }) : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  "func.return"(%r) : (tensor<4x8xf32>) -> ()
}) : () -> ()

// Captured scalar constants become rank-0 tensors; cmpf ugt + select is a
// select on the negated ordered comparison (le), operands swapped.
// CHECK-LABEL: func @relu_scaled
// CHECK: %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[LE:.*]] = ds.compare le, %{{.*}}, %[[Z]]
// CHECK: %[[SEL:.*]] = ds.select %[[LE]], %[[Z]], %{{.*}} :
// CHECK: %[[H:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: ds.mul %[[SEL]], %[[H]]
func.func @relu_scaled(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %p = arith.cmpf ugt, %in, %c0 : f32
    %s = arith.select %p, %in, %c0 : f32
    %m = arith.mulf %s, %half : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// torch-mlir's exact GELU body is one ds.gelu.
// CHECK-LABEL: func @gelu
// CHECK: ds.gelu %{{.*}} : tensor<4x8xf64>
// CHECK-NOT: ds.mul
func.func @gelu(%x: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %sqrt2 = arith.constant 1.4142135623730951 : f64
  %one = arith.constant 1.0 : f64
  %half = arith.constant 0.5 : f64
  %e = tensor.empty() : tensor<4x8xf64>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf64>) outs(%e : tensor<4x8xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.divf %in, %sqrt2 : f64
    %1 = math.erf %0 : f64
    %2 = arith.addf %1, %one : f64
    %3 = arith.mulf %2, %half : f64
    %4 = arith.mulf %in, %3 : f64
    linalg.yield %4 : f64
  } -> tensor<4x8xf64>
  return %r : tensor<4x8xf64>
}

// A keep-dim sum (output map (d0, 0)) from a zero fill; the max of an
// argmax generic whose index result is unused.
// CHECK-LABEL: func @reductions
// CHECK: %[[S:.*]] = ds.reduce_sum %{{.*}} [1] keep_dims : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK: %[[M:.*]] = ds.reduce_max %{{.*}} [1] keep_dims : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK: %[[MR:.*]] = ds.reshape %[[M]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK: return %[[S]], %[[MR]]
func.func @reductions(%x: tensor<4x8xf32>) -> (tensor<4x1xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %i0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<4x1xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = linalg.generic {indexing_maps = [#id2, #col0], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%z : tensor<4x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<4x1xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %ei = tensor.empty() : tensor<4xi64>
  %i00 = linalg.fill ins(%i0 : i64) outs(%ei : tensor<4xi64>) -> tensor<4xi64>
  %m:2 = linalg.generic {indexing_maps = [#id2, #d0, #d0], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%m0, %i00 : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%in: f32, %out: f32, %oi: i64):
    %k = linalg.index 1 : index
    %ki = arith.index_cast %k : index to i64
    %mx = arith.maximumf %in, %out : f32
    %gt = arith.cmpf ogt, %in, %out : f32
    %sel = arith.select %gt, %ki, %oi : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %s, %m#0 : tensor<4x1xf32>, tensor<4xf32>
}

// A transpose feeding a matmul becomes its transpose flag; the zero fill
// and the transpose vanish.
// CHECK-LABEL: func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<16x8xf32>)
// CHECK: ds.matmul %[[X]], %[[W]] transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
// CHECK-NOT: linalg.
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %c0 = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<8x16xf32>
  %wt = linalg.transpose ins(%w : tensor<16x8xf32>) outs(%et : tensor<8x16xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul ins(%x, %wt : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// Attention's reshapes, head transpose and batched matmul.
// CHECK-LABEL: func @heads
// CHECK: %[[E:.*]] = ds.reshape %{{.*}} : tensor<8x16xf32> -> tensor<2x4x2x8xf32>
// CHECK: %[[T:.*]] = ds.transpose %[[E]] [0, 2, 1, 3] : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
// CHECK: %[[C:.*]] = ds.reshape %[[T]] : tensor<2x2x4x8xf32> -> tensor<4x4x8xf32>
// CHECK: ds.matmul %[[C]], %[[C]] transpose_rhs : tensor<4x4x8xf32>, tensor<4x4x8xf32> -> tensor<4x4x4xf32>
func.func @heads(%x: tensor<8x16xf32>) -> tensor<4x4x4xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.expand_shape %x [[0, 1], [2, 3]] output_shape [2, 4, 2, 8] : tensor<8x16xf32> into tensor<2x4x2x8xf32>
  %et = tensor.empty() : tensor<2x2x4x8xf32>
  %t = linalg.transpose ins(%e : tensor<2x4x2x8xf32>) outs(%et : tensor<2x2x4x8xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %t [[0, 1], [2], [3]] : tensor<2x2x4x8xf32> into tensor<4x4x8xf32>
  %ek = tensor.empty() : tensor<4x8x4xf32>
  %k = linalg.transpose ins(%c : tensor<4x4x8xf32>) outs(%ek : tensor<4x8x4xf32>) permutation = [0, 2, 1]
  %eo = tensor.empty() : tensor<4x4x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%eo : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  %s = linalg.batch_matmul ins(%c, %k : tensor<4x4x8xf32>, tensor<4x8x4xf32>) outs(%z : tensor<4x4x4xf32>) -> tensor<4x4x4xf32>
  return %s : tensor<4x4x4xf32>
}

// nll_loss's gather of the target logit: a one-hot selection and sum. The
// index range asserts go with it.
// CHECK-LABEL: func @target_logit
// CHECK-SAME: (%[[L:.*]]: tensor<4x10xf32>, %[[Y:.*]]: tensor<4x1xi64>)
// CHECK-DAG: %[[IOTA:.*]] = arith.constant dense<{{\[\[\[}}0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]]> : tensor<1x1x10xi64>
// CHECK-DAG: %[[YE:.*]] = ds.reshape %[[Y]] : tensor<4x1xi64> -> tensor<4x1x1xi64>
// CHECK: %[[HOT:.*]] = ds.compare eq, %[[YE]], %[[IOTA]]
// CHECK: %[[LE:.*]] = ds.reshape %[[L]] : tensor<4x10xf32> -> tensor<4x1x10xf32>
// CHECK: %[[P:.*]] = ds.select %[[HOT]], %[[LE]], %{{.*}} : tensor<4x1x10xi1>, tensor<4x1x10xf32>, tensor<f32> -> tensor<4x1x10xf32>
// CHECK: ds.reduce_sum %[[P]] [2] : tensor<4x1x10xf32> -> tensor<4x1xf32>
// CHECK-NOT: cf.assert
func.func @target_logit(%logp: tensor<4x10xf32>, %y: tensor<4x1xi64>) -> tensor<4x1xf32> {
  %c10 = arith.constant 10 : index
  %e = tensor.empty() : tensor<4x1xf32>
  %r = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x1xi64>) outs(%e : tensor<4x1xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = linalg.index 0 : index
    %j = arith.index_cast %in : i64 to index
    %ok = arith.cmpi slt, %j, %c10 : index
    cf.assert %ok, "index must be smaller than dim size"
    %v = tensor.extract %logp[%i, %j] : tensor<4x10xf32>
    linalg.yield %v : f32
  } -> tensor<4x1xf32>
  return %r : tensor<4x1xf32>
}

// The embedding lookup of token ids.
// CHECK-LABEL: func @embedding
// CHECK: ds.embedding %{{.*}}, %{{.*}} : tensor<32x16xf32>, tensor<2x4xi64> -> tensor<2x4x16xf32>
// CHECK-NOT: tensor.extract
func.func @embedding(%table: tensor<32x16xf32>, %tok: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %e = tensor.empty() : tensor<2x4x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%tok : tensor<2x4xi64>) outs(%e : tensor<2x4x16xf32>) {
  ^bb0(%in: i64, %out: f32):
    %i = arith.index_cast %in : i64 to index
    %d = linalg.index 2 : index
    %v = tensor.extract %table[%i, %d] : tensor<32x16xf32>
    linalg.yield %v : f32
  } -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// Convolution: the zero pad is its padding, the broadcast accumulator its
// bias. Max pooling from a -inf fill. A standalone constant pad becomes an
// insert_slice into a constant.
// CHECK-LABEL: func @conv_pool
// CHECK-SAME: (%[[X:.*]]: tensor<2x1x8x8xf32>, %[[W:.*]]: tensor<4x1x3x3xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK: %[[C:.*]] = ds.conv2d %[[X]], %[[W]], %[[B]] padding = [1, 1] : tensor<2x1x8x8xf32>, tensor<4x1x3x3xf32>, tensor<4xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[P:.*]] = ds.max_pool2d %[[C]] kernel = [2, 2] strides = [2, 2] : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
// CHECK: ds.insert_slice %[[P]] into %{{.*}} offsets [0, 0, 1, 1] : tensor<2x4x4x4xf32> into tensor<2x4x6x6xf32>
// CHECK-NOT: linalg.
// CHECK-NOT: tensor.pad
func.func @conv_pool(%x: tensor<2x1x8x8xf32>, %w: tensor<4x1x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x6x6xf32> {
  %c0 = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %c0 : f32
  } : tensor<2x1x8x8xf32> to tensor<2x1x10x10xf32>
  %e = tensor.empty() : tensor<2x4x8x8xf32>
  %bb = linalg.broadcast ins(%b : tensor<4xf32>) outs(%e : tensor<2x4x8x8xf32>) dimensions = [0, 2, 3]
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%p, %w : tensor<2x1x10x10xf32>, tensor<4x1x3x3xf32>) outs(%bb : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %ep = tensor.empty() : tensor<2x4x4x4xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%ep : tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %win = tensor.empty() : tensor<2x2xf32>
  %m = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
      ins(%c, %win : tensor<2x4x8x8xf32>, tensor<2x2xf32>) outs(%f : tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %q = tensor.pad %m low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %c0 : f32
  } : tensor<2x4x4x4xf32> to tensor<2x4x6x6xf32>
  return %q : tensor<2x4x6x6xf32>
}

// x.pow(n) as torch-mlir prints it (generic form, captured i64 exponent):
// products of x, the reciprocal of one for a negative n, 1 for n = 0.
// CHECK-LABEL: func @fpowi
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf64>)
// CHECK: %[[SQ:.*]] = ds.mul %[[X]], %[[X]] : tensor<4x8xf64>, tensor<4x8xf64> -> tensor<4x8xf64>
// CHECK: %[[SQ2:.*]] = ds.mul %[[X]], %[[X]]
// CHECK: %[[CUBE:.*]] = ds.mul %[[X]], %[[SQ2]]
// CHECK: %[[SQ3:.*]] = ds.mul %[[X]], %[[X]]
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f64>
// CHECK: %[[INV:.*]] = ds.div %[[ONE]], %[[SQ3]] : tensor<f64>, tensor<4x8xf64> -> tensor<4x8xf64>
// CHECK: %[[ONES:.*]] = arith.constant dense<1.000000e+00> : tensor<f64>
// CHECK: %[[B:.*]] = ds.broadcast %[[ONES]] {{.*}} -> tensor<4x8xf64>
// CHECK: return %[[SQ]], %[[CUBE]], %[[INV]], %[[B]]
"func.func"() <{function_type = (tensor<4x8xf64>) -> (tensor<4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>), sym_name = "fpowi"}> ({
^bb0(%x: tensor<4x8xf64>):
  %c2 = "arith.constant"() <{value = 2 : i64}> : () -> i64
  %c3 = "arith.constant"() <{value = 3 : i64}> : () -> i64
  %cm2 = "arith.constant"() <{value = -2 : i64}> : () -> i64
  %c0 = "arith.constant"() <{value = 0 : i64}> : () -> i64
  %e = "tensor.empty"() : () -> tensor<4x8xf64>
  %r2 = "linalg.generic"(%x, %e) <{indexing_maps = [#id2, #id2], iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>], operandSegmentSizes = array<i32: 1, 1>}> ({
  ^bb0(%in: f64, %out: f64):
    %p = "math.fpowi"(%in, %c2) <{fastmath = #arith.fastmath<none>}> : (f64, i64) -> f64
    "linalg.yield"(%p) : (f64) -> ()
  }) : (tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  %r3 = "linalg.generic"(%x, %e) <{indexing_maps = [#id2, #id2], iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>], operandSegmentSizes = array<i32: 1, 1>}> ({
  ^bb0(%in: f64, %out: f64):
    %p = "math.fpowi"(%in, %c3) <{fastmath = #arith.fastmath<none>}> : (f64, i64) -> f64
    "linalg.yield"(%p) : (f64) -> ()
  }) : (tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  %rm2 = "linalg.generic"(%x, %e) <{indexing_maps = [#id2, #id2], iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>], operandSegmentSizes = array<i32: 1, 1>}> ({
  ^bb0(%in: f64, %out: f64):
    %p = "math.fpowi"(%in, %cm2) <{fastmath = #arith.fastmath<none>}> : (f64, i64) -> f64
    "linalg.yield"(%p) : (f64) -> ()
  }) : (tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  %r0 = "linalg.generic"(%x, %e) <{indexing_maps = [#id2, #id2], iterator_types = [#linalg.iterator_type<parallel>, #linalg.iterator_type<parallel>], operandSegmentSizes = array<i32: 1, 1>}> ({
  ^bb0(%in: f64, %out: f64):
    %p = "math.fpowi"(%in, %c0) <{fastmath = #arith.fastmath<none>}> : (f64, i64) -> f64
    "linalg.yield"(%p) : (f64) -> ()
  }) : (tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<4x8xf64>
  "func.return"(%r2, %r3, %rm2, %r0) : (tensor<4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>) -> ()
}) : () -> ()

// powf: a constant 0.5 / -0.5 is sqrt / rsqrt, an integral one a product
// (constants in the body as well as captured); any other exponent
// exp(y log x) (x > 0).
// CHECK-LABEL: func @powf
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x8xf32>)
// CHECK: %[[S:.*]] = ds.sqrt %[[X]]
// CHECK: %[[RS:.*]] = ds.rsqrt %[[X]]
// CHECK: %[[SQ:.*]] = ds.mul %[[X]], %[[X]]
// CHECK: %[[L:.*]] = ds.log %[[X]]
// CHECK: %[[YL:.*]] = ds.mul %[[Y]], %[[L]]
// CHECK: %[[P:.*]] = ds.exp %[[YL]]
// CHECK: return %[[S]], %[[RS]], %[[SQ]], %[[P]]
func.func @powf(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %half = arith.constant 0.5 : f32
  %mhalf = arith.constant -0.5 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %r0, %r1, %r2, %r3 = linalg.generic {indexing_maps = [#id2, #id2, #id2, #id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e, %e, %e, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%in: f32, %iny: f32, %o0: f32, %o1: f32, %o2: f32, %o3: f32):
    %two = arith.constant 2.0 : f32
    %s = math.powf %in, %half : f32
    %rs = math.powf %in, %mhalf : f32
    %sq = math.powf %in, %two : f32
    %p = math.powf %in, %iny : f32
    linalg.yield %s, %rs, %sq, %p : f32, f32, f32, f32
  } -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return %r0, %r1, %r2, %r3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// exp2 = exp(x ln 2); fma = x*y + z; rsqrt; log1p and expm1 with Kahan's
// correction for |x| < 1.
// CHECK-LABEL: func @math_compositions
// CHECK-SAME: (%[[X:.*]]: tensor<8xf64>, %[[Y:.*]]: tensor<8xf64>, %[[Z:.*]]: tensor<8xf64>)
// CHECK: %[[LN2:.*]] = arith.constant dense<0.69314718055994529> : tensor<f64>
// CHECK: %[[XL:.*]] = ds.mul %[[X]], %[[LN2]]
// CHECK: %[[E2:.*]] = ds.exp %[[XL]]
// CHECK: %[[XY:.*]] = ds.mul %[[X]], %[[Y]]
// CHECK: %[[F:.*]] = ds.add %[[XY]], %[[Z]]
// CHECK: %[[R:.*]] = ds.rsqrt %[[X]]
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<f64>
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<f64>
// CHECK: %[[A:.*]] = ds.abs %[[X]]
// CHECK: %[[LT:.*]] = ds.compare lt, %[[A]], %[[ONE]]
// CHECK: %[[U:.*]] = ds.add %[[ONE]], %[[X]]
// CHECK: %[[LU:.*]] = ds.log %[[U]]
// The corrected side sees 0 where it is not taken, and a denominator of 1
// where 1 + x rounds to 1, so its gradient is never 0 / 0.
// CHECK: %[[XS:.*]] = ds.select %[[LT]], %[[X]], %[[ZERO]]
// CHECK: %[[US:.*]] = ds.add %[[ONE]], %[[XS]]
// CHECK: %[[LUS:.*]] = ds.log %[[US]]
// CHECK: %[[UM1:.*]] = ds.sub %[[US]], %[[ONE]]
// CHECK: %[[EQ:.*]] = ds.compare eq, %[[US]], %[[ONE]]
// CHECK: %[[DEN:.*]] = ds.select %[[EQ]], %[[ONE]], %[[UM1]]
// CHECK: %[[Q:.*]] = ds.div %[[XS]], %[[DEN]]
// CHECK: %[[C:.*]] = ds.mul %[[LUS]], %[[Q]]
// CHECK: %[[SM:.*]] = ds.select %[[EQ]], %[[XS]], %[[C]]
// CHECK: %[[L1P:.*]] = ds.select %[[LT]], %[[SM]], %[[LU]]
// CHECK: %[[EU:.*]] = ds.exp %[[X]]
// CHECK: %[[EM:.*]] = ds.sub %[[EU]], %{{.*}}
// CHECK: ds.exp
// CHECK: ds.log
// CHECK: %[[EM1:.*]] = ds.select %{{.*}}, %{{.*}}, %[[EM]]
// CHECK: return %[[E2]], %[[F]], %[[R]], %[[L1P]], %[[EM1]]
func.func @math_compositions(%x: tensor<8xf64>, %y: tensor<8xf64>, %z: tensor<8xf64>) -> (tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>) {
  %e = tensor.empty() : tensor<8xf64>
  %r:5 = linalg.generic {indexing_maps = [#id1, #id1, #id1, #id1, #id1, #id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%x, %y, %z : tensor<8xf64>, tensor<8xf64>, tensor<8xf64>) outs(%e, %e, %e, %e, %e : tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>) {
  ^bb0(%a: f64, %b: f64, %c: f64, %o0: f64, %o1: f64, %o2: f64, %o3: f64, %o4: f64):
    %0 = math.exp2 %a : f64
    %1 = math.fma %a, %b, %c : f64
    %2 = math.rsqrt %a : f64
    %3 = math.log1p %a : f64
    %4 = math.expm1 %a : f64
    linalg.yield %0, %1, %2, %3, %4 : f64, f64, f64, f64, f64
  } -> (tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>)
  return %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>, tensor<8xf64>
}

// An integer power with an exponent read from a tensor (exp(y log x) would
// be NaN for x < 0) and ops ds has no composition for stay upstream.
// CHECK-LABEL: func @negative_pow_and_trig
// CHECK: math.fpowi
// CHECK: math.sin
func.func @negative_pow_and_trig(%x: tensor<8xf64>, %n: tensor<8xi32>) -> (tensor<8xf64>, tensor<8xf64>) {
  %e = tensor.empty() : tensor<8xf64>
  %p = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%x, %n : tensor<8xf64>, tensor<8xi32>) outs(%e : tensor<8xf64>) {
  ^bb0(%a: f64, %k: i32, %o: f64):
    %0 = math.fpowi %a, %k : f64, i32
    linalg.yield %0 : f64
  } -> tensor<8xf64>
  %s = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf64>) outs(%e : tensor<8xf64>) {
  ^bb0(%a: f64, %o: f64):
    %0 = math.sin %a : f64
    linalg.yield %0 : f64
  } -> tensor<8xf64>
  return %p, %s : tensor<8xf64>, tensor<8xf64>
}

// Integer label arithmetic stays upstream; ops the pass does not know stay.
// CHECK-LABEL: func @negative_stays_upstream
// CHECK: linalg.generic
// CHECK: arith.cmpi ne
// CHECK: "other.op"
func.func @negative_stays_upstream(%y: tensor<4xi64>, %x: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xf32>) {
  %c = arith.constant -100 : i64
  %e = tensor.empty() : tensor<4xi1>
  %r = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%y : tensor<4xi64>) outs(%e : tensor<4xi1>) {
  ^bb0(%in: i64, %out: i1):
    %p = arith.cmpi ne, %in, %c : i64
    linalg.yield %p : i1
  } -> tensor<4xi1>
  %o = "other.op"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r, %o : tensor<4xi1>, tensor<4xf32>
}

// The contract from options, and the loss of a training step: mean over a
// rank-0 reduction.
// CONTRACT-LABEL: func @step
// CONTRACT-SAME: %{{.*}}: tensor<10x8xf32> {ds.init = #ds.init<file>, ds.param = "w"}
// CONTRACT-SAME: %{{.*}}: tensor<10xf32> {ds.init = #ds.init<file>, ds.param = "b"}
// CONTRACT-SAME: %{{.*}}: tensor<4x8xf32> {ds.input = "x"}
// CONTRACT-SAME: %{{.*}}: tensor<4xi64> {ds.input = "labels"}
// CONTRACT-SAME: -> (tensor<f32> {ds.loss}) attributes {ds.train_step}
// CHECK-LABEL: func @step
// CHECK: ds.reduce_sum %{{.*}} [0, 1] keep_dims : tensor<4x10xf32> -> tensor<1x1xf32>
// CHECK: ds.reshape %{{.*}} : tensor<1x1xf32> -> tensor<f32>
func.func @step(%w: tensor<10x8xf32>, %b: tensor<10xf32>, %x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %n = arith.constant 40.0 : f32
  %e = tensor.empty() : tensor<4x10xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x10xf32>) -> tensor<4x10xf32>
  %et = tensor.empty() : tensor<8x10xf32>
  %wt = linalg.transpose ins(%w : tensor<10x8xf32>) outs(%et : tensor<8x10xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%x, %wt : tensor<4x8xf32>, tensor<8x10xf32>) outs(%z : tensor<4x10xf32>) -> tensor<4x10xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [#id2, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%y : tensor<4x10xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %sq = arith.mulf %in, %in : f32
    %a = arith.addf %sq, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  %m = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%s : tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.divf %in, %n : f32
    linalg.yield %d : f32
  } -> tensor<f32>
  return %m : tensor<f32>
}

// REPORT: remark: ds-import-linalg: raised 2 of 2 ops (100.0%) into ds; left as upstream ops: none
// REPORT: remark: ds-import-linalg: raised 0 of 4 ops (0.0%) into ds; left as upstream ops: 1 arith.constant, 1 tensor.empty, 1 linalg.generic, 1 other.op

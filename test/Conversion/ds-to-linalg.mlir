// RUN: ds-opt %s --convert-ds-to-linalg --mlir-print-local-scope | FileCheck %s --implicit-check-not=ds.
// RUN: ds-opt %s --convert-ds-to-linalg | ds-opt --pass-pipeline='builtin.module(one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map})' -o /dev/null

// Structure of --convert-ds-to-linalg, one function per ds op (and the
// interesting variants). The numerics are checked by executing the lowered
// code in test/Integration/Lowering; this file checks the shape of the IR
// later passes rely on: named matmuls fed by a zero fill, broadcasts as
// affine maps, reductions with dropped dimensions, tensor shape ops. The
// second RUN line checks that the output bufferizes.

// CHECK-LABEL: func.func @add(
// CHECK-SAME:    %[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<1x8xf32>
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:      ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<1x8xf32>) outs(%[[E]] : tensor<4x8xf32>)
// CHECK:           arith.addf
// CHECK:         return %[[R]]
func.func @add(%a: tensor<4x8xf32>, %b: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.add %a, %b : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @sub_scalar(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:           arith.subf {{.*}} : f64
func.func @sub_scalar(%a: tensor<4x8xf64>, %b: tensor<f64>) -> tensor<4x8xf64> {
  %0 = ds.sub %a, %b : tensor<4x8xf64>, tensor<f64> -> tensor<4x8xf64>
  return %0 : tensor<4x8xf64>
}

// CHECK-LABEL: func.func @mul_int(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:           arith.muli {{.*}} : i64
func.func @mul_int(%a: tensor<4x1xi64>, %b: tensor<1x8xi64>) -> tensor<4x8xi64> {
  %0 = ds.mul %a, %b : tensor<4x1xi64>, tensor<1x8xi64> -> tensor<4x8xi64>
  return %0 : tensor<4x8xi64>
}

// CHECK-LABEL: func.func @div(
// CHECK:         linalg.generic
// CHECK:           arith.divf
func.func @div(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.div %a, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @maximum(
// CHECK:         linalg.generic
// CHECK:           arith.maximumf
func.func @maximum(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.maximum %a, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @minimum(
// CHECK:         linalg.generic
// CHECK:           arith.minimumf
func.func @minimum(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.minimum %a, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @broadcast(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
func.func @broadcast(%a: tensor<8x1xf32>) -> tensor<4x8x5xf32> {
  %0 = ds.broadcast %a dims = [1, 2] : tensor<8x1xf32> -> tensor<4x8x5xf32>
  return %0 : tensor<4x8x5xf32>
}

// CHECK-LABEL: func.func @relu(
// CHECK:         linalg.generic
// CHECK:           %[[P:.*]] = arith.cmpf ugt, %[[X:.*]], %[[Z:.*]] : f32
// CHECK:           arith.select %[[P]], %[[X]], %[[Z]] : f32
func.func @relu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.relu %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @silu(
// CHECK:         linalg.generic
// CHECK:           math.exp
// CHECK:           arith.select
// CHECK:           arith.mulf
func.func @silu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.silu %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @sigmoid(
// CHECK:         linalg.generic
// CHECK:           %[[ABS:.*]] = math.absf
// CHECK:           %[[NEG:.*]] = arith.negf %[[ABS]]
// CHECK:           math.exp %[[NEG]]
// CHECK:           arith.cmpf oge
// CHECK:           arith.select
func.func @sigmoid(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.sigmoid %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @tanh(
// CHECK:         linalg.generic
// CHECK:           math.tanh
func.func @tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.tanh %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @exp_bf16(
// CHECK:         linalg.generic
// CHECK:           %[[W:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:           %[[E:.*]] = math.exp %[[W]] : f32
// CHECK:           arith.truncf %[[E]] : f32 to bf16
func.func @exp_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = ds.exp %x : tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// CHECK-LABEL: func.func @log(
// CHECK:         linalg.generic
// CHECK:           math.log {{.*}} : f64
func.func @log(%x: tensor<4x8xf64>) -> tensor<4x8xf64> {
  %0 = ds.log %x : tensor<4x8xf64>
  return %0 : tensor<4x8xf64>
}

// CHECK-LABEL: func.func @sqrt(
// CHECK:         linalg.generic
// CHECK:           math.sqrt
func.func @sqrt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.sqrt %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @rsqrt(
// CHECK:         linalg.generic
// CHECK:           math.rsqrt
func.func @rsqrt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.rsqrt %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @neg(
// CHECK:         linalg.generic
// CHECK:           arith.negf
func.func @neg(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.neg %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @abs(
// CHECK:         linalg.generic
// CHECK:           math.absf
func.func @abs(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.abs %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @gelu(
// CHECK:         linalg.generic
// CHECK:           arith.constant 0.707106769 : f32
// CHECK:           math.erf
func.func @gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.gelu %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @gelu_tanh(
// CHECK:         linalg.generic
// CHECK:           arith.constant 4.471500e-02 : f32
// CHECK:           arith.constant 0.797884583 : f32
// CHECK:           math.tanh
func.func @gelu_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.gelu %x approximate = tanh : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @gelu_grad(
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK:           math.exp
// CHECK:           math.erf
// CHECK:           arith.mulf
func.func @gelu_grad(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.gelu_grad %x, %dy : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @gelu_grad_tanh(
// CHECK:         linalg.generic
// CHECK:           math.tanh
// CHECK-NOT:       math.erf
// CHECK:           linalg.yield
func.func @gelu_grad_tanh(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.gelu_grad %x, %dy approximate = tanh : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @cast_trunc(
// CHECK:         linalg.generic
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
func.func @cast_trunc(%x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  %0 = ds.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// f8E4M3FN has no inf: out-of-range values and infinities clamp to +-448,
// with or without `saturate` (PyTorch's .to()).
// CHECK-LABEL: func.func @cast_saturate(
// CHECK:         linalg.generic
// CHECK:           %[[MAX:.*]] = arith.constant 4.480000e+02 : f32
// CHECK:           %[[ABS:.*]] = math.absf
// CHECK:           %[[OVER:.*]] = arith.cmpf ogt, %[[ABS]], %[[MAX]]
// CHECK:           %[[SIGNED:.*]] = arith.select
// CHECK:           %[[C:.*]] = arith.select %[[OVER]], %[[SIGNED]], %{{.*}} : f32
// CHECK:           arith.truncf %[[C]] : f32 to f8E4M3FN
// CHECK-LABEL: func.func @cast_e4m3_plain(
// CHECK:           arith.cmpf ogt
// CHECK:           arith.truncf %{{.*}} : f32 to f8E4M3FN
func.func @cast_saturate(%x: tensor<4x8xf32>) -> tensor<4x8xf8E4M3FN> {
  %0 = ds.cast %x saturate : tensor<4x8xf32> -> tensor<4x8xf8E4M3FN>
  return %0 : tensor<4x8xf8E4M3FN>
}
func.func @cast_e4m3_plain(%x: tensor<4x8xf32>) -> tensor<4x8xf8E4M3FN> {
  %0 = ds.cast %x : tensor<4x8xf32> -> tensor<4x8xf8E4M3FN>
  return %0 : tensor<4x8xf8E4M3FN>
}

// With `saturate` and a target that has inf, only finite values clamp.
// CHECK-LABEL: func.func @cast_saturate_e5m2(
// CHECK:           %[[MAX:.*]] = arith.constant 5.734400e+04 : f32
// CHECK:           %[[ABS:.*]] = math.absf
// CHECK:           %[[OVER:.*]] = arith.cmpf ogt, %[[ABS]], %[[MAX]]
// CHECK:           %[[FIN:.*]] = arith.cmpf one, %[[ABS]]
// CHECK:           arith.andi %[[OVER]], %[[FIN]]
// CHECK:           arith.truncf %{{.*}} : f32 to f8E5M2
func.func @cast_saturate_e5m2(%x: tensor<4x8xf32>) -> tensor<4x8xf8E5M2> {
  %0 = ds.cast %x saturate : tensor<4x8xf32> -> tensor<4x8xf8E5M2>
  return %0 : tensor<4x8xf8E5M2>
}

// bf16 cannot hold f16's largest value (65504): the clamp happens in f32.
// CHECK-LABEL: func.func @cast_saturate_bf16_f16(
// CHECK:           %[[W:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:           arith.constant 6.550400e+04 : f32
// CHECK:           arith.truncf %{{.*}} : f32 to f16
func.func @cast_saturate_bf16_f16(%x: tensor<4x8xbf16>) -> tensor<4x8xf16> {
  %0 = ds.cast %x saturate : tensor<4x8xbf16> -> tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// CHECK-LABEL: func.func @cast_int(
// CHECK:         linalg.generic
// CHECK:           arith.sitofp %{{.*}} : i64 to f32
func.func @cast_int(%x: tensor<4x8xi64>) -> tensor<4x8xf32> {
  %0 = ds.cast %x : tensor<4x8xi64> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @cast_to_int(
// CHECK:         linalg.generic
// CHECK:           arith.fptosi %{{.*}} : f32 to i32
func.func @cast_to_int(%x: tensor<4x8xf32>) -> tensor<4x8xi32> {
  %0 = ds.cast %x : tensor<4x8xf32> -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// CHECK-LABEL: func.func @compare(
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x8xi1>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:           arith.cmpf une
func.func @compare(%a: tensor<4x8xf32>, %b: tensor<f32>) -> tensor<4x8xi1> {
  %0 = ds.compare ne, %a, %b : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xi1>
  return %0 : tensor<4x8xi1>
}

// CHECK-LABEL: func.func @select(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:           arith.select
func.func @select(%c: tensor<4x8xi1>, %a: tensor<4x1xf32>, %b: tensor<f32>) -> tensor<4x8xf32> {
  %0 = ds.select %c, %a, %b : tensor<4x8xi1>, tensor<4x1xf32>, tensor<f32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @causal_mask(
// CHECK:         linalg.generic
// CHECK:           %[[I:.*]] = linalg.index 1 : index
// CHECK:           %[[J:.*]] = linalg.index 2 : index
// CHECK:           %[[OFF:.*]] = arith.constant 2 : index
// CHECK:           %[[LIM:.*]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK:           %[[M:.*]] = arith.cmpi sgt, %[[J]], %[[LIM]] : index
// CHECK:           %[[FILL:.*]] = arith.constant 0xFF800000 : f32
// CHECK:           arith.select %[[M]], %[[FILL]], %{{.*}} : f32
func.func @causal_mask(%x: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  %0 = ds.causal_mask %x : tensor<2x4x6xf32>
  return %0 : tensor<2x4x6xf32>
}

// CHECK-LABEL: func.func @dropout(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>, %[[RNG:.*]]: tensor<2xi64>
// CHECK:         %[[KEY:.*]] = tensor.extract %[[RNG]][%{{.*}}] : tensor<2xi64>
// CHECK:         %[[CTR:.*]] = tensor.extract %[[RNG]][%{{.*}}] : tensor<2xi64>
// CHECK:         %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x8xf32>)
// CHECK:           linalg.index 0
// CHECK:           linalg.index 1
// CHECK:           arith.addi %[[CTR]], %{{.*}} : i64
// CHECK-COUNT-20:  arith.muli %{{.*}}, %{{.*}} : i64
// CHECK:           arith.uitofp %{{.*}} : i32 to f64
// CHECK:           arith.cmpf oge
// CHECK:           arith.select
// CHECK:         %[[NUMEL:.*]] = arith.constant 32 : i64
// CHECK:         %[[NEXT:.*]] = arith.addi %[[CTR]], %[[NUMEL]] : i64
// CHECK:         %[[NEW:.*]] = tensor.from_elements %[[KEY]], %[[NEXT]] : tensor<2xi64>
// CHECK:         return %[[Y]], %[[NEW]]
func.func @dropout(%x: tensor<4x8xf32>, %rng: tensor<2xi64>) -> (tensor<4x8xf32>, tensor<2xi64>) {
  %0, %1 = ds.dropout %x, %rng p = 1.0e-01 : tensor<4x8xf32>, tensor<2xi64>
  return %0, %1 : tensor<4x8xf32>, tensor<2xi64>
}

// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:    %[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x16xf32>
// CHECK:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x16xf32>
// CHECK:         %[[F:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E]] : tensor<4x16xf32>)
// CHECK:         %[[R:.*]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<8x16xf32>) outs(%[[F]] : tensor<4x16xf32>)
// CHECK:         return %[[R]]
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = ds.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @matmul_transpose_lhs(
// CHECK:         linalg.fill
// CHECK:         linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-SAME:      ins(%{{.*}}, %{{.*}} : tensor<8x4xf32>, tensor<8x16xf32>)
func.func @matmul_transpose_lhs(%a: tensor<8x4xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = ds.matmul %a, %b transpose_lhs : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @matmul_batched(
// CHECK:         %[[A:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] : tensor<2x3x4x8xf32> into tensor<6x4x8xf32>
// CHECK:         %[[B:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] : tensor<2x3x16x8xf32> into tensor<6x16x8xf32>
// CHECK:         %[[F:.*]] = linalg.fill
// CHECK:         %[[R:.*]] = linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
// CHECK-SAME:      ins(%[[A]], %[[B]] : tensor<6x4x8xf32>, tensor<6x16x8xf32>) outs(%[[F]] : tensor<6x4x16xf32>)
// CHECK:         tensor.expand_shape %[[R]] {{\[\[}}0, 1], [2], [3]] output_shape [2, 3, 4, 16]
func.func @matmul_batched(%a: tensor<2x3x4x8xf32>, %b: tensor<2x3x16x8xf32>) -> tensor<2x3x4x16xf32> {
  %0 = ds.matmul %a, %b transpose_rhs : tensor<2x3x4x8xf32>, tensor<2x3x16x8xf32> -> tensor<2x3x4x16xf32>
  return %0 : tensor<2x3x4x16xf32>
}

// Narrow operands are extended to f32 first: the GEMM is an f32 one.
// CHECK-LABEL: func.func @matmul_shared_rhs(
// CHECK-SAME:    %[[A:.*]]: tensor<2x3x8xbf16>, %[[B:.*]]: tensor<16x8xbf16>
// CHECK:         %[[AW:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<2x3x8xbf16>) outs(%{{.*}} : tensor<2x3x8xf32>)
// CHECK:           arith.extf %{{.*}} : bf16 to f32
// CHECK:         %[[BW:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<16x8xbf16>) outs(%{{.*}} : tensor<16x8xf32>)
// CHECK:         %[[FLAT:.*]] = tensor.collapse_shape %[[AW]] {{\[\[}}0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
// CHECK:         %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<6x16xf32>)
// CHECK:         %[[R:.*]] = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// CHECK-SAME:      ins(%[[FLAT]], %[[BW]] : tensor<6x8xf32>, tensor<16x8xf32>) outs(%[[F]] : tensor<6x16xf32>)
// CHECK:         tensor.expand_shape %[[R]] {{\[\[}}0, 1], [2]] output_shape [2, 3, 16]
func.func @matmul_shared_rhs(%a: tensor<2x3x8xbf16>, %b: tensor<16x8xbf16>) -> tensor<2x3x16xf32> {
  %0 = ds.matmul %a, %b transpose_rhs : tensor<2x3x8xbf16>, tensor<16x8xbf16> -> tensor<2x3x16xf32>
  return %0 : tensor<2x3x16xf32>
}

// CHECK-LABEL: func.func @matmul_shared_rhs_transpose_lhs(
// CHECK:         linalg.fill
// CHECK:         linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
// CHECK-SAME:      ins(%{{.*}}, %{{.*}} : tensor<2x8x3xf32>, tensor<8x16xf32>)
func.func @matmul_shared_rhs_transpose_lhs(%a: tensor<2x8x3xf32>, %b: tensor<8x16xf32>) -> tensor<2x3x16xf32> {
  %0 = ds.matmul %a, %b transpose_lhs : tensor<2x8x3xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
  return %0 : tensor<2x3x16xf32>
}

// CHECK-LABEL: func.func @reduce_sum(
// CHECK:         linalg.fill
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d1)>], iterator_types = ["reduction", "parallel", "reduction"]}
// CHECK:           arith.addf %{{.*}}, %{{.*}} fastmath<reassoc> : f32
func.func @reduce_sum(%x: tensor<4x8x5xf32>) -> tensor<8xf32> {
  %0 = ds.reduce_sum %x [0, 2] : tensor<4x8x5xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// CHECK-LABEL: func.func @reduce_mean(
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:           arith.addf
// CHECK:         %[[M:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<4xf32>)
// CHECK:           arith.constant 8.000000e+00 : f32
// CHECK:           arith.divf
// CHECK:         tensor.expand_shape %[[M]] {{\[\[}}0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
func.func @reduce_mean(%x: tensor<4x8xf32>) -> tensor<4x1xf32> {
  %0 = ds.reduce_mean %x [1] keep_dims : tensor<4x8xf32> -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// CHECK-LABEL: func.func @reduce_max(
// CHECK:         %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<f32>
// CHECK:         linalg.fill ins(%[[NINF]] : f32) outs(%[[E]] : tensor<f32>)
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
// CHECK:           arith.maximumf
func.func @reduce_max(%x: tensor<4x8xf32>) -> tensor<f32> {
  %0 = ds.reduce_max %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @softmax(
// CHECK:         %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:           arith.maximumf
// CHECK:         %[[EXP:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[MAX]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK:           arith.subf
// CHECK:           math.exp
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[EXP]] : tensor<4x8xf32>)
// CHECK:           arith.addf
// CHECK:         linalg.generic {{.*}} ins(%[[EXP]], %[[SUM]] : tensor<4x8xf32>, tensor<4xf32>)
// CHECK:           arith.divf
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.softmax %x axis = 1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @log_softmax(
// CHECK:         %[[MAX:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
// CHECK:           arith.maximumf
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%{{.*}}, %[[MAX]] : tensor<4x8xf32>, tensor<8xf32>)
// CHECK:           math.exp
// CHECK:           arith.addf
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[MAX]], %[[SUM]] : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK:           arith.subf
// CHECK:           math.log
// CHECK:           arith.subf
func.func @log_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.log_softmax %x axis = 0 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @layer_norm(
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%{{.*}}, %[[SUM]] : tensor<2x4x8xf32>, tensor<2x4xf32>)
// CHECK:           arith.subf
// CHECK:           arith.mulf
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]
// CHECK:           math.rsqrt
func.func @layer_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %0 = ds.layer_norm %x, %w, %b : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return %0 : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @rms_norm(
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "reduction"]
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]
// CHECK:           arith.constant 9.99999997E-7 : f32
// CHECK:           math.rsqrt
func.func @rms_norm(%x: tensor<2x4x8xf32>, %w: tensor<4x8xf32>) -> tensor<2x4x8xf32> {
  %0 = ds.rms_norm %x, %w eps = 1.0e-06 : tensor<2x4x8xf32>, tensor<4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @batch_norm(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<2x3x4x5xf32>, %[[W:[^:]*]]: tensor<3xf32>, %[[B:[^:]*]]: tensor<3xf32>, %[[RM:[^:]*]]: tensor<3xf32>, %[[RV:[^:]*]]: tensor<3xf32>
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction", "reduction"]
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction", "reduction"]
// CHECK:         %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[SUM]], %[[SQ]], %[[W]], %[[B]] :
// CHECK:           math.rsqrt
// CHECK:         %[[M:.*]] = linalg.generic {{.*}} ins(%[[RM]], %[[SUM]] :
// CHECK:           arith.constant 4.000000e+01 : f32
// CHECK:         %[[V:.*]] = linalg.generic {{.*}} ins(%[[RV]], %[[SQ]] :
// CHECK:           arith.constant 3.900000e+01 : f32
// CHECK:         return %[[Y]], %[[M]], %[[V]]
func.func @batch_norm(%x: tensor<2x3x4x5xf32>, %w: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> (tensor<2x3x4x5xf32>, tensor<3xf32>, tensor<3xf32>) {
  %y, %m1, %v1 = ds.batch_norm %x, %w, %b, %m, %v : tensor<2x3x4x5xf32>, tensor<3xf32>
  return %y, %m1, %v1 : tensor<2x3x4x5xf32>, tensor<3xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME:    %[[L:.*]]: tensor<4x10xf32>, %[[T:.*]]: tensor<4xi64>
// CHECK:         %[[MAX:.*]] = linalg.generic
// CHECK:           arith.maximumf
// CHECK:         %[[SUM:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         %[[TOT:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[MAX]], %[[SUM]], %[[T]] : tensor<4xf32>, tensor<4xf32>, tensor<4xi64>) outs(%{{.*}} : tensor<f32>)
// CHECK:           arith.index_cast
// CHECK:           tensor.extract %[[L]]
// CHECK:           math.log
// CHECK:         linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%[[TOT]] : tensor<f32>)
// CHECK:           arith.divf
func.func @cross_entropy(%l: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  %0 = ds.cross_entropy %l, %t : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @cross_entropy_grad(
// CHECK:         linalg.generic
// CHECK:           arith.maximumf
// CHECK:         linalg.generic
// CHECK:           math.exp
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK:           math.exp
// CHECK:           linalg.index 1
// CHECK:           arith.cmpi eq
func.func @cross_entropy_grad(%l: tensor<4x10xf32>, %t: tensor<4xi64>, %g: tensor<f32>) -> tensor<4x10xf32> {
  %0 = ds.cross_entropy_grad %l, %t, %g : tensor<4x10xf32>, tensor<4xi64>, tensor<f32>
  return %0 : tensor<4x10xf32>
}

// CHECK-LABEL: func.func @mse_loss(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
// CHECK:           arith.subf
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         linalg.generic
// CHECK:           arith.constant 3.200000e+01 : f32
// CHECK:           arith.divf
func.func @mse_loss(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<f32> {
  %0 = ds.mse_loss %a, %b : tensor<4x8xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @reshape_collapse(
// CHECK:         %[[R:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
// CHECK-NEXT:    return %[[R]]
func.func @reshape_collapse(%x: tensor<2x4x8xf32>) -> tensor<8x8xf32> {
  %0 = ds.reshape %x : tensor<2x4x8xf32> -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// CHECK-LABEL: func.func @reshape_expand(
// CHECK:         %[[R:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [2, 4, 8] : tensor<8x8xf32> into tensor<2x4x8xf32>
// CHECK-NEXT:    return %[[R]]
func.func @reshape_expand(%x: tensor<8x8xf32>) -> tensor<2x4x8xf32> {
  %0 = ds.reshape %x : tensor<8x8xf32> -> tensor<2x4x8xf32>
  return %0 : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @reshape_via_1d(
// CHECK:         %[[F:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2]] : tensor<3x5x7xf32> into tensor<105xf32>
// CHECK:         tensor.expand_shape %[[F]] {{\[\[}}0, 1]] output_shape [5, 21] : tensor<105xf32> into tensor<5x21xf32>
func.func @reshape_via_1d(%x: tensor<3x5x7xf32>) -> tensor<5x21xf32> {
  %0 = ds.reshape %x : tensor<3x5x7xf32> -> tensor<5x21xf32>
  return %0 : tensor<5x21xf32>
}

// CHECK-LABEL: func.func @transpose(
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<8x2x4xf32>
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<2x4x8xf32>) outs(%[[E]] : tensor<8x2x4xf32>) permutation = [2, 0, 1]
func.func @transpose(%x: tensor<2x4x8xf32>) -> tensor<8x2x4xf32> {
  %0 = ds.transpose %x [2, 0, 1] : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
  return %0 : tensor<8x2x4xf32>
}

// CHECK-LABEL: func.func @slice(
// CHECK:         tensor.extract_slice %{{.*}}[0, 1] [4, 3] [1, 2] : tensor<4x8xf32> to tensor<4x3xf32>
func.func @slice(%x: tensor<4x8xf32>) -> tensor<4x3xf32> {
  %0 = ds.slice %x offsets [0, 1] strides [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @insert_slice(
// CHECK-SAME:    %[[S:.*]]: tensor<4x3xf32>, %[[D:.*]]: tensor<4x8xf32>
// CHECK:         tensor.insert_slice %[[S]] into %[[D]][0, 1] [4, 3] [1, 2] : tensor<4x3xf32> into tensor<4x8xf32>
func.func @insert_slice(%s: tensor<4x3xf32>, %d: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = ds.insert_slice %s into %d offsets [0, 1] strides [1, 2] : tensor<4x3xf32> into tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @concat(
// CHECK-SAME:    %[[A:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<4x5xf32>
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK:         %[[I:.*]] = tensor.insert_slice %[[A]] into %[[E]][0, 0] [4, 3] [1, 1]
// CHECK:         tensor.insert_slice %[[B]] into %[[I]][0, 3] [4, 5] [1, 1]
func.func @concat(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) -> tensor<4x8xf32> {
  %0 = ds.concat %a, %b axis = 1 : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @embedding(
// CHECK-SAME:    %[[W:.*]]: tensor<96x64xf32>, %[[I:.*]]: tensor<2x16xi64>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[I]] : tensor<2x16xi64>)
// CHECK:           %[[IDX:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK:           %[[LO:.*]] = arith.maxsi %[[IDX]]
// CHECK:           %[[ROW:.*]] = arith.minsi %[[LO]]
// CHECK:           %[[COL:.*]] = linalg.index 2 : index
// CHECK:           tensor.extract %[[W]][%[[ROW]], %[[COL]]] : tensor<96x64xf32>
func.func @embedding(%w: tensor<96x64xf32>, %i: tensor<2x16xi64>) -> tensor<2x16x64xf32> {
  %0 = ds.embedding %w, %i : tensor<96x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf32>
  return %0 : tensor<2x16x64xf32>
}

// CHECK-LABEL: func.func @embedding_grad(
// CHECK:         %[[Z:.*]] = linalg.fill
// CHECK:         %[[IDX:.*]] = tensor.collapse_shape %{{.*}} : tensor<2x16xi64> into tensor<32xi64>
// CHECK:         %[[G:.*]] = tensor.collapse_shape %{{.*}} : tensor<2x16x64xf32> into tensor<32x64xf32>
// CHECK:         scf.for %[[P:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[Z]]) -> (tensor<96x64xf32>)
// CHECK:           tensor.extract %[[IDX]][%[[P]]]
// CHECK:           %[[ROW:.*]] = arith.minsi
// CHECK:           %[[DST:.*]] = tensor.extract_slice %[[ACC]][%[[ROW]], 0] [1, 64] [1, 1]
// CHECK:           %[[SRC:.*]] = tensor.extract_slice %[[G]][%[[P]], 0] [1, 64] [1, 1]
// CHECK:           %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[SRC]] : tensor<1x64xf32>) outs(%[[DST]] : tensor<1x64xf32>)
// CHECK:           %[[UPD:.*]] = tensor.insert_slice %[[SUM]] into %[[ACC]][%[[ROW]], 0] [1, 64] [1, 1]
// CHECK:           scf.yield %[[UPD]]
func.func @embedding_grad(%g: tensor<2x16x64xf32>, %i: tensor<2x16xi64>) -> tensor<96x64xf32> {
  %0 = ds.embedding_grad %g, %i : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<96x64xf32>
  return %0 : tensor<96x64xf32>
}

// CHECK-LABEL: func.func @conv2d(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x8x8xf32>, %[[W:.*]]: tensor<4x3x3x3xf32>, %[[B:.*]]: tensor<4xf32>
// CHECK:         %[[P:.*]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:         } : tensor<2x3x8x8xf32> to tensor<2x3x10x10xf32>
// CHECK:         %[[INIT:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]{{.*}} ins(%[[B]] : tensor<4xf32>)
// CHECK:         linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%[[P]], %[[W]] : tensor<2x3x10x10xf32>, tensor<4x3x3x3xf32>) outs(%[[INIT]] : tensor<2x4x4x4xf32>)
func.func @conv2d(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<2x4x4x4xf32> {
  %0 = ds.conv2d %x, %w, %b strides = [2, 2] padding = [1, 1] : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32> -> tensor<2x4x4x4xf32>
  return %0 : tensor<2x4x4x4xf32>
}

// CHECK-LABEL: func.func @conv2d_groups(
// CHECK:         linalg.fill
// CHECK:         %[[X:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 2, 2, 8, 8]
// CHECK:         %[[W:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 3, 2, 3, 3]
// CHECK:         %[[O:.*]] = tensor.expand_shape %{{.*}} output_shape [2, 2, 3, 4, 4]
// CHECK:         %[[R:.*]] = linalg.conv_2d_ngchw_gfchw {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[X]], %[[W]] : {{.*}}) outs(%[[O]] : tensor<2x2x3x4x4xf32>)
// CHECK:         tensor.collapse_shape %[[R]] {{\[\[}}0], [1, 2], [3], [4]] : tensor<2x2x3x4x4xf32> into tensor<2x6x4x4xf32>
func.func @conv2d_groups(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32> {
  %0 = ds.conv2d %x, %w dilation = [2, 2] groups = 2 : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x4xf32>
  return %0 : tensor<2x6x4x4xf32>
}

// CHECK-LABEL: func.func @conv2d_grad_input(
// CHECK-SAME:    %[[DY:.*]]: tensor<2x4x4x4xf32>, %[[W:.*]]: tensor<4x3x3x3xf32>
// CHECK:         %[[Z:.*]] = linalg.fill {{.*}} -> tensor<2x4x10x10xf32>
// CHECK:         %[[T:.*]] = tensor.insert_slice %[[DY]] into %[[Z]][0, 0, 1, 1] [2, 4, 4, 4] [1, 1, 2, 2]
// CHECK:         %[[WT:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0 * 4 + d2, d1, -d3 + 2, -d4 + 2)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>]{{.*}} ins(%[[W]] : tensor<4x3x3x3xf32>) outs(%{{.*}} : tensor<1x3x4x3x3xf32>)
// CHECK:         %[[WF:.*]] = tensor.collapse_shape %[[WT]] {{.*}} into tensor<3x4x3x3xf32>
// CHECK:         linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%[[T]], %[[WF]] : tensor<2x4x10x10xf32>, tensor<3x4x3x3xf32>) outs(%{{.*}} : tensor<2x3x8x8xf32>)
func.func @conv2d_grad_input(%dy: tensor<2x4x4x4xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32> {
  %0 = ds.conv2d_grad_input %dy, %w strides = [2, 2] padding = [1, 1] : tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  return %0 : tensor<2x3x8x8xf32>
}

// CHECK-LABEL: func.func @conv2d_grad_weight(
// CHECK:         %[[P:.*]] = tensor.pad %{{.*}} low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:         %[[X:.*]] = tensor.expand_shape %[[P]] {{.*}} into tensor<2x1x3x10x10xf32>
// CHECK:         %[[DY:.*]] = tensor.expand_shape %{{.*}} into tensor<2x1x4x4x4xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d5, d0, d1, d6, d7)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d5, d0, d2, d6 * 2 + d3, d7 * 2 + d4)>, affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%[[DY]], %[[X]] :
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         tensor.collapse_shape %[[R]] {{.*}} into tensor<4x3x3x3xf32>
func.func @conv2d_grad_weight(%dy: tensor<2x4x4x4xf32>, %x: tensor<2x3x8x8xf32>) -> tensor<4x3x3x3xf32> {
  %0 = ds.conv2d_grad_weight %dy, %x strides = [2, 2] padding = [1, 1] : tensor<2x4x4x4xf32>, tensor<2x3x8x8xf32> -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// CHECK-LABEL: func.func @max_pool2d(
// CHECK:         %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[P:.*]] = tensor.pad %{{.*}} low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:           tensor.yield %[[NINF]] : f32
// CHECK:         %[[INIT:.*]] = linalg.fill ins(%[[NINF]] : f32)
// CHECK:         %[[WIN:.*]] = tensor.empty() : tensor<3x3xf32>
// CHECK:         linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%[[P]], %[[WIN]] : tensor<2x3x10x10xf32>, tensor<3x3xf32>) outs(%[[INIT]] : tensor<2x3x4x4xf32>)
func.func @max_pool2d(%x: tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32> {
  %0 = ds.max_pool2d %x kernel = [3, 3] strides = [2, 2] padding = [1, 1] : tensor<2x3x8x8xf32> -> tensor<2x3x4x4xf32>
  return %0 : tensor<2x3x4x4xf32>
}

// CHECK-LABEL: func.func @avg_pool2d(
// CHECK-NOT:     tensor.pad
// CHECK:         %[[S:.*]] = linalg.pooling_nchw_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
// CHECK:         linalg.generic {{.*}} ins(%[[S]] : tensor<2x3x4x4xf32>)
// CHECK:           arith.constant 4.000000e+00 : f32
// CHECK:           arith.divf
func.func @avg_pool2d(%x: tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32> {
  %0 = ds.avg_pool2d %x kernel = [2, 2] : tensor<2x3x8x8xf32> -> tensor<2x3x4x4xf32>
  return %0 : tensor<2x3x4x4xf32>
}

// CHECK-LABEL: func.func @max_pool2d_grad(
// CHECK-SAME:    %{{.*}}: tensor<2x3x8x8xf32>, %[[DY:.*]]: tensor<2x3x4x4xf32>
// CHECK:         %[[P:.*]] = tensor.pad
// CHECK:         %[[ARG:.*]]:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%[[P]], %{{.*}} : tensor<2x3x10x10xf32>, tensor<3x3xf32>) outs(%{{.*}}, %{{.*}} : tensor<2x3x4x4xf32>, tensor<2x3x4x4xindex>)
// CHECK:           arith.cmpf ogt
// CHECK:           arith.cmpi slt
// CHECK:           linalg.yield %{{.*}}, %{{.*}} : f32, index
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK:           arith.remsi
// CHECK:           tensor.extract %[[DY]]
// CHECK:           tensor.extract %[[ARG]]#1
// CHECK:           arith.cmpi eq
// CHECK:           arith.addf
func.func @max_pool2d_grad(%x: tensor<2x3x8x8xf32>, %dy: tensor<2x3x4x4xf32>) -> tensor<2x3x8x8xf32> {
  %0 = ds.max_pool2d_grad %x, %dy kernel = [3, 3] strides = [2, 2] padding = [1, 1] : tensor<2x3x8x8xf32>, tensor<2x3x4x4xf32>
  return %0 : tensor<2x3x8x8xf32>
}

// CHECK-LABEL: func.func @avg_pool2d_grad(
// CHECK-SAME:    %{{.*}}: tensor<2x3x8x8xf32>, %[[DY:.*]]: tensor<2x3x4x4xf32>
// CHECK-NOT:     tensor.pad
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>]
// CHECK:           tensor.extract %[[DY]]
// CHECK:           arith.divf
// CHECK:           arith.select
// CHECK:           arith.addf
func.func @avg_pool2d_grad(%x: tensor<2x3x8x8xf32>, %dy: tensor<2x3x4x4xf32>) -> tensor<2x3x8x8xf32> {
  %0 = ds.avg_pool2d_grad %x, %dy kernel = [2, 2] : tensor<2x3x8x8xf32>, tensor<2x3x4x4xf32>
  return %0 : tensor<2x3x8x8xf32>
}

// CHECK-LABEL: func.func @upstream_ops_untouched(
// CHECK:         %[[C:.*]] = arith.constant 1 : index
// CHECK:         tensor.extract %{{.*}}[%[[C]]] : tensor<4xf32>
// CHECK:         linalg.generic
// CHECK:           math.exp
// CHECK:         arith.addf %{{.*}}, %{{.*}} : f32
func.func @upstream_ops_untouched(%x: tensor<4xf32>) -> f32 {
  %c = arith.constant 1 : index
  %e = tensor.extract %x[%c] : tensor<4xf32>
  %0 = ds.exp %x : tensor<4xf32>
  %f = tensor.extract %0[%c] : tensor<4xf32>
  %s = arith.addf %e, %f : f32
  return %s : f32
}

// Fake quantization: one parallel generic; a per-group scale is read
// through the channel index divided by the group size, and the grid index
// is zero_point + roundeven(x * (1 / scale)) with the reciprocal in f32.
// CHECK-LABEL: func @fake_quant_group
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1 floordiv 4)>, affine_map<(d0, d1) -> (d0, d1 floordiv 4)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.divf
// CHECK: arith.mulf
// CHECK: math.roundeven
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: arith.minimumf
func.func @fake_quant_group(%x: tensor<8x12xf32>, %s: tensor<8x3xf32>, %q: tensor<f32>) -> tensor<8x12xf32> {
  %0 = ds.fake_quant %x, %s, %s, %q, %q axis = 1 group_size = 4 : tensor<8x12xf32>, tensor<8x3xf32>, tensor<f32>
  return %0 : tensor<8x12xf32>
}

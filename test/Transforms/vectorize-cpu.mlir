// RUN: ds-opt %s --pass-pipeline="builtin.module(func.func(ds-vectorize-cpu))" --split-input-file | FileCheck %s

// Elementwise f32: rows by one, columns by 16 lanes, 1-D vectors.
// CHECK-LABEL: func.func @add
// CHECK: scf.for
// CHECK: scf.for
// CHECK: vector.transfer_read {{.*}} : tensor<128x256xf32>, vector<16xf32>
// CHECK: arith.addf {{.*}} : vector<16xf32>
// CHECK: vector.transfer_write {{.*}} : vector<16xf32>, tensor<1x16xf32>
// CHECK: tensor.insert_slice {{.*}} : tensor<1x16xf32> into tensor<128x256xf32>
// CHECK-NOT: linalg.generic
func.func @add(%a: tensor<128x256xf32>, %b: tensor<128x256xf32>)
    -> tensor<128x256xf32> {
  %e = tensor.empty() : tensor<128x256xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                       affine_map<(d0, d1) -> (d0, d1)>,
                       affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<128x256xf32>, tensor<128x256xf32>)
      outs(%e : tensor<128x256xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<128x256xf32>
  return %r : tensor<128x256xf32>
}

// -----

// f64 gets 8 lanes; a broadcast operand becomes a broadcasting read.
// CHECK-LABEL: func.func @bias_f64
// CHECK: vector.transfer_read {{.*}} : tensor<64x32xf64>, vector<8xf64>
// CHECK: vector.transfer_read {{.*}} : tensor<32xf64>, vector<8xf64>
// CHECK: arith.addf {{.*}} : vector<8xf64>
func.func @bias_f64(%a: tensor<64x32xf64>, %b: tensor<32xf64>)
    -> tensor<64x32xf64> {
  %e = tensor.empty() : tensor<64x32xf64>
  %r = linalg.generic {
      indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                       affine_map<(d0, d1) -> (d1)>,
                       affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<64x32xf64>, tensor<32xf64>)
      outs(%e : tensor<64x32xf64>) {
  ^bb0(%x: f64, %y: f64, %o: f64):
    %s = arith.addf %x, %y : f64
    linalg.yield %s : f64
  } -> tensor<64x32xf64>
  return %r : tensor<64x32xf64>
}

// -----

// A row reduction keeps the whole row in one vector; rows are tiled by one.
// CHECK-LABEL: func.func @row_sum
// CHECK: scf.for
// CHECK: vector.transfer_read {{.*}} : tensor<128x256xf32>, vector<256xf32>
// CHECK: vector.multi_reduction <add>, {{.*}} [1] : vector<1x256xf32> to vector<1xf32>
func.func @row_sum(%a: tensor<128x256xf32>) -> tensor<128xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<128xf32>) -> tensor<128xf32>
  %r = linalg.reduce ins(%a : tensor<128x256xf32>) outs(%f : tensor<128xf32>)
      dimensions = [1]
    (%x: f32, %acc: f32) {
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
    }
  return %r : tensor<128xf32>
}

// -----

// Matmuls are left for the library GEMM.
// CHECK-LABEL: func.func @matmul
// CHECK: linalg.matmul
func.func @matmul(%a: tensor<16x32xf32>, %b: tensor<32x8xf32>,
                  %c: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x8xf32>)
                     outs(%c : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %r : tensor<16x8xf32>
}

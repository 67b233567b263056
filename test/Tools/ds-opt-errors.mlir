// Bad input to ds-opt: a located diagnostic and a non-zero exit, never a
// crash. `not` fails the test if ds-opt exits 0 or crashes (signal).
// RUN: not ds-opt %s -split-input-file 2>&1 | FileCheck %s

// CHECK: ds-opt-errors.mlir:[[# @LINE + 3]]:18: error: expected ':'
func.func @missing_colon(%x: tensor<4xf32>) {
  %0 = ds.relu %x : tensor<4xf32>
  %1 = ds.relu %0 tensor<4xf32>
  return
}

// -----

// CHECK: ds-opt-errors.mlir:[[# @LINE + 2]]:8: error: custom op 'ds.matmull' is unknown
func.func @unknown_op(%x: tensor<4x4xf32>) {
  %0 = ds.matmull %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// CHECK: ds-opt-errors.mlir:[[# @LINE + 2]]:8: error: 'ds.softmax' op operand #0 (%arg0) has a dynamic dimension 1
func.func @dynamic(%x: tensor<4x?xf32>) {
  %0 = ds.softmax %x axis = 1 : tensor<4x?xf32>
  return
}

// -----

// CHECK: ds-opt-errors.mlir:[[# @LINE + 2]]:19: error: use of value '%y' expects different type than prior uses
func.func @type_mismatch(%x: tensor<4xf32>, %y: tensor<5xf32>) {
  %0 = ds.add %x, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// CHECK: ds-opt-errors.mlir:[[# @LINE + 1]]:1: error: custom op 'unterminated' is unknown
unterminated {

// ds-split-empty-tensors gives each destination of a shared tensor.empty a
// tensor.empty of its own, so that bufferization gives each its own buffer.
// RUN: ds-opt %s --pass-pipeline='builtin.module(func.func(ds-split-empty-tensors))' | FileCheck %s
// RUN: ds-opt %s --pass-pipeline='builtin.module(func.func(ds-split-empty-tensors{max-elements=0}))' | FileCheck %s --check-prefix=ALL
// Bufferized, the two fills write two allocations, not one reused buffer.
// RUN: ds-opt %s --pass-pipeline='builtin.module(func.func(ds-split-empty-tensors), one-shot-bufferize{bufferize-function-boundaries})' | FileCheck %s --check-prefix=BUF
// Without the pass, one buffer serves both (the test would not see it).
// RUN: ds-opt %s --one-shot-bufferize=bufferize-function-boundaries | FileCheck %s --check-prefix=SHARED
// SHARED-LABEL: func.func @shared
// SHARED-COUNT-1: memref.alloc
// SHARED-NOT:     memref.alloc
// SHARED:         return

// CHECK-LABEL: func.func @shared
// CHECK:         %[[E0:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT:    %[[A:.*]] = linalg.fill {{.*}} outs(%[[E0]] :
// CHECK:         %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT:    %[[B:.*]] = linalg.fill {{.*}} outs(%[[E1]] :
// BUF-LABEL: func.func @shared
// BUF-COUNT-2: memref.alloc() {{.*}} : memref<4xf32>
// BUF-NOT:     memref.alloc
// BUF:         return
func.func @shared(%x: f32) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.fill ins(%x : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %y = tensor.extract %a[%c0] : tensor<4xf32>
  %b = linalg.fill ins(%y : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// A tensor.empty with one use is left as it is.
// CHECK-LABEL: func.func @single
// CHECK-COUNT-1: tensor.empty
// CHECK-NOT:     tensor.empty
func.func @single(%x: f32) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.fill ins(%x : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// Past max-elements (4096 by default), a shared tensor.empty stays shared:
// each split costs an allocation per step.
// CHECK-LABEL: func.func @large
// CHECK-COUNT-1: tensor.empty
// CHECK-NOT:     tensor.empty
// ALL-LABEL: func.func @large
// ALL-COUNT-2: tensor.empty
func.func @large(%x: f32) -> tensor<8192xf32> {
  %c0 = arith.constant 0 : index
  %e = tensor.empty() : tensor<8192xf32>
  %a = linalg.fill ins(%x : f32) outs(%e : tensor<8192xf32>) -> tensor<8192xf32>
  %y = tensor.extract %a[%c0] : tensor<8192xf32>
  %b = linalg.fill ins(%y : f32) outs(%e : tensor<8192xf32>) -> tensor<8192xf32>
  return %b : tensor<8192xf32>
}

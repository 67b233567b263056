// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(convert-ds-to-linalg{causal-block=64}))' | FileCheck %s --check-prefix=MARK
// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(convert-ds-to-linalg))' | FileCheck %s --check-prefix=OFF
// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(convert-ds-to-linalg{causal-block=64}),func.func(canonicalize,cse,ds-prepare-library-gemms),one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},convert-linalg-to-ds-runtime)' | FileCheck %s --check-prefix=SPLIT
// RUN: not ds-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(convert-ds-to-linalg{causal-block=-1}))' -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG

// Causal attention's six products, as ds-autodiff writes the backward, over
// 160 tokens: blocks of 64, 64 and 32 rows. Every one of them is marked
// with what it may leave out (ds.causal_gemm, CausalGemm.h).
// MARK-LABEL: func.func @attention
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, result = "lower"}}
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, lhs = "lower"}}
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, result = "lower"}}
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, lhs = "upper"}}
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, lhs = "lower"}}
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, lhs = "upper"}}
// OFF-NOT: ds.causal_gemm

// The scores: one GEMM per row block over the columns up to its end
// (64, 128, 160), the upper blocks never written.
// SPLIT-LABEL: func.func @attention
// SPLIT: memref.subview %{{.*}}[0, 0, 0] [2, 64, 16] [1, 1, 1]
// SPLIT: memref.subview %{{.*}}[0, 0, 0] [2, 64, 16] [1, 1, 1]
// SPLIT: memref.subview %[[S:.*]][0, 0, 0] [2, 64, 64] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT: memref.subview %{{.*}}[0, 64, 0] [2, 64, 16] [1, 1, 1]
// SPLIT: memref.subview %{{.*}}[0, 0, 0] [2, 128, 16] [1, 1, 1]
// SPLIT: memref.subview %[[S]][0, 64, 0] [2, 64, 128] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT: memref.subview %[[S]][0, 128, 0] [2, 32, 160] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// The output P V: each row block over the depth up to its end.
// SPLIT: memref.subview %[[P:.*]][0, 0, 0] [2, 64, 64] [1, 1, 1]
// SPLIT: memref.subview %{{.*}}[0, 0, 0] [2, 64, 16] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT: memref.subview %[[P]][0, 64, 0] [2, 64, 128] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT: memref.subview %[[P]][0, 128, 0] [2, 32, 160] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// dP = dO V^T, as the scores.
// SPLIT-COUNT-3: call @dsrt_matmul_f32
// dV = P^T dO: row block j of dV over P's rows from j's start on.
// SPLIT: memref.subview %[[P]][0, 0, 0] [2, 160, 64] [1, 1, 1]
// SPLIT: memref.subview %{{.*}}[0, 0, 0] [2, 160, 16] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT: memref.subview %[[P]][0, 64, 64] [2, 96, 64] [1, 1, 1]
// SPLIT: memref.subview %{{.*}}[0, 64, 0] [2, 96, 16] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT: memref.subview %[[P]][0, 128, 128] [2, 32, 32] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// dQ = dS K and dK = dS^T Q, as the output and dV.
// SPLIT-COUNT-6: call @dsrt_matmul_f32
// SPLIT-NOT: call @dsrt_matmul_f32
// SPLIT: return
func.func @attention(%q: tensor<2x160x16xf32>, %k: tensor<2x160x16xf32>,
                     %v: tensor<2x160x16xf32>, %do: tensor<2x160x16xf32>)
    -> (tensor<2x160x16xf32>, tensor<2x160x16xf32>, tensor<2x160x16xf32>, tensor<2x160x16xf32>) {
  %c = arith.constant dense<0.25> : tensor<f32>
  %s0 = ds.matmul %q, %k transpose_rhs : tensor<2x160x16xf32>, tensor<2x160x16xf32> -> tensor<2x160x160xf32>
  %s1 = ds.mul %s0, %c : tensor<2x160x160xf32>, tensor<f32> -> tensor<2x160x160xf32>
  %s = ds.causal_mask %s1 : tensor<2x160x160xf32>
  %p = ds.softmax %s axis = 2 : tensor<2x160x160xf32>
  %o = ds.matmul %p, %v : tensor<2x160x160xf32>, tensor<2x160x16xf32> -> tensor<2x160x16xf32>
  %dp = ds.matmul %do, %v transpose_rhs : tensor<2x160x16xf32>, tensor<2x160x16xf32> -> tensor<2x160x160xf32>
  %dv = ds.matmul %p, %do transpose_lhs : tensor<2x160x160xf32>, tensor<2x160x16xf32> -> tensor<2x160x16xf32>
  %pd0 = ds.mul %dp, %p : tensor<2x160x160xf32>, tensor<2x160x160xf32> -> tensor<2x160x160xf32>
  %pd = ds.causal_mask %pd0 fill = 0.0 : tensor<2x160x160xf32>
  %dpm = ds.causal_mask %dp fill = 0.0 : tensor<2x160x160xf32>
  %r = ds.reduce_sum %pd [2] keep_dims : tensor<2x160x160xf32> -> tensor<2x160x1xf32>
  %u = ds.sub %dpm, %r : tensor<2x160x160xf32>, tensor<2x160x1xf32> -> tensor<2x160x160xf32>
  %g = ds.mul %p, %u : tensor<2x160x160xf32>, tensor<2x160x160xf32> -> tensor<2x160x160xf32>
  %gm = ds.causal_mask %g fill = 0.0 : tensor<2x160x160xf32>
  %gs = ds.mul %gm, %c : tensor<2x160x160xf32>, tensor<f32> -> tensor<2x160x160xf32>
  %dq = ds.matmul %gs, %k : tensor<2x160x160xf32>, tensor<2x160x16xf32> -> tensor<2x160x16xf32>
  %dk = ds.matmul %gs, %q transpose_lhs : tensor<2x160x160xf32>, tensor<2x160x16xf32> -> tensor<2x160x16xf32>
  return %o, %dq, %dk, %dv : tensor<2x160x16xf32>, tensor<2x160x16xf32>, tensor<2x160x16xf32>, tensor<2x160x16xf32>
}

// -----

// As PyTorch's export writes attention: the heads merged into the batch by
// reshapes, the scale a quotient, and the key gradient transposed, Q^T dS,
// whose rhs is the structured one: column blocks over the depth from each
// block's first column on.
// MARK-LABEL: func.func @torch_shapes
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, result = "lower"}}
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, lhs = "lower"}}
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, rhs = "lower"}}
// SPLIT-LABEL: func.func @torch_shapes
// SPLIT-COUNT-6: call @dsrt_matmul_f32
// SPLIT: memref.subview %{{.*}}[0, 0, 0] [4, 160, 8] [1, 1, 1]
// SPLIT: memref.subview %[[DS:.*]][0, 0, 0] [4, 160, 64] [1, 1, 1]
// SPLIT: memref.subview %[[DKT:.*]][0, 0, 0] [4, 8, 64] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT: memref.subview %{{.*}}[0, 64, 0] [4, 96, 8] [1, 1, 1]
// SPLIT: memref.subview %[[DS]][0, 64, 64] [4, 96, 64] [1, 1, 1]
// SPLIT: memref.subview %[[DKT]][0, 0, 64] [4, 8, 64] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT: memref.subview %[[DS]][0, 128, 128] [4, 32, 32] [1, 1, 1]
// SPLIT: call @dsrt_matmul_f32
// SPLIT-NOT: call @dsrt_matmul_f32
// SPLIT: return
func.func @torch_shapes(%q: tensor<4x160x8xf32>, %kt: tensor<4x8x160xf32>, %v: tensor<4x160x8xf32>,
                        %g: tensor<2x2x160x160xf32>)
    -> (tensor<4x160x8xf32>, tensor<4x8x160xf32>) {
  %c = arith.constant dense<2.828427> : tensor<f32>
  %s0 = ds.matmul %q, %kt : tensor<4x160x8xf32>, tensor<4x8x160xf32> -> tensor<4x160x160xf32>
  %s1 = ds.reshape %s0 : tensor<4x160x160xf32> -> tensor<2x2x160x160xf32>
  %s2 = ds.div %s1, %c : tensor<2x2x160x160xf32>, tensor<f32> -> tensor<2x2x160x160xf32>
  %s = ds.causal_mask %s2 : tensor<2x2x160x160xf32>
  %p0 = ds.softmax %s axis = 3 : tensor<2x2x160x160xf32>
  %p = ds.reshape %p0 : tensor<2x2x160x160xf32> -> tensor<4x160x160xf32>
  %o = ds.matmul %p, %v : tensor<4x160x160xf32>, tensor<4x160x8xf32> -> tensor<4x160x8xf32>
  %gm = ds.causal_mask %g fill = 0.0 : tensor<2x2x160x160xf32>
  %gd = ds.div %gm, %c : tensor<2x2x160x160xf32>, tensor<f32> -> tensor<2x2x160x160xf32>
  %gs = ds.reshape %gd : tensor<2x2x160x160xf32> -> tensor<4x160x160xf32>
  %dkt = ds.matmul %q, %gs transpose_lhs : tensor<4x160x8xf32>, tensor<4x160x160xf32> -> tensor<4x8x160xf32>
  return %o, %dkt : tensor<4x160x8xf32>, tensor<4x8x160xf32>
}

// -----

// A dropout on the probabilities keeps their zeros (GPT-2's attn_pdrop).
// MARK-LABEL: func.func @attention_dropout
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, lhs = "lower"}}
// MARK: linalg.batch_matmul {{.*}}{ds.causal_gemm = {block = 64 : i64, rhs = "lower"}}
func.func @attention_dropout(%x: tensor<2x160x160xf32>, %v: tensor<2x160x16xf32>, %rng: tensor<2xi64>)
    -> (tensor<2x160x16xf32>, tensor<2x16x160xf32>) {
  %s = ds.causal_mask %x : tensor<2x160x160xf32>
  %p = ds.softmax %s axis = 2 : tensor<2x160x160xf32>
  %pd, %rng1 = ds.dropout %p, %rng p = 2.5e-01 : tensor<2x160x160xf32>, tensor<2xi64>
  %o = ds.matmul %pd, %v : tensor<2x160x160xf32>, tensor<2x160x16xf32> -> tensor<2x160x16xf32>
  %vt = ds.matmul %v, %pd transpose_lhs : tensor<2x160x16xf32>, tensor<2x160x160xf32> -> tensor<2x16x160xf32>
  return %o, %vt : tensor<2x160x16xf32>, tensor<2x16x160xf32>
}

// -----

// Nothing is known, so nothing is marked: scores that are also returned
// whole, a softmax of unmasked scores, a mask's fill that is not zero, a
// product with a tensor (0 * inf is NaN), a quotient by zero, a reshape
// that moves the diagonal, and scores whose product with a tensor (which
// keeps each entry in its place) is returned without a mask.
// MARK-LABEL: func.func @unknown
// MARK-NOT: ds.causal_gemm
// MARK: return
// SPLIT-LABEL: func.func @unknown
// SPLIT-COUNT-7: call @dsrt_matmul_f32
// SPLIT-NOT: call @dsrt_matmul_f32
// SPLIT: return
func.func @unknown(%q: tensor<2x96x16xf32>, %x: tensor<2x96x96xf32>)
    -> (tensor<2x96x96xf32>, tensor<2x96x96xf32>, tensor<2x96x16xf32>, tensor<2x96x16xf32>, tensor<2x96x16xf32>, tensor<2x96x16xf32>, tensor<2x48x8xf32>, tensor<2x96x96xf32>) {
  %s = ds.matmul %q, %q transpose_rhs : tensor<2x96x16xf32>, tensor<2x96x16xf32> -> tensor<2x96x96xf32>
  %m = ds.causal_mask %s : tensor<2x96x96xf32>
  %p = ds.softmax %x axis = 2 : tensor<2x96x96xf32>
  %o = ds.matmul %p, %q : tensor<2x96x96xf32>, tensor<2x96x16xf32> -> tensor<2x96x16xf32>
  %f = ds.causal_mask %x fill = 1.0 : tensor<2x96x96xf32>
  %o2 = ds.matmul %f, %q : tensor<2x96x96xf32>, tensor<2x96x16xf32> -> tensor<2x96x16xf32>
  %z = ds.causal_mask %x fill = 0.0 : tensor<2x96x96xf32>
  %zx = ds.mul %z, %x : tensor<2x96x96xf32>, tensor<2x96x96xf32> -> tensor<2x96x96xf32>
  %o3 = ds.matmul %zx, %q : tensor<2x96x96xf32>, tensor<2x96x16xf32> -> tensor<2x96x16xf32>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %zd = ds.div %z, %zero : tensor<2x96x96xf32>, tensor<f32> -> tensor<2x96x96xf32>
  %o4 = ds.matmul %zd, %q : tensor<2x96x96xf32>, tensor<2x96x16xf32> -> tensor<2x96x16xf32>
  %zr = ds.reshape %z : tensor<2x96x96xf32> -> tensor<2x48x192xf32>
  %qr = ds.reshape %q : tensor<2x96x16xf32> -> tensor<2x192x8xf32>
  %o5 = ds.matmul %zr, %qr : tensor<2x48x192xf32>, tensor<2x192x8xf32> -> tensor<2x48x8xf32>
  %s2 = ds.matmul %o, %q transpose_rhs : tensor<2x96x16xf32>, tensor<2x96x16xf32> -> tensor<2x96x96xf32>
  %s2x = ds.mul %s2, %x : tensor<2x96x96xf32>, tensor<2x96x96xf32> -> tensor<2x96x96xf32>
  %s2m = ds.causal_mask %s2x fill = 0.0 : tensor<2x96x96xf32>
  %s2o = ds.add %s2x, %s2m : tensor<2x96x96xf32>, tensor<2x96x96xf32> -> tensor<2x96x96xf32>
  return %s, %m, %o, %o2, %o3, %o4, %o5, %s2o : tensor<2x96x96xf32>, tensor<2x96x96xf32>, tensor<2x96x16xf32>, tensor<2x96x16xf32>, tensor<2x96x16xf32>, tensor<2x96x16xf32>, tensor<2x48x8xf32>, tensor<2x96x96xf32>
}

// -----

// NEG: error: convert-ds-to-linalg: causal-block is rows per GEMM (0: off), not -1
func.func @negative(%q: tensor<2x8xf32>) -> tensor<2x8xf32> {
  return %q : tensor<2x8xf32>
}

// RUN: ds-opt %s --ds-sparsify-matmul="total-steps=10" -split-input-file -verify-diagnostics
// RUN: not ds-opt %s --ds-sparsify-matmul="initial=1.0 total-steps=10" -split-input-file 2>&1 | FileCheck %s --check-prefix=INITIAL
// RUN: not ds-opt %s --ds-sparsify-matmul="final=-0.1 total-steps=10" -split-input-file 2>&1 | FileCheck %s --check-prefix=FINAL
// RUN: not ds-opt %s --ds-sparsify-matmul -split-input-file 2>&1 | FileCheck %s --check-prefix=TOTAL
// RUN: not ds-opt %s --ds-sparsify-matmul="schedule=constant regrow" -split-input-file 2>&1 | FileCheck %s --check-prefix=REGROW
// RUN: not ds-opt %s --ds-sparsify-matmul="block=0 total-steps=10" -split-input-file 2>&1 | FileCheck %s --check-prefix=BLOCK0
// RUN: not ds-opt %s --ds-sparsify-matmul="update-every=0 total-steps=10" -split-input-file 2>&1 | FileCheck %s --check-prefix=EVERY
// RUN: not ds-opt %s --ds-sparsify-matmul="total-steps=10 total-steps=20" -split-input-file 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not ds-opt %s --ds-sparsify-matmul="total-steps=10 policy=%S/Inputs/sparsity-bad-key.yaml" -split-input-file 2>&1 | FileCheck %s --check-prefix=KEY
// RUN: not ds-opt %s --ds-sparsify-matmul="total-steps=10 policy=%S/Inputs/sparsity-conv.yaml" -split-input-file 2>&1 | FileCheck %s --check-prefix=CONV
// RUN: not ds-opt %s --ds-sparsify-matmul="total-steps=10 policy=%S/Inputs/mgpm-no-quant.yaml" -split-input-file 2>&1 | FileCheck %s --check-prefix=NOSECTION
// RUN: not ds-opt %s --ds-training-pipeline="sparsity-final=1.5" -split-input-file 2>&1 | FileCheck %s --check-prefix=PIPE
// INITIAL: in option 'initial' of pass 'ds-sparsify-matmul': must be in [0, 1), got 1.000000
// FINAL: in option 'final' of pass 'ds-sparsify-matmul': must be in [0, 1), got -0.100000
// TOTAL: in option 'total-steps' of pass 'ds-sparsify-matmul': is needed by the cosine schedule (the training length it is laid over); give total-steps=T or schedule=constant
// REGROW: in option 'total-steps' of pass 'ds-sparsify-matmul': is needed by regrow (the drop fraction decays to 0 at regrow-end * total-steps)
// BLOCK0: in option 'block' of pass 'ds-sparsify-matmul': must be positive, got 0
// EVERY: in option 'update-every' of pass 'ds-sparsify-matmul': must be positive, got 0
// TWICE: in option 'total-steps' of pass 'ds-sparsify-matmul': given 2 times; give each option once
// KEY: sparsity-bad-key.yaml:3:5: error: ds-sparsify-matmul: unknown sparsity rule key 'density'; expected op, role, param, module or sparse
// CONV: sparsity-conv.yaml:2:5: error: ds-sparsify-matmul: sparsity rule #0 matches 'ds.conv2d'; only linear layers (ds.matmul) are made block-sparse
// NOSECTION: mgpm-no-quant.yaml:1:1: error: ds-sparsify-matmul: the policy has no 'sparsity:' section for ds-sparsify-matmul
// PIPE: in option 'final' of pass 'ds-sparsify-matmul': must be in [0, 1), got 1.500000

// A weight the block does not divide: a located error, the step unchanged.
func.func @step(%w: tensor<64x12xf32> {ds.param = "fc1.weight", ds.init = #ds.init<zeros>},
                %w2: tensor<8x64xf32> {ds.param = "fc2.weight", ds.init = #ds.init<zeros>},
                %x: tensor<2x12xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  // expected-error@+1 {{ds-sparsify-matmul: block size 8 does not divide dimension 1 (12) of the weight 'fc1.weight' 'tensor<64x12xf32>'; choose another block or keep the layer dense with a policy rule 'param: fc1.weight, sparse: false'}}
  %h = ds.matmul %x, %w transpose_rhs : tensor<2x12xf32>, tensor<64x12xf32> -> tensor<2x64xf32>
  %y = ds.matmul %h, %w2 transpose_rhs : tensor<2x64xf32>, tensor<8x64xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %y [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{ds-sparsify-matmul: runs on the forward + loss step, before ds-autodiff; this step already has gradients or updates}}
func.func @step(%w: tensor<8x8xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                %x: tensor<2x8xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}, tensor<8x8xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w transpose_rhs : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %h [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<8x8xf32>
}

// -----

// Nothing to sparsify (the only layer is the head): a warning, no change.
// expected-warning@+1 {{ds-sparsify-matmul: found no linear layer the sparsity policy makes sparse; the step is unchanged}}
func.func @step(%w: tensor<8x8xf32> {ds.param = "lm_head.weight", ds.init = #ds.init<zeros>},
                %x: tensor<2x8xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.matmul %x, %w transpose_rhs {ds.module = "lm_head"} : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %l = ds.reduce_sum %h [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The second run finds the masks already there.
// expected-error@+1 {{ds-sparsify-matmul: the step is already sparse (it has 'sparsity.mask' state)}}
func.func @step(%w: tensor<8x8xf32> {ds.param = "fc1.weight", ds.init = #ds.init<zeros>},
                %m: tensor<1x1xi8> {ds.state = #ds.state<"sparsity.mask", of = "fc1.weight">, ds.init = #ds.init<ones>},
                %x: tensor<2x8xf32> {ds.input = "x"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %h = ds.block_sparse_matmul %x, %w, %m block = 8 transpose_weight : tensor<2x8xf32>, tensor<8x8xf32>, tensor<1x1xi8> -> tensor<2x8xf32>
  %l = ds.reduce_sum %h [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

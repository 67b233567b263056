// The example models lower completely and the result compiles through the
// naive CPU path (bufferization, loops, LLVM). ds-export-contract first
// moves the training-step attributes, whose verifier wants tensors, into
// the module table.
//
// RUN: ds-opt %ds_src_root/examples/mlp.mlir --ds-export-contract --convert-ds-to-linalg \
// RUN:   | FileCheck %s --check-prefix=MLP --implicit-check-not="= ds."
// RUN: ds-opt %ds_src_root/examples/cnn.mlir --ds-export-contract --convert-ds-to-linalg \
// RUN:   | FileCheck %s --check-prefix=CNN --implicit-check-not="= ds."
// RUN: ds-opt %ds_src_root/examples/gpt_block.mlir --ds-export-contract --convert-ds-to-linalg \
// RUN:   | FileCheck %s --check-prefix=GPT --implicit-check-not="= ds."
//
// DEFINE: %{cpu} = ds-export-contract,func.func(convert-ds-to-linalg),one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},canonicalize,buffer-deallocation-pipeline,func.func(convert-linalg-to-loops),expand-strided-metadata,lower-affine,convert-scf-to-cf,convert-math-to-llvm,convert-math-to-libm,convert-to-llvm,reconcile-unrealized-casts
// RUN: ds-opt %ds_src_root/examples/mlp.mlir --pass-pipeline="builtin.module(%{cpu})" | FileCheck %s --check-prefix=LLVM
// RUN: ds-opt %ds_src_root/examples/cnn.mlir --pass-pipeline="builtin.module(%{cpu})" | FileCheck %s --check-prefix=LLVM
// RUN: ds-opt %ds_src_root/examples/gpt_block.mlir --pass-pipeline="builtin.module(%{cpu})" | FileCheck %s --check-prefix=LLVM
//

// MLP-LABEL: func.func @mlp_step
// MLP:         linalg.matmul
// MLP:         tensor.from_elements

// CNN-LABEL: func.func @cnn_step
// CNN:         linalg.conv_2d_nchw_fchw
// CNN:         linalg.pooling_nchw_max
// CNN:         linalg.conv_2d_nchw_fchw
// CNN:         linalg.pooling_nchw_sum
// CNN:         linalg.matmul

// GPT-LABEL: func.func @gpt_step
// GPT:         tensor.extract
// GPT:         linalg.batch_matmul
// GPT:         linalg.batch_matmul

// LLVM: llvm.func @{{.*}}_step

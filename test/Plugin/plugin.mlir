// Debian's stock mlir-opt-22 loads ds as a dialect plugin (which registers the
// dialect and the passes) or as a pass plugin, parses ds IR and runs ds passes. Pass flags of a plugin are not known when
// mlir-opt parses its command line, so ds passes go in --pass-pipeline.

// RUN: %mlir_opt --load-dialect-plugin=%ds_plugin %s | FileCheck %s --check-prefix=PARSE
// RUN: %mlir_opt --load-dialect-plugin=%ds_plugin %s --pass-pipeline="builtin.module(ds-export-contract)" | FileCheck %s --check-prefix=PASS
// The pass plugin alone registers the passes but not the dialect (mlir-opt
// offers pass plugins no registry), so it runs them on IR without ds syntax.
// RUN: %mlir_opt --load-pass-plugin=%ds_plugin %S/Inputs/plain.mlir --pass-pipeline="builtin.module(ds-export-contract)" | FileCheck %s --check-prefix=PLAIN
// RUN: %mlir_opt --load-dialect-plugin=%ds_plugin --load-pass-plugin=%ds_plugin %ds_src_root/examples/gpt_block.mlir --pass-pipeline="builtin.module(ds-export-contract)" | FileCheck %s --check-prefix=GPT

// Bad input through the plugin: a located error and a non-zero exit.
// RUN: not %mlir_opt --load-dialect-plugin=%ds_plugin %S/Inputs/bad.mlir 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not %mlir_opt --load-dialect-plugin=%ds_plugin %S/Inputs/bad-contract.mlir --pass-pipeline="builtin.module(ds-export-contract)" 2>&1 | FileCheck %s --check-prefix=BADC

// PARSE: ds.relu %{{.*}} : tensor<4x8xf32>
// PARSE: ds.softmax %{{.*}} axis = 1 : tensor<4x8xf32>
// PLAIN: func.func @plain
// PASS: module attributes {ds.contract = {f = {args = [{name = "x", role = "input"
// GPT: module attributes {ds.contract = {gpt_step =
// GPT: ds.causal_mask
// BAD: bad.mlir:5:8: error: 'ds.matmul' op contraction sizes differ
// BADC: bad-contract.mlir:3:1: error: 'func.func' op a training step has exactly one result marked 'ds.loss', found 0

func.func @f(%x: tensor<4x8xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %0 = ds.relu %x : tensor<4x8xf32>
  %1 = ds.softmax %0 axis = 1 : tensor<4x8xf32>
  %2 = ds.mse_loss %0, %1 : tensor<4x8xf32> -> tensor<f32>
  return %2 : tensor<f32>
}

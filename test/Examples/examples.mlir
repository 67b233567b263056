// The example forward graphs parse, verify (ops and training-step contract)
// and round-trip, and the checked-in files are the generator's output.

// RUN: ds-opt %ds_src_root/examples/mlp.mlir | ds-opt | FileCheck %s --check-prefix=MLP
// RUN: ds-opt %ds_src_root/examples/gpt_block.mlir | ds-opt | FileCheck %s --check-prefix=GPT
// RUN: ds-opt %ds_src_root/examples/cnn.mlir | ds-opt | FileCheck %s --check-prefix=CNN

// RUN: python3 %ds_src_root/examples/gen_examples.py mlp | diff - %ds_src_root/examples/mlp.mlir
// RUN: python3 %ds_src_root/examples/gen_examples.py gpt | diff - %ds_src_root/examples/gpt_block.mlir
// RUN: python3 %ds_src_root/examples/gen_examples.py cnn | diff - %ds_src_root/examples/cnn.mlir

// Other sizes verify too (the benchmark's size, and f64 for gradient checks).
// RUN: python3 %ds_src_root/examples/gen_examples.py gpt --d-model 256 --heads 4 --seq 128 --batch 16 | ds-opt > /dev/null
// RUN: python3 %ds_src_root/examples/gen_examples.py cnn --dtype f64 --image 12 --channels 3 | ds-opt > /dev/null

// MLP-LABEL: func.func @mlp_step
// MLP-SAME: ds.param = "fc1.weight"
// MLP-SAME: ds.state = #ds.state<"rng">
// MLP-SAME: ds.input = "labels"
// MLP-SAME: attributes {ds.train_step}
// MLP: ds.dropout
// MLP: ds.cross_entropy

// GPT-LABEL: func.func @gpt_step
// GPT-SAME: ds.param = "attn.q_proj.weight"
// GPT: ds.embedding
// GPT: ds.layer_norm
// GPT: ds.causal_mask
// GPT: ds.softmax
// GPT: ds.gelu
// GPT: ds.cross_entropy

// CNN-LABEL: func.func @cnn_step
// CNN-SAME: ds.state = #ds.state<"bn1.running_mean">
// CNN: ds.conv2d
// CNN: ds.batch_norm
// CNN: ds.max_pool2d
// CNN: ds.avg_pool2d
// CNN: ds.cross_entropy

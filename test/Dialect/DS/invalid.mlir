// RUN: ds-opt %s -split-input-file -verify-diagnostics

// One case per verifier message of the ds ops. Contract (attribute) errors
// are in contract-invalid.mlir.

func.func @negative_dynamic_operand(%x: tensor<?x4xf32>) {
  // expected-error@+1 {{'ds.relu' op operand #0 (%arg0) has a dynamic dimension 0 in 'tensor<?x4xf32>'; ds requires static shapes}}
  %0 = ds.relu %x : tensor<?x4xf32>
  return
}

// -----

func.func @negative_dynamic_result(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) {
  // expected-error@+1 {{'ds.matmul' op result #0 (%0) has a dynamic dimension 1 in 'tensor<4x?xf32>'}}
  %0 = ds.matmul %x, %y : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x?xf32>
  return
}

// -----

func.func @negative_unranked(%x: tensor<*xf32>) {
  // expected-error@+1 {{invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %0 = ds.relu %x : tensor<*xf32>
  return
}

// -----

func.func @negative_int_unary(%x: tensor<4xi32>) {
  // expected-error@+1 {{'ds.exp' op operand #0 must be ranked tensor of floating-point values}}
  %0 = ds.exp %x : tensor<4xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// ds.matmul
//===----------------------------------------------------------------------===//

func.func @negative_matmul_element_types(%x: tensor<4x3xf32>, %y: tensor<3x5xbf16>) {
  // expected-error@+1 {{lhs and rhs must share an element type, got 'f32' and 'bf16'}}
  %0 = ds.matmul %x, %y : tensor<4x3xf32>, tensor<3x5xbf16> -> tensor<4x5xf32>
  return
}

// -----

func.func @negative_matmul_rank(%x: tensor<4xf32>, %y: tensor<4x5xf32>) {
  // expected-error@+1 {{operands need rank >= 2, got lhs [4] and rhs [4, 5]}}
  %0 = ds.matmul %x, %y : tensor<4xf32>, tensor<4x5xf32> -> tensor<5xf32>
  return
}

// -----

func.func @negative_matmul_contraction(%x: tensor<4x3xf32>, %y: tensor<4x5xf32>) {
  // expected-error@+1 {{contraction sizes differ: lhs [4, 3] gives K = 3, rhs [4, 5] gives K = 4}}
  %0 = ds.matmul %x, %y : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @negative_matmul_batch(%x: tensor<2x4x3xf32>, %y: tensor<3x3x5xf32>) {
  // expected-error@+1 {{batch dimensions of lhs [2, 4, 3] and rhs [3, 3, 5] must be equal, or rhs must be a rank-2 matrix shared by every batch}}
  %0 = ds.matmul %x, %y : tensor<2x4x3xf32>, tensor<3x3x5xf32> -> tensor<2x4x5xf32>
  return
}

// -----

func.func @negative_matmul_result(%x: tensor<4x3xf32>, %y: tensor<3x5xf32>) {
  // expected-error@+1 {{result shape [5, 4] does not match the product's shape [4, 5]}}
  %0 = ds.matmul %x, %y : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<5x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise binary ops and ds.broadcast
//===----------------------------------------------------------------------===//

func.func @negative_binary_element_types(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error@+2 {{'ds.add' op operands must share an element type, got f32 and f16}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.add %x, %y : tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return
}

// -----

func.func @negative_binary_rank(%x: tensor<4x8xf32>, %y: tensor<8xf32>) {
  // expected-error@+2 {{'ds.mul' op operand ranks differ ([4, 8] vs [8]); broadcasting keeps the rank, reshape an operand first}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.mul %x, %y : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @negative_binary_broadcast(%x: tensor<4x3xf32>, %y: tensor<4x5xf32>) {
  // expected-error@+2 {{'ds.sub' op dimension 1 is not broadcastable (3 vs 5 in [4, 3] and [4, 5])}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.sub %x, %y : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
  return
}

// -----

func.func @negative_binary_result(%x: tensor<4x1xf32>, %y: tensor<1x5xf32>) {
  // expected-error@+2 {{'ds.div' op inferred type(s) 'tensor<4x5xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.div %x, %y : tensor<4x1xf32>, tensor<1x5xf32> -> tensor<4x1xf32>
  return
}

// -----

func.func @negative_broadcast_element(%x: tensor<8xf32>) {
  // expected-error@+1 {{input and result must share an element type, got 'f32' and 'f16'}}
  %0 = ds.broadcast %x dims = [1] : tensor<8xf32> -> tensor<4x8xf16>
  return
}

// -----

func.func @negative_broadcast_dims_count(%x: tensor<8xf32>) {
  // expected-error@+1 {{'dims' has 2 entries, but the input has rank 1}}
  %0 = ds.broadcast %x dims = [0, 1] : tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @negative_broadcast_dims_range(%x: tensor<8xf32>) {
  // expected-error@+1 {{'dims' entry 2 is out of range for result rank 2}}
  %0 = ds.broadcast %x dims = [2] : tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @negative_broadcast_dims_order(%x: tensor<1x8xf32>) {
  // expected-error@+1 {{'dims' [2, 1] must be strictly increasing}}
  %0 = ds.broadcast %x dims = [2, 1] : tensor<1x8xf32> -> tensor<4x8x8xf32>
  return
}

// -----

func.func @negative_broadcast_size(%x: tensor<3xf32>) {
  // expected-error@+1 {{input dimension 0 (size 3) cannot broadcast to result dimension 1 (size 8)}}
  %0 = ds.broadcast %x dims = [1] : tensor<3xf32> -> tensor<4x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// ds.cast, ds.gelu
//===----------------------------------------------------------------------===//

func.func @negative_cast_saturate(%x: tensor<4xf32>) {
  // expected-error@+1 {{'saturate' applies to float-to-float casts only}}
  %0 = ds.cast %x saturate : tensor<4xf32> -> tensor<4xi8>
  return
}

// -----

func.func @negative_cast_shape(%x: tensor<4xf32>) {
  // expected-error@+1 {{'ds.cast' op requires the same shape for all operands and results}}
  %0 = ds.cast %x : tensor<4xf32> -> tensor<5xbf16>
  return
}

// -----

func.func @negative_gelu_mode(%x: tensor<4xf32>) {
  // expected-error@+1 {{expected string or keyword containing one of the following enum values for attribute 'approximate' [none, tanh]}}
  %0 = ds.gelu %x approximate = sigmoid : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Softmax and normalisations
//===----------------------------------------------------------------------===//

func.func @negative_softmax_axis(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'ds.softmax' op axis 2 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = ds.softmax %x axis = 2 : tensor<4x8xf32>
  return
}

// -----

func.func @negative_log_softmax_axis(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'ds.log_softmax' op axis -1 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = ds.log_softmax %x axis = -1 : tensor<4x8xf32>
  return
}

// -----

func.func @negative_layer_norm_weight(%x: tensor<2x16x64xf32>, %w: tensor<16xf32>) {
  // expected-error@+1 {{weight shape [16] must equal the trailing dimensions of the input shape [2, 16, 64]}}
  %0 = ds.layer_norm %x, %w, %w : tensor<2x16x64xf32>, tensor<16xf32>, tensor<16xf32>
  return
}

// -----

func.func @negative_layer_norm_element(%x: tensor<2x64xbf16>, %w: tensor<64xf32>) {
  // expected-error@+1 {{input and weight must share an element type, got 'bf16' and 'f32'}}
  %0 = ds.layer_norm %x, %w, %w : tensor<2x64xbf16>, tensor<64xf32>, tensor<64xf32>
  return
}

// -----

func.func @negative_layer_norm_bias(%x: tensor<2x64xf32>, %w: tensor<64xf32>, %b: tensor<32xf32>) {
  // expected-error@+1 {{'ds.layer_norm' op failed to verify that all of {weight, bias} have same type}}
  %0 = "ds.layer_norm"(%x, %w, %b) : (tensor<2x64xf32>, tensor<64xf32>, tensor<32xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @negative_rms_norm_eps(%x: tensor<2x64xf32>, %w: tensor<64xf32>) {
  // expected-error@+1 {{eps must be non-negative, got -1.000000e+00}}
  %0 = ds.rms_norm %x, %w eps = -1.0 : tensor<2x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @negative_batch_norm_rank(%x: tensor<16xf32>, %w: tensor<16xf32>) {
  // expected-error@+1 {{input must have rank >= 2 ([N, C, ...]), got [16]}}
  %y, %m, %v = ds.batch_norm %x, %w, %w, %w, %w : tensor<16xf32>, tensor<16xf32>
  return
}

// -----

func.func @negative_batch_norm_channels(%x: tensor<8x16x4x4xf32>, %w: tensor<8xf32>) {
  // expected-error@+1 {{weight, bias and running statistics must have shape [16] (the channels), got [8]}}
  %y, %m, %v = ds.batch_norm %x, %w, %w, %w, %w : tensor<8x16x4x4xf32>, tensor<8xf32>
  return
}

// -----

func.func @negative_batch_norm_element(%x: tensor<8x16xf16>, %w: tensor<16xf32>) {
  // expected-error@+1 {{input and weight must share an element type, got 'f16' and 'f32'}}
  %y, %m, %v = ds.batch_norm %x, %w, %w, %w, %w : tensor<8x16xf16>, tensor<16xf32>
  return
}

// -----

func.func @negative_batch_norm_single(%x: tensor<1x16xf32>, %w: tensor<16xf32>) {
  // expected-error@+1 {{needs more than one value per channel in training mode, got 1}}
  %y, %m, %v = ds.batch_norm %x, %w, %w, %w, %w : tensor<1x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @negative_batch_norm_momentum(%x: tensor<8x16xf32>, %w: tensor<16xf32>) {
  // expected-error@+1 {{momentum must be in [0, 1], got 1.5}}
  %y, %m, %v = ds.batch_norm %x, %w, %w, %w, %w momentum = 1.5 : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @negative_batch_norm_eps(%x: tensor<8x16xf32>, %w: tensor<16xf32>) {
  // expected-error@+1 {{'ds.batch_norm' op eps must be non-negative}}
  %y, %m, %v = ds.batch_norm %x, %w, %w, %w, %w eps = -0.5 : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

func.func @negative_reduce_range(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'ds.reduce_sum' op reduction dimension 2 is out of range for rank 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.reduce_sum %x [2] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @negative_reduce_order(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'ds.reduce_mean' op reduction dimensions [1, 0] must be strictly increasing}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.reduce_mean %x [1, 0] : tensor<4x8xf32> -> tensor<f32>
  return
}

// -----

func.func @negative_reduce_result(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'ds.reduce_max' op inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.reduce_max %x [1] keep_dims : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

func.func @negative_transpose_count(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'ds.transpose' op permutation [0] has 1 entries, expected 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.transpose %x [0] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @negative_transpose_perm(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'ds.transpose' op [1, 1] is not a permutation of [0, 2)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.transpose %x [1, 1] : tensor<4x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @negative_reshape_count(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{cannot reshape [4, 8] (32 elements) into [5, 6] (30 elements)}}
  %0 = ds.reshape %x : tensor<4x8xf32> -> tensor<5x6xf32>
  return
}

// -----

func.func @negative_reshape_element(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{input and result must share an element type, got 'f32' and 'f16'}}
  %0 = ds.reshape %x : tensor<4x8xf32> -> tensor<32xf16>
  return
}

// -----

func.func @negative_slice_element(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{input and result must share an element type, got 'f32' and 'bf16'}}
  %0 = ds.slice %x offsets [0, 0] : tensor<4x8xf32> -> tensor<2x2xbf16>
  return
}

// -----

func.func @negative_slice_rank(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{result rank 1 differs from input rank 2}}
  %0 = ds.slice %x offsets [0, 0] : tensor<4x8xf32> -> tensor<2xf32>
  return
}

// -----

func.func @negative_slice_offsets(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'offsets' has 1 entries, expected 2}}
  %0 = ds.slice %x offsets [0] : tensor<4x8xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @negative_slice_strides(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'strides' has 3 entries, expected 2}}
  %0 = ds.slice %x offsets [0, 0] strides [1, 1, 1] : tensor<4x8xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @negative_slice_stride_value(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{stride 0 in dimension 1 must be >= 1}}
  %0 = ds.slice %x offsets [0, 0] strides [1, 0] : tensor<4x8xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @negative_slice_offset_value(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{offset -1 in dimension 0 must be >= 0}}
  %0 = ds.slice %x offsets [-1, 0] : tensor<4x8xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @negative_slice_bounds(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{slice of dimension 1 (offset 4, size 3, stride 2) reads past its size 8}}
  %0 = ds.slice %x offsets [0, 4] strides [1, 2] : tensor<4x8xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @negative_concat_empty() {
  // expected-error@+2 {{'ds.concat' op needs at least one input}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = "ds.concat"() {axis = 0 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @negative_concat_axis(%x: tensor<4x8xf32>) {
  // expected-error@+2 {{'ds.concat' op axis 2 is out of range for rank 2}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.concat %x, %x axis = 2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @negative_concat_types(%x: tensor<4x8xf32>, %y: tensor<4x8xf16>) {
  // expected-error@+2 {{'ds.concat' op input #1 must have the rank and element type of input #0}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.concat %x, %y axis = 1 : tensor<4x8xf32>, tensor<4x8xf16> -> tensor<4x16xf32>
  return
}

// -----

func.func @negative_concat_shapes(%x: tensor<4x8xf32>, %y: tensor<5x8xf32>) {
  // expected-error@+2 {{'ds.concat' op input #1 has shape [5, 8], which differs from input #0 [4, 8] outside the axis}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.concat %x, %y axis = 1 : tensor<4x8xf32>, tensor<5x8xf32> -> tensor<4x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Transformer pieces
//===----------------------------------------------------------------------===//

func.func @negative_embedding_table(%t: tensor<96xf32>, %i: tensor<4xi64>) {
  // expected-error@+2 {{'ds.embedding' op table must have rank 2 ([num_embeddings, dim]), got [96]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.embedding %t, %i : tensor<96xf32>, tensor<4xi64> -> tensor<4xf32>
  return
}

// -----

func.func @negative_embedding_indices(%t: tensor<96x8xf32>, %i: tensor<4xf32>) {
  // expected-error@+1 {{'ds.embedding' op operand #1 must be ranked tensor of signless integer values}}
  %0 = ds.embedding %t, %i : tensor<96x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @negative_causal_mask_rank(%x: tensor<16xf32>) {
  // expected-error@+1 {{scores must have rank >= 2 ([..., T, S]), got [16]}}
  %0 = ds.causal_mask %x : tensor<16xf32>
  return
}

// -----

func.func @negative_causal_mask_shape(%x: tensor<8x4xf32>) {
  // expected-error@+1 {{more queries (8) than keys (4)}}
  %0 = ds.causal_mask %x : tensor<8x4xf32>
  return
}

// -----

func.func @negative_dropout_rng(%x: tensor<8xf32>, %r: tensor<3xi64>) {
  // expected-error@+1 {{rng state must be a tensor<2xi64> (key, counter), got 'tensor<3xi64>'}}
  %0, %1 = ds.dropout %x, %r p = 0.1 : tensor<8xf32>, tensor<3xi64>
  return
}

// -----

func.func @negative_dropout_p(%x: tensor<8xf32>, %r: tensor<2xi64>) {
  // expected-error@+1 {{drop probability p must be in [0, 1), got 1}}
  %0, %1 = ds.dropout %x, %r p = 1.0 : tensor<8xf32>, tensor<2xi64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

func.func @negative_conv_rank(%x: tensor<3x28x28xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+2 {{'ds.conv2d' op input [N, C, H, W] and weight [O, C/groups, KH, KW] must have rank 4, got [3, 28, 28] and [16, 3, 3, 3]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.conv2d %x, %w : tensor<3x28x28xf32>, tensor<16x3x3x3xf32> -> tensor<16x26x26xf32>
  return
}

// -----

func.func @negative_conv_element(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) {
  // expected-error@+2 {{'ds.conv2d' op input and weight must share an element type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.conv2d %x, %w : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @negative_conv_strides(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error@+2 {{'ds.conv2d' op 'strides' needs 2 entries (height, width), got 1}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.conv2d %x, %w strides = [2] : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @negative_conv_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error@+2 {{'ds.conv2d' op 'padding' entries must be >= 0, got [-1, 0]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.conv2d %x, %w padding = [-1, 0] : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @negative_conv_groups(%x: tensor<1x3x8x8xf32>, %w: tensor<4x1x3x3xf32>) {
  // expected-error@+2 {{'ds.conv2d' op groups = 2 must be >= 1 and divide the input channels (3) and output channels (4)}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.conv2d %x, %w groups = 2 : tensor<1x3x8x8xf32>, tensor<4x1x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @negative_conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error@+2 {{'ds.conv2d' op weight has 2 input channels per group, expected 3}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.conv2d %x, %w : tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @negative_conv_bias(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{'ds.conv2d' op bias must be a tensor of shape [4] with the input's element type}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.conv2d %x, %w, %b : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @negative_conv_fit(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error@+2 {{'ds.conv2d' op the kernel does not fit the padded input [1, 3, 2, 2]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.conv2d %x, %w : tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x1x1xf32>
  return
}

// -----

func.func @negative_pool_rank(%x: tensor<3x8x8xf32>) {
  // expected-error@+2 {{'ds.max_pool2d' op input must be a rank-4 [N, C, H, W] tensor}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.max_pool2d %x kernel = [2, 2] : tensor<3x8x8xf32> -> tensor<3x4x4xf32>
  return
}

// -----

func.func @negative_pool_kernel(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+2 {{'ds.avg_pool2d' op 'kernel' entries must be >= 1, got [0, 2]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.avg_pool2d %x kernel = [0, 2] : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  return
}

// -----

func.func @negative_pool_padding(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+2 {{'ds.max_pool2d' op padding [2, 2] must be at most half the kernel [2, 2]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.max_pool2d %x kernel = [2, 2] padding = [2, 2] : tensor<1x3x8x8xf32> -> tensor<1x3x6x6xf32>
  return
}

// -----

func.func @negative_pool_fit(%x: tensor<1x3x2x2xf32>) {
  // expected-error@+2 {{'ds.avg_pool2d' op the window [3, 3] does not fit the padded input [1, 3, 2, 2]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.avg_pool2d %x kernel = [3, 3] : tensor<1x3x2x2xf32> -> tensor<1x3x1x1xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

func.func @negative_cross_entropy(%l: tensor<8x10xf32>, %y: tensor<4xi64>) {
  // expected-error@+2 {{'ds.cross_entropy' op expects logits [N, C] and labels [N], got [8, 10] and [4]}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.cross_entropy %l, %y : tensor<8x10xf32>, tensor<4xi64> -> tensor<f32>
  return
}

// -----

func.func @negative_cross_entropy_i1_labels(%l: tensor<16x10xf32>, %y: tensor<16xi1>) {
  // expected-error@+2 {{'ds.cross_entropy' op labels of type 1-bit integer cannot index 10 classes; use i32 or i64 labels}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.cross_entropy %l, %y : tensor<16x10xf32>, tensor<16xi1> -> tensor<f32>
  return
}

// -----

func.func @negative_cross_entropy_i8_labels(%l: tensor<4x300xf32>, %y: tensor<4xi8>) {
  // expected-error@+2 {{'ds.cross_entropy' op labels of type 8-bit integer cannot index 300 classes; use i32 or i64 labels}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.cross_entropy %l, %y : tensor<4x300xf32>, tensor<4xi8> -> tensor<f32>
  return
}

// -----

func.func @negative_mse_types(%x: tensor<8xf32>, %y: tensor<4xf32>) {
  // expected-error@+1 {{'ds.mse_loss' op failed to verify that all of {input, target} have same type}}
  %0 = "ds.mse_loss"(%x, %y) : (tensor<8xf32>, tensor<4xf32>) -> tensor<f32>
  return
}

// -----

// Unknown ops are errors, not crashes.
func.func @negative_unknown_op(%x: tensor<8xf32>) {
  // expected-error@+1 {{custom op 'ds.frobnicate' is unknown}}
  %0 = ds.frobnicate %x : tensor<8xf32>
  return
}

// -----

func.func @negative_unknown_annotation(%x: tensor<8xf32>) {
  // expected-error@+1 {{'ds.relu' op unknown ds attribute 'ds.colour'}}
  %0 = ds.relu %x {ds.colour = "red"} : tensor<8xf32>
  return
}

// -----

func.func @negative_annotation_type(%x: tensor<8xf32>) {
  // expected-error@+1 {{'ds.relu' op attribute 'ds.role' must be a string}}
  %0 = ds.relu %x {ds.role = 3 : i64} : tensor<8xf32>
  return
}

// -----

func.func @negative_op_id_type(%x: tensor<8xf32>) {
  // expected-error@+1 {{'ds.relu' op attribute 'ds.op_id' must be an integer}}
  %0 = ds.relu %x {ds.op_id = "q"} : tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Comparison, selection, insert_slice and backward kernels
//===----------------------------------------------------------------------===//

func.func @negative_compare_types(%x: tensor<4xf32>, %y: tensor<4xf64>) {
  // expected-error@+2 {{'ds.compare' op operands must share an element type, got f32 and f64}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.compare lt, %x, %y : tensor<4xf32>, tensor<4xf64> -> tensor<4xi1>
  return
}

// -----

func.func @negative_select_types(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error@+2 {{'ds.select' op on_true and on_false must share an element type, got f32 and f16}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.select %c, %x, %y : tensor<4xi1>, tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return
}

// -----

func.func @negative_select_shapes(%c: tensor<5xi1>, %x: tensor<4xf32>) {
  // expected-error@+2 {{'ds.select' op dimension 0 is not broadcastable (5 vs 4 in [5] and [4])}}
  // expected-error@+1 {{failed to infer returned types}}
  %0 = ds.select %c, %x, %x : tensor<5xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @negative_insert_slice_types(%x: tensor<4xf32>, %d: tensor<8xf16>) {
  // expected-error@+1 {{source and dest must share an element type, got 'f32' and 'f16'}}
  %0 = ds.insert_slice %x into %d offsets [0] : tensor<4xf32> into tensor<8xf16>
  return
}

// -----

func.func @negative_insert_slice_bounds(%x: tensor<4xf32>, %d: tensor<8xf32>) {
  // expected-error@+1 {{slice of dimension 0 (offset 6, size 4, stride 1) reads past its size 8}}
  %0 = ds.insert_slice %x into %d offsets [6] : tensor<4xf32> into tensor<8xf32>
  return
}

// -----

func.func @negative_insert_slice_rank(%x: tensor<4xf32>, %d: tensor<2x8xf32>) {
  // expected-error@+1 {{source rank 1 differs from dest rank 2}}
  %0 = ds.insert_slice %x into %d offsets [0, 0] : tensor<4xf32> into tensor<2x8xf32>
  return
}

// -----

func.func @negative_cross_entropy_grad_shapes(%l: tensor<8x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error@+1 {{expects logits [N, C] and labels [N], got [8, 10] and [4]}}
  %0 = ds.cross_entropy_grad %l, %y, %g : tensor<8x10xf32>, tensor<4xi64>, tensor<f32>
  return
}

// -----

func.func @negative_cross_entropy_grad_seed(%l: tensor<8x10xf32>, %y: tensor<8xi64>, %g: tensor<8xf32>) {
  // expected-error@+1 {{grad must be a rank-0 tensor of the logits' element type, got 'tensor<8xf32>'}}
  %0 = ds.cross_entropy_grad %l, %y, %g : tensor<8x10xf32>, tensor<8xi64>, tensor<8xf32>
  return
}

// -----

func.func @negative_embedding_grad_rank(%g: tensor<4x8xf32>, %i: tensor<4xi64>) {
  // expected-error@+1 {{result (the table) must have rank 2, got [96]}}
  %0 = ds.embedding_grad %g, %i : tensor<4x8xf32>, tensor<4xi64> -> tensor<96xf32>
  return
}

// -----

func.func @negative_embedding_grad_shape(%g: tensor<4x8xf32>, %i: tensor<5xi64>) {
  // expected-error@+1 {{grad shape [4, 8] must be the indices' shape plus the row size [5, 8]}}
  %0 = ds.embedding_grad %g, %i : tensor<4x8xf32>, tensor<5xi64> -> tensor<96x8xf32>
  return
}

// -----

func.func @negative_embedding_grad_type(%g: tensor<4x8xf32>, %i: tensor<4xi64>) {
  // expected-error@+1 {{grad and result must share an element type, got 'f32' and 'f64'}}
  %0 = ds.embedding_grad %g, %i : tensor<4x8xf32>, tensor<4xi64> -> tensor<96x8xf64>
  return
}

// -----

func.func @negative_conv_grad_shape(%dy: tensor<8x16x26x26xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{grad has type 'tensor<8x16x26x26xf32>', but the convolution produces [8, 16, 28, 28] of 'f32'}}
  %0 = ds.conv2d_grad_input %dy, %w padding = [1, 1] : tensor<8x16x26x26xf32>, tensor<16x3x3x3xf32> -> tensor<8x3x28x28xf32>
  return
}

// -----

func.func @negative_conv_grad_weight(%dy: tensor<8x16x28x28xf32>, %x: tensor<8x3x28x28xf32>) {
  // expected-error@+1 {{'ds.conv2d_grad_weight' op weight has 4 input channels per group, expected 3}}
  %0 = ds.conv2d_grad_weight %dy, %x padding = [1, 1] : tensor<8x16x28x28xf32>, tensor<8x3x28x28xf32> -> tensor<16x4x3x3xf32>
  return
}

// -----

func.func @negative_pool_grad_shape(%x: tensor<8x16x28x28xf32>, %dy: tensor<8x16x13x13xf32>) {
  // expected-error@+1 {{grad has type 'tensor<8x16x13x13xf32>', but the pooling produces [8, 16, 14, 14]}}
  %0 = ds.max_pool2d_grad %x, %dy kernel = [2, 2] : tensor<8x16x28x28xf32>, tensor<8x16x13x13xf32>
  return
}

// -----

func.func @negative_pool_grad_kernel(%x: tensor<8x16x28x28xf32>, %dy: tensor<8x16x14x14xf32>) {
  // expected-error@+1 {{'ds.avg_pool2d_grad' op 'kernel' needs 2 entries (height, width), got 1}}
  %0 = ds.avg_pool2d_grad %x, %dy kernel = [2] : tensor<8x16x28x28xf32>, tensor<8x16x14x14xf32>
  return
}

// -----

func.func @random_normal_bad_rng(%r: tensor<3xi64>) -> tensor<4xf32> {
  // expected-error@+1 {{rng state must be a tensor<2xi64> (key, counter), got 'tensor<3xi64>'}}
  %n, %r1 = ds.random_normal %r std = 1.0 : tensor<3xi64> -> tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

func.func @random_normal_bad_std(%r: tensor<2xi64>) -> tensor<4xf32> {
  // expected-error@+1 {{std must be finite and >= 0, got -1}}
  %n, %r1 = ds.random_normal %r std = -1.0 : tensor<2xi64> -> tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

func.func @fake_quant_scale_shape(%x: tensor<8x4xf32>, %s: tensor<4xf32>, %q: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant' op expects a scale of shape [8] for channels of axis 0, got 'tensor<4xf32>'}}
  %0 = ds.fake_quant %x, %s, %s, %q, %q axis = 0 : tensor<8x4xf32>, tensor<4xf32>, tensor<f32>
  return
}

// -----

func.func @fake_quant_per_tensor(%x: tensor<8x4xf32>, %s: tensor<4xf32>, %q: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant' op per-tensor quantization (no axis) expects a rank-0 scale, got 'tensor<4xf32>'}}
  %0 = ds.fake_quant %x, %s, %s, %q, %q : tensor<8x4xf32>, tensor<4xf32>, tensor<f32>
  return
}

// -----

func.func @fake_quant_axis(%x: tensor<8x4xf32>, %s: tensor<4xf32>, %q: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant' op axis 2 is out of range for 'tensor<8x4xf32>'}}
  %0 = ds.fake_quant %x, %s, %s, %q, %q axis = 2 : tensor<8x4xf32>, tensor<4xf32>, tensor<f32>
  return
}

// -----

func.func @fake_quant_group(%x: tensor<8x12xf32>, %s: tensor<8x2xf32>, %q: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant' op group_size 5 does not divide dimension 1 of 'tensor<8x12xf32>' (size 12)}}
  %0 = ds.fake_quant %x, %s, %s, %q, %q axis = 1 group_size = 5 : tensor<8x12xf32>, tensor<8x2xf32>, tensor<f32>
  return
}

// -----

func.func @fake_quant_group_shape(%x: tensor<8x12xf32>, %s: tensor<8x4xf32>, %q: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant' op expects a scale of shape [8, 3] for groups of 4 along axis 1, got 'tensor<8x4xf32>'}}
  %0 = ds.fake_quant %x, %s, %s, %q, %q axis = 1 group_size = 4 : tensor<8x12xf32>, tensor<8x4xf32>, tensor<f32>
  return
}

// -----

func.func @fake_quant_group_without_axis(%x: tensor<8x12xf32>, %s: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant' op group_size needs the axis it groups along}}
  %0 = ds.fake_quant %x, %s, %s, %s, %s group_size = 4 : tensor<8x12xf32>, tensor<f32>, tensor<f32>
  return
}

// -----

func.func @fake_quant_format(%x: tensor<8x12xf32>, %s: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant' op format must be f8E4M3FN or f8E5M2, got 'bf16'}}
  %0 = ds.fake_quant %x, %s, %s, %s, %s format = bf16 : tensor<8x12xf32>, tensor<f32>, tensor<f32>
  return
}

// -----

func.func @fake_quant_learned_fp8(%x: tensor<8x12xf32>, %s: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant' op a learned scale needs an integer grid; drop 'learned' or 'format'}}
  %0 = ds.fake_quant %x, %s, %s, %s, %s format = f8E5M2 learned : tensor<8x12xf32>, tensor<f32>, tensor<f32>
  return
}

// -----

func.func @fake_quant_qmin_rank(%x: tensor<8x12xf32>, %s: tensor<f32>, %q: tensor<1xf32>) {
  // expected-error@+1 {{'ds.fake_quant' op expects rank-0 qmin and qmax, got 'tensor<1xf32>'}}
  %0 = ds.fake_quant %x, %s, %s, %q, %q : tensor<8x12xf32>, tensor<f32>, tensor<1xf32>
  return
}

// -----

func.func @fake_quant_qmin_type(%x: tensor<8x12xf32>, %s: tensor<f32>, %q: tensor<f16>) {
  // expected-error@+1 {{'ds.fake_quant' op expects qmin and qmax of the scale's element type 'f32', got 'f16'}}
  %0 = ds.fake_quant %x, %s, %s, %q, %q : tensor<8x12xf32>, tensor<f32>, tensor<f16>
  return
}

// -----

func.func @fake_quant_grad_of(%x: tensor<8x12xf32>, %s: tensor<f32>) {
  // expected-error@+1 {{'ds.fake_quant_grad' op the gradient of 'scale' exists only for a learned scale}}
  %0 = ds.fake_quant_grad %x, %s, %s, %s, %s, %x of = scale : tensor<8x12xf32>, tensor<f32>, tensor<f32>
  return
}

// -----

func.func @quantize_grid_too_wide(%x: tensor<8x12xf32>, %s: tensor<f32>) {
  %lo = arith.constant dense<0.0> : tensor<f32>
  %hi = arith.constant dense<255.0> : tensor<f32>
  // expected-error@+1 {{'ds.quantize' op qmax 2.550000e+02 does not fit the result 'i8' ([-128, 127]; store an unsigned grid shifted)}}
  %0 = ds.quantize %x, %s, %s, %lo, %hi : tensor<8x12xf32>, tensor<f32>, tensor<f32> -> tensor<8x12xi8>
  return
}

// -----

func.func @quantized_matmul_contraction(%x: tensor<4x12xi8>, %w: tensor<8x10xi8>, %s: tensor<f32>, %sw: tensor<8xf32>) {
  // expected-error@+1 {{'ds.quantized_matmul' op contracts lhs dimension of size 12 with rhs dimension of size 10}}
  %0 = ds.quantized_matmul %x, %w, %s, %s, %sw, %sw transpose_rhs : tensor<4x12xi8>, tensor<8x10xi8>, tensor<f32>, tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @quantized_matmul_scale(%x: tensor<4x12xi8>, %w: tensor<8x12xi8>, %s: tensor<f32>, %sw: tensor<12xf32>) {
  // expected-error@+1 {{'ds.quantized_matmul' op expects a rank-0 rhs_scale and rhs_zero_point or ones of shape [8] (per output channel), got 'tensor<12xf32>'}}
  %0 = ds.quantized_matmul %x, %w, %s, %s, %sw, %sw transpose_rhs : tensor<4x12xi8>, tensor<8x12xi8>, tensor<f32>, tensor<12xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @quantized_matmul_types(%x: tensor<4x12xi32>, %w: tensor<8x12xi8>, %s: tensor<f32>) {
  // expected-error@+1 {{'ds.quantized_matmul' op expects i8 operands, got 'i32' and 'i8'}}
  %0 = ds.quantized_matmul %x, %w, %s, %s, %s, %s transpose_rhs : tensor<4x12xi32>, tensor<8x12xi8>, tensor<f32>, tensor<f32> -> tensor<4x8xf32>
  return
}

// -----

func.func @negative_read_fraction(%m: memref<8xf32>, %i: index) -> f32 {
  // expected-error@+1 {{'memref.load' op attribute 'ds.read_fraction' must be a float in [0, 1]}}
  %0 = memref.load %m[%i] {ds.read_fraction = 1.5 : f64} : memref<8xf32>
  return %0 : f32
}

// -----

func.func @causal_gemm_side(%a: tensor<4x8x8xf32>) -> tensor<4x8x8xf32> {
  // expected-error@+1 {{'ds.matmul' op attribute 'ds.causal_gemm' must be {block = <positive integer>, lhs and rhs = "lower" or "upper" (optional), result = "lower" (optional)}}}
  %0 = ds.matmul %a, %a {ds.causal_gemm = {block = 4 : i64, lhs = "left"}} : tensor<4x8x8xf32>, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
  return %0 : tensor<4x8x8xf32>
}

// -----

func.func @causal_gemm_block(%a: tensor<4x8x8xf32>) -> tensor<4x8x8xf32> {
  // expected-error@+1 {{'ds.matmul' op attribute 'ds.causal_gemm' must be}}
  %0 = ds.matmul %a, %a {ds.causal_gemm = {block = 0 : i64, result = "lower"}} : tensor<4x8x8xf32>, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
  return %0 : tensor<4x8x8xf32>
}

// -----

func.func @causal_gemm_key(%a: tensor<4x8x8xf32>) -> tensor<4x8x8xf32> {
  // expected-error@+1 {{'ds.matmul' op attribute 'ds.causal_gemm' must be}}
  %0 = ds.matmul %a, %a {ds.causal_gemm = {block = 4 : i64, rhs = 1 : i64, out = "lower"}} : tensor<4x8x8xf32>, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
  return %0 : tensor<4x8x8xf32>
}

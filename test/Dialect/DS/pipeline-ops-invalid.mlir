// Hand-written pipeline IR: ds.send / ds.recv are checked against each other
// across the stage functions of the module.
// RUN: ds-opt %s -split-input-file -verify-diagnostics

// A send whose receive is missing.
module attributes {ds.pipeline = {stages = 2 : i64}} {
  func.func @s0(%x: tensor<4xf32>) attributes {ds.pipeline_stage = 0 : i64} {
    // expected-error @+1 {{channel 3 from stage 0 to stage 1 has 2 ds.send and 1 ds.recv: every send needs its matching receive}}
    ds.send %x to 1 tag 3 : tensor<4xf32>
    ds.send %x to 1 tag 3 : tensor<4xf32>
    return
  }
  func.func @s1() -> tensor<4xf32> attributes {ds.pipeline_stage = 1 : i64} {
    %y = ds.recv from 0 tag 3 : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// Both ends of a channel carry one type.
module attributes {ds.pipeline = {stages = 2 : i64}} {
  func.func @s0(%x: tensor<4xf32>) attributes {ds.pipeline_stage = 0 : i64} {
    ds.send %x to 1 tag 0 : tensor<4xf32>
    return
  }
  func.func @s1() -> tensor<8xf32> attributes {ds.pipeline_stage = 1 : i64} {
    // expected-error @+1 {{carries 'tensor<8xf32>' on a channel that carries 'tensor<4xf32>'}}
    %y = ds.recv from 0 tag 0 : tensor<8xf32>
    return %y : tensor<8xf32>
  }
}

// -----

// A peer outside the pipeline.
module attributes {ds.pipeline = {stages = 2 : i64}} {
  func.func @s0(%x: tensor<4xf32>) attributes {ds.pipeline_stage = 0 : i64} {
    // expected-error @+1 {{connects stages 0 and 2 of a 2-stage pipeline}}
    ds.send %x to 2 tag 0 : tensor<4xf32>
    return
  }
}

// -----

// A send outside a stage function.
module attributes {ds.pipeline = {stages = 2 : i64}} {
  func.func @f(%x: tensor<4xf32>) {
    // expected-error @+1 {{must be in a function marked 'ds.pipeline_stage'}}
    ds.send %x to 1 tag 0 : tensor<4xf32>
    return
  }
}

// -----

// To itself.
module attributes {ds.pipeline = {stages = 2 : i64}} {
  func.func @s0(%x: tensor<4xf32>) attributes {ds.pipeline_stage = 0 : i64} {
    // expected-error @+1 {{peer 0 must be another stage than this function's (0)}}
    ds.send %x to 0 tag 0 : tensor<4xf32>
    return
  }
}

// -----

// Without the module's ds.pipeline.
func.func @s0(%x: tensor<4xf32>) attributes {ds.pipeline_stage = 0 : i64} {
  // expected-error @+1 {{needs a module with 'ds.pipeline'}}
  ds.send %x to 1 tag 0 : tensor<4xf32>
  return
}

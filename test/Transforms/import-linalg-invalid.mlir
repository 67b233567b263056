// RUN: ds-opt %s --allow-unregistered-dialect -split-input-file -verify-diagnostics \
// RUN:   --ds-import-linalg="func=step args=param:w,input:x results=loss"
// Option errors that the splits below cannot all show at once:
// RUN: not ds-opt %s --allow-unregistered-dialect -split-input-file --ds-import-linalg="args=weight:w,input:x results=loss" 2>&1 | FileCheck %s --check-prefix=ROLE
// RUN: not ds-opt %s --allow-unregistered-dialect -split-input-file --ds-import-linalg="args=param:,input:x results=loss" 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not ds-opt %s --allow-unregistered-dialect -split-input-file --ds-import-linalg="args=param:w,input:x results=grad:w" 2>&1 | FileCheck %s --check-prefix=RESULT
// RUN: not ds-opt %s --allow-unregistered-dialect -split-input-file --ds-import-linalg="args=param:w,input:x results=update:v" 2>&1 | FileCheck %s --check-prefix=UPDATE
// RUN: not ds-opt %s --allow-unregistered-dialect -split-input-file --ds-import-linalg="func=train args=param:w,input:x results=loss" 2>&1 | FileCheck %s --check-prefix=NOFUNC
// ROLE: args entry #0 'weight:w' has unknown role 'weight' (expected param:<name>, state:<kind> or input:<name>)
// EMPTY: args entry #0 'param:' has an empty name
// RESULT: results entry #0 'grad:w' is not a result role (expected loss, update:<name> or metric:<name>)
// UPDATE: results entry #0 'update:v' updates 'v', which is no parameter or state in 'args'
// NOFUNC: ds-import-linalg: no function named 'train' to attach the contract to

// expected-error @+1 {{ds-import-linalg: 'args' gives 2 roles but @step has 3 arguments}}
func.func @step(%w: tensor<4xf32>, %x: tensor<4xf32>, %extra: tensor<4xf32>) -> tensor<f32> {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

#id1 = affine_map<(d0) -> (d0)>
#sum = affine_map<(d0) -> ()>
// remf has neither a ds op nor a derivative rule: the generic stays, between
// the parameter and the loss, and ds-autodiff could not differentiate it.
func.func @step(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{ds-import-linalg: cannot raise 'linalg.generic', which lies between the parameters and the loss, nor differentiate it: its body's 'arith.remf' has no derivative rule}}
  %r = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]}
      ins(%w, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.remf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [#id1, #sum], iterator_types = ["reduction"]}
      ins(%r : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// -----

#id1 = affine_map<(d0) -> (d0)>
#sum = affine_map<(d0) -> ()>
// A body that reads its output is not elementwise in its inputs alone.
func.func @step(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  // expected-error @+1 {{ds-import-linalg: cannot raise 'linalg.generic', which lies between the parameters and the loss, nor differentiate it: its body reads its output operand}}
  %r = linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]}
      ins(%w : tensor<4xf32>) outs(%x : tensor<4xf32>) {
  ^bb0(%a: f32, %out: f32):
    %m = math.sin %a : f32
    %n = arith.remf %m, %out : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [#id1, #sum], iterator_types = ["reduction"]}
      ins(%r : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @step(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'tm_tensor.sort' op ds-import-linalg: cannot handle 'tm_tensor.sort' (tm_tensor ops have no ds equivalent; export the model without it)}}
  %s = "tm_tensor.sort"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error @+1 {{ds-import-linalg: @step already has a training-step contract; drop the 'args' and 'results' options}}
func.func @step(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>},
                %x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss})
    attributes {ds.train_step} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

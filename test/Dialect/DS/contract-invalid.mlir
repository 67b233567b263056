// RUN: ds-opt %s -split-input-file -verify-diagnostics

// One case per diagnostic of the training-step contract: the attribute
// verifiers of the dialect, TrainingContract::fromFunction, and the module
// table `ds.contract`.

// expected-error@+1 {{'ds.train_step' may only mark a function}}
module attributes {ds.train_step} {}

// -----

// expected-error@+1 {{'ds.train_step' is a unit attribute}}
func.func @negative_train_step_value() attributes {ds.train_step = 1 : i64} {
  return
}

// -----

// expected-error@+1 {{a training step needs a body}}
func.func private @negative_external(tensor<f32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step}

// -----

// expected-error@+1 {{argument #0: has no role; mark it 'ds.param', 'ds.input' or 'ds.state'}}
func.func @negative_no_role(%x: tensor<4xf32>) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: has more than one of 'ds.param', 'ds.input', 'ds.state'}}
func.func @negative_two_roles(%x: tensor<4xf32> {ds.param = "w", ds.input = "x", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: param 'w' must be a ranked tensor with a static shape, got 'f32'}}
func.func @negative_param_not_tensor(%w: f32 {ds.param = "w", ds.init = #ds.init<zeros>}, %x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: input 'x' must be a ranked tensor with a static shape, got 'tensor<?xf32>'}}
func.func @negative_dynamic_input(%x: tensor<?xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: param 'w' must have a floating-point element type, got 'i32'}}
func.func @negative_int_param(%w: tensor<4xi32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: input 'x' takes no 'ds.init'; inputs are fed each step}}
func.func @negative_input_init(%x: tensor<4xf32> {ds.input = "x", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: param 'w' needs a 'ds.init' attribute (e.g. #ds.init<zeros>)}}
func.func @negative_missing_init(%w: tensor<4xf32> {ds.param = "w"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: init 'normal' needs a floating-point element type, got 'i64'}}
func.func @negative_int_normal(%s: tensor<i64> {ds.state = #ds.state<"step">, ds.init = #ds.init<normal, 1.0>}, %x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #1: duplicate param 'w'}}
func.func @negative_duplicate_param(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}, %v: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %v : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #1: duplicate state 'adam.m@w'}}
func.func @negative_duplicate_state(%w: tensor<4xf32> {ds.state = #ds.state<"adam.m", of = "w">, ds.init = #ds.init<zeros>}, %v: tensor<4xf32> {ds.state = #ds.state<"adam.m", of = "w">, ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %v : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: state 'adam.m@v' belongs to unknown parameter 'v'}}
func.func @negative_state_owner(%m: tensor<4xf32> {ds.state = #ds.state<"adam.m", of = "v">, ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %m, %m : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{result #1: has no role; mark it 'ds.loss', 'ds.update', 'ds.grad' or 'ds.metric'}}
func.func @negative_result_no_role(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}, tensor<f32>) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l, %l : tensor<f32>, tensor<f32>
}

// -----

// expected-error@+1 {{result #0: has more than one of 'ds.loss', 'ds.update', 'ds.grad', 'ds.metric'}}
func.func @negative_result_two_roles(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss, ds.metric = "l"}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{result #1: metric must be a ranked tensor with a static shape, got 'f32'}}
func.func @negative_metric_scalar(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}, f32 {ds.metric = "m"}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  %c = arith.constant 0.0 : f32
  return %l, %c : tensor<f32>, f32
}

// -----

// expected-error@+1 {{result #0: the loss must be a rank-0 floating-point tensor, got 'tensor<4xf32>'}}
func.func @negative_loss_rank(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<4xf32> {ds.loss}) attributes {ds.train_step} {
  return %x : tensor<4xf32>
}

// -----

// expected-error@+1 {{a training step has exactly one result marked 'ds.loss', found 0}}
func.func @negative_no_loss(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<4xf32> {ds.metric = "x"}) attributes {ds.train_step} {
  return %x : tensor<4xf32>
}

// -----

// expected-error@+1 {{result #1: 'ds.update' = 5 is out of range; the function has 1 arguments}}
func.func @negative_update_range(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 5 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{result #1: 'ds.update' = 0 names input 'x'; only parameters and state are updated}}
func.func @negative_update_input(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{result #1: update of param 'w' has type 'tensor<4xf16>', but the argument has type 'tensor<4xf32>'}}
func.func @negative_update_type(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}, tensor<4xf16> {ds.update = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  %h = ds.cast %w : tensor<4xf32> -> tensor<4xf16>
  return %l, %h : tensor<f32>, tensor<4xf16>
}

// -----

// expected-error@+1 {{result #2: param 'w' is already updated by result #1}}
func.func @negative_update_twice(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 0 : i64}, tensor<4xf32> {ds.update = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{result #2: duplicate metric 'm'}}
func.func @negative_duplicate_metric(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}, tensor<f32> {ds.metric = "m"}, tensor<f32> {ds.metric = "m"}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l, %l, %l : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// Attribute value checks of the dialect
//===----------------------------------------------------------------------===//

// expected-error@+1 {{argument #0: 'ds.param' must be a non-empty string, got ""}}
func.func @negative_param_empty(%w: tensor<4xf32> {ds.param = "", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: 'ds.state' must be a #ds.state attribute, got "adam.m"}}
func.func @negative_state_string(%m: tensor<4xf32> {ds.state = "adam.m", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %m, %m : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: 'ds.init' must be a #ds.init attribute, got "zeros"}}
func.func @negative_init_string(%w: tensor<4xf32> {ds.param = "w", ds.init = "zeros"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: unknown ds argument attribute 'ds.parameter'; expected ds.param, ds.input, ds.state, ds.init, ds.optim or ds.range}}
func.func @negative_arg_typo(%w: tensor<4xf32> {ds.parameter = "w"}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: 'ds.optim' must be a dictionary of optimizer hyperparameters, got 1.000000e-01 : f64}}
func.func @negative_optim_not_dict(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>, ds.optim = 0.1 : f64}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: unknown 'ds.optim' key 'betas'; expected kind, lr, momentum, dampening, nesterov, beta1, beta2, eps or weight_decay}}
func.func @negative_optim_key(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>, ds.optim = {betas = 0.9}}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: 'ds.optim' key 'lr' must be a number, got "fast"}}
func.func @negative_optim_value(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>, ds.optim = {lr = "fast"}}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{argument #1: 'ds.optim' applies to parameters only}}
func.func @negative_optim_on_input(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}, %x: tensor<4xf32> {ds.input = "x", ds.optim = {lr = 0.1}}) -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{'ds.param' on argument #0 requires the function to be marked 'ds.train_step'}}
func.func @negative_unmarked(%w: tensor<4xf32> {ds.param = "w"}) {
  return
}

// -----

// expected-error@+1 {{result #0: 'ds.loss' must be a unit attribute, got 1 : i64}}
func.func @negative_loss_value(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss = 1 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{result #1: 'ds.update' must be an argument index (a signless integer of at most 64 bits), got "w"}}
func.func @negative_update_value(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = "w"}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{result #1: 'ds.metric' must be a non-empty string, got 3 : i64}}
func.func @negative_metric_value(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.loss}, tensor<f32> {ds.metric = 3 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l, %l : tensor<f32>, tensor<f32>
}

// -----

// expected-error@+1 {{result #0: unknown ds result attribute 'ds.losses'; expected ds.loss, ds.update, ds.grad or ds.metric}}
func.func @negative_result_typo(%x: tensor<4xf32> {ds.input = "x"}) -> (tensor<f32> {ds.losses}) attributes {ds.train_step} {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{'ds.loss' on result #0 requires the function to be marked 'ds.train_step'}}
func.func @negative_result_unmarked(%x: tensor<4xf32>) -> (tensor<f32> {ds.loss}) {
  %l = ds.mse_loss %x, %x : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// #ds.init and #ds.state
//===----------------------------------------------------------------------===//

// expected-error@+1 {{unknown init kind 'gaussian'; expected one of zeros, ones, constant, normal, uniform, file}}
func.func private @negative_init_kind() attributes {x = #ds.init<gaussian, 1.0>}

// -----

// expected-error@+1 {{init kind 'normal' needs a value, e.g. <normal, 0.02>}}
func.func private @negative_init_missing_value() attributes {x = #ds.init<normal>}

// -----

// expected-error@+1 {{init kind 'zeros' takes no value}}
func.func private @negative_init_extra_value() attributes {x = #ds.init<zeros, 1.0>}

// -----

// expected-error@+1 {{init 'uniform' needs a non-negative scale, got -1}}
func.func private @negative_init_negative() attributes {x = #ds.init<uniform, -1.0>}

// -----

// expected-error@+1 {{state kind must not be empty}}
func.func private @negative_state_empty() attributes {x = #ds.state<"">}

// -----

// expected-error@+1 {{state kind 'a@b' must not contain '@'}}
func.func private @negative_state_at() attributes {x = #ds.state<"a@b">}

// -----

//===----------------------------------------------------------------------===//
// The module table ds.contract
//===----------------------------------------------------------------------===//

func.func @negative_contract_on_func() attributes {ds.contract = {}} {
  // expected-error@-1 {{'ds.contract' may only be attached to a module}}
  return
}

// -----

// expected-error@+1 {{'ds.contract' must be a dictionary from function name to contract}}
module attributes {ds.contract = [1]} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': expected a dictionary with 'args' and 'results'}}
module attributes {ds.contract = {f = 1 : i64}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': expected arrays 'args' and 'results'}}
module attributes {ds.contract = {f = {args = []}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': argument #0 is not a dictionary}}
module attributes {ds.contract = {f = {args = [1], results = []}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': argument #0 needs role = "param", "input" or "state"}}
module attributes {ds.contract = {f = {args = [{role = "weight"}], results = []}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': argument #0 needs state = #ds.state<...>}}
module attributes {ds.contract = {f = {args = [{role = "state"}], results = []}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': argument #0 needs a non-empty name}}
module attributes {ds.contract = {f = {args = [{role = "param"}], results = []}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': argument #0 needs type = <static ranked tensor type>}}
module attributes {ds.contract = {f = {args = [{role = "param", name = "w", type = tensor<?xf32>}], results = []}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': argument #0 needs init = #ds.init<...>}}
module attributes {ds.contract = {f = {args = [{role = "param", name = "w", type = tensor<4xf32>}], results = []}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': result #0 is not a dictionary}}
module attributes {ds.contract = {f = {args = [], results = [1]}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': result #0 needs role = "loss", "update", "grad" or "metric"}}
module attributes {ds.contract = {f = {args = [], results = [{role = "output"}]}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': result #0 needs of = <argument index>}}
module attributes {ds.contract = {f = {args = [], results = [{role = "update"}]}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': result #0 needs a non-empty name}}
module attributes {ds.contract = {f = {args = [], results = [{role = "metric"}]}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': result #0 needs type = <static ranked tensor type>}}
module attributes {ds.contract = {f = {args = [], results = [{role = "loss"}]}}} {}

// -----

// expected-error@+1 {{'ds.contract' entry 'f': result #0: the loss must be a rank-0 floating-point tensor, got 'tensor<2xf32>'}}
module attributes {ds.contract = {f = {args = [], results = [{role = "loss", type = tensor<2xf32>}]}}} {}

// -----

// expected-error@+1 {{result #1: 'ds.update' must be an argument index (a signless integer of at most 64 bits), got 0 : ui8}}
func.func @negative_update_unsigned(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.update = 0 : ui8}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{init value must be finite}}
func.func private @negative_init_infinite() attributes {x = #ds.init<normal, 1.0e400>}

// -----

// expected-error@+1 {{init value must be a number (+-inf allowed)}}
func.func private @negative_init_nan() attributes {x = #ds.init<constant, 0x7FF8000000000000>}

// -----

// expected-error@+1 {{result #1: 'ds.grad' = 3 is out of range; the function has 1 arguments}}
func.func @negative_grad_range(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 3 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{result #1: 'ds.grad' = 0 names state 'step'; gradients are of parameters}}
func.func @negative_grad_of_state(%s: tensor<4xf32> {ds.state = #ds.state<"step">, ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %s, %s : tensor<4xf32> -> tensor<f32>
  return %l, %s : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{result #1: gradient of param 'w' has type 'tensor<4xf64>', but the parameter has type 'tensor<4xf32>'}}
func.func @negative_grad_type(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}, %g: tensor<4xf64> {ds.input = "g"}) -> (tensor<f32> {ds.loss}, tensor<4xf64> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %g : tensor<f32>, tensor<4xf64>
}

// -----

// expected-error@+1 {{result #2: param 'w' already has its gradient in result #1}}
func.func @negative_grad_twice(%w: tensor<4xf32> {ds.param = "w", ds.init = #ds.init<zeros>}) -> (tensor<f32> {ds.loss}, tensor<4xf32> {ds.grad = 0 : i64}, tensor<4xf32> {ds.grad = 0 : i64}) attributes {ds.train_step} {
  %l = ds.mse_loss %w, %w : tensor<4xf32> -> tensor<f32>
  return %l, %w, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @negative_seed_value(%x: tensor<f32>) {
  // expected-error@+1 {{attribute 'ds.seed' is a unit attribute}}
  %0 = ds.neg %x {ds.seed = 1 : i64} : tensor<f32>
  return
}

// -----

func.func @negative_gemm_overwrite_value(%x: tensor<f32>) {
  // expected-error@+1 {{attribute 'ds.gemm_overwrite' is a unit attribute}}
  %0 = ds.neg %x {ds.gemm_overwrite = "yes"} : tensor<f32>
  return
}

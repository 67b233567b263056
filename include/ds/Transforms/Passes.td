//===- Passes.td - ds transformation passes ----------------*- tablegen -*-===//
//
// The passes of ds-mlir. Flags are the public interface; each starts with
// `ds-`. See docs/Passes.md (generated) for the options.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TRANSFORMS_PASSES_TD
#define DS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExportContractPass : Pass<"ds-export-contract", "::mlir::ModuleOp"> {
  let summary = "Record every training step's contract in the module's "
                "ds.contract table";
  let description = [{
    Reads the training-step contract of every function marked
    `ds.train_step` and records it in the module attribute `ds.contract`, a
    dictionary from function name to its argument and result table (role,
    name or state, type, init). The table is what survives lowering: once
    the function's tensors have become memrefs and LLVM pointers, `ds-run`
    still knows what each argument and result is.

    With `strip` (the default) the contract attributes are then removed from
    the functions, which become plain functions that any upstream pass
    accepts. Run it first in a lowering pipeline.

    ```mlir
    module attributes {ds.contract = {step = {args = [...], results = [...]}}} {
      func.func @step(...) { ... }
    }
    ```
  }];
  let options = [
    Option<"strip", "strip", "bool", /*default=*/"true",
           "Remove the contract attributes from the functions after "
           "recording them">
  ];
}

def ImportLinalgPass : Pass<"ds-import-linalg", "::mlir::ModuleOp"> {
  let summary = "Raise torch-mlir's linalg-on-tensors output into ds ops";
  let description = [{
    Accepts the `linalg-on-tensors` output of torch-mlir (generic form,
    weights as function arguments; `python/ds_torch/linalg_export.py`
    writes it together with the options below) and raises what it
    recognises into ds ops, so that ds-autodiff, ds-insert-optimizer and
    ds-cpu-pipeline (or `ds-run`) train it. Raising is per op:

    - `linalg.generic`: every input is moved into the iteration space
      (projected-permutation maps, constant-0 dimensions) with
      `ds.reshape` / `ds.transpose`, size-1 dimensions broadcasting; the
      body is translated op by op: `arith.addf/subf/mulf/divf/negf`,
      `maximumf/maxnumf/minimumf/minnumf`, integer `addi/subi/muli`,
      `math.exp/log/tanh/sqrt/rsqrt/absf`, `cmpf/cmpi` + `select` ->
      `ds.compare` / `ds.select` (unordered predicates as negated ordered
      ones), casts -> `ds.cast`, scalar constants (captured or in the body)
      -> rank-0 tensors. Composed of ds ops: `math.fpowi` / `math.powf`
      with a constant exponent as PyTorch's pow kernel computes it (0.5 ->
      `ds.sqrt`, -0.5 -> `ds.rsqrt`, an integer n with |n| <= 64 -> products
      of x by squaring, `1 /` that for n < 0, 1 for n = 0), `math.powf`
      with any other exponent -> `exp(y * log x)` (defined for x > 0 only;
      `math.fpowi` with a non-constant exponent is never raised so, since
      it is wrong for x < 0); `math.exp2` -> `exp(x ln 2)`; `math.fma` ->
      `x * y + z` (two roundings); `math.log1p` / `math.expm1` -> `log(1 +
      x)` / `exp(x) - 1` with Kahan's correction (`log(u) * x / (u - 1)`,
      `(u - 1) * x / log(u)`) for |x| < 1. ds has no op or composition for
      `math.sin/cos/tan/erf/floor/ceil/atan/...`: an elementwise generic
      with them stays upstream (except erf inside the exact GELU body),
      and ds-autodiff differentiates it from its scalar body (see below). The exact GELU body (`x * (erf(x / sqrt 2) + 1) * 0.5`) ->
      `ds.gelu`. Reductions (`addf` / `maximumf` into the output) become
      `ds.reduce_sum` / `ds.reduce_max` (an initial value other than a fill
      of 0 / -inf is added / maxed in); a multi-result generic whose other
      results are unused (the argmax of `max(dim)`) keeps the used ones.
      Gathers (`tensor.extract` at an index read from an integer operand):
      row lookups of a 2-D table -> `ds.embedding`, others (the target
      logit of `nll_loss`) -> a one-hot `ds.compare` / `ds.select` /
      `ds.reduce_sum`.
    - `linalg.matmul`, `linalg.batch_matmul` -> `ds.matmul` (a transpose of
      the two inner dimensions of an operand becomes a transpose flag, a
      non-zero accumulator an add); `linalg.transpose`, `linalg.broadcast`,
      `tensor.expand_shape` / `collapse_shape`, `tensor.extract_slice`,
      `tensor.concat` -> their ds counterparts; `linalg.conv_2d_nchw_fchw`
      (with its zero `tensor.pad` as padding and a per-channel broadcast
      accumulator as bias) -> `ds.conv2d`; `linalg.pooling_nchw_max` (with
      a -inf pad) -> `ds.max_pool2d`; a constant `tensor.pad` no
      convolution absorbed -> `ds.insert_slice` into a constant.

    Everything else stays as it is; dead upstream ops are removed.
    Integer computations on labels and masks typically stay: ds-autodiff
    never differentiates them and the lowering accepts them. The
    `cf.assert`s torch-mlir wraps around gathers (index range checks)
    disappear with the gathers they guard.

    Options attach the training-step contract to the function `func`
    (which must have none): `args` gives one role per argument, in order
    (`param:<name>` and `state:<kind>` get `ds.init = #ds.init<file>`,
    `input:<name>`), `results` one per result (`loss`,
    `update:<param or state kind>`, `metric:<name>`). Wrong counts, unknown
    roles and updates of unknown arguments are located errors.

    On a training step, an elementwise `linalg.generic` left between the
    parameters (or state) and the loss stays in the step: ds-autodiff
    differentiates it from its scalar body (forward-mode rules for the
    arith and math ops, one gradient generic per input, summed over the
    loops the input is broadcast along; `ds/Dialect/Linalg/GenericVJP.h`).
    Any other upstream op there, or a generic that reduces, reads its
    output or has a body op without a derivative rule, blocks
    differentiation: the import fails with a located error naming it and
    the reason, e.g. `cannot raise 'linalg.generic', which lies between
    the parameters and the loss, nor differentiate it: its body's
    'arith.remf' has no derivative rule`. A `tm_tensor` op is an error too. With
    `report` (the default) each function gets a remark with the fraction of
    its ops raised and the upstream ops left, by name:

    ```
    remark: ds-import-linalg: raised 117 of 124 ops (94.4%) into ds; left
            as upstream ops: 5 linalg.generic, 2 tensor.empty
    ```

    ```sh
    ds-opt --allow-unregistered-dialect step.mlir --ds-import-linalg="func=step \
        args=param:fc.weight,param:fc.bias,input:x,input:labels results=loss"
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"funcName", "func", "std::string", /*default=*/"\"step\"",
           "The function the contract options apply to">,
    ListOption<"args", "args", "std::string",
               "One role per argument: param:<name>, state:<kind> or "
               "input:<name>">,
    ListOption<"results", "results", "std::string",
               "One role per result: loss, update:<name> or metric:<name>">,
    Option<"reportFraction", "report", "bool", /*default=*/"true",
           "Emit a remark with the fraction of ops raised">
  ];
}

def AutodiffPass : Pass<"ds-autodiff", "::mlir::ModuleOp"> {
  let summary = "Append the backward pass: gradients of the loss w.r.t. "
                "every parameter";
  let description = [{
    Reverse-mode differentiation of every `ds.train_step` function: the
    gradient of the `ds.loss` result with respect to each `ds.param`
    argument, built from each op's vector-Jacobian product
    (DifferentiableOpInterface) and returned as a result marked
    `ds.grad = <argument index>`. Cotangents of values with several uses are
    summed; broadcast operands get their gradient summed back to their
    shape; integer values, inputs and state get none; a parameter the loss
    does not depend on gets zeros.

    The seed (the cotangent of the loss, 1) is an `arith.constant` marked
    `ds.seed`. Backward ops carry `ds.vjp_of` (the forward op's name) and
    copy the forward op's `ds.module` and `ds.role`.

    `linalg.generic` has a gradient rule too (an external model of the
    interface, registered with the ds dialect): an elementwise generic on
    static tensors (parallel loops, inputs indexed by loop dimensions or a
    0 for a size-1 dimension, outputs by a permutation of the loops, no
    reads of its outputs) is differentiated from its scalar body, whose
    arith and math ops (`sin`, `cos`, `tan`, `sinh`, `cosh`, `asin`,
    `acos`, `atan`, `atan2`, `erf`, `erfc`, `exp`, `exp2`, `expm1`, `log`,
    `log2`, `log10`, `log1p`, `sqrt`, `rsqrt`, `cbrt`, `tanh`, `absf`,
    `powf`, `fpowi`, `fma`, `floor`, `ceil`, `round`, ...) have
    forward-mode derivative rules following PyTorch's conventions at
    kinks (|x|' = sign x, floor' = 0).

    An op without a gradient rule on a path from a parameter to the loss is
    a located error naming it. Runs first in the training pipeline; a step
    that already has gradients or parameter updates is an error.

    ```mlir
    // before: (..) -> (tensor<f32> {ds.loss})
    // after:  (..) -> (tensor<f32> {ds.loss}, tensor<4x3xf32> {ds.grad = 0 : i64})
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::ds::DSDialect"];
}

def InsertOptimizerPass : Pass<"ds-insert-optimizer", "::mlir::ModuleOp"> {
  let summary = "Append the parameter update (SGD, momentum, Adam, AdamW) "
                "with its state and learning-rate schedule";
  let description = [{
    Consumes the `ds.grad` results of a differentiated step and returns, for
    every parameter, its updated value (`ds.update`). Optimizer memory
    becomes state arguments with update results: `momentum_buffer` (SGD with
    momentum), `adam.m` and `adam.v` (Adam, AdamW), all `of` the parameter,
    and the shared `step` counter (created when the step has none). The
    learning rate actually used is returned as the metric `lr`.

    The formulas, the order of their operations and the defaults are
    torch.optim's: `sgd` (momentum 0), `momentum` (SGD with momentum 0.9),
    `adam` (coupled L2 weight decay, default 0), `adamw` (decoupled weight
    decay, default 0.01); lr 1e-3, betas (0.9, 0.999), eps 1e-8.
    `schedule=warmup-cosine` ramps the rate linearly from
    `warmup-start-factor * lr` over `warmup-steps` steps, then follows a
    cosine to `min-lr-factor * lr` at `total-steps` (torch's
    SequentialLR(LinearLR, CosineAnnealingLR)).

    Per-parameter hyperparameters (torch.optim's `param_groups`, written by
    the PyTorch front end) come as a `ds.optim` dictionary on a parameter
    argument: `{kind = "adamw", lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999,
    eps = 1.0e-08, weight_decay = 0.01}` (also `momentum`, `dampening`,
    `nesterov`). Its entries override the pass options for that parameter;
    a `kind` brings that kind's defaults as the option does. The schedule is
    the step's. The `lr` metric is the rate of the first trained parameter.

    Skipped steps: when the step has a `found_inf` metric result (from
    ds-insert-loss-scaling), every update the pass builds is guarded by it,
    on the device: where `found_inf > 0.5` each parameter, each moment and
    momentum buffer, and the `step` counter (hence Adam's bias corrections
    and the schedule) select their old value, so a skipped step changes
    nothing, exactly as GradScaler's `step` not calling `optimizer.step()`.
    This is why ds-insert-optimizer runs after loss scaling.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"kind", "kind", "::mlir::ds::OptimizerKind",
           /*default=*/"::mlir::ds::OptimizerKind::AdamW", "Optimizer",
           [{::mlir::ds::optimizerKindValues()}]>,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"-1.0",
           "SGD momentum (default: 0 for sgd, 0.9 for momentum)">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "Nesterov momentum">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (default: 0.01 for adamw, 0 otherwise); decoupled "
           "for adamw, L2 for the others">,
    Option<"schedule", "schedule", "::mlir::ds::LRSchedule",
           /*default=*/"::mlir::ds::LRSchedule::Constant",
           "Learning-rate schedule",
           [{::mlir::ds::lrScheduleValues()}]>,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Linear warm-up steps (warmup-cosine)">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0",
           "Steps at which the cosine reaches its floor (warmup-cosine)">,
    Option<"warmupStartFactor", "warmup-start-factor", "double",
           /*default=*/"0.001", "Learning-rate factor of the first warm-up "
           "step">,
    Option<"minLrFactor", "min-lr-factor", "double", /*default=*/"0.0",
           "Final learning-rate factor of the cosine">
  ];
}

def AssignPrecisionPass : Pass<"ds-assign-precision", "::mlir::ModuleOp"> {
  let summary = "Assign per-op precisions (module, channel and time levels) "
                "and materialise casts and FP8 scaling";
  let description = [{
    Multi-granularity precision mapping over the whole differentiated step,
    forward and backward. Runs after `ds-autodiff` and before
    `ds-insert-optimizer` (a located error otherwise).

    *Roles.* A graph analysis (RoleAnalysis.h) gives forward ops a
    `ds.role` from the structure alone, names stripped: attention q/k/v
    projections (separate or one fused QKV projection split by slices),
    scores, context and output projection; FFN up, gate (SwiGLU),
    activation and down; norm, softmax, loss, embedding, head (the
    projection feeding the loss), reduction, conv and plain `linear`.
    Module paths from the front end (`ds.module = "...q_proj"`) name
    projections the structure left `linear`. Backward ops inherit their
    forward op's role (`ds.op_id`).

    *Module level.* A policy (`policy=FILE`, YAML or JSON; default: the
    seeds' mapping, docs/PrecisionPolicy.md) maps ops by `op`, `role`,
    `param` (glob over the parameters the op consumes) and `module` (glob
    over `ds.module`), first match wins, to `compute` (the type its
    operands are cast to; matmuls accumulate in FP32), `storage` (the type
    its result is kept in, for its consumers and the backward) and `grad`
    (the type of the cotangent operand of its gradient GEMMs; their other
    operand keeps the forward's compute type). Reductions, norms, softmax
    and losses never go to FP8 (a located error at the rule's line).

    *FP8 scaling.* Every FP8 tensor gets a scale: `scaling: delayed`
    (Transformer Engine: `scale = max / amax / 2^margin` from an amax
    history of `amax-history-len` steps, state `fp8.amax_history.<op>.<operand>`,
    non-finite amaxes not recorded), `current` (this step's amax) or `block`
    (DeepSeek-V3: one scale per 1 x B activation tile along the contraction
    and per B x B weight block). Scaled values are cast with `saturate`;
    per-tensor FP8 GEMMs take FP8 operands and are descaled after FP32
    accumulation, block-scaled operands are dequantised before an FP32
    GEMM.

    *Channel level* (`channel:` in the policy). Matmuls and 2-D
    convolutions of the listed roles whose weight is a parameter keep a running estimate per output channel
    of the weight gradient's variance relative to the layer mean (state
    `channel.grad_var.<label>`); channels above the threshold run in the
    high type (weight column, output, output cotangent selected per
    channel, one FP32-accumulating GEMM); metric `channel.high.<label>`.

    *Time level* (`schedule:` in the policy, or `anomaly-steps`). The step
    gets a high-precision variant `<name>_high` with the same signature
    (same state, updated alike, nothing rounded), and the module's
    `ds.precision_schedule` says which variant runs which of `total-steps`
    steps and how many steps the runner spends in the variant after a
    gradient anomaly. Later passes treat both variants alike.

    The decisions are recorded in the module attribute `ds.precision_map`
    (per step function: each op's compute/storage/grad type, scaling and
    the rule that chose it), which ds-run copies into its report.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "Policy file (YAML or JSON); empty: the default policy">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0",
           "Training length, for the policy's time-level schedule">,
    Option<"anomalySteps", "anomaly-steps", "int64_t", /*default=*/"0",
           "Steps the runner spends in the high-precision variant after a "
           "gradient anomaly (builds the variant; 0: none)">,
  ];
}

def InsertLossScalingPass : Pass<"ds-insert-loss-scaling", "::mlir::ModuleOp"> {
  let summary = "Dynamic loss scaling with an on-device skip decision, and "
                "the gradient anomaly detector";
  let description = [{
    Runs after ds-autodiff and before ds-clip-gradients and
    ds-insert-optimizer (a located error says what must run first
    otherwise). The scaler is torch.amp.GradScaler, exactly:

    1. The backward seed (the `arith.constant {ds.seed}` of ds-autodiff) is
       multiplied by the scale `s`, so every gradient is computed scaled.
    2. `found_inf` is 1 when any element of any scaled gradient is inf or
       NaN (checked before unscaling, as torch does), computed on the device
       as the sum over `g - g` of every gradient (NaN iff some element is
       not finite).
    3. Every `ds.grad` result is unscaled: `g * inv`, `inv` the reciprocal
       of `s` computed in f64 and rounded to f32 (torch's
       `scale.double().reciprocal().float()`).
    4. The scale and growth tracker are updated by `_amp_update_scale_`:
       on overflow `s *= backoff-factor` and the tracker is reset; otherwise
       the tracker counts up and after `growth-interval` clean steps in a
       row `s *= growth-factor` (kept only if finite in f32) and the tracker
       is reset. The decision is a select: no host round trip.

    ds-insert-optimizer guards every update it builds with `found_inf`, so a
    skipped step changes no parameter or optimizer state.

    Megatron-LM extensions: with `hysteresis = H > 1` the scale backs off
    only when the overflow count reaches H (a counter decremented on every
    overflow and reset to H when the scale grows, as Megatron's
    DynamicGradScaler); `min-scale` is a floor for the back-off.

    Activation-based cap (the seeds' `scale <= min(gamma * max|a|, S_max)`):
    with `activation-cap-gamma > 0` and/or `activation-cap-max > 0`, the
    scale used in a step is `min(s, gamma * A, S_max)`, where `A` is the
    largest `|a|` over the activation operands of the loss op (the last op
    on the loss's path with a non-scalar float operand: the logits of
    `ds.cross_entropy`, the prediction and target of `ds.mse_loss`) in the
    previous non-skipped step, held in the state
    `loss_scale.activation_max` (0 before the first step: no gamma cap).

    Anomaly detector (`anomaly`, on by default): the global L2 norm of the
    unscaled gradients `n_t` is an anomaly step when
    `n_t > (1 + anomaly-epsilon) n_{t-1}` held on `anomaly-count`
    consecutive non-skipped steps (this one included). Skipped steps do not
    count and do not break a run.

    State (all explicit): `loss_scale` (f32), `loss_scale.growth_tracker`
    (i32), `loss_scale.hysteresis` (i32, with hysteresis > 1),
    `loss_scale.activation_max` (f32, with a gamma cap),
    `anomaly.prev_norm` (f64, -1 before the first step) and
    `anomaly.run_length` (i32). Metrics: `found_inf` (f32 0/1),
    `loss_scale` (f32, the scale used this step), `grad_norm` and `anomaly`
    (f32 0/1) with the detector.

    `inject-nonfinite` adds the input `ds.input = "inject_nonfinite"`
    (tensor<f32>): when it is > 0.5 the loss op's first activation becomes
    NaN, in the forward and in every backward use, and so does the scaled
    seed (the loss's cotangent), so that every gradient is non-finite even
    when the loss op's gradient rule reads no activation (fault injection;
    ds-run `--inject-nonfinite` feeds it).

    ```mlir
    // after: (..., %s: tensor<f32> {ds.state = #ds.state<"loss_scale">, ...})
    //   -> (..., tensor<4x3xf32> {ds.grad = 0 : i64},   // unscaled
    //       tensor<f32> {ds.metric = "found_inf"}, ...)
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"initScale", "init-scale", "double", /*default=*/"65536.0",
           "Initial scale (torch: 2^16)">,
    Option<"growthFactor", "growth-factor", "double", /*default=*/"2.0",
           "Scale factor after growth-interval clean steps (> 1)">,
    Option<"backoffFactor", "backoff-factor", "double", /*default=*/"0.5",
           "Scale factor on overflow (in (0, 1))">,
    Option<"growthInterval", "growth-interval", "int64_t",
           /*default=*/"2000", "Clean steps in a row before growing">,
    Option<"hysteresis", "hysteresis", "int64_t", /*default=*/"1",
           "Overflows before backing off (Megatron); 1 = torch">,
    Option<"minScale", "min-scale", "double", /*default=*/"0.0",
           "Floor of the backed-off scale (Megatron); 0 = none">,
    Option<"capGamma", "activation-cap-gamma", "double", /*default=*/"0.0",
           "Cap the scale at gamma * max|activation| of the previous step; "
           "0 = off">,
    Option<"capMax", "activation-cap-max", "double", /*default=*/"0.0",
           "Cap the scale at S_max; 0 = off">,
    Option<"anomaly", "anomaly", "bool", /*default=*/"true",
           "Add the gradient anomaly detector">,
    Option<"anomalyEpsilon", "anomaly-epsilon", "double", /*default=*/"0.25",
           "Relative growth of the gradient norm that counts">,
    Option<"anomalyCount", "anomaly-count", "int64_t", /*default=*/"3",
           "Consecutive growing steps that make an anomaly">,
    Option<"injectNonfinite", "inject-nonfinite", "bool", /*default=*/"false",
           "Add the fault-injection input 'inject_nonfinite'">
  ];
}

def SparsifyMatMulPass : Pass<"ds-sparsify-matmul", "::mlir::ModuleOp"> {
  let summary = "Dynamic block sparsity: block-sparse linear layers with "
                "block masks as state and a sparsity schedule";
  let description = [{
    Runs on the forward + loss step, before ds-autodiff and
    ds-insert-fake-quant. Every `ds.matmul` whose right-hand side is a 2-D
    parameter (a linear layer) that the policy's `sparsity:` section marks
    `sparse` (default: every linear layer but the embedding and the head)
    becomes a `ds.block_sparse_matmul` on the state `sparsity.mask@<param>`
    (`tensor<(R/block)x(C/block)xi8>`, starting dense), so ds-autodiff gives
    the sparse input gradient and the weight gradient sampled on the mask.

    The schedule (all in the step, read off the shared `iteration`
    counter; T = `total-steps`): `cosine`, the seeds', `s(t) = initial` for
    `t < hold T`, then `final - (final - initial) (1 + cos(pi (t - hold T) /
    ((1 - hold) T))) / 2`, `final` from T on; `cubic`, Zhu & Gupta's
    `final + (initial - final) (1 - p)^3` with `p` the same phase; and
    `constant`, `final` throughout.

    Masks change every `update-every` iterations (iteration 0 included,
    which prunes the dense initialisation by magnitude), while the schedule
    still moves or regrowth is on: ds-update-sparsity-masks (after
    ds-autodiff, before ds-insert-optimizer) computes them from the block
    scores. Those iterations are RigL's mask updates: the step returns the
    metric `sparsity.mask_update` = 1 and ds-insert-optimizer skips the
    parameter update (the `step` counter holds, `iteration` advances).
    The settings go to the module attribute `ds.sparsity` for that pass and
    the report.

    A block size that does not divide a selected weight, sparsities
    outside [0, 1), a `cosine` or `cubic` schedule or regrowth without
    `total-steps`: located errors, the step unchanged.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "A policy file whose sparsity: section says which layers are "
           "sparse (default: every linear layer but embedding and head)">,
    Option<"block", "block", "int64_t", /*default=*/"8",
           "Block size (8: the runtime's 8x8 kernels; multiples of 8 use "
           "them too)">,
    Option<"schedule", "schedule", "::mlir::ds::SparsitySchedule",
           /*default=*/"::mlir::ds::SparsitySchedule::Cosine",
           "How the sparsity moves from initial to final",
           [{::mlir::ds::sparsityScheduleValues()}]>,
    Option<"initial", "initial", "double", /*default=*/"0.8",
           "Sparsity at the start, in [0, 1)">,
    Option<"final", "final", "double", /*default=*/"0.98",
           "Sparsity at the end (constant: throughout), in [0, 1)">,
    Option<"hold", "hold", "double", /*default=*/"0.3",
           "Fraction of total-steps the initial sparsity is held, in [0, 1)">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0",
           "The training length T the schedule and regrowth are laid over">,
    Option<"updateEvery", "update-every", "int64_t", /*default=*/"100",
           "Iterations between mask updates">,
    Option<"regrow", "regrow", "bool", /*default=*/"false",
           "RigL: at each update, also grow blocks by dense-gradient "
           "magnitude">,
    Option<"dropFraction", "drop-fraction", "double", /*default=*/"0.3",
           "RigL's fraction of the active blocks regrown per update, "
           "decaying by cosine to 0">,
    Option<"regrowEnd", "regrow-end", "double", /*default=*/"0.75",
           "Fraction of total-steps where regrowth ends (RigL: 0.75)">,
    Option<"score", "score", "::mlir::ds::BlockScore",
           /*default=*/"::mlir::ds::BlockScore::L1",
           "The block score of magnitudes and gradients",
           [{::mlir::ds::blockScoreValues()}]>,
    Option<"distribution", "distribution",
           "::mlir::ds::SparsityDistribution",
           /*default=*/"::mlir::ds::SparsityDistribution::Uniform",
           "How the sparsity is spread over the layers",
           [{::mlir::ds::sparsityDistributionValues()}]>
  ];
}

def UpdateSparsityMasksPass
    : Pass<"ds-update-sparsity-masks", "::mlir::ModuleOp"> {
  let summary = "The mask updates of ds-sparsify-matmul, on the device";
  let description = [{
    Runs after ds-autodiff (and after loss scaling, the all-reduce and
    clipping, so gradients are final), before ds-insert-optimizer, on a
    step ds-sparsify-matmul prepared (its `ds.sparsity` settings). On a
    mask-update iteration, per sparse weight: the target number of active
    blocks `A` from the scheduled sparsity (per layer; ERK densities solved
    for the target, layers that would exceed density 1 kept dense and the
    rest re-solved; or one global ranking); with `regrow`, `g = floor(d(t)
    A)` with RigL's drop fraction `d(t) = drop-fraction (1 + cos(pi t /
    (regrow-end T))) / 2` until `regrow-end T` (0 after); the `A - g`
    active blocks of largest weight score are kept (ties: the lower index
    is dropped first), and the `g` blocks of largest dense-gradient score
    among the others grow. The weight gradient is computed densely on
    those iterations only (the sampled product's mask is all ones). The
    new mask is the update of `sparsity.mask@<param>`; ds-insert-optimizer
    then keeps the weight and its optimizer state exactly zero outside it
    (dropped blocks are zeroed, grown blocks start at zero). Metrics per
    weight: `sparsity@<param>` (fraction of inactive blocks after the
    step), `sparsity.dropped@<param>` and `sparsity.grown@<param>` (blocks,
    on update iterations), and `sparsity.scheduled`, s(t). On a step loss
    scaling skips (`found_inf`), masks are still updated by weight
    magnitude but nothing regrows (the gradients are not finite).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
}

def InsertFakeQuantPass : Pass<"ds-insert-fake-quant", "::mlir::ModuleOp"> {
  let summary = "Quantization-aware training: fake-quantize the inputs of "
                "linear layers and convolutions, with observers as state";
  let description = [{
    Runs on the forward + loss step, before ds-autodiff (which then
    differentiates through ds.fake_quant's straight-through estimator).
    The layers are every `ds.matmul` with an operand that is a parameter (a
    linear layer's weight, seen through casts, transposes and reshapes) and
    every `ds.conv2d` with a parameter weight; each, and each
    `ds.batch_norm`, takes the first matching rule of the policy's `quant:`
    section (docs/PrecisionPolicy.md; `policy=FILE`). The default policy is
    the seeds' tiers: attention projections kept in BF16 (not quantized;
    with ds-assign-precision they compute in BF16, whatever its rules say),
    batch norm in "dynamic FP8" (its output fake-quantized to E4M3 with
    this step's scale max|y| / 448, no state), and every other layer with
    torch.ao's `get_default_qat_qconfig("x86")`: its weight and activation
    input replaced by a `ds.fake_quant` of them, exactly as a torch.ao
    `FakeQuantize` module does:

    - weights: qint8 (`weight-bits`), per output channel, symmetric:
      `scale = max(-min(min, 0), max(max, 0)) / ((qmax - qmin) / 2)`,
      zero point 0 (a rule's `weight: int4` is per group of 256 along the
      reduction axis, torchao's, or of `group`);
    - activations: quint8 (`activation-bits`) with `reduce-range` (0..127),
      per tensor, affine: `scale = (max(max, 0) - min(min, 0)) / (qmax -
      qmin)`, `zero_point = clamp(qmin - round(min(min, 0) / scale), qmin,
      qmax)`;
    - every scale floored at f32's epsilon;
    - the observers (`observer` for activations, `weight-observer` for
      weights): `moving-average` (torch.ao's
      MovingAverage[PerChannel]MinMaxObserver, the default of both: the
      first observation is taken as it is, later ones as `m + c * (x - m)`
      with `c = averaging-constant`), `min-max` (the running extremes),
      `current` (this step's range: torchao's weight scales, which never
      lag the weights), or `max-abs` (the seeds': this step's max |x|,
      symmetric, `scale = max|x| / qmax`).

    Each step observes its input first and then fake-quantizes it with the
    parameters just computed (FakeQuantize's order). All of it is explicit
    state, per quantized value `V` (a weight's parameter name, `L.input`
    for the activation of layer `L`): `qat.min` / `qat.max` (starting at
    +inf / -inf), `qat.scale` (starting at 1) and `qat.zero_point` (0), f32,
    rank 0 or one per channel. The schedule reads the shared `iteration`
    counter: observers update while `iteration < freeze-observers-at` (0:
    always; then scale and zero point stay as they are, as after
    `disable_observer`), and fake quantization applies from `iteration >=
    fake-quant-from` (before that the step computes in full precision while
    the observers already run, as before `enable_fake_quant`).

    With `dynamic-bits`, every weight an `int4` or `int8` rule quantizes
    per channel gets the state `qat.weight.tier` (f32: 0 int4, 1 int8, 2
    not quantized; starting at its rule's tier), and its grid (qmin, qmax
    and the scale's divisor) is selected from it on the device;
    ds-qat-bit-width, after ds-autodiff, moves the tier.

    With `learn-scales`, each quantized value's scale is a parameter
    instead (LSQ; torch.ao's `_LearnableFakeQuantize` with
    `use_grad_scaling`), named `<layer>.weight_fake_quant.scale` /
    `<layer>.input_fake_quant.scale`, and an activation's zero point too
    (`<layer>.input_fake_quant.zero_point`, LSQ+'s learned offset; weights
    stay symmetric). ds.fake_quant is `learned`: the scale's gradient is
    LSQ's, scaled by `1 / sqrt(numel * qmax)`. The step size starts at
    LSQ's `2 mean|x| / sqrt(qmax)` of the first step's values (per channel
    for weights) and the zero point at torch.ao's affine formula for that
    scale: the parameter holds the learned change, and a
    `qat.*.{scale,zero_point}_init` state, set on iteration 0 through
    ds.stop_gradient, holds the start. The parameters carry `ds.optim =
    {weight_decay = 0}` (and `lr = scale-lr` when given). The `qat.*.scale` / `zero_point` state follows the
    values in effect (the zero point rounded and clamped, as the learned
    kernel uses it), so evaluation, ds-convert-fake-quant and the export
    read them as they read observed ones.

    With `observe=false` no observer runs: the state's scales and zero
    points are used as they are (ds-run builds its held-out evaluation
    step so, from the training step's state).

    A step that already has `qat.*` state, or that has gradients, is a
    located error; so are out-of-range options.

    ```mlir
    // before: %y = ds.matmul %x, %w transpose_rhs : ...
    // after:  %xq = ds.fake_quant %x, %sx, %zx, %c0, %c127 : ...
    //         %wq = ds.fake_quant %w, %sw, %zw, %cm128, %c127 axis = 0 : ...
    //         %y = ds.matmul %xq, %wq transpose_rhs : ...
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "A policy file whose quant: section says how each layer is "
           "quantized (default: the seeds' tiers)">,
    Option<"weights", "weights", "bool", /*default=*/"true",
           "Fake-quantize the weights">,
    Option<"activations", "activations", "bool", /*default=*/"true",
           "Fake-quantize the activation inputs">,
    Option<"weightBits", "weight-bits", "int64_t", /*default=*/"8",
           "Bits of the default policy's signed, symmetric, per-channel "
           "weight grid (2..16)">,
    Option<"activationBits", "activation-bits", "int64_t", /*default=*/"8",
           "Bits of the default policy's unsigned, affine, per-tensor "
           "activation grid (2..16)">,
    Option<"reduceRange", "reduce-range", "bool", /*default=*/"true",
           "One bit less for activations (torch.ao's x86 qconfig: 0..127)">,
    Option<"observer", "observer", "::mlir::ds::QuantObserver",
           /*default=*/"::mlir::ds::QuantObserver::MovingAverage",
           "How the activations' range is observed",
           [{::mlir::ds::quantObserverValues()}]>,
    Option<"weightObserver", "weight-observer", "::mlir::ds::QuantObserver",
           /*default=*/"::mlir::ds::QuantObserver::MovingAverage",
           "How the weights' range is observed",
           [{::mlir::ds::quantObserverValues()}]>,
    Option<"averagingConstant", "averaging-constant", "double",
           /*default=*/"0.01",
           "The moving-average observer's constant, in (0, 1]">,
    Option<"freezeObserversAt", "freeze-observers-at", "int64_t",
           /*default=*/"0",
           "Observers update while iteration < N; 0 = always">,
    Option<"fakeQuantFrom", "fake-quant-from", "int64_t", /*default=*/"0",
           "Fake quantization applies from this iteration on">,
    Option<"dynamicBits", "dynamic-bits", "bool", /*default=*/"false",
           "Per-layer dynamic weight bit-width (int4 -> int8 -> "
           "unquantized), driven by ds-qat-bit-width">,
    Option<"learnScales", "learn-scales", "bool", /*default=*/"false",
           "LSQ / LSQ+: scales (and activation zero points) are parameters "
           "learned with the straight-through gradients, initialised from "
           "the first step's values (2 mean|x| / sqrt(qmax)), no weight "
           "decay; no observer runs">,
    Option<"scaleLr", "scale-lr", "double", /*default=*/"0.0",
           "With learn-scales: the learning rate of the quantizers' "
           "parameters (0: the optimizer's); Adam's normalised steps of the "
           "main learning rate move a small step size by much of itself">,
    Option<"observe", "observe", "bool", /*default=*/"true",
           "false: the observers never update, the scales and zero points "
           "in the state are used as they are (evaluation, fine-tuning with "
           "frozen ranges)">
  ];
}

def ConvertFakeQuantPass : Pass<"ds-convert-fake-quant", "::mlir::ModuleOp"> {
  let summary = "Turn a trained, fake-quantized forward into integer "
                "inference: int8 GEMMs on the quantized grids";
  let description = [{
    Runs on a forward + loss step whose fake-quantizers are frozen: every
    `ds.fake_quant` reads its scale and zero point from state (as
    ds-insert-fake-quant with `observe=false` builds them; ds-run's held-out
    evaluation step is one), so the trained quantization parameters are
    the state's values. Each `ds.matmul` whose activation operand (lhs) is
    a per-tensor fake-quantization on an integer grid and whose weight
    (rhs, 2-D) is a per-tensor or per-output-channel one becomes

        %xi = ds.quantize %x, %sx, %zx, %qmin, %qmax       -> i8
        %wi = ds.quantize %w, %sw, %zw, ... axis = a       -> i8
        %y  = ds.quantized_matmul %xi, %wi, %sx, %zx, %sw, %zw

    whose integer product runs on the runtime's int8 GEMM (oneDNN; exact
    also on CPUs without VNNI, where it splits activations that oneDNN's
    kernels could saturate on into two 7-bit GEMMs). A grid
    wider than int8 (an unsigned 8-bit activation grid, 0..255) is stored
    shifted by -128. The fake-quantization schedule (`fake-quant-from`)
    does not apply to inference: a fake-quantizer selected against its
    input by the iteration counter is taken as always on.

    What it does not convert stays the fake-quantized f32 computation (the
    same numbers up to rounding): convolutions, FP8 (dynamic batch norm),
    per-group (INT4 group) and dynamic-bit-width weights, and weights on
    the lhs. The pass says what it converted and what it left, per step.

    A step without `ds.fake_quant`, one with gradients or parameter updates
    (convert the forward, not the training step), and one whose observers
    still run
    (a scale computed in the step rather than read from state: the model
    is still being trained) are located errors; so is a step where nothing
    could be converted.

    With `prepare-weights`, the weights' quantization (every ds.quantize
    that depends on no batch input) moves to a step of its own,
    `<step>_weights`, whose updates are new `qat.weight.int8@<param>` state
    arguments (i8) the inference step reads: the weights are quantized once
    per model, not per call, as a deployed model has them (ds-run evaluates
    this form).
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"prepareWeights", "prepare-weights", "bool", /*default=*/"false",
           "Quantize the weights in a separate step whose results the "
           "inference step reads as state">,
  ];
}

def QATBitWidthPass : Pass<"ds-qat-bit-width", "::mlir::ModuleOp"> {
  let summary = "Dynamic per-layer bit-width of QAT weights from their "
                "gradient variance (the seed's rule)";
  let description = [{
    Runs on a gradient step made from a forward that
    `ds-insert-fake-quant{dynamic-bits}` quantized (after ds-autodiff and
    ds-insert-loss-scaling, before clipping and the optimizer). For each
    weight with a `qat.weight.tier` state it keeps a running estimate of
    its gradient's variance relative to the mean over the quantized
    weights, state `qat.weight.grad_var` (-1 before the first observation,
    which is taken as it is; then `v <- momentum v + (1 - momentum) r`, in
    f64; a step loss scaling skips is not recorded), and moves the tier for
    the next step: above `threshold` one tier up (int4 -> int8 ->
    unquantized), below `threshold / 2` for `window` steps in a row
    (counted in `qat.weight.calm`) one tier down, never below the tier its
    rule gave it. The metric `qat.bits.<weight>` is the bit-width this
    step ran with (4, 8 or 32); ds-run reports it per step.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"threshold", "threshold", "double", /*default=*/"2.0",
           "Promote above this multiple of the mean gradient variance">,
    Option<"window", "window", "int64_t", /*default=*/"100",
           "Steps below threshold / 2 before demoting">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9",
           "Running estimate: v <- momentum v + (1 - momentum) r">
  ];
}

def DataParallelPass : Pass<"ds-data-parallel", "::mlir::ModuleOp"> {
  let summary = "Averages the gradients over the ranks of an MPI job";
  let description = [{
    Runs after ds-insert-loss-scaling, on the unscaled gradients, and before
    clipping, the mask updates and the optimizer (slot 4 of the canonical
    order). Every rank runs the same step on its own rows of the global
    batch (ds-run under mpirun hands rank r rows [r b, (r + 1) b) of a
    global batch of N b rows, for a step of batch b):

    - each `ds.grad` result becomes the mean over the ranks: a
      `ds.all_reduce_start` right after the gradient is computed and a
      `ds.all_reduce_wait` right before its first use, one pair per
      gradient (ds-fuse-allreduce then packs them into buckets);
    - `found_inf` (ds-insert-loss-scaling) is MAX-reduced where it is
      computed, so every rank skips the same steps and the loss scale
      evolves identically; the local check keeps reading the local
      gradients;
    - the loss is averaged over the ranks (the mean loss of the global
      batch), and every other metric computed from this rank's data is
      MAX-reduced, so the runner makes the same decision on every rank;
    - state updated from this rank's data (observer ranges, amax
      histories; batch-norm running statistics unless ds-sync-batch-norm
      ran) takes rank 0's value, as DDP broadcasts module buffers from
      rank 0;
    - `ds.dropout` draws the counters of this rank's rows of the global
      batch (the batch is the leading dimension), so the random stream
      does not depend on the number of ranks.

    The module gets the attribute `ds.data_parallel`; ds-run refuses to run
    a module without it under mpirun with more than one rank.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
}

def PartitionPipelinePass : Pass<"ds-partition-pipeline", "::mlir::ModuleOp"> {
  let summary = "Cuts a training step into pipeline stages over devices";
  let description = [{
    Runs after every other training pass, before lowering. Splits the step
    into layers at its narrowest cuts (StepLayers.h), costs them for the
    devices of a cluster file (or `stages` identical devices), cuts them
    into stages with PipeDream's dynamic program and assigns stages to
    devices with the Hungarian algorithm (iterating cut -> assign -> re-cut),
    then rewrites each step function `@f` into, per stage k:

    - `@f_s<k>_fwd` / `@f_s<k>_bwd`: the forward and backward of one
      micro-batch on stage k's layers;
    - `@f_s<k>_update`: the once-per-step part (unscaling, `found_inf`,
      clipping, all-reduces, the optimizer) on the mean of the micro-
      batches' gradients; sums that span stages (gradient norm,
      `found_inf`, the loss) become `ds.all_reduce ... across_stages`;
    - `@f_s<k>`: the training step a rank of stage k runs: the schedule
      (GPipe or 1F1B) unrolled over `micro-batches` micro-batches, with
      `ds.send` / `ds.recv` of activations and cotangents between stages.

    Batch inputs grow by the number of micro-batches on their leading
    dimension; micro-batch m is rows [m b, (m + 1) b). With one stage this
    is gradient accumulation (ds-run --accumulate M). The module gets
    `ds.pipeline` (stages, micro-batches, schedule, the plan).
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", "\"\"",
           "Cluster file (YAML/JSON, docs/PipelinePartitioning.md); "
           "empty: `stages` identical devices">,
    Option<"stages", "stages", "int64_t", "0",
           "Number of stages (0: the planner chooses, at most the devices)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "Micro-batch schedule: 1f1b or gpipe">,
    Option<"objective", "objective", "std::string", "\"bottleneck\"",
           "Stage-to-device assignment: bottleneck (the slowest stage) or "
           "sum (the Hungarian sum of the seed)">,
    Option<"printPlan", "print-plan", "bool", "false",
           "Print the plan to stderr">,
    Option<"planOnly", "plan-only", "bool", "false",
           "Plan and record the plan, but leave the step as it is">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
}

def SyncBatchNormPass : Pass<"ds-sync-batch-norm", "::mlir::ModuleOp"> {
  let summary = "Batch-norm statistics over all ranks (SyncBatchNorm)";
  let description = [{
    Runs on the forward, before ds-autodiff, in a data-parallel step: every
    `ds.batch_norm` becomes its decomposition with the per-channel sums of
    the batch statistics all-reduced over the ranks (`ds.all_reduce`, whose
    gradient is the all-reduce of the gradient, so autodiff derives
    SyncBatchNorm's backward). Normalization and running statistics are
    those of the global batch: the step equals a single-process step on the
    global batch, and the running statistics agree on every rank.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::ds::DSDialect"];
}

def FuseAllReducePass : Pass<"ds-fuse-allreduce", "::mlir::ModuleOp"> {
  let summary = "Packs the gradient all-reduces into buckets (DDP)";
  let description = [{
    Runs after ds-data-parallel. The gradients' all-reduces are packed, in
    the order the backward produces the gradients, into flat buckets of at
    most `bucket-bytes` (the first one `first-bucket-bytes`, so that
    communication starts early; a gradient larger than the limit is a
    bucket of its own; gradients of different element types never share
    one), PyTorch DDP's defaults 25 MiB and 1 MiB. Each bucket's
    all-reduce starts right after its last gradient is computed and is
    waited for right before the first use of any of its gradients, so it
    overlaps the rest of the backward.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "Bytes per bucket (DDP's bucket_cap_mb = 25)">,
    Option<"firstBucketBytes", "first-bucket-bytes", "int64_t",
           /*default=*/"1048576",
           "Bytes of the first bucket (DDP's 1 MiB)">,
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def CompressAllReducePass : Pass<"ds-compress-allreduce", "::mlir::ModuleOp"> {
  let summary = "Compresses the gradient all-reduce, with error feedback";
  let description = [{
    Runs after ds-data-parallel (and ds-fuse-allreduce); sets the
    compression of every gradient bucket:

    - `three-tier` (the seed): with `v = g + r` (the error-feedback residual
      `r`), elements with `|v| > theta_high` are sent as 8-bit symmetric
      integers (scale `max|v| / 127`), those with `theta_low < |v| <=
      theta_high` as f16 (scaled by a power of two so they never overflow),
      the others not at all; `r` becomes `v` minus what was sent. The
      thresholds are per-bucket quantiles of `|v|` (`quantile-low`,
      `quantile-high`; NumPy's method "lower") or fixed (`thresholds=fixed`,
      `theta-low`, `theta-high`).
    - `topk` (DGC): the fraction `ratio` of largest `|v|`, the threshold
      estimated on a 1 % sample; with `warmup-iterations = W > 0`, DGC's
      warm-up keeps 25 %, 6.25 %, 1.5625 %, 0.4 % for W iterations each,
      then `ratio`.
    - `fp16` / `bf16`: DDP's compression hooks (divide by the world size,
      round, reduce).
    - `powersgd`: PyTorch's powerSGD_hook (warm start, error feedback,
      `rank`, uncompressed until `start-iteration`, vectors and matrices
      whose rate would be below 2 uncompressed): per bucket, the state of
      its matrices (errors and Q factors) is `comm.powersgd.bucket<i>`.

    With `momentum = m > 0` (DGC's momentum correction, for SGD: the
    optimizer must then be plain `sgd`), each rank accumulates its own
    momentum `u = m u + g` (state `comm.momentum.bucket<i>`) and sends
    `u` through the error feedback instead of `g`; the elements it sent
    get `u = 0` (momentum-factor masking). `local-clip = c > 0` scales each
    bucket to an L2 norm of at most `c / sqrt(N)` first (DGC's local
    clipping, per bucket).

    Residuals are state (`comm.residual.bucket<i>`, zeros), one per
    bucket and rank; on a step that is skipped (`found_inf`) or a mask
    update (`sparsity.mask_update`) they keep their value. Sparse payloads
    are exchanged by an all-gather (or dense above SparCML's density); see
    docs/DataParallel.md.
  }];
  let options = [
    Option<"scheme", "scheme", "::mlir::ds::CompressionScheme",
           /*default=*/"::mlir::ds::CompressionScheme::three_tier",
           "three-tier, topk, fp16, bf16 or powersgd",
           [{::mlir::ds::compressionSchemeValues()}]>,
    Option<"fixedThresholds", "fixed-thresholds", "bool", /*default=*/"false",
           "three-tier: theta-low and theta-high instead of quantiles">,
    Option<"quantileLow", "quantile-low", "double", /*default=*/"0.95",
           "three-tier: the quantile of |v| below which nothing is sent">,
    Option<"quantileHigh", "quantile-high", "double", /*default=*/"0.99",
           "three-tier: the quantile of |v| above which 8 bits are sent">,
    Option<"thetaLow", "theta-low", "double", /*default=*/"0.0",
           "three-tier, fixed thresholds: theta_low">,
    Option<"thetaHigh", "theta-high", "double", /*default=*/"0.0",
           "three-tier, fixed thresholds: theta_high">,
    Option<"ratio", "ratio", "double", /*default=*/"0.001",
           "topk: the fraction of elements sent (DGC's 0.1 %)">,
    Option<"warmupIterations", "warmup-iterations", "int64_t",
           /*default=*/"0",
           "topk: iterations per stage of DGC's sparsity warm-up (0: none)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "topk, three-tier: DGC's momentum correction with this momentum "
           "(0: off); the optimizer is then plain SGD">,
    Option<"rank", "rank", "int64_t", /*default=*/"1",
           "powersgd: the rank of the approximation (DDP's "
           "matrix_approximation_rank)">,
    Option<"startIteration", "start-iteration", "int64_t",
           /*default=*/"1000",
           "powersgd: iterations of uncompressed all-reduce first (DDP's "
           "start_powerSGD_iter)">,
    Option<"localClip", "local-clip", "double", /*default=*/"0.0",
           "topk, three-tier: DGC's local clipping of each bucket to this "
           "L2 norm times N^-1/2 before accumulation (0: off)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
}

def ClipGradientsPass : Pass<"ds-clip-gradients", "::mlir::ModuleOp"> {
  let summary = "Global (torch clip_grad_norm_) or adaptive per-tensor "
                "gradient clipping";
  let description = [{
    Runs after ds-autodiff (and ds-insert-loss-scaling, so it sees unscaled
    gradients) and before ds-insert-optimizer; rewrites the `ds.grad`
    results.

    `mode=global` is torch.nn.utils.clip_grad_norm_: the total norm `N` of
    all gradients (`norm-type=2`: the L2 norm of the per-tensor L2 norms;
    `inf`: the largest `|g|`), `coef = max-norm / (N + 1e-6)` clamped to 1,
    and every gradient multiplied by it. Norms are computed in f64. Metrics
    `clip_coef` (the clamped coefficient) and `clip_norm` (`N`).

    `mode=adaptive` is the seeds' per-component variant. With `n_t` the
    global L2 norm of this step's gradients and `H` the last `history`
    (1000) global norms including `n_t`, the threshold is `t_1 = n_1`, then
    `t = 0.9 t + 0.1 mean(H)`; each gradient becomes
    `g * min(1, t / ||g||)`, where `||g||` is the L2 norm for attention
    parameters, the infinity norm for FFN parameters and the L2 norm for
    every other one. What a parameter is for comes first from the structure
    of the step: the pass runs the role analysis itself (it does not need
    ds-assign-precision to have written `ds.role`), and a parameter consumed
    (through reshapes, transposes, slices, broadcasts and casts; a bias
    through the projection it is added to) by a forward op with an
    attention role (`attn.*`) is attention, else one consumed by an FFN role
    (`ffn.*`) is FFN. When the structure gives neither, the names decide:
    a parameter is attention when its name, or the `ds.module` /
    `ds.role` of an op using it, contains `attn`,
    `attention`, `q_proj`, `k_proj`, `v_proj`, `out_proj` or `qkv`; FFN when
    a dotted component is `mlp`, `ffn`, `fc`, `up`, `down` or `gate`, or
    starts with one of them followed by a digit or `_` (`fc1`, `up_proj`),
    or ends with `_` and one of them (`c_fc`). The history is a ring buffer
    `clip.history` (tensor<Hxf64>) with the count `clip.count` (i64) and
    the threshold `clip.threshold` (tensor<1xf64>), all state. Metrics
    `clip_threshold` and `clip_norm`.

    `noise-std > 0` (adaptive or global) adds N(0, noise-std^2) to every
    clipped gradient, drawn by `ds.random_normal` from the explicit
    Philox key `clip.rng` (tensor<2xi64>, seeded by the runner).

    When the step has a `found_inf` metric (ds-insert-loss-scaling), a
    skipped step leaves the clipping state unchanged.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::ds::DSDialect"];
  let options = [
    Option<"mode", "mode", "::mlir::ds::ClipMode",
           /*default=*/"::mlir::ds::ClipMode::Global", "Clipping mode",
           [{::mlir::ds::clipModeValues()}]>,
    Option<"maxNorm", "max-norm", "double", /*default=*/"1.0",
           "Largest total norm (global)">,
    Option<"normType", "norm-type", "::mlir::ds::ClipNormType",
           /*default=*/"::mlir::ds::ClipNormType::L2",
           "Norm of the global mode",
           [{::mlir::ds::clipNormTypeValues()}]>,
    Option<"history", "history", "int64_t", /*default=*/"1000",
           "Global norms averaged by the adaptive threshold">,
    Option<"noiseStd", "noise-std", "double", /*default=*/"0.0",
           "Std of the Gaussian noise added to the gradients; 0 = none">
  ];
}

def PrepareStepABIPass : Pass<"ds-prepare-step-abi", "::mlir::ModuleOp"> {
  let summary = "Make every step of the ds.contract table callable by the "
                "runner";
  let description = [{
    For each function named in the module's `ds.contract` table (run
    ds-export-contract first): requests the C calling convention
    (`llvm.emit_c_interface`, one memref descriptor per argument and result,
    results as out-parameters after bufferization) and marks every argument
    `bufferization.writable = false`, so the compiled step never writes into
    the buffers the runner passes in: a step that fails leaves the runner's
    state intact, and checkpoints are exact.
  }];
}

def FuseElementwisePass : InterfacePass<"ds-fuse-elementwise", "::mlir::FunctionOpInterface"> {
  let summary = "Fuse elementwise linalg chains, keeping contractions intact";
  let description = [{
    Upstream's elementwise fusion (linalg-fuse-elementwise-ops) with one
    restriction: nothing is fused into a `linalg.matmul` or
    `linalg.batch_matmul`. Fusing a producer into a contraction turns it into
    a `linalg.generic` that the library-GEMM lowering
    (convert-linalg-to-ds-runtime) no longer recognises, trading a GEMM at
    library speed for a loop nest; the producer is better computed once.
    A producer with several users is fused only if every user can take it,
    so that it disappears (a gather, never: it is computed once): if one
    user needs its result in memory, the others read that result rather
    than recomputing it from all of its inputs. Where that user is an
    elementwise op over the same elements that comes first (before every
    other use), the producer joins it instead as one op with both results
    (which upstream's pattern does not do: it recomputes the producer in
    the consumer and keeps it for the other uses): one pass reads the
    producer's inputs and writes the kept result and the consumer's. An
    AdamW update's moments, which the step returns and the parameter update
    reads, are one pass over each parameter instead of three. Casts alone
    are left to the rounding and widening patterns, which place them
    themselves.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def FuseTransposesPass : InterfacePass<"ds-fuse-transposes", "::mlir::FunctionOpInterface"> {
  let summary = "Write a transposed copy from the op that computes the value";
  let description = [{
    A `linalg.transpose` that swaps the two innermost dimensions of an
    all-parallel `linalg.generic`'s result (directly, or of a collapse of it
    that keeps the innermost dimension, as a [B, T, K] tensor read as
    [B*T, K]) becomes a second output of that generic, written through the
    permuted indexing map, and the transpose goes: the copy is made where
    the value is computed, not by reading it back. ds-gpu-pipeline runs it
    for the copies that give cuBLASLt's FP8 GEMMs their TN layout: the
    scaled cast of a weight, an input or a gradient then writes the FP8
    tensor and its transpose in one pass, as Transformer Engine's
    cast-transpose kernel does (with the amax in the same kernel, when the
    cast has one: convert-linalg-to-ds-gpu). The generic keeps its other
    results; the transposed output is `tensor.empty`, and the copy is
    exact.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FuseCollapsedTransposesPass : InterfacePass<"ds-fuse-collapsed-transposes", "::mlir::FunctionOpInterface"> {
  let summary = "Compute a head merge in the generics that read it through a collapse";
  let description = [{
    Attention merges its heads with a `linalg.transpose` that keeps the
    innermost dimension ([B, H, T, D] to [B, T, H, D]) and a
    `tensor.collapse_shape` of the result ([B, T, H*D]). Where every reader
    of the transpose, directly or through collapses, is an input of a
    `linalg.generic` on tensors whose indexing maps are projected
    permutations (under the FP8 policy: the scaled cast-transpose, its amax
    and the bias gradient; no GEMM reads the merged tensor), the copy is
    computed in those readers instead of written and read back: their loops
    are expanded through the collapse (upstream's fusion by expansion, the
    collapsed dimension becoming H and D), and the transpose is fused into
    each (upstream's elementwise fusion), which then reads the unmerged
    tensor through the permuted map. A transpose that something else reads
    (a GEMM, under BF16) stays. ds-gpu-pipeline runs it after
    ds-fuse-transposes.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def SplitEmptyTensorsPass : InterfacePass<"ds-split-empty-tensors", "::mlir::FunctionOpInterface"> {
  let summary = "Give each destination of a shared tensor.empty a tensor.empty of its own";
  let description = [{
    CSE makes one `tensor.empty` of each shape the destination of every op
    that writes a fresh tensor of that shape. One-Shot Bufferize then gives
    the shared empty one buffer and writes in place into it wherever the
    earlier value is dead, so unrelated ops of the step share a buffer (and
    the last of them, a result, turns it into an out-parameter). On the
    GPU each such reuse is a dependence: two kernels that write one buffer
    in turn cannot run in one launch or move past each other. Under the
    FP8 policy every amax history's shift and newest entry went through
    one result buffer, which chained each tensor's scale to the previous
    tensor's amax. This pass clones the `tensor.empty` before each of its
    users but the first, so that each destination gets a buffer of its
    own, freed after its last use (the stream-ordered allocator reuses the
    memory). Each split costs an allocation per step, so by default only
    tensors of bookkeeping size are split (at most 4096 elements: amax
    histories, scales, norms), where the chains are. ds-gpu-pipeline runs
    it right before bufferization.
  }];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", "4096",
           "Split only tensor.empty ops of a static shape of at most this "
           "many elements (0: every one)">,
  ];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def SinkColumnReductionsPass : InterfacePass<"ds-sink-column-reductions", "::mlir::FunctionOpInterface"> {
  let summary = "Move column reductions past the row-wise op after them that reads the same tensor";
  let description = [{
    A layer norm's gradient computes the rows' statistics, then the weight
    and bias gradients (column sums of the cotangent over the rows), then
    the input gradient, which reads the cotangent and the statistics. On
    the GPU the statistics and the input gradient form one row group
    (convert-linalg-to-ds-gpu), which reads each row once, but the column
    sums between them keep the input gradient out: bufferization writes it
    in place over the cotangent they still read.

    This pass moves a reduction of every loop but the innermost (a column
    sum) on tensors to just after the first later all-parallel
    `linalg.generic` over the same loops that reads one of its tensors
    through the same map, reads a value per row (an input whose map uses
    some loop but not the innermost), writes nothing transposed and does
    not depend on the reduction. Several such reductions keep their order.
    The cotangent is then live until the column sums, so the input gradient
    gets a buffer of its own and joins the row group. ds-gpu-pipeline runs
    it before bufferization. A cast-transpose (a transposed output) is
    left alone: the column sums join its tiles instead.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def ApproximateMathPass : InterfacePass<"ds-approximate-math", "::mlir::FunctionOpInterface"> {
  let summary = "Replace f32 transcendental calls by inline polynomials";
  let description = [{
    Rewrites f32 `math.tanh`, `math.erf`, `math.exp`, `math.expm1`,
    `math.log`, `math.log1p` and friends into upstream MLIR's polynomial
    approximations (accurate to a few ulp in f32): inline arithmetic that the
    compiler vectorises, instead of one libm call per element. On these CPUs
    libm's tanhf alone took a fifth of a GPT step. f64 and other types keep
    the library calls, so f64 gradient and parity checks are unaffected.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def VectorizeCPUPass : InterfacePass<"ds-vectorize-cpu", "::mlir::FunctionOpInterface"> {
  let summary = "Tile and vectorise the non-GEMM linalg ops on tensors";
  let description = [{
    Runs on tensors, after ds-prepare-library-gemms and before
    bufferization. Every linalg op other than `linalg.matmul` and
    `linalg.batch_matmul` (those go to the library GEMM) with static shapes
    and projected-permutation indexing maps is tiled with `scf.for` loops so
    that a tile is `1 x ... x 1 x V` along the innermost loop, which is the
    contiguous dimension of the ops convert-ds-to-linalg produces; V is the
    largest divisor of that dimension not above 512 bits worth of the op's
    widest element type (16 f32, 8 f64), so tiles are static and need no
    masks. An innermost reduction of up to 1024 elements is kept whole (one
    vector per row). The tile is then vectorised with `linalg::vectorize`
    and leading unit dimensions are cast away, so the vectors are 1-D.
    Data-dependent `tensor.extract`s (embedding gathers fused into
    elementwise ops) are vectorised too: a contiguous load where the
    innermost index is the vectorised loop's, a `vector.gather` otherwise.

    Ops that upstream's vectoriser rejects (checked before tiling) are left
    untouched and become scalar loops, so the pass changes speed, not
    results. The vector ops are lowered by ds-cpu-pipeline after
    bufferization (lower-vector-multi-reduction, convert-vector-to-scf,
    convert-vector-to-llvm); the pipeline lets LLVM reassociate the row
    reductions, so sums differ from the scalar loops' in the last bits.

    ```mlir
    // 128x256 f32 add: one scf.for over rows, one over 16 columns,
    // vector.transfer_read/arith.addf/vector.transfer_write on vector<16xf32>.
    ```
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

def EmulateNarrowFloatsPass : Pass<"ds-emulate-narrow-floats"> {
  let summary = "Emulate casts to and from bf16, f16 and FP8 with integer code";
  let description = [{
    Rewrites `arith.truncf` into bf16, f16, f8E4M3FN and f8E5M2 (from f32
    or f64; from f16/bf16 through an exact extension to f32) and
    `arith.extf` out of them into integer code on `arith.bitcast`s: shifts,
    adds, compares and selects on the operand's shape, so the vectors of
    ds-vectorize-cpu stay vectors. The semantics are those of the arith ops
    and of PyTorch's `.to()`, bit for bit: round to nearest, ties to even;
    subnormals rounded, not flushed; overflow to inf, or to NaN for
    f8E4M3FN, which has no inf; NaN stays (quiet) NaN. Extension is exact.
    Everything else on these types is data movement, which the LLVM
    lowering handles (FP8 values and constants become i8).

    Runs after bufferization and after arith-emulate-unsupported-floats,
    which turns arithmetic on the same types into f32 arithmetic between
    `extf`/`truncf` pairs that this pass then expands. Saturating casts
    (`ds.cast ... saturate`) arrive here already clamped in the wider type.
    With `keep-f32-casts`, casts between f32 and bf16 or f16 stay casts
    (for a target with conversion instructions: NVPTX on sm_80 and newer
    has `cvt.rn.bf16.f32`, and LLVM's own lowering rounds the same way),
    and only lose their `contract` flag, with which arith would fold
    extf(truncf(x)) to x. Casts from f64 and FP8 casts are still
    emulated.

    A cast this pass cannot emulate is an error: an FP8 type other than
    f8E4M3FN/f8E5M2 (LLVM cannot represent it), a `truncf` into an emulated
    type with a rounding mode other than to_nearest_even, or a cast on
    tensors.

    ```mlir
    %h = arith.truncf %x : vector<16xf32> to vector<16xf8E4M3FN>
    // becomes
    %u = arith.bitcast %x : vector<16xf32> to vector<16xi32>
    ...  // andi/shrui/addi/cmpi/select on vector<16xi32>
    %t = arith.trunci %r : vector<16xi32> to vector<16xi8>
    %h = arith.bitcast %t : vector<16xi8> to vector<16xf8E4M3FN>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let options = [
    ListOption<"typeNames", "types", "std::string",
               "Narrow float types to emulate (default: bf16, f16, "
               "f8E4M3FN, f8E5M2); casts on the others are left to LLVM">,
    Option<"keepF32Casts", "keep-f32-casts", "bool", /*default=*/"false",
           "Leave casts between f32 and bf16 or f16 to LLVM, for a target "
           "that converts them in one instruction (NVPTX on sm_80 and "
           "newer), with their `contract` flag dropped">,
  ];
}

#endif // DS_TRANSFORMS_PASSES_TD

// Policy files that are wrong get an error at their line.
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-bad-role.yaml 2>&1 | FileCheck %s --check-prefix=ROLE
// ROLE: policy-bad-role.yaml:4:11: error: ds-assign-precision: unknown role 'attn.z'; expected one of attn.q, attn.k
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-bad-type.yaml 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: policy-bad-type.yaml:3:14: error: ds-assign-precision: unknown type 'fp4' for compute; expected f32, bf16, f16, f8E4M3FN or f8E5M2
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-fp8-reduction.yaml 2>&1 | FileCheck %s --check-prefix=RED
// RED: policy-fp8-reduction.yaml:3:5: error: ds-assign-precision: rule #0 maps a reduction ('ds.reduce_sum') to FP8; reductions, norms, softmax, exp/log and losses stay in at least BF16
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-fp8-norm.yaml 2>&1 | FileCheck %s --check-prefix=NORM
// NORM: policy-fp8-norm.yaml:2:5: error: ds-assign-precision: rule #0 maps a reduction (role 'norm') to FP8
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-syntax.yaml 2>&1 | FileCheck %s --check-prefix=SYNTAX
// SYNTAX: policy-syntax.yaml:3:19: error: ds-assign-precision: Expected quote at end of scalar
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-bad-key.yaml 2>&1 | FileCheck %s --check-prefix=KEY
// KEY: policy-bad-key.yaml:3:5: error: ds-assign-precision: unknown rule key 'precision'; expected op, role, param, module, compute, storage, grad, grad-storage or scaling
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-unknown-op.yaml 2>&1 | FileCheck %s --check-prefix=OP
// OP: policy-unknown-op.yaml:2:9: error: ds-assign-precision: unknown op 'ds.matmull'
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-grad-storage-fp8.yaml 2>&1 | FileCheck %s --check-prefix=GRADFP8
// GRADFP8: policy-grad-storage-fp8.yaml:4:19: error: ds-assign-precision: grad-storage must be bf16, f16 or f32: an FP8 gradient needs a scale (give the cotangent operand FP8 with 'grad')
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-empty-rule.yaml 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: policy-empty-rule.yaml:2:5: error: ds-assign-precision: rule #0 matches nothing: give op, role, param or module
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/no-such-policy.yaml 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: ds-assign-precision: cannot read policy '{{.*}}no-such-policy.yaml': No such file or directory
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-catchall-fp8.yaml 2>&1 | FileCheck %s --check-prefix=CATCH
// CATCH: assign-precision-invalid.mlir:[[@LINE+25]]:8: error: 'ds.layer_norm' op ds-assign-precision: rule #0 (param *) maps this op to FP8; only matmuls run in FP8
// CATCH: policy-catchall-fp8.yaml:4:5: note: the rule is here

// The channel level's high type must not be narrower than the rule's.
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-channel-narrow-high.yaml 2>&1 | FileCheck %s --check-prefix=HIGH
// HIGH: error: 'ds.matmul' op ds-assign-precision: the channel level's high type 'f8E4M3FN' is narrower than 'bf16' of rule #0 (role head)
// HIGH: policy-channel-narrow-high.yaml:5:3: note: the channel section
// A schedule needs the training length.
// RUN: not ds-opt %s --ds-autodiff --ds-assign-precision=policy=%S/Inputs/policy-schedule.yaml 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: error: 'func.func' op ds-assign-precision: the policy's schedule needs the training length: pass total-steps=N (ds-run passes its --steps)
// SCHED: policy-schedule.yaml:5:3: note: the schedule is here
// RUN: not ds-opt %s --ds-autodiff "--ds-assign-precision=anomaly-steps=-2" 2>&1 | FileCheck %s --check-prefix=ANOM
// ANOM: error: 'func.func' op ds-assign-precision: anomaly-steps must be non-negative, got -2

// Out of the canonical order: before ds-autodiff, after ds-insert-optimizer.
// RUN: not ds-opt %s --ds-assign-precision 2>&1 | FileCheck %s --check-prefix=ORDER1
// ORDER1: error: 'func.func' op ds-assign-precision: the step has no gradients ('ds.grad' results); run ds-autodiff first
// RUN: not ds-opt %s --ds-autodiff --ds-insert-optimizer --ds-assign-precision 2>&1 | FileCheck %s --check-prefix=ORDER2
// ORDER2: error: 'func.func' op ds-assign-precision: the step already updates its parameters; run ds-assign-precision before ds-insert-optimizer

func.func @step(%x: tensor<8x16xf32> {ds.input = "x"}, %y: tensor<8xi64> {ds.input = "y"},
    %g: tensor<16xf32> {ds.param = "ln.weight", ds.init = #ds.init<ones>},
    %b: tensor<16xf32> {ds.param = "ln.bias", ds.init = #ds.init<zeros>},
    %w: tensor<10x16xf32> {ds.param = "head.weight", ds.init = #ds.init<normal, 0.1>})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %n = ds.layer_norm %x, %g, %b : tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>
  %z = ds.matmul %n, %w transpose_rhs : tensor<8x16xf32>, tensor<10x16xf32> -> tensor<8x10xf32>
  %l = ds.cross_entropy %z, %y : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

//===- DSOps.td - ds dialect ops ---------------------------*- tablegen -*-===//
//
// The ops of the ds dialect: tensor-valued, value semantics, static shapes.
// They are enough to write the forward graph and loss of an MLP, a GPT-style
// decoder block and a small CNN. Each op documents its gradient rule; the
// rules are implemented through DifferentiableOpInterface.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSOPS_TD
#define DS_DIALECT_DS_IR_DSOPS_TD

include "ds/Dialect/DS/IR/DSBase.td"
include "ds/Dialect/DS/IR/DSAttrs.td"
include "ds/Dialect/DS/IR/DSInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def DS_MatMulOp : DS_Op<"matmul", [Pure, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Matrix product, batched, with optional transposes";
  let description = [{
    `result[b..., i, j] = sum_k op(lhs)[b..., i, k] * op(rhs)[b..., k, j]`
    where `op` transposes the two innermost dimensions of an operand when its
    `transpose_*` flag is set.

    Both operands have rank >= 2. Either they have the same rank and equal
    batch (leading) dimensions, or `rhs` has rank 2 and is shared by every
    batch of `lhs` (a linear layer applied to a `[B, T, D]` activation). The
    operands share an element type, or are two FP8 formats (E5M2 gradients
    times E4M3 weights, as Hopper's FP8 GEMMs); the result element type may
    differ (e.g. FP8 operands with an FP32 result), accumulation is in at
    least the result's precision.

    Gradient (for the untransposed form, `C = A B`):
    `dA = dC B^T`, `dB = A^T dC`; when `rhs` is shared across batches its
    gradient is summed over them. The transposed forms follow by symmetry.

    ```mlir
    %y = ds.matmul %x, %w transpose_rhs
        : tensor<16x128x256xf32>, tensor<768x256xf32> -> tensor<16x128x768xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$lhs, DS_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
  let builders = [
    // Infers the result type; its element type is the operands'.
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   CArg<"bool", "false">:$transposeLhs,
                   CArg<"bool", "false">:$transposeRhs)>
  ];
  let extraClassDeclaration = [{
    /// The result shape for the given operand shapes, or failure with a
    /// message in `error`.
    static ::llvm::FailureOr<::llvm::SmallVector<int64_t>>
    inferResultShape(::llvm::ArrayRef<int64_t> lhs, ::llvm::ArrayRef<int64_t> rhs,
                     bool transposeLhs, bool transposeRhs, std::string &error);
    /// Whether `rhs` is a rank-2 matrix shared by every batch of `lhs`.
    bool isRhsBroadcast() {
      return getLhs().getType().getRank() > 2 && getRhs().getType().getRank() == 2;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

class DS_BinaryOp<string mnemonic, string formula, string grad,
                  list<Trait> traits = []>
    : DS_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor, DS_Retypable,
        DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>], traits)> {
  let summary = "Elementwise `" # formula # "` with explicit broadcast";
  let description = [{
    Elementwise `result = }] # formula # [{`.

    Broadcasting is explicit in the types: both operands have the same rank
    and each dimension is either equal or 1 in one of them (that operand is
    repeated along it), or one operand is rank 0 (a scalar). Changing rank
    takes a `ds.reshape` or `ds.broadcast`. The operands share an element
    type, float or integer. The op is `Retypable`: ds-assign-precision may
    compute it in a narrower float type by retyping operands and result.

    Gradient: }] # grad # [{ Where an operand was broadcast, its gradient is
    summed over the broadcast dimensions back to the operand's shape.

    ```mlir
    %y = ds.}] # mnemonic # [{ %x, %b : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins DS_Tensor:$lhs, DS_Tensor:$rhs);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

// The four arithmetic ops fold away their identity operand where that is
// exact (x + -0.0, x - +0.0, x * 1, x / 1; see DSFolders.cpp).
def DS_AddOp : DS_BinaryOp<"add", "lhs + rhs",
    "`dlhs = dy`, `drhs = dy`.", [Commutative]> {
  let hasFolder = 1;
}
def DS_SubOp : DS_BinaryOp<"sub", "lhs - rhs",
    "`dlhs = dy`, `drhs = -dy`."> {
  let hasFolder = 1;
}
def DS_MulOp : DS_BinaryOp<"mul", "lhs * rhs",
    "`dlhs = dy * rhs`, `drhs = dy * lhs`.", [Commutative]> {
  let hasFolder = 1;
}
def DS_DivOp : DS_BinaryOp<"div", "lhs / rhs",
    "`dlhs = dy / rhs`, `drhs = -dy * lhs / rhs^2`."> {
  let hasFolder = 1;
}
def DS_MaximumOp : DS_BinaryOp<"maximum", "max(lhs, rhs)",
    "the cotangent flows to the larger operand; on ties it is split evenly "
    "between both (as PyTorch's `torch.maximum`).", [Commutative]>;
def DS_MinimumOp : DS_BinaryOp<"minimum", "min(lhs, rhs)",
    "the cotangent flows to the smaller operand; on ties it is split evenly "
    "between both (as PyTorch's `torch.minimum`).", [Commutative]>;

def DS_BroadcastOp : DS_Op<"broadcast", [Pure, DS_DataMovement,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Broadcasts a tensor into a larger shape (broadcast_in_dim)";
  let description = [{
    Operand dimension `i` maps to result dimension `dims[i]` (strictly
    increasing); it must have the result's size there or size 1 (then it is
    repeated). Result dimensions no operand dimension maps to are new.

    The op is `DataMovement`: it computes nothing, so analyses (parameter
    tracing, roles) look through it.

    Gradient: `dx` = `dy` summed over the new and the repeated dimensions,
    reshaped to the operand's shape.

    ```mlir
    %b2 = ds.broadcast %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins DS_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $input `dims` `=` $dims attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

class DS_UnaryOp<string mnemonic, string formula, string grad,
                 list<Trait> traits = []>
    : DS_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
        DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>], traits)> {
  let summary = "Elementwise " # formula;
  let description = [{
    Elementwise `result = }] # formula # [{` on a floating-point tensor.

    Gradient: }] # grad # [{

    ```mlir
    %y = ds.}] # mnemonic # [{ %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// Activations (DS_Activation) are what a feed-forward block's role is
// found by; exp and log are not DS_Retypable: they stay in f32 (see
// ds-assign-precision), the others may compute in a narrower type.
def DS_ReluOp : DS_UnaryOp<"relu", "max(x, 0)",
    "`dx = dy * (x > 0)` (0 at x = 0, as PyTorch).",
    [DS_Retypable, DS_Activation]>;
def DS_SiluOp : DS_UnaryOp<"silu", "x * sigmoid(x)",
    "`dx = dy * s * (1 + x * (1 - s))` with `s = sigmoid(x)`.",
    [DS_Retypable, DS_Activation]>;
def DS_SigmoidOp : DS_UnaryOp<"sigmoid", "1 / (1 + exp(-x))",
    "`dx = dy * y * (1 - y)`.", [DS_Retypable, DS_Activation]>;
def DS_TanhOp : DS_UnaryOp<"tanh", "tanh(x)", "`dx = dy * (1 - y^2)`.",
    [DS_Retypable, DS_Activation]>;
def DS_ExpOp : DS_UnaryOp<"exp", "exp(x)", "`dx = dy * y`.">;
def DS_LogOp : DS_UnaryOp<"log", "log(x)", "`dx = dy / x`.">;
def DS_SqrtOp : DS_UnaryOp<"sqrt", "sqrt(x)", "`dx = dy / (2 y)`.",
    [DS_Retypable]>;
def DS_RsqrtOp : DS_UnaryOp<"rsqrt", "1 / sqrt(x)",
    "`dx = -dy * y^3 / 2`.", [DS_Retypable]>;
def DS_NegOp : DS_UnaryOp<"neg", "-x", "`dx = -dy`.", [DS_Retypable]>;
def DS_AbsOp : DS_UnaryOp<"abs", "|x|", "`dx = dy * sign(x)` (0 at x = 0).",
    [DS_Retypable]>;
def DS_RoundOp : DS_UnaryOp<"round", "nearbyint(x)",
    "`dx = 0` (piecewise constant, as torch.round; ties round to even).">;

def DS_StopGradientOp : DS_Op<"stop_gradient", [Pure,
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface,
                              ["isDifferentiableOperand"]>]> {
  let summary = "The value itself, through which no gradient flows";
  let description = [{
    `result = input`, as torch's `Tensor.detach()`: the forward value passes,
    the gradient does not (`dx = 0`). Passes use it where a value computed
    from a parameter must not send gradient back to it (LSQ's data-dependent
    initial step size). It has no folder, so canonicalization before
    ds-autodiff keeps it; lowering drops it.

    ```mlir
    %s0 = ds.stop_gradient %s : tensor<8xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def DS_GeluOp : DS_Op<"gelu", [Pure, SameOperandsAndResultType, DS_Retypable,
    DS_Activation, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Gaussian error linear unit, exact (erf) or tanh form";
  let description = [{
    `approximate = none` (the default): `y = x * Phi(x)` with
    `Phi(x) = (1 + erf(x / sqrt(2))) / 2`.
    `approximate = tanh`: `y = x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    Both equal PyTorch's `F.gelu(x, approximate=...)`.

    Gradient: `dx = dy * (Phi(x) + x * phi(x))` with `phi` the standard
    normal density, for the exact form; for the tanh form with
    `u = sqrt(2/pi) (x + 0.044715 x^3)` and `t = tanh(u)`:
    `dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2))`.

    ```mlir
    %y = ds.gelu %x approximate = tanh : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input,
      DefaultValuedAttr<DS_GeluApproximation, "::mlir::ds::GeluApproximation::none">:$approximate);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` `=` $approximate^)? attr-dict `:` type($input)
  }];
}

def DS_CastOp : DS_Op<"cast", [Pure, SameOperandsAndResultShape,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Converts the element type";
  let description = [{
    Converts every element to the result element type, bit for bit like
    PyTorch's `.to()`. Float to narrower float rounds to nearest, ties to
    even, subnormals included; NaN stays NaN; values beyond the target's
    range become inf, except for targets without inf (`f8E4M3FN`), where
    out-of-range values and infinities become the largest finite value
    (448) with their sign, as PyTorch does (`arith.truncf` would give NaN).
    With `saturate`, out-of-range finite values clamp to the largest finite
    value of the target instead of becoming inf (`satfinite`, used for
    scaled FP8 tensors); infinities stay infinities where the target has
    them. Float to integer truncates toward zero; integer to float rounds
    to nearest. On the CPU, casts to and from bf16, f16 and FP8 are exact
    integer code (ds-emulate-narrow-floats). A cast rounds, so it is not
    `DataMovement`; analyses that trace a parameter still look through it
    (a rounded weight is the same weight).

    Canonicalization moves a cast of a `ds.reshape` before the reshape
    (the two commute), so that CSE keeps one cast of a tensor that a view
    and its reshape would each round.

    Gradient: `dx = cast(dy)` back to the operand's element type (the
    identity up to rounding); integer operands receive none.

    ```mlir
    %h = ds.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    %q = ds.cast %x saturate : tensor<4x8xf32> -> tensor<4x8xf8E4M3FN>
    ```
  }];
  let arguments = (ins DS_Tensor:$input, UnitAttr:$saturate);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $input (`saturate` $saturate^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Normalisations and softmax
//===----------------------------------------------------------------------===//

class DS_SoftmaxBase<string mnemonic, string formula, string grad>
    : DS_Op<mnemonic, [Pure, SameOperandsAndResultType,
        DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let description = [{
    `y = }] # formula # [{` along dimension `axis`, computed stably (the
    maximum along the axis is subtracted first). `0 <= axis < rank`.

    Gradient: }] # grad # [{

    ```mlir
    %p = ds.}] # mnemonic # [{ %scores axis = 3 : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, I64Attr:$axis);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def DS_SoftmaxOp : DS_SoftmaxBase<"softmax", "exp(x) / sum(exp(x))",
    "`dx = y * (dy - sum(dy * y))`, the sum along `axis`. Where the input "
    "is a `ds.causal_mask` with fill -inf (through casts) and `axis` the "
    "last, `dy` is masked too (fill 0) before it is used: `y` is 0 "
    "there, so finite values give the same gradient, and the masked "
    "cotangent need not be read (flash attention never computes it); an "
    "inf or NaN there no longer makes the row's gradient NaN."> {
  let summary = "Softmax along one axis";
}
def DS_LogSoftmaxOp : DS_SoftmaxBase<"log_softmax", "x - log(sum(exp(x)))",
    "`dx = dy - exp(y) * sum(dy)`, the sum along `axis`."> {
  let summary = "Log-softmax along one axis";
}

def DS_LayerNormOp : DS_Op<"layer_norm",
    [Pure, AllTypesMatch<["input", "result"]>, AllTypesMatch<["weight", "bias"]>,
     DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Layer normalisation over the trailing dimensions";
  let description = [{
    Normalises over the trailing dimensions whose shape is `weight`'s (the
    `normalized_shape` of PyTorch's `nn.LayerNorm`):
    `y = (x - mean) / sqrt(var + eps) * weight + bias`, with the biased
    variance. All operands share the element type.

    Gradient, with `xhat = (x - mean) * rstd` over `N` normalised elements and
    `g = dy * weight`: `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`,
    `dweight = sum(dy * xhat)`, `dbias = sum(dy)` (sums over the leading
    dimensions).

    ```mlir
    %y = ds.layer_norm %x, %w, %b eps = 1.0e-05
        : tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       DS_FloatTensor:$bias,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias (`eps` `=` $eps^)? attr-dict `:` type($input) `,` type($weight) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def DS_RmsNormOp : DS_Op<"rms_norm",
    [Pure, AllTypesMatch<["input", "result"]>, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Root-mean-square normalisation over the trailing dimensions";
  let description = [{
    Normalises over the trailing dimensions whose shape is `weight`'s:
    `y = x / sqrt(mean(x^2) + eps) * weight` (PyTorch's `nn.RMSNorm`).

    Gradient, with `r = rsqrt(mean(x^2) + eps)` and `g = dy * weight`:
    `dx = r * (g - x * r^2 * mean(g * x))`, `dweight = sum(dy * x * r)`.

    ```mlir
    %y = ds.rms_norm %x, %w eps = 1.0e-06 : tensor<2x16x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`eps` `=` $eps^)? attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def DS_BatchNormOp : DS_Op<"batch_norm", [Pure, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>,
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["weight", "bias", "running_mean", "running_var",
                   "new_running_mean", "new_running_var"]>]> {
  let summary = "Batch normalisation in training mode";
  let description = [{
    For an input `[N, C, ...]`, normalises each channel `c` over all other
    dimensions with the batch statistics (biased variance):
    `y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c`, and updates
    the running statistics as PyTorch does in training mode:
    `new_mean = (1 - momentum) * running_mean + momentum * mean_c`,
    `new_var = (1 - momentum) * running_var + momentum * var_c * M / (M - 1)`
    (the unbiased variance, `M` elements per channel). The running
    statistics are explicit state of the training step.

    Gradient (per channel, `xhat` normalised input, `M` elements):
    `dx = weight * rstd * (dy - mean(dy) - xhat * mean(dy * xhat))`,
    `dweight = sum(dy * xhat)`, `dbias = sum(dy)`. The running statistics
    receive no gradient.

    ```mlir
    %y, %m1, %v1 = ds.batch_norm %x, %g, %b, %m0, %v0 momentum = 1.0e-01 eps = 1.0e-05
        : tensor<8x16x14x14xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       DS_FloatTensor:$bias, DS_FloatTensor:$running_mean,
                       DS_FloatTensor:$running_var,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs DS_FloatTensor:$result, DS_FloatTensor:$new_running_mean,
                      DS_FloatTensor:$new_running_var);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `,` $running_mean `,` $running_var
    (`momentum` `=` $momentum^)? (`eps` `=` $eps^)? attr-dict
    `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class DS_ReduceOp<string mnemonic, string what, string grad>
    : DS_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Reduces dimensions by " # what;
  let description = [{
    Reduces the dimensions listed in `dims` (strictly increasing, in range)
    by }] # what # [{. With `keep_dims` they stay as size-1 dimensions,
    otherwise they are removed.

    Gradient: }] # grad # [{

    ```mlir
    %s = ds.}] # mnemonic # [{ %x [1] : tensor<4x8xf32> -> tensor<4xf32>
    %k = ds.}] # mnemonic # [{ %x [1] keep_dims : tensor<4x8xf32> -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keep_dims);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input $dims (`keep_dims` $keep_dims^)? attr-dict `:` type($input) `->` type($result)
  }];
}

def DS_ReduceSumOp : DS_ReduceOp<"reduce_sum", "summation",
    "`dx = broadcast(dy)` over the reduced dimensions.">;
def DS_ReduceMeanOp : DS_ReduceOp<"reduce_mean", "the arithmetic mean",
    "`dx = broadcast(dy) / n`, `n` the number of reduced elements.">;
def DS_ReduceMaxOp : DS_ReduceOp<"reduce_max", "the maximum",
    "`dy` is split evenly among the elements equal to the maximum (as "
    "PyTorch's `amax`).">;

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def DS_TransposeOp : DS_Op<"transpose",
    [Pure, InferTypeOpAdaptor, DS_DataMovement,
     DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Permutes dimensions";
  let description = [{
    `result[i_perm[0], ..., i_perm[n-1]] = input[i_0, ..., i_n-1]`, i.e.
    result dimension `k` is input dimension `permutation[k]`.

    The op is `DataMovement`: it computes nothing, so analyses (parameter
    tracing, roles) look through it.

    Gradient: `dx = transpose(dy)` with the inverse permutation.

    ```mlir
    %t = ds.transpose %x [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins DS_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

def DS_ReshapeOp : DS_Op<"reshape", [Pure, DS_DataMovement,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Reinterprets the shape in row-major order";
  let description = [{
    Same elements in the same row-major order, new static shape with the
    same number of elements.

    The op is `DataMovement`: it computes nothing, so analyses (parameter
    tracing, roles) look through it.

    Gradient: `dx = reshape(dy)` to the operand's shape.

    ```mlir
    %flat = ds.reshape %x : tensor<2x16x64xf32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins DS_Tensor:$input);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def DS_SliceOp : DS_Op<"slice", [Pure, DS_DataMovement,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Extracts a strided box";
  let description = [{
    `result[i...] = input[offsets + i * strides]`; the result type gives the
    sizes. `strides` defaults to all ones. Every selected index must be in
    bounds.

    The op is `DataMovement`: it computes nothing, so analyses (parameter
    tracing, roles) look through it.

    Gradient: `dx` is zero except at the selected positions, where it is
    `dy` (a strided insert into zeros).

    ```mlir
    %q = ds.slice %qkv offsets [0, 0, 0] : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
    %e = ds.slice %x offsets [0, 1] strides [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins DS_Tensor:$input, DenseI64ArrayAttr:$offsets,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $input `offsets` $offsets (`strides` $strides^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The strides, all ones when the attribute is absent.
    ::llvm::SmallVector<int64_t> getStridesOrOnes();
  }];
}

def DS_ConcatOp : DS_Op<"concat",
    [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Concatenates tensors along one axis";
  let description = [{
    Joins one or more tensors of equal rank and element type along `axis`;
    all other dimensions must agree. It computes nothing either, but it is
    not `DataMovement`: its result has several sources, and analyses that
    trace a value to its one source stop at it.

    Gradient: each operand receives the slice of `dy` at its position.

    ```mlir
    %c = ds.concat %a, %b axis = 1 : tensor<4x3xf32>, tensor<4x5xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<DS_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $inputs `axis` `=` $axis attr-dict `:` type($inputs) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Transformer pieces
//===----------------------------------------------------------------------===//

def DS_EmbeddingOp : DS_Op<"embedding",
    [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Looks up rows of a table by integer index";
  let description = [{
    `result[i..., :] = table[indices[i...], :]` for a `[V, D]` table. Indices
    outside `[0, V)` read row 0 clamped into range (`min(max(i, 0), V - 1)`);
    front ends validate indices before they reach the step.

    Gradient: `dtable[v, :] = sum over positions p with indices[p] = v of
    dy[p, :]` (a scatter-add); the indices receive none.

    ```mlir
    %e = ds.embedding %wte, %tokens : tensor<96x64xf32>, tensor<2x16xi64> -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$table, DS_IntTensor:$indices);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices attr-dict `:` type($table) `,` type($indices) `->` type($result)
  }];
}

def DS_CausalMaskOp : DS_Op<"causal_mask", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Masks attention scores above the diagonal";
  let description = [{
    For scores `[..., T, S]` (rank >= 2, `T <= S`), sets
    `result[..., i, j] = fill` where `j > i + (S - T)` and copies the other
    elements: the mask of causal (autoregressive) self-attention, aligned so
    that the last query sees every key. `fill` defaults to -inf.

    Gradient: `dx = causal_mask(dy)` with `fill = 0`.

    ```mlir
    %m = ds.causal_mask %scores : tensor<2x4x16x16xf32>
    %g = ds.causal_mask %dscores fill = 0.0 : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input,
      DefaultValuedAttr<F64Attr, "-std::numeric_limits<double>::infinity()">:$fill);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input (`fill` `=` $fill^)? attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def DS_DropoutOp : DS_Op<"dropout", [Pure, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["rng", "new_rng"]>]> {
  let summary = "Inverted dropout driven by an explicit counter-based RNG";
  let description = [{
    `result = input * keep / (1 - p)` where `keep[i]` is true with
    probability `1 - p`. The random bits come from Philox4x32-10, a
    counter-based generator: `rng` is a `tensor<2xi64>` holding the key and a
    counter. Element `i` (row-major) uses counter `rng[1] + i` under key
    `rng[0]` and the first 32-bit output word `w`; it is kept when
    `w * 2^-32 >= p`. The result `new_rng` is `[rng[0], rng[1] + numel]`, so
    chained dropouts never reuse bits and a run is reproducible from the key.
    The generator state is ordinary step state (`ds.state<"rng">`).

    Gradient: `dx = dy * keep / (1 - p)` with the same `keep` (recomputed
    from `rng`); `rng` receives none.

    ```mlir
    %y, %rng1 = ds.dropout %x, %rng0 p = 1.0e-01 : tensor<2x16x64xf32>, tensor<2xi64>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_RngState:$rng, F64Attr:$p);
  let results = (outs DS_FloatTensor:$result, DS_RngState:$new_rng);
  let assemblyFormat = [{
    $input `,` $rng `p` `=` $p attr-dict `:` type($input) `,` type($rng)
  }];
  let hasVerifier = 1;
}

def DS_RandomNormalOp : DS_Op<"random_normal", [Pure,
    AllTypesMatch<["rng", "new_rng"]>]> {
  let summary = "Gaussian samples from an explicit counter-based RNG";
  let description = [{
    `result[i] = std * z[i]` with `z[i]` standard normal, drawn by
    Box-Muller from Philox4x32-10 (the generator of `ds.dropout`): element
    `i` (row-major) uses counter `rng[1] + i` under key `rng[0]`; with the
    first two 32-bit output words `w0`, `w1`,
    `u1 = (w0 + 0.5) 2^-32` (in (0, 1)), `u2 = w1 2^-32` and
    `z = sqrt(-2 ln u1) cos(2 pi u2)`, evaluated in f64 and rounded to the
    result type. `new_rng` is `[rng[0], rng[1] + numel]`. Used for
    gradient noise (ds-clip-gradients `noise-std`).

    Not differentiable (it has no differentiable operand).

    ```mlir
    %n, %rng1 = ds.random_normal %rng0 std = 1.0e-03 : tensor<2xi64> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins DS_RngState:$rng, F64Attr:$std);
  let results = (outs DS_FloatTensor:$result, DS_RngState:$new_rng);
  let assemblyFormat = [{
    $rng `std` `=` $std attr-dict `:` type($rng) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (NCHW)
//===----------------------------------------------------------------------===//

def DS_Conv2DOp : DS_Op<"conv2d",
    [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "2-D convolution, NCHW input, OIHW weight";
  let description = [{
    PyTorch's `F.conv2d` (cross-correlation): input `[N, C, H, W]`, weight
    `[O, C / groups, KH, KW]`, optional bias `[O]`, symmetric zero
    `padding` `[ph, pw]`, `strides` and `dilation`; all default to the
    identity (`[0, 0]`, `[1, 1]`, `[1, 1]`, `groups = 1`). Output
    `[N, O, OH, OW]` with
    `OH = (H + 2 ph - dh (KH - 1) - 1) / sh + 1` (likewise `OW`).

    Gradient: `dinput` is the transposed convolution of `dy` with the
    weight; `dweight[o, c, kh, kw] = sum_{n, oh, ow} dy[n, o, oh, ow] *
    input[n, c, oh sh + kh dh - ph, ow sw + kw dw - pw]`; `dbias = sum
    over N, OH, OW of dy`.

    ```mlir
    %y = ds.conv2d %x, %w, %b padding = [1, 1]
        : tensor<8x3x28x28xf32>, tensor<16x3x3x3xf32>, tensor<16xf32> -> tensor<8x16x28x28xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$weight,
                       Optional<DS_FloatTensor>:$bias,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)?
    (`strides` `=` $strides^)? (`padding` `=` $padding^)?
    (`dilation` `=` $dilation^)? (`groups` `=` $groups^)? attr-dict
    `:` type($input) `,` type($weight) (`,` type($bias)^)? `->` type($result)
  }];
}

class DS_Pool2DOp<string mnemonic, string what, string grad>
    : DS_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "2-D " # what # " pooling over NCHW";
  let description = [{
    }] # what # [{ over `kernel` windows of an `[N, C, H, W]` input with
    `strides` (default: the kernel, as PyTorch) and symmetric `padding`
    (default 0; at most half the kernel). Output size
    `OH = (H + 2 ph - KH) / sh + 1` (likewise `OW`).

    Gradient: }] # grad # [{

    ```mlir
    %p = ds.}] # mnemonic # [{ %x kernel = [2, 2] : tensor<8x16x28x28xf32> -> tensor<8x16x14x14xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `kernel` `=` $kernel (`strides` `=` $strides^)? (`padding` `=` $padding^)?
    attr-dict `:` type($input) `->` type($result)
  }];
  let extraClassDeclaration = [{
    /// The strides, the kernel when the attribute is absent.
    ::llvm::SmallVector<int64_t> getStridesOrKernel() {
      if (auto s = getStrides())
        return ::llvm::SmallVector<int64_t>(*s);
      return ::llvm::SmallVector<int64_t>(getKernel());
    }
  }];
}

def DS_MaxPool2DOp : DS_Pool2DOp<"max_pool2d", "Maximum",
    "`dy` goes to the first maximal element of each window (row-major "
    "order, as PyTorch), accumulated where windows overlap; padding is "
    "-inf.">;
def DS_AvgPool2DOp : DS_Pool2DOp<"avg_pool2d", "Average",
    "`dy / (KH KW)` goes to every element of each window (padding counts "
    "in the divisor, PyTorch's `count_include_pad=True`).">;

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def DS_CrossEntropyOp : DS_Op<"cross_entropy",
    [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Mean softmax cross-entropy with integer class labels";
  let description = [{
    For logits `[N, C]` and labels `[N]` (integers in `[0, C)`):
    `loss = mean_n (logsumexp(logits[n, :]) - logits[n, labels[n]])`, a
    rank-0 tensor, PyTorch's `F.cross_entropy` with `reduction='mean'`.
    Labels out of range contribute `logsumexp` only (their target logit
    reads as 0); validate labels before the step.

    Gradient: `dlogits = dy * (softmax(logits) - onehot(labels)) / N`; the
    labels receive none.

    ```mlir
    %loss = ds.cross_entropy %logits, %labels : tensor<32x96xf32>, tensor<32xi64> -> tensor<f32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IntTensor:$labels);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->` type($result)
  }];
}

def DS_MseLossOp : DS_Op<"mse_loss", [Pure, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>,
    AllTypesMatch<["input", "target"]>,
    InferTypeOpAdaptor]> {
  let summary = "Mean squared error";
  let description = [{
    `loss = mean((input - target)^2)` over all elements, a rank-0 tensor
    (PyTorch's `F.mse_loss`, `reduction='mean'`).

    Gradient: `dinput = dy * 2 (input - target) / n`, `dtarget = -dinput`.

    ```mlir
    %loss = ds.mse_loss %pred, %y : tensor<16x4xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$target);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $target attr-dict `:` type($input) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Comparison and selection
//===----------------------------------------------------------------------===//

def DS_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "elementwise comparison predicate", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>
    ]> {
  let cppNamespace = "::mlir::ds";
}

def DS_CompareOp : DS_Op<"compare", [Pure, InferTypeOpAdaptor]> {
  let summary = "Elementwise comparison with explicit broadcast";
  let description = [{
    `result = lhs <predicate> rhs` as `i1`, broadcasting as the binary ops
    do. Floats compare ordered: any comparison with NaN is false, except
    `ne`, which is true.

    Not differentiable (its result is boolean).

    ```mlir
    %pos = ds.compare gt, %x, %zero : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xi1>
    ```
  }];
  let arguments = (ins DS_ComparePredicate:$predicate, DS_Tensor:$lhs,
                       DS_Tensor:$rhs);
  let results = (outs RankedTensorOf<[I1]>:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def DS_SelectOp : DS_Op<"select", [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Elementwise choice between two tensors";
  let description = [{
    `result = cond ? on_true : on_false`, all three broadcasting as the binary
    ops do (equal ranks with size-1 dimensions, or rank-0 scalars).
    `on_true` and `on_false` share an element type.

    Gradient: `don_true = select(cond, dy, 0)`, `don_false =
    select(cond, 0, dy)` (each reduced to its operand's shape).

    ```mlir
    %y = ds.select %pos, %x, %zero : tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I1]>:$cond, DS_Tensor:$on_true,
                       DS_Tensor:$on_false);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` type($on_true) `,` type($on_false) `->` type($result)
  }];
}

def DS_InsertSliceOp : DS_Op<"insert_slice", [Pure, DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>,
    AllTypesMatch<["dest", "result"]>]> {
  let summary = "Writes a tensor into a strided box of another";
  let description = [{
    `result` equals `dest` except at the box `offsets + i * strides` (sizes
    from `source`'s shape), which holds `source`. The inverse of
    `ds.slice`; `strides` defaults to all ones.

    Gradient: `dsource = slice(dy)` at the box; `ddest = dy` with the box
    zeroed.

    ```mlir
    %g = ds.insert_slice %dq into %zeros offsets [0, 0, 0]
        : tensor<2x16x64xf32> into tensor<2x16x192xf32>
    ```
  }];
  let arguments = (ins DS_Tensor:$source, DS_Tensor:$dest,
                       DenseI64ArrayAttr:$offsets,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs DS_Tensor:$result);
  let assemblyFormat = [{
    $source `into` $dest `offsets` $offsets (`strides` $strides^)? attr-dict
    `:` type($source) `into` type($dest)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The strides, all ones when the attribute is absent.
    ::llvm::SmallVector<int64_t> getStridesOrOnes();
  }];
}

//===----------------------------------------------------------------------===//
// Backward kernels
//
// The gradients of most ops are compositions of other ds ops. These ops
// exist where a composition would be slow or awkward: they are the
// backward halves of fused forward ops.
//===----------------------------------------------------------------------===//

def DS_GeluGradOp : DS_Op<"gelu_grad", [Pure, AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "Gradient of ds.gelu";
  let description = [{
    `result = grad * gelu'(input)` for the given approximation (see
    `ds.gelu` for the formulas).

    Not differentiable itself (ds trains with first-order gradients only).

    ```mlir
    %dx = ds.gelu_grad %x, %dy approximate = tanh : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$grad,
      DefaultValuedAttr<DS_GeluApproximation, "::mlir::ds::GeluApproximation::none">:$approximate);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad (`approximate` `=` $approximate^)? attr-dict `:` type($input)
  }];
}

def DS_CrossEntropyGradOp : DS_Op<"cross_entropy_grad", [Pure,
    AllTypesMatch<["logits", "result"]>]> {
  let summary = "Gradient of ds.cross_entropy with respect to the logits";
  let description = [{
    `result[n, c] = grad * (softmax(logits[n, :])[c] - (c == labels[n])) / N`
    for logits `[N, C]`, labels `[N]` and the rank-0 cotangent `grad` of
    the mean loss.

    ```mlir
    %dl = ds.cross_entropy_grad %logits, %labels, %dloss
        : tensor<32x96xf32>, tensor<32xi64>, tensor<f32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IntTensor:$labels,
                       DS_FloatTensor:$grad);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` type($logits) `,` type($labels) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def DS_EmbeddingGradOp : DS_Op<"embedding_grad", [Pure]> {
  let summary = "Gradient of ds.embedding with respect to the table";
  let description = [{
    Scatter-add: `result[v, :] = sum over positions p with indices[p] = v of
    grad[p, :]`, zero for rows no index names. The result type is the
    table's `[V, D]`; `grad` is `indices.shape + [D]`. Indices outside
    `[0, V)` are clamped, as in the forward op.

    ```mlir
    %dt = ds.embedding_grad %dy, %tokens : tensor<2x16x64xf32>, tensor<2x16xi64> -> tensor<96x64xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$grad, DS_IntTensor:$indices);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` type($grad) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

class DS_ConvGradOp<string mnemonic, string summaryText, string what>
    : DS_Op<mnemonic, [Pure]> {
  let summary = summaryText;
  let description = [{
    The gradient of `ds.conv2d` with respect to its }] # what # [{, given
    the cotangent `grad` of the convolution's result and the convolution's
    other operand. The attributes are the forward convolution's; the result
    type is the }] # what # [{'s type.

    ```mlir
    %r = ds.}] # mnemonic # [{ %dy, %other padding = [1, 1]
        : tensor<8x16x28x28xf32>, tensor<...xf32> -> tensor<...xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$grad, DS_FloatTensor:$other,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{1, 1}">:$dilation,
                       DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $other
    (`strides` `=` $strides^)? (`padding` `=` $padding^)?
    (`dilation` `=` $dilation^)? (`groups` `=` $groups^)? attr-dict
    `:` type($grad) `,` type($other) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_Conv2DGradInputOp : DS_ConvGradOp<"conv2d_grad_input",
    "Gradient of ds.conv2d with respect to its input", "input">;
def DS_Conv2DGradWeightOp : DS_ConvGradOp<"conv2d_grad_weight",
    "Gradient of ds.conv2d with respect to its weight", "weight">;

class DS_PoolGradOp<string mnemonic, string what, string rule>
    : DS_Op<mnemonic, [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Gradient of ds." # what;
  let description = [{
    The gradient of `ds.}] # what # [{` with respect to its input:
    }] # rule # [{ The attributes are the forward op's; `input` is the
    forward op's input (its type is the result type).

    ```mlir
    %dx = ds.}] # mnemonic # [{ %x, %dy kernel = [2, 2]
        : tensor<8x16x28x28xf32>, tensor<8x16x14x14xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_FloatTensor:$grad,
                       DenseI64ArrayAttr:$kernel,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 0}">:$padding);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `kernel` `=` $kernel (`strides` `=` $strides^)? (`padding` `=` $padding^)?
    attr-dict `:` type($input) `,` type($grad)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The strides, the kernel when the attribute is absent.
    ::llvm::SmallVector<int64_t> getStridesOrKernel() {
      if (auto s = getStrides())
        return ::llvm::SmallVector<int64_t>(*s);
      return ::llvm::SmallVector<int64_t>(getKernel());
    }
  }];
}

def DS_MaxPool2DGradOp : DS_PoolGradOp<"max_pool2d_grad", "max_pool2d",
    "each window's cotangent goes to the first maximal input element of the "
    "window (row-major), accumulated where windows overlap.">;
def DS_AvgPool2DGradOp : DS_PoolGradOp<"avg_pool2d_grad", "avg_pool2d",
    "each window's cotangent divided by the window size goes to every input "
    "element of the window, accumulated where windows overlap.">;

include "ds/Dialect/DS/IR/DSQuantOps.td"
include "ds/Dialect/DS/IR/DSSparseOps.td"
include "ds/Dialect/DS/IR/DSCommOps.td"

#endif // DS_DIALECT_DS_IR_DSOPS_TD

//===- DSBase.td - ds dialect definition -------------------*- tablegen -*-===//
//
// The `ds` dialect and the pieces every ds op shares: the base op class, the
// static-shape trait and the op-category traits.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSBASE_TD
#define DS_DIALECT_DS_IR_DSBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def DS_Dialect : Dialect {
  let name = "ds";
  let cppNamespace = "::mlir::ds";
  let summary = "Tensor ops for whole training steps";
  let description = [{
    The `ds` dialect carries the training step of a model (forward, loss,
    backward and optimizer update) as tensor ops with value semantics and
    static shapes. Element types are MLIR builtins (`f64`, `f32`, `f16`,
    `bf16`, `f8E4M3FN`, `f8E5M2`, `i64`, `i8`, ...).

    A training step is a `func.func` marked `ds.train_step`; its arguments
    and results carry the attributes of the training-step contract
    (`ds.param`, `ds.input`, `ds.state`, `ds.init`, `ds.loss`, `ds.update`,
    `ds.grad`, `ds.metric`), documented in `docs/TrainingStepContract.md` and checked by
    the dialect's attribute verifiers.

    Every differentiable op documents its gradient rule (vector-Jacobian
    product) and implements it through `DifferentiableOpInterface`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Attribute names of the training-step contract.
    static constexpr ::llvm::StringLiteral kTrainStepAttrName = "ds.train_step";
    static constexpr ::llvm::StringLiteral kParamAttrName = "ds.param";
    static constexpr ::llvm::StringLiteral kInputAttrName = "ds.input";
    static constexpr ::llvm::StringLiteral kStateAttrName = "ds.state";
    static constexpr ::llvm::StringLiteral kInitAttrName = "ds.init";
    /// Per-parameter optimizer hyperparameters (a front end's param_groups).
    static constexpr ::llvm::StringLiteral kOptimAttrName = "ds.optim";
    static constexpr ::llvm::StringLiteral kLossAttrName = "ds.loss";
    static constexpr ::llvm::StringLiteral kUpdateAttrName = "ds.update";
    static constexpr ::llvm::StringLiteral kGradAttrName = "ds.grad";
    static constexpr ::llvm::StringLiteral kMetricAttrName = "ds.metric";
    /// Module attribute holding the contract table of every step function.
    static constexpr ::llvm::StringLiteral kContractAttrName = "ds.contract";

    /// Discardable op annotations (checked by verifyOperationAttribute).
    /// The module path of the op in the front end's model (string).
    static constexpr ::llvm::StringLiteral kModuleAttrName = "ds.module";
    /// What the op is for in the model (string; see RoleAnalysis.h).
    static constexpr ::llvm::StringLiteral kRoleAttrName = "ds.role";
    /// On a backward op: the name of the forward op it differentiates.
    static constexpr ::llvm::StringLiteral kVjpOfAttrName = "ds.vjp_of";
    /// The number a forward op shares with its backward ops (integer).
    static constexpr ::llvm::StringLiteral kOpIdAttrName = "ds.op_id";
    /// The backward seed, d loss / d loss (unit, on an arith.constant).
    static constexpr ::llvm::StringLiteral kSeedAttrName = "ds.seed";
    /// On an op ds-insert-fake-quant built (observers, ds.fake_quant): the
    /// quantization machinery, which ds-assign-precision leaves alone
    /// (unit).
    static constexpr ::llvm::StringLiteral kQuantAttrName = "ds.quant";
    /// On a layer a quant rule keeps unquantized in a type (a TypeAttr:
    /// bf16, f16, f32): ds-assign-precision computes it in that type.
    static constexpr ::llvm::StringLiteral kQuantKeepAttrName =
        "ds.quant_keep";
    /// A tensor-level matmul whose accumulator is not read (unit).
    static constexpr ::llvm::StringLiteral kGemmOverwriteAttrName =
        "ds.gemm_overwrite";
    /// On a matmul of causal attention: which operand is zero on one side
    /// of its diagonal, or which side of the result is never read, and
    /// the rows per library GEMM (a dictionary; CausalGemm.h).
    static constexpr ::llvm::StringLiteral kCausalGemmAttrName =
        "ds.causal_gemm";
    /// On a load in a GPU kernel that runs only where the element is used
    /// (lib/Conversion/LinalgToGPU/MaskedReads.h): the fraction of its
    /// buffer it reads, for ds-gpu-launch-report (a float in [0, 1]).
    static constexpr ::llvm::StringLiteral kReadFractionAttrName =
        "ds.read_fraction";

    /// On a store in a GPU kernel that stops before row tails nothing reads
    /// (lib/Conversion/LinalgToGPU/UnreadRowTails.h): the fraction of its
    /// buffer it writes, for ds-gpu-launch-report (a float in [0, 1]).
    static constexpr ::llvm::StringLiteral kWriteFractionAttrName =
        "ds.write_fraction";

    /// Module attributes of ds-assign-precision: its decisions per step
    /// function, and the time-level schedule the runner follows.
    static constexpr ::llvm::StringLiteral kPrecisionMapAttrName =
        "ds.precision_map";
    static constexpr ::llvm::StringLiteral kPrecisionScheduleAttrName =
        "ds.precision_schedule";
    /// Module attribute of ds-insert-optimizer: per step function, the
    /// optimizer compiled into it, as text (for messages and reports).
    static constexpr ::llvm::StringLiteral kOptimizerAttrName =
        "ds.optimizer";
    /// Module attribute of ds-sparsify-matmul: per step function, its
    /// settings (schedule, block, update period, regrowth), which
    /// ds-update-sparsity-masks and the report read.
    static constexpr ::llvm::StringLiteral kSparsityAttrName =
        "ds.sparsity";
    /// Module attribute of ds-data-parallel: the module averages its
    /// gradients over the ranks; ds-fuse-allreduce and
    /// ds-compress-allreduce add their settings (bucket size, scheme).
    static constexpr ::llvm::StringLiteral kDataParallelAttrName =
        "ds.data_parallel";
    /// On a gradient ds.all_reduce_start: the parameters whose gradients
    /// the bucket holds, in order.
    static constexpr ::llvm::StringLiteral kGradsAttrName = "ds.grads";
    /// Module attribute of ds-partition-pipeline: the stages, micro-batches,
    /// schedule and the plan; and, on each stage's functions, the stage.
    static constexpr ::llvm::StringLiteral kPipelineAttrName = "ds.pipeline";
    static constexpr ::llvm::StringLiteral kPipelineStageAttrName =
        "ds.pipeline_stage";

  private:
    void registerAttributes();
  }];
}

/// Every tensor operand and result of the op has a ranked, static shape. The
/// error names the offending value, since that is what the user must fix.
def DS_StaticShapes : NativeOpTrait<"StaticShapes"> {
  let cppNamespace = "::mlir::ds::OpTrait";
}

//===----------------------------------------------------------------------===//
// Op categories (DSTraits.h). Passes ask an op for its category instead of
// keeping their own lists of ops.
//===----------------------------------------------------------------------===//

/// Moves data, computes nothing: the result holds elements of the one tensor
/// operand, rearranged, selected or repeated. Analyses look through it.
def DS_DataMovement : NativeOpTrait<"DataMovement"> {
  let cppNamespace = "::mlir::ds::OpTrait";
}

/// Elementwise and meaningful in a narrower float type: computing it in bf16
/// or f16 takes only retyping its operands and result.
def DS_Retypable : NativeOpTrait<"Retypable"> {
  let cppNamespace = "::mlir::ds::OpTrait";
}

/// A pointwise nonlinearity, the middle of a feed-forward block.
def DS_Activation : NativeOpTrait<"Activation"> {
  let cppNamespace = "::mlir::ds::OpTrait";
}

class DS_Op<string mnemonic, list<Trait> traits = []>
    : Op<DS_Dialect, mnemonic, !listconcat([DS_StaticShapes], traits)>;

class DS_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<DS_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def DS_Tensor : RankedTensorOf<[AnyFloat, AnySignlessInteger]>;
def DS_FloatTensor : RankedTensorOf<[AnyFloat]>;
def DS_IntTensor : RankedTensorOf<[AnySignlessInteger]>;
def DS_RngState : RankedTensorOf<[I64]>;

#endif // DS_DIALECT_DS_IR_DSBASE_TD

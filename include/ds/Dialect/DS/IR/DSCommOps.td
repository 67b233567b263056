//===- DSCommOps.td - ds collective communication ops ------*- tablegen -*-===//
//
// Data parallelism (ds-data-parallel, ds-fuse-allreduce,
// ds-compress-allreduce): the collectives a step runs across the ranks of
// an MPI job. They are not pure: each is a point where every rank must take
// part, in the same order, so no pass may erase, merge or reorder them (they
// carry a write effect). The runtime runs them (ds_runtime.h,
// "Collectives"); outside mpirun they reduce over one rank. Included by
// DSOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSCOMMOPS_TD
#define DS_DIALECT_DS_IR_DSCOMMOPS_TD

def DS_ReductionKind : I32EnumAttr<"ReductionKind", "collective reduction", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>, I32EnumAttrCase<"min", 3>]> {
  let cppNamespace = "::mlir::ds";
}

def DS_CompressionScheme : I32EnumAttr<"CompressionScheme",
    "gradient all-reduce compression", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"three_tier", 1>,
    I32EnumAttrCase<"topk", 2>, I32EnumAttrCase<"fp16", 3>,
    I32EnumAttrCase<"bf16", 4>, I32EnumAttrCase<"powersgd", 5>]> {
  let cppNamespace = "::mlir::ds";
}

def DS_AllReduceOp : DS_Op<"all_reduce", [
    MemoryEffects<[MemWrite]>, AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<DS_DifferentiableOpInterface>]> {
  let summary = "Blocking reduction of a tensor over the ranks";
  let description = [{
    Every rank receives the elementwise `reduction` (sum, mean, max, min)
    of `input` over all ranks. Used for small values a step needs on every
    rank at once: the loss and metrics of the report, `found_inf`
    (max: every rank skips the same steps), and the batch statistics of
    synchronized batch norm (ds-sync-batch-norm, sum). Gradients use the
    non-blocking `ds.all_reduce_start` / `ds.all_reduce_wait` pair instead.

    Gradient: every rank's input contributes to every rank's result, so
    `dx = all_reduce(dy, sum)` for a sum and `all_reduce(dy, mean)` for a
    mean; max and min are not differentiable.

    With `across_stages` (pipeline parallelism, ds-partition-pipeline) the
    reduction runs over the stages of this rank's pipeline replica instead
    of over the data-parallel replicas of its stage: the loss, gradient norm
    and `found_inf` that every stage needs.

    ```mlir
    %found = ds.all_reduce %local max : tensor<f64>
    %norm2 = ds.all_reduce %partial sum across_stages : tensor<f64>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, DS_ReductionKind:$reduction,
                       UnitAttr:$across_stages);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $input $reduction (`across_stages` $across_stages^)? attr-dict `:`
    type($input)
  }];
}

def DS_CommBroadcastOp : DS_Op<"comm_broadcast", [
    MemoryEffects<[MemWrite]>, AllTypesMatch<["input", "result"]>]> {
  let summary = "Rank 0's value of a tensor, on every rank";
  let description = [{
    Every rank receives rank 0's `input`: state that data parallelism keeps
    identical by broadcasting it, as PyTorch DDP broadcasts module buffers
    (batch-norm running statistics) from rank 0.

    ```mlir
    %mean = ds.comm_broadcast %local_mean : tensor<8xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def DS_AllReduceStartOp : DS_Op<"all_reduce_start", [
    MemoryEffects<[MemWrite]>, AttrSizedOperandSegments]> {
  let summary = "Starts the mean all-reduce of a gradient bucket";
  let description = [{
    Starts the mean over the ranks of the 1-D `bucket` and returns a request
    that exactly one `ds.all_reduce_wait` completes. The collective
    progresses while the step computes on (the runtime's communication
    thread), so a bucket started as soon as its last gradient exists
    overlaps the rest of the backward.

    `scheme` compresses what this rank sends (ds-compress-allreduce):
    `three-tier` (8-bit / f16 / dropped by magnitude, the thresholds given
    by `params` = [mode (0: quantiles, 1: fixed), low, high]) and `topk`
    (`params` = [ratio, 0, 0], DGC) add the error-feedback `residual` to the
    bucket first and return the new residual, what was not sent;
    `fp16` / `bf16` round before sending. `powersgd` (`params` = [rank,
    active, 0], `shapes` = the bucket's tensors as [m_0, n_0, m_1, ...])
    sends rank-r factors of each matrix; its `residual` is the state of
    every matrix (the error, then the warm-start Q), and the new state is
    only complete once the wait has returned. A bucket holding inf or NaN
    is sent as zeros and its residual kept.

    ```mlir
    %req = ds.all_reduce_start %g scheme = none : tensor<4096xf32> -> i64
    %req2, %r1 = ds.all_reduce_start %g residual(%r0 : tensor<4096xf32>)
        params(%p : tensor<3xf64>) scheme = three_tier
        : tensor<4096xf32> -> i64, tensor<4096xf32>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$bucket,
                       Optional<DS_FloatTensor>:$residual,
                       Optional<RankedTensorOf<[F64]>>:$params,
                       Optional<RankedTensorOf<[I64]>>:$shapes,
                       DS_CompressionScheme:$scheme);
  let results = (outs I64:$request, Optional<DS_FloatTensor>:$new_residual);
  let assemblyFormat = [{
    $bucket (`residual` `(` $residual^ `:` type($residual) `)`)?
    (`params` `(` $params^ `:` type($params) `)`)?
    (`shapes` `(` $shapes^ `:` type($shapes) `)`)?
    `scheme` `=` $scheme attr-dict `:` type($bucket) `->` type($request)
    (`,` type($new_residual)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether `scheme` keeps an error-feedback residual.
    static bool hasResidual(CompressionScheme scheme) {
      return scheme == CompressionScheme::three_tier ||
             scheme == CompressionScheme::topk ||
             scheme == CompressionScheme::powersgd;
    }
  }];
}

def DS_AllReduceWaitOp : DS_Op<"all_reduce_wait", [MemoryEffects<[MemWrite]>]> {
  let summary = "Completes a ds.all_reduce_start";
  let description = [{
    Blocks until the all-reduce `request` names has completed on this rank
    and returns the mean bucket (the bucket's type). Placed as late as
    possible: right before the first use of the bucket's gradients.

    ```mlir
    %avg = ds.all_reduce_wait %req : i64 -> tensor<4096xf32>
    ```
  }];
  let arguments = (ins I64:$request);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$request attr-dict `:` type($request) `->` type($result)";
  let hasVerifier = 1;
}

def DS_CommRankOp : DS_Op<"comm_rank", [Pure]> {
  let summary = "This process's rank and the number of ranks";
  let description = [{
    `rank` and `size` of the data-parallel world, as rank-0 i64 tensors
    (0 and 1 outside mpirun). A step offsets its dropout counters by its
    rows of the global batch with them.

    ```mlir
    %rank, %size = ds.comm_rank : tensor<i64>, tensor<i64>
    ```
  }];
  let results = (outs 0DTensorOf<[I64]>:$rank, 0DTensorOf<[I64]>:$size);
  let assemblyFormat = "attr-dict `:` type($rank) `,` type($size)";
}

def DS_SendOp : DS_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "Sends a tensor to another pipeline stage";
  let description = [{
    Sends `input` to stage `peer` of this rank's pipeline replica on channel
    `tag`; the stage's function receives it with the `ds.recv` of the same
    channel. Returns at once (the runtime copies the data). Only in a
    function marked `ds.pipeline_stage` of a module with `ds.pipeline`; the
    module verifier checks that every channel has as many receives as
    sends, of the same type (ds-partition-pipeline writes these).

    ```mlir
    ds.send %act to 1 tag 0 : tensor<4x8x16xf64>
    ```
  }];
  let arguments = (ins DS_FloatTensor:$input, I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$input `to` $peer `tag` $tag attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def DS_RecvOp : DS_Op<"recv", [MemoryEffects<[MemWrite]>]> {
  let summary = "Receives a tensor from another pipeline stage";
  let description = [{
    Blocks until the tensor stage `peer` sent on channel `tag` arrives (at
    most the runtime's timeout). See `ds.send`.

    ```mlir
    %act = ds.recv from 0 tag 0 : tensor<4x8x16xf64>
    ```
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$tag);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "`from` $peer `tag` $tag attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // DS_DIALECT_DS_IR_DSCOMMOPS_TD

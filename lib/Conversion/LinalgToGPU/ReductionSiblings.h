//===- ReductionSiblings.h - A reduction and an op reading its input -*- C++
//-*-===//
//
// FP8 scaling reads each tensor it quantises twice: once for its amax (a
// reduction over every element) and once to scale and cast it (an
// elementwise op). As two kernels, the tensor comes from DRAM twice: 546 MB
// per layer of the benchmark's FP8 GPT step. Where the two can run as one
// kernel, the reduction's threads also compute the elementwise op at each
// element they load (buildReductionLaunch with a sibling), and the tensor
// is read once.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_REDUCTIONSIBLINGS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_REDUCTIONSIBLINGS_H

#include "GPUKernelBuilders.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::ds::gpu_kernels {

/// A full reduction and the all-parallel generic that runs in its kernel.
/// Where that generic is a cast-transpose (isTransposingGeneric), a column
/// reduction of the same tensor may run over its tiles as well: a bias
/// gradient, which sums the cotangent the FP8 cast quantises over its rows
/// (Transformer Engine's cast_transpose_dbias). In the block they are
/// adjacent, in this order: `columns`, `reduction`, `elementwise`; either
/// of the first two may be null, not both.
struct ReductionSibling {
  linalg::GenericOp reduction;
  linalg::GenericOp elementwise;
  linalg::GenericOp columns;
};

/// The tensor a full reduction and an elementwise op both read: the
/// operand of each, and how their iterations meet. `sameLoops`: both read
/// one buffer through one permutation map over loops of the same sizes, so
/// loop d of one is loop d of the other. Otherwise both read it through
/// identity maps, as views of one contiguous buffer that differ only by
/// reshapes (a cotangent's amax over [B, T, N] and its cast as [B*T, N]):
/// iteration k of each, in row-major order, reads element k.
struct SharedInput {
  OpOperand *reduction;
  OpOperand *elementwise;
  bool sameLoops;
};
std::optional<SharedInput> sharedInput(linalg::GenericOp reduction,
                                       linalg::GenericOp elementwise);

/// Whether `elementwise` can run in the kernel of the full reduction
/// `reduction` (every loop reduced, a kernel of its own: an amax, a norm),
/// judged on the two ops alone: an all-parallel generic on static buffers,
/// writing each of its outputs once per iteration (permutation maps), that
/// shares an input tensor with the reduction (sharedInput).
bool canShareReductionKernel(linalg::GenericOp reduction,
                             linalg::GenericOp elementwise);

/// Whether the reduction `columns` can run over the tiles of the
/// cast-transpose `elementwise` (isTransposingGeneric), judged on the two
/// ops alone: it keeps the tiles' columns (the innermost loop), reduces
/// their rows (and any other loops it does not keep), and reads a tensor
/// of `elementwise`'s through the same map over loops of the same sizes.
bool canShareColumnTiles(linalg::GenericOp columns,
                         linalg::GenericOp elementwise);

/// Pairs each full reduction of `f`'s body with the first later op that
/// canShareReductionKernel, where the two can meet: the reduction moves
/// down to just before it, and the ops between that depend on the
/// reduction (through values or buffers, transitively) move to just after
/// it. Only when the elementwise op depends on none of them, and neither
/// op writes what the other touches. `distinctArguments`: `f`'s buffer
/// arguments never share memory (the step ABI's promise). Then brings
/// each column reduction next to the first later cast-transpose (paired or
/// not) that canShareColumnTiles, in the same way. Returns the pairs, each
/// now adjacent.
SmallVector<ReductionSibling> scheduleReductionSiblings(func::FuncOp f,
                                                        bool distinctArguments);

/// Where the tensor a unit's members share (`elementwise`'s input that its
/// reductions read) is a temporary written by one all-parallel generic
/// over the same loops and read by nothing but the unit, that producer's
/// body moves into every member that reads it, which reads the producer's
/// inputs instead; the producer and the temporary go. A GELU's gradient,
/// which an FP8 policy's cast-transpose, its amax and the bias gradient
/// read, is then computed in their kernel and never written (Transformer
/// Engine's dact_cast_transpose_dbias). The producer's inputs must not be
/// written between it and the unit, nor by the unit. Updates `units`.
void inlineSharedProducers(MutableArrayRef<ReductionSibling> units,
                           bool distinctArguments);

/// Column reductions that one launch folds side by side (buildColumnGroup
/// Launch, GPUKernelBuilders.h), and the all-parallel generic before them
/// whose iterations run in that launch too, if any.
struct ColumnGroup {
  /// Over the members' loops; writes, through the map a member reads it
  /// by, a buffer a member reads. Each thread computes it at the elements
  /// it folds, stores its outputs, and hands the members the values they
  /// would load: a GELU's gradient, which the next GEMM reads, and the
  /// bias gradient that sums it over the rows, as one pass over the
  /// tensors instead of two. Null: none.
  linalg::GenericOp producer;
  SmallVector<linalg::GenericOp> members;
};

/// Runs of column reductions (getsColumnReduction, GPUKernelBuilders.h) of
/// `f`'s body that one launch can fold side by side: each over loops of the
/// same sizes and iterators as the first, reading an input another member
/// reads through the same map, touching nothing another writes, and
/// separated from the one before only by allocations and pure ops. With
/// the producer found before the first (as far from it), if one can run
/// there: all-parallel over loops of the same sizes, writing each element
/// once (permutation maps), its body free of regions, writing something a
/// member reads, and whatever a member reads of its outputs through the
/// map it writes it by; otherwise touching nothing a member writes nor
/// writing anything a member reads. Two members at least, or one and a
/// producer; none of `taken` (the ops siblings took).
SmallVector<ColumnGroup> columnGroups(func::FuncOp f,
                                      const llvm::DenseSet<Operation *> &taken,
                                      bool distinctArguments);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_REDUCTIONSIBLINGS_H

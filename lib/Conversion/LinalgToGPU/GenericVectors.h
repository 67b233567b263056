//===- GenericVectors.h - A linalg generic's iteration in vectors -*- C++
//-*-===//
//
// A row group's members (RowGroupKernels.cpp) iterate over a row's elements
// one element at a time, each thread of the row's team striding over it.
// Where the row is contiguous, a thread can take a 16-byte vector of it
// instead (as VectorKernels.h does for host loops): one load or store
// instruction per operand for several elements, and one address. These are
// the pieces: which operands of a generic move vectors along a loop, and
// one vector's iteration. Internal to lib/Conversion/LinalgToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_GENERICVECTORS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_GENERICVECTORS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::ds::gpu_kernels {

struct Reduction;

/// How a generic's iteration moves vectors along its loop `innermost`.
struct GenericVectors {
  linalg::GenericOp op;
  unsigned innermost = 0;
  /// Elements a vector: a power of two, at least 2.
  int64_t width = 0;
  /// Per operand (by number): whether it moves a vector. The others are read
  /// once for all lanes (their maps do not use `innermost`), or are a
  /// reduction's accumulator.
  SmallVector<bool> isVector;
  /// The buffers of the vector operands, each once.
  SmallVector<Value> buffers;
};

/// Plans `op`'s iteration in vectors along loop `innermost` (of
/// `innermostSize` iterations), or none. `reduction`: `op` is a parallel
/// reduction whose accumulator is combined per element, not stored (its
/// init is skipped); otherwise it is all-parallel and every output is
/// stored at each element. Qualifies when its body touches no memory, and
/// every operand read at each element (and every output stored) either
/// does not use `innermost` or has it as its map's last result and nowhere
/// else, on a buffer holdsVectors of the width, which is
/// chooseVectorWidth's (VectorKernels.h), as for host loops.
/// `leftToCaller`: outputs the caller stores itself from the lanes
/// (emitGenericVector's `yields`), which need not move vectors.
std::optional<GenericVectors>
planGenericVectors(linalg::GenericOp op, unsigned innermost,
                   int64_t innermostSize, bool reduction,
                   ArrayRef<OpOperand *> leftToCaller = {});

/// A vector an operand takes instead of loading its own: the one another
/// op's iteration loaded from the same elements.
struct GivenVector {
  OpOperand *operand = nullptr;
  Value vector;
};

/// One vector of `plan.op`'s iteration at loop indices `ivs`, where
/// ivs[innermost] is a multiple of the width: the operands loaded (vectors,
/// or one element for all lanes; each of `given`'s operands takes its
/// vector), the
/// body once per lane (linalg.index of the innermost loop gives the lane's
/// own index). An all-parallel op's outputs are then stored as vectors and
/// null is returned; for a reduction (`red`), `acc` combined with each lane
/// in turn is returned. `loaded`, when given, receives the vector each
/// operand took, by operand number (null for the others). `yields`, when
/// given, receives each yielded value's lanes instead of their being
/// stored (storeVectorOutput stores one).
Value emitGenericVector(OpBuilder &b, Location loc, const GenericVectors &plan,
                        ArrayRef<Value> ivs, Reduction *red = nullptr,
                        Value acc = {}, ArrayRef<GivenVector> given = {},
                        SmallVectorImpl<Value> *loaded = nullptr,
                        SmallVectorImpl<SmallVector<Value>> *yields = nullptr);

/// The vectors `from`'s iteration loaded (emitGenericVector's `loaded`, by
/// operand number) that operands of `to` read too: the same buffer through
/// the same map, over the same loops.
SmallVector<GivenVector> vectorsReadBy(linalg::GenericOp from,
                                       ArrayRef<Value> loaded,
                                       linalg::GenericOp to);

/// The vectors the sibling of `red` (ReductionSiblings.h) takes from the
/// reduction's iteration (`loaded`): the tensor the two share and, over
/// the same loops, every other buffer both read through the same map.
SmallVector<GivenVector> sharedVectors(const Reduction &red,
                                       ArrayRef<Value> loaded);

/// Maps, in `toMap`, each block argument of `to` that reads what one of
/// `from` read (the same buffer through the same map, over the same loops)
/// and `fromMap` holds to that element: cloned at the same indices, `to`
/// then loads it no more.
void mapElementsReadBy(linalg::GenericOp from, const IRMapping &fromMap,
                       linalg::GenericOp to, IRMapping &toMap);

/// Appends to `buffers` those of `more` it does not hold yet.
void appendBuffers(SmallVectorImpl<Value> &buffers, ArrayRef<Value> more);

/// Stores `lanes` (an output's values, one per lane) as one vector into
/// output `init` of `plan.op`, at the loop indices `ivs` of the first.
/// Returns the vector stored.
Value storeVectorOutput(OpBuilder &b, Location loc, const GenericVectors &plan,
                        OpOperand &init, ArrayRef<Value> lanes,
                        ArrayRef<Value> ivs);

/// One vector of the reduction `red`'s iteration at loop indices `ivs`,
/// where plan.innermost is one of its output (parallel) loops: lane k
/// combines its element into accs[k], the accumulator of the vector's
/// output k (`given`, `loaded`: as emitGenericVector's). Returns the
/// accumulators.
SmallVector<Value>
emitGenericVectorLanes(OpBuilder &b, Location loc, const GenericVectors &plan,
                       ArrayRef<Value> ivs, Reduction &red,
                       ArrayRef<Value> accs, ArrayRef<GivenVector> given = {},
                       SmallVectorImpl<Value> *loaded = nullptr);

/// How a parallel reduction's fold moves vectors along its innermost
/// reduced loop, and with it the iterations of the sibling that runs in its
/// kernel (ReductionSiblings.h), at the same width.
struct ReductionVectors {
  GenericVectors reduction;
  std::optional<GenericVectors> sibling;
  /// Both plans' buffers, each once: the ones buffersAligned checks.
  SmallVector<Value> buffers;
};

/// Plans `red`'s fold in vectors (planGenericVectors along its last reduced
/// loop, whose extent is static), and its sibling's iterations, if it has
/// one: along the same loop when the two share their loops, else along the
/// sibling's last loop (iteration k of each is element k of the shared
/// tensor). The narrower width of the two; none if either has none.
std::optional<ReductionVectors> planReductionVectors(Reduction &red);

/// Output `parIdx`'s part of `red`'s fold (and its sibling's iterations),
/// in vectors where `aligned` holds: vectors `first`, `first + step`, ...
/// of the output's reduced elements, folded in order from the identity,
/// lane by lane; elsewhere elements `first`, `first + step`, ... one at a
/// time (Reduction::foldRange). Both loops are there, the one not taken
/// running no iteration: a branch that yields the partial result made
/// ptxas keep a stack frame in a layer norm's gradient.
Value foldVectorsOrElements(OpBuilder &b, Location loc, Reduction &red,
                            const ReductionVectors &plan,
                            ArrayRef<Value> parIdx, Value first, Value step,
                            Value aligned);

/// An i1 that holds when every buffer of `buffers` starts 16-byte aligned
/// (the same in every thread).
Value buffersAligned(OpBuilder &b, Location loc, ArrayRef<Value> buffers);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_GENERICVECTORS_H

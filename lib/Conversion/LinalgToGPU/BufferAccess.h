//===- BufferAccess.h - Which buffers ops read and write --------*- C++ -*-===//
//
// The buffers an operation touches, traced through views to the buffer
// they name (an allocation, a global, an argument), and whether two such
// accesses may overlap: what ds-merge-gpu-launches checks before putting
// two launches in one kernel, and convert-linalg-to-ds-gpu before moving a
// reduction next to the elementwise op that reads the same tensor.
// Internal to lib/Conversion/LinalgToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_BUFFERACCESS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_BUFFERACCESS_H

#include "mlir/IR/Operation.h"

namespace mlir::ds::gpu_kernels {

/// Whether two root buffers may share memory. An allocation shares none
/// with any other root, and globals only with the same global; two
/// arguments share none when `distinctArguments` says so, nor then does an
/// argument with a global (the runner allocates them), and may otherwise
/// (a caller may pass one buffer as two arguments).
bool mayAlias(Value a, Value b, bool distinctArguments);

/// A buffer an op touches: the memref it names, and the buffer that memref
/// views (viewRoot, KernelUtils.h).
struct Access {
  Value view;
  Value root;
};

/// Whether two accesses may touch the same memory: their roots may alias,
/// and they are not static subviews of one memref whose ranges miss each
/// other (an FP8 amax history's newest entry and the rest).
bool mayOverlap(const Access &a, const Access &b, bool distinctArguments);

/// The buffers `op` and the ops nested in it read and write (freeing a
/// buffer counts as writing it); false when one of them touches memory in
/// a way not stated per buffer (a call, an op without memory effects
/// declared). Collectives exchange registers within a block, not buffers.
/// `libraryGemms`: a call to a library GEMM (`dsrt_cuda_matmul_*`) writes
/// its third operand and reads the others, as ds_runtime_cuda.h states,
/// rather than touching anything.
bool collectAccesses(Operation *op, SmallVectorImpl<Access> &reads,
                     SmallVectorImpl<Access> &writes,
                     bool libraryGemms = false);

/// What one op reads and writes, for dependence checks between ops.
struct AccessSet {
  SmallVector<Access> reads, writes;
  bool unknown = false; // collectAccesses failed: conflicts with any access

  explicit AccessSet(Operation *op, bool libraryGemms = false)
      : unknown(!collectAccesses(op, reads, writes, libraryGemms)) {}
  bool touchesMemory() const {
    return unknown || !reads.empty() || !writes.empty();
  }
};

/// Whether one of `a` and `b` may write memory the other reads or writes:
/// then they cannot swap places, nor run as one kernel in any interleaving.
bool conflict(const AccessSet &a, const AccessSet &b, bool distinctArguments);

/// Whether `a` conflicts with any of `others`.
bool conflictsWithAny(const AccessSet &a, ArrayRef<AccessSet> others,
                      bool distinctArguments);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_BUFFERACCESS_H

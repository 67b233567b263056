//===- UniformGuards.h - Kernels that usually write nothing -----*- C++ -*-===//
//
// A data-parallel bucket is zeroed when it holds a non-finite value
// (convert-ds-to-runtime's mask, in place): each element becomes
// select(probe is NaN, 0, element), a store of what was loaded unless the
// one value the probe holds says otherwise. An elementwise loop whose only
// write is `M[i] = select(c, k, M[i])`, with `c` the same at every
// iteration (computed from values defined outside the loop and loads at
// fixed indices of buffers the loop does not write), changes nothing where
// `c` is false. Its kernel then tests `c` once per thread and runs the
// loop only where it holds: exact, and a finite bucket costs a launch that
// reads one value. Internal to lib/Conversion/LinalgToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_UNIFORMGUARDS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_UNIFORMGUARDS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>

namespace mlir::ds::gpu_kernels {

/// The condition under which a loop's one store changes its buffer.
struct UniformGuard {
  /// The ops of the loop body that compute `condition`, in order.
  SmallVector<Operation *> slice;
  Value condition;
  /// Whether the store writes where `condition` is true (select(c, k, M[i]))
  /// or where it is false (select(c, M[i], k)).
  bool writesWhen = true;
  /// The buffer the loop writes.
  Value buffer;
};

/// The guard of `loop` (a host scf.parallel about to become a kernel), if
/// its body is straight-line code whose one memory write is such a store.
std::optional<UniformGuard> uniformGuard(scf::ParallelOp loop);

/// Makes `launch` (built from the guarded loop) test the guard once per
/// thread before its work, and marks its accesses of the written buffer
/// as touching none of it for the launch report (the case where the
/// condition does not hold, a finite bucket's).
void guardLaunch(gpu::LaunchOp launch, const UniformGuard &guard);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_UNIFORMGUARDS_H

//===- ConcatenationInBuffer.h - Parts written in place --------*- C++ -*-===//
//
// ds.concat lowers to a chain of tensor.insert_slice ops on a tensor.empty,
// which bufferization turns into a fresh buffer and one copy per part. A
// data-parallel step joins its gradients so (ds-fuse-allreduce's buckets):
// each gradient is written by the kernel or GEMM that computes it, then
// copied into the bucket that the all-reduce sends. As DDP's
// gradient_as_bucket_view, the kernels can write the bucket's slices
// directly, and the copies go.
//
//===----------------------------------------------------------------------===//

#ifndef DS_CONVERSION_LINALGTORUNTIME_CONCATENATIONINBUFFER_H
#define DS_CONVERSION_LINALGTORUNTIME_CONCATENATIONINBUFFER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::ds {

/// When `concatenation` is a chain of tensor.insert_slice ops (ds.concat's
/// lowering) on a static tensor.empty, each link used once, builds it in a
/// fresh buffer (memref.alloc, static shape) instead, replaces its uses
/// with the buffer's tensor (`bufferization.to_tensor restrict writable`,
/// then the slices of the parts that are copied) and returns the buffer.
///
/// A part is computed in its slice of the buffer, not copied, when it is
/// used only by its link and comes, through reshapes and destination-style
/// ops each used once, from an op whose tied init is a tensor.empty or is
/// not read (a linalg.fill, an elementwise generic): that init becomes the
/// slice, viewed in the part's shape (`to_tensor restrict writable` of a
/// subview of the buffer); a zero fill shared by other uses is copied for
/// it. Such a part's link becomes a `materialize_in_destination` of the part
/// in its slice, which bufferization makes a copy of the slice onto itself
/// and the canonicalizer removes. The other parts are copied as before.
/// The buffer is allocated before the first op that writes a part.
///
/// Returns null, changing nothing, when `concatenation` is built
/// otherwise. Run right before one-shot bufferization: the views alias the
/// buffer behind each other's backs (each `restrict`), which holds only
/// while nothing but these ops writes them. With `partsInPlace` false,
/// every part is copied (bucket-views=false, to compare).
Value buildConcatenationInBuffer(Value concatenation, bool partsInPlace = true);

} // namespace mlir::ds

#endif // DS_CONVERSION_LINALGTORUNTIME_CONCATENATIONINBUFFER_H

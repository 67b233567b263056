//===- VectorKernels.h - Elementwise kernels on 16-byte vectors -*- C++ -*-===//
//
// An elementwise loop whose every buffer is contiguous and indexed by the
// loop's own indices reads and writes memory in one order: element i of
// each buffer is element i of the iteration space. Such a kernel can move
// 16 bytes per access, as PyTorch's vectorized elementwise kernels do
// (`ld.global.v4`): a quarter of the load and store instructions of scalar
// f32 code, an eighth for bf16, and a warp's access one 512-byte run.
// Internal to lib/Conversion/LinalgToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_VECTORKERNELS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_VECTORKERNELS_H

#include "GPUKernelBuilders.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::ds::gpu_kernels {

/// The bytes a thread's vector access moves at most: one `ld.global.v4.b32`.
constexpr int64_t kVectorBytes = 16;

/// The bytes of an element a vector access may move: 1, 2, 4 or 8 (none
/// for i1, index and other types).
std::optional<int64_t> vectorElementBytes(Type t);

/// Whether vectors of `width` elements of `buffer` start at multiples of
/// `width` elements from its aligned pointer wherever the innermost index
/// is a multiple of `width`: a static layout whose innermost stride is 1 and
/// whose other strides and offset are multiples of `width`.
bool holdsVectors(Value buffer, int64_t width);

/// The elements a vector takes when its accesses' widest element has
/// `widest` bytes: 16 bytes' worth, halved while `accesses` vectors would
/// hold more than kAccessesPerGroup x 16 bytes in registers, or it does not
/// divide `innermostSize` or a buffer's layout (holdsVectors); 0 when that
/// leaves fewer than 2.
int64_t chooseVectorWidth(int64_t widest, int64_t accesses,
                          int64_t innermostSize, ArrayRef<Value> buffers);

/// The alignment a vector of `width` elements of `element` claims: its
/// size, which holds where holdsVectors does and the buffer starts 16-byte
/// aligned.
llvm::MaybeAlign vectorAlignment(int64_t width, Type element);

/// Stores `lanes` (consecutive elements) into `buffer` at `indices`, the
/// first lane's: one memref.store for one lane, else one vector.store
/// claiming vectorAlignment. Returns what it stored (the lane, or the
/// vector).
Value storeLanes(OpBuilder &b, Location loc, ArrayRef<Value> lanes,
                 Value buffer, ValueRange indices);

/// If the host loop `p` qualifies, builds its launch at `b`'s insertion
/// point and returns it; otherwise builds nothing. `element(b, loc, i)`
/// clones p's body for the element of linear index i (row-major over p's
/// space), as buildGridStrideLaunch's body does. `p` qualifies when:
///   - it starts at 0 with steps of 1 and a constant count of more than
///     kOneBlockElements elements (smaller ones are one-block launches,
///     which ds-merge-gpu-launches chains);
///   - its body is loads, stores and pure ops, no load after a store
///     (canUnrollElementwise), and uses the induction variables only as
///     indices of loads and stores;
///   - every load and store indexed by the innermost induction variable
///     has it as its last index, on a buffer whose innermost dimension is
///     contiguous (a "vector access"); every store is one. The other loads
///     read one element for all of a vector's lanes (a bias broadcast
///     along the rows, a scalar);
///   - a vector of 16 bytes of the widest element (or fewer, to fit the
///     innermost extent and the buffers' strides and offsets) holds at
///     least 2 elements, and the vector accesses' elements are 1, 2, 4 or
///     8 bytes.
/// Each thread takes one vector of the innermost dimension an iteration,
/// vectors a grid stride apart: the loads shared by its lanes, the vector
/// loads, the body once per lane (vector.extract), then the vector stores.
/// So a broadcast or a permutation of the outer dimensions (attention's
/// head split) moves vectors too. The buffers' alignment is checked at run
/// time, once per thread (one uniform branch): if one is not 16-byte
/// aligned, the kernel runs `element` in buildStridedLoop's loop instead.
gpu::LaunchOp buildVectorElementwiseLaunch(
    OpBuilder &b, scf::ParallelOp p, const LaunchShape &shape,
    function_ref<void(OpBuilder &, Location, Value)> element);

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_VECTORKERNELS_H

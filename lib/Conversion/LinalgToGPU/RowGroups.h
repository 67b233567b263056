//===- RowGroups.h - Runs of row-wise ops that one kernel can take -*- C++
//-*-===//
//
// A softmax is three passes over each row (its max, the sum of exponentials,
// the normalisation), a layer norm two or three, and their gradients as
// many. As separate kernels, each pass reads the whole tensor from DRAM. A
// row group is a run of such ops that a block per row can execute in turn
// (buildRowGroupLaunch), so that the row is read from DRAM once.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_ROWGROUPS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_ROWGROUPS_H

#include "GPUKernelBuilders.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ds::gpu_kernels {

/// Ops that may run as one row kernel, in program order, and their shape.
struct RowGroup {
  SmallVector<Operation *> ops;
  SmallVector<int64_t> rows;    // the loops that index rows
  SmallVector<int64_t> reduced; // the loops over a row's elements
};

/// The row groups of `f`'s body, disjoint. A group starts at a row
/// reduction that would get a block per row (isBlockRowReduction) and
/// takes the ops after it while each is one of
///   - a row reduction over the same rows and row elements,
///   - an all-parallel linalg.generic, linalg.fill or memref.copy whose
///     loops are the rows, or the rows and the row elements (its loads
///     coalescing along the row),
/// and between them lie pure ops, allocations, and ops without results
/// that touch no buffer a member writes and write none a member touches
/// (checked against every member, before and after, through
/// BufferAccess.h): those move to just after the group, in order. Every
/// buffer a member writes must be reached, by every member, through one
/// value of identity layout and maps whose leading results are the row
/// loops themselves (and whose others do not involve them): then a row's
/// ops touch only their row's elements of it, and blocks never share one.
/// A load in a member's body (a gather) counts as reaching any element of
/// its buffer, so an op that gathers from what the group writes is not a
/// member.
/// A group reads at least two of its rows' tensors (fewer would save no
/// pass); trailing ops over the rows alone are left out.
/// A group also takes column members (isColumnMember): a layer norm
/// gradient's weight and bias gradients, and the bias gradient of the
/// linear layer before it, are sums over the rows of tensors the group
/// reads or writes row by row. Each team of the kernel (a warp or a block)
/// folds its rows' elements into sums in shared memory, a column a thread,
/// so that the rows are not read again (buildRowGroupLaunch). Their outputs
/// must be touched by no other member, and their sums fit
/// kMaxColumnSumBytes together; a column member past that is moved out of
/// the group's way as other ops are.
/// The moves happen here; the caller builds the launches.
SmallVector<RowGroup> findRowGroups(func::FuncOp f, const LaunchShape &shape);

/// Whether `op` is a sum over `numRows` row loops of the elements of one
/// more loop, a row's (its output indexed by that loop alone, static,
/// coalescing along it): a column member of a row group over those rows.
bool isColumnMember(linalg::GenericOp op, unsigned numRows);

/// Shared memory one team's sums of column member `op` take: a row's
/// elements of its output type.
int64_t columnSumBytes(linalg::GenericOp op);

/// Shared memory a team's column sums may take: 32 KiB keeps seven blocks
/// on an SM of an H100 or H200 (228 KiB), below the 48 KiB a kernel may
/// hold statically.
constexpr int64_t kMaxColumnSumBytes = 32 * 1024;

} // namespace mlir::ds::gpu_kernels

#endif // DS_LIB_CONVERSION_LINALGTOGPU_ROWGROUPS_H

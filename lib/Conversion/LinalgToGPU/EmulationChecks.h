//===- EmulationChecks.h - What the emulation checks a GPU would fault on -===//
//
// ds-emulate-gpu-kernels runs a launch's blocks and threads one after
// another on the host, which runs what a GPU would not: an access past a
// buffer's end, a misaligned vector, two blocks racing on an element. These
// put checks around the launch's loads and stores that stop the emulation
// with the access's location instead, and the emitted code that reports.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTOGPU_EMULATIONCHECKS_H
#define DS_LIB_CONVERSION_LINALGTOGPU_EMULATIONCHECKS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace mlir::ds::emulation {

/// Before each load and store of the launch's body, a check that its
/// indices are in bounds, and for a vector access that claims more
/// alignment than its element's, that its address has it.
LogicalResult checkAccesses(gpu::LaunchOp launch);

/// Around each load and store of a buffer the launch stores to, a check
/// that no other block of the launch writes the element, nor reads it if
/// this access writes. The shadows it allocates before the launch are
/// appended to `buffers`, for the caller to free after the launch's loops.
LogicalResult checkBlockRaces(gpu::LaunchOp launch,
                              SmallVectorImpl<Value> &buffers);

/// Around each load and store of a buffer, or of shared memory, the launch
/// stores to, a check that no other thread of the block writes the element
/// between the same two block-wide synchronisations, nor reads it if this
/// access writes. Shadows and per-thread phase counts it allocates before
/// the launch are appended to `buffers`.
LogicalResult checkThreadRaces(gpu::LaunchOp launch,
                               SmallVectorImpl<Value> &buffers);

/// Code at `b` that, where `fails` holds, stops the emulation with
/// `ds-emulate-gpu-kernels: FILE:LINE:COL: <op> <what>`.
LogicalResult emitCheck(OpBuilder &b, Location loc, Operation *op, Value fails,
                        const Twine &what);
/// Code at `b` that writes `message` and a newline to standard error and
/// aborts.
LogicalResult emitFatal(OpBuilder &b, Location loc, const Twine &message);
/// Code at `b` that writes `text` to standard error (write(2), unbuffered).
LogicalResult emitWrite(OpBuilder &b, Location loc, const Twine &text);
/// The address of a constant global holding `text`, made once a module,
/// with libc's write and abort declared.
FailureOr<Value> stringGlobal(OpBuilder &b, Location loc, const Twine &text);
/// Code at `b` that writes `size` bytes at `addr` to standard error.
void writeTo2(OpBuilder &b, Location loc, Value addr, Value size);
/// `FILE:LINE:COL: <op>`, as compilers print a location.
std::string where(Operation *op);

} // namespace mlir::ds::emulation

#endif // DS_LIB_CONVERSION_LINALGTOGPU_EMULATIONCHECKS_H

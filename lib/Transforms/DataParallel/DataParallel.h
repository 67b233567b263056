//===- DataParallel.h - Shared by the data-parallel passes -----*- C++ -*-===//
//
// What ds-data-parallel, ds-fuse-allreduce and ds-compress-allreduce agree
// on: the module attribute that marks a data-parallel module (ds-run reads
// it), the attribute naming the gradients a bucket holds, and the state key
// of an error-feedback residual.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_DATAPARALLEL_DATAPARALLEL_H
#define DS_LIB_TRANSFORMS_DATAPARALLEL_DATAPARALLEL_H

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::ds::dp {

/// Module attribute set by ds-data-parallel: a dictionary that the other
/// two passes extend (`bucket_bytes`, `compression`).
inline constexpr llvm::StringLiteral kModuleAttr =
    DSDialect::kDataParallelAttrName;
/// On a gradient `ds.all_reduce_start`: the names of the parameters whose
/// gradients the bucket holds, in bucket order.
inline constexpr llvm::StringLiteral kGradsAttr = DSDialect::kGradsAttrName;
/// State kind of an error-feedback residual (`comm.residual.bucket<i>`).
inline constexpr llvm::StringLiteral kResidualKind = "comm.residual";

/// Whether `module` went through ds-data-parallel.
inline bool isDataParallel(ModuleOp module) {
  return module && module->hasAttr(kModuleAttr);
}

/// Sets `name = value` in the module's ds.data_parallel dictionary.
void setModuleEntry(ModuleOp module, StringRef name, Attribute value);

/// The gradient all-reduce starts of `func` (those with kGradsAttr), in
/// block order.
SmallVector<AllReduceStartOp> gradientStarts(FunctionOpInterface func);

/// The wait that completes `start` (exactly one after ds-data-parallel).
AllReduceWaitOp waitOf(AllReduceStartOp start);

} // namespace mlir::ds::dp

#endif // DS_LIB_TRANSFORMS_DATAPARALLEL_DATAPARALLEL_H

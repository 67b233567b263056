//===- Passes.h - ds transformation passes ---------------------*- C++ -*-===//
//
// Declarations of the ds passes, the reusable functions they are thin
// wrappers of, and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TRANSFORMS_PASSES_H
#define DS_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

#define GEN_PASS_DECL
#include "ds/Transforms/Passes.h.inc"

/// Records the contract of every `ds.train_step` function of `module` in the
/// module's `ds.contract` table (merged with any existing entries) and, when
/// `strip` is set, removes the contract attributes from the functions.
/// Emits a diagnostic and fails when a contract is invalid.
LogicalResult exportContracts(ModuleOp module, bool strip);

#define GEN_PASS_REGISTRATION
#include "ds/Transforms/Passes.h.inc"

/// Registers every ds pass and pipeline.
void registerAllDSPasses();

} // namespace mlir::ds

#endif // DS_TRANSFORMS_PASSES_H

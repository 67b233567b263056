//===- OptimizeModule.h - LLVM pipeline for a compiled step --- -*- C++ -*-===//
//
// What mlir::makeOptimizingTransformer does (the default per-module pipeline
// with loop and SLP vectorisation), less CalledValuePropagation: that
// interprocedural pass only annotates indirect calls, which compiled steps
// do not make, and on a GPU step's host function (one block of 100 000
// instructions) it took 9 of the optimiser's 10.8 s.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_OPTIMIZEMODULE_H
#define DS_RUNNER_OPTIMIZEMODULE_H

namespace llvm {
class Error;
class Module;
class TargetMachine;
} // namespace llvm

namespace ds::runner {

/// Runs LLVM's default pipeline at `optLevel` (0-3) on `module`;
/// `targetMachine` (may be null) informs the cost models.
llvm::Error optimizeModule(llvm::Module &module, unsigned optLevel,
                           llvm::TargetMachine *targetMachine);

} // namespace ds::runner

#endif // DS_RUNNER_OPTIMIZEMODULE_H

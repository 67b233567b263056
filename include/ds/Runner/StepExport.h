//===- StepExport.h - A compiled step as a shared library ------*- C++ -*-===//
//
// The ahead-of-time path: a step compiled by ds-run (for the CPU or for a
// CUDA chip) written as a directory that a runner without MLIR loads
// (tools/ds-step-run, or a user's own program):
//
//   step.o      the machine code the JIT would run (host code; a GPU step's
//               kernels are cubins embedded in it and loaded by its module
//               constructors)
//   step.so     step.o linked as a shared library (its runtime symbols are
//               left to the loading program: libdsrt, or libdsrt_cuda)
//   step.json   what the step takes and returns (docs/AheadOfTime.md)
//   init/       the initial parameters and state, as a ds-run checkpoint
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_STEPEXPORT_H
#define DS_RUNNER_STEPEXPORT_H

#include "ds/Runner/Session.h"

#include "llvm/Support/Error.h"

#include <string>

namespace ds::runner {

/// The files of an exported step directory.
inline constexpr llvm::StringLiteral kStepManifestFile = "step.json";
inline constexpr llvm::StringLiteral kStepObjectFile = "step.o";
inline constexpr llvm::StringLiteral kStepLibraryFile = "step.so";
inline constexpr llvm::StringLiteral kStepInitDir = "init";

/// What step.json records beside the contract.
struct StepExportInfo {
  std::string device = "cpu";   ///< "cpu" or "cuda"
  std::string chip;             ///< the CUDA chip (sm_90, ...) of a GPU step
  bool emulatedKernels = false; ///< a GPU step's kernels run on the host
  std::string modulePath, moduleHash;
  uint64_t seed = 0;
  /// The passes ds-run applied (one line each), for the record.
  std::vector<std::string> passes;
};

/// Writes step.o, step.so and step.json of `program` (compiled with
/// PrepareOptions::compileOnly) into the existing directory `dir`. step.so
/// is linked with the system C compiler (cc, else clang or gcc, found on
/// PATH); a missing compiler or a failed link is an error that names the
/// command. Refuses steps the runner cannot drive: several step variants (a
/// time-level precision schedule), pipeline stages and data parallelism.
llvm::Error writeStepLibrary(const StepProgram &program, llvm::StringRef dir,
                             const StepExportInfo &info);

} // namespace ds::runner

#endif // DS_RUNNER_STEPEXPORT_H

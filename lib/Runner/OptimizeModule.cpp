//===- OptimizeModule.cpp - LLVM's pipeline for a compiled step -----------===//

#include "ds/Runner/OptimizeModule.h"

#include "llvm/IR/Module.h"
#include "llvm/IR/PassInstrumentation.h"
#include "llvm/Passes/OptimizationLevel.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/Error.h"

using namespace llvm;

Error ds::runner::optimizeModule(Module &module, unsigned optLevel,
                                 TargetMachine *targetMachine) {
  if (optLevel > 3)
    return createStringError("invalid LLVM optimisation level " +
                             Twine(optLevel) + " (expected 0 to 3)");
  const OptimizationLevel levels[] = {
      OptimizationLevel::O0, OptimizationLevel::O1, OptimizationLevel::O2,
      OptimizationLevel::O3};
  OptimizationLevel level = levels[optLevel];

  PassInstrumentationCallbacks callbacks;
  callbacks.registerShouldRunOptionalPassCallback(
      [](StringRef pass, Any) { return pass != "CalledValuePropagationPass"; });
  PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  PassBuilder builder(targetMachine, tuning, std::nullopt, &callbacks);

  LoopAnalysisManager loops;
  FunctionAnalysisManager functions;
  CGSCCAnalysisManager sccs;
  ModuleAnalysisManager modules;
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);

  ModulePassManager pipeline =
      level == OptimizationLevel::O0
          ? builder.buildO0DefaultPipeline(level)
          : builder.buildPerModuleDefaultPipeline(level);
  pipeline.run(module, modules);
  return Error::success();
}

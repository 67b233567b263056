//===- DSPlugin.cpp - ds as an mlir-opt dialect and pass plugin -----------===//
//
// The entry points Debian's stock `mlir-opt-22` looks up when it loads this
// library with `--load-dialect-plugin` or `--load-pass-plugin`. The dialect
// entry point registers the dialect and the passes, so it alone is enough to
// parse ds IR and run ds passes (name them in --pass-pipeline: plugin pass
// flags do not exist yet when mlir-opt parses its command line). The pass
// entry point can only register passes: mlir-opt gives pass plugins no
// dialect registry.
//
//===----------------------------------------------------------------------===//

#include "ds/InitDS.h"

#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

using namespace mlir;

extern "C" LLVM_ATTRIBUTE_WEAK DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "DS", LLVM_VERSION_STRING,
          [](DialectRegistry *registry) {
            ds::registerDSDialects(*registry);
            ds::registerDSPassesAndPipelines();
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "DSPasses", LLVM_VERSION_STRING,
          []() { ds::registerDSPassesAndPipelines(); }};
}

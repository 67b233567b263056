//===- ds-opt.cpp - The ds optimizer driver -------------------------------===//
//
// mlir-opt with ds: every upstream dialect, pass, extension and LLVM
// translation, plus the ds dialect, passes and pipelines.
//
//===----------------------------------------------------------------------===//

#include "ds/InitDS.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace mlir::ds::test {
/// The passes of test/lib (tests and docs only).
void registerTestPasses();
} // namespace mlir::ds::test

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::ds::registerDSPassesAndPipelines();
  mlir::ds::test::registerTestPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // Passes such as gpu-module-to-binary translate to LLVM IR in-process.
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::ds::registerDSDialects(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "ds-mlir optimizer driver\n", registry));
}

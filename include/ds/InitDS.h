//===- InitDS.h - Register everything ds provides --------------*- C++ -*-===//
//
// One place that tools (ds-opt, the mlir-opt plugin, ds-run) call to make ds
// available: its dialect and its passes.
//
//===----------------------------------------------------------------------===//

#ifndef DS_INITDS_H
#define DS_INITDS_H

#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/Linalg/GenericVJP.h"
#include "ds/Pipelines/Pipelines.h"
#include "ds/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"

namespace mlir::ds {

/// Adds the ds dialect to `registry`, and the gradient rule of
/// `linalg.generic` for when linalg is loaded.
inline void registerDSDialects(DialectRegistry &registry) {
  registry.insert<DSDialect>();
  registerLinalgGenericVJPModel(registry);
}

/// Registers every ds pass and pipeline with the global pass registry.
inline void registerDSPassesAndPipelines() {
  registerAllDSPasses();
  registerDSConversionPasses();
  registerDSPipelines();
}

} // namespace mlir::ds

#endif // DS_INITDS_H

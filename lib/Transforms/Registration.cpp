//===- Registration.cpp - Register ds passes ------------------------------===//

#include "ds/Transforms/Passes.h"

void mlir::ds::registerAllDSPasses() { registerDSPasses(); }

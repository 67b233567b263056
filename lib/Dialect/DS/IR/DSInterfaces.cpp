//===- DSInterfaces.cpp - ds op interfaces --------------------------------===//

#include "ds/Dialect/DS/IR/DSInterfaces.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

#include "ds/Dialect/DS/IR/DSInterfaces.cpp.inc"

//===- DSInterfaces.h - ds op interfaces -----------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSINTERFACES_H
#define DS_DIALECT_DS_IR_DSINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/TypeUtilities.h"

#include "ds/Dialect/DS/IR/DSInterfaces.h.inc"

#endif // DS_DIALECT_DS_IR_DSINTERFACES_H

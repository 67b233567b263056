//===- DSAttrs.h - ds attributes and enums ---------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSATTRS_H
#define DS_DIALECT_DS_IR_DSATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "ds/Dialect/DS/IR/DSEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ds/Dialect/DS/IR/DSAttrs.h.inc"

#endif // DS_DIALECT_DS_IR_DSATTRS_H

//===- DSDialect.h - ds dialect --------------------------------*- C++ -*-===//
//
// The ds dialect class. Include DSOps.h for the ops.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSDIALECT_H
#define DS_DIALECT_DS_IR_DSDIALECT_H

#include "mlir/IR/Dialect.h"

#include "ds/Dialect/DS/IR/DSDialect.h.inc"

#endif // DS_DIALECT_DS_IR_DSDIALECT_H

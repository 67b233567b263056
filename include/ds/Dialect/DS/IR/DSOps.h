//===- DSOps.h - ds dialect ops --------------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSOPS_H
#define DS_DIALECT_DS_IR_DSOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSInterfaces.h"
#include "ds/Dialect/DS/IR/DSTraits.h"

#define GET_OP_CLASSES
#include "ds/Dialect/DS/IR/DSOps.h.inc"

#endif // DS_DIALECT_DS_IR_DSOPS_H

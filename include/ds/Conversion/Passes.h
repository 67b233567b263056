//===- Passes.h - ds lowering passes ---------------------------*- C++ -*-===//

#ifndef DS_CONVERSION_PASSES_H
#define DS_CONVERSION_PASSES_H

#include "ds/Conversion/DSToLinalg.h"

#include "mlir/Pass/Pass.h"

namespace mlir::ds {

#define GEN_PASS_DECL
#include "ds/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Conversion/Passes.h.inc"

} // namespace mlir::ds

#endif // DS_CONVERSION_PASSES_H

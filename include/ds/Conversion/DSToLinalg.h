//===- DSToLinalg.h - Lower ds to linalg -----------------------*- C++ -*-===//

#ifndef DS_CONVERSION_DSTOLINALG_H
#define DS_CONVERSION_DSTOLINALG_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::ds {

/// Adds the patterns that lower every ds op to linalg, tensor, arith, math
/// and scf ops on tensors.
void populateDSToLinalgPatterns(RewritePatternSet &patterns);

} // namespace mlir::ds

#endif // DS_CONVERSION_DSTOLINALG_H

//===- NarrowBeforeTranspose.h - Round before moving, not after -*- C++ -*-===//
//
// Internal to lib/Transforms: the pattern ds-fuse-elementwise adds so that
// a narrowing cast of a transposed tensor rounds before the transpose
// (NarrowBeforeTranspose.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_NARROWBEFORETRANSPOSE_H
#define DS_LIB_TRANSFORMS_NARROWBEFORETRANSPOSE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::ds {

/// `truncf(reshape*(linalg.transpose(x)))`, each op its producer's only
/// user, becomes `reshape*(linalg.transpose(truncf(x)))`.
void populateNarrowBeforeTransposePatterns(RewritePatternSet &patterns);

} // namespace mlir::ds

#endif // DS_LIB_TRANSFORMS_NARROWBEFORETRANSPOSE_H

//===- NarrowBeforeTranspose.h - Round before moving, not after -*- C++ -*-===//
//
// Internal to lib/Transforms: the patterns ds-fuse-elementwise adds so that
// a narrowing cast of a transposed (reshaped) tensor rounds before the
// transpose (and the reshape) (NarrowBeforeTranspose.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_NARROWBEFORETRANSPOSE_H
#define DS_LIB_TRANSFORMS_NARROWBEFORETRANSPOSE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::ds {

/// `truncf(reshape*(linalg.transpose(x)))`, each op its producer's only
/// user, becomes `reshape*(linalg.transpose(truncf(x)))`; and
/// `truncf(reshape(x))`, where `x` is an elementwise generic's result used
/// only by the reshape, becomes `reshape(truncf(x))`, so the cast fuses
/// into that generic.
void populateNarrowBeforeTransposePatterns(RewritePatternSet &patterns);

} // namespace mlir::ds

#endif // DS_LIB_TRANSFORMS_NARROWBEFORETRANSPOSE_H

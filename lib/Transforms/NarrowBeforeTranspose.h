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
/// Also `reshape(extf(x))` becomes `extf(reshape(x))` where the reshape's
/// readers all take the widening (readersTakeWidening), so that it fuses
/// into them.
void populateNarrowBeforeTransposePatterns(RewritePatternSet &patterns);

/// Whether `op` is a linalg.generic that only widens its one input
/// elementwise (identity maps, parallel loops, one arith.extf).
bool isWideningCast(Operation *op);

/// Whether every reader of `reshape`'s result is a linalg.generic (tensor
/// semantics) reading it as an input, which a widening cast moved past the
/// reshape would fuse into.
bool readersTakeWidening(Operation *reshape);

} // namespace mlir::ds

#endif // DS_LIB_TRANSFORMS_NARROWBEFORETRANSPOSE_H

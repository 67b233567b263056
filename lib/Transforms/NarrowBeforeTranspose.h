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
/// into them; and `transpose(extf(x))` becomes `extf(transpose(x))` where
/// the transpose's readers do, directly or through such reshapes.
void populateNarrowBeforeTransposePatterns(RewritePatternSet &patterns);

/// Whether `op` is a linalg.generic that only widens its one input
/// elementwise (identity maps, parallel loops, one arith.extf).
bool isWideningCast(Operation *op);

/// Whether a widening cast of `use`'s value would end up fused into its
/// reader: a linalg.generic (tensor semantics) reading it as an input, or a
/// reshape or a transpose (of its input) whose readers all take it, since
/// the widening moves past those.
bool takesWidening(OpOperand &use);

/// Whether every use of the one result of `view` (a reshape or a
/// transpose) takesWidening.
bool readersTakeWidening(Operation *view);

} // namespace mlir::ds

#endif // DS_LIB_TRANSFORMS_NARROWBEFORETRANSPOSE_H

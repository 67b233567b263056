//===- GenericVJP.h - Differentiating linalg.generic from its body -*- C++
//-*-===//
//
// ds-autodiff differentiates ds ops through DifferentiableOpInterface. An
// elementwise `linalg.generic` that ds-import-linalg cannot raise into ds
// ops (its body uses `math.sin`, `math.erf`, `math.floor`, ...) stays in the
// step, and this external model of the interface gives it a gradient rule
// derived from its scalar body, as Enzyme-MLIR differentiates linalg.generic:
// for each differentiable input x_i, one generic over the same iteration
// space recomputes the body, builds the body's forward-mode derivative
// d out / d x_i (ScalarDerivatives.h) and yields `dy * d out / d x_i`,
// summed over the loops x_i is broadcast along.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_LINALG_GENERICVJP_H
#define DS_DIALECT_LINALG_GENERICVJP_H

#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace mlir {
namespace linalg {
class GenericOp;
} // namespace linalg

namespace ds {

/// Why ds-autodiff cannot differentiate `op` from its scalar body, or an
/// empty string when it can: `op` must be elementwise on static tensors
/// (parallel loops only, no reads of its outputs, every input indexed by
/// loop dimensions or a 0 for a size-1 dimension, every output by a
/// permutation of the loops), and every body op that a float input reaches
/// must have a derivative rule.
std::string whyNotDifferentiable(linalg::GenericOp op);

/// Attaches DifferentiableOpInterface to `linalg.generic`.
void registerLinalgGenericVJPModel(DialectRegistry &registry);

} // namespace ds
} // namespace mlir

#endif // DS_DIALECT_LINALG_GENERICVJP_H

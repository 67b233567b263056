//===- DSTraits.h - ds op traits -------------------------------*- C++ -*-===//
//
// Traits shared by ds ops: the static-shape check, and the op categories
// analyses and passes query instead of keeping their own lists of ops
// (data movement, retypable elementwise ops, activations).
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSTRAITS_H
#define DS_DIALECT_DS_IR_DSTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::ds {
/// Emits an error on `op` for the first tensor operand or result whose shape
/// is unranked or has a dynamic dimension, naming the value.
LogicalResult verifyStaticShapes(Operation *op);

namespace OpTrait {
/// Every tensor operand and result of the op is ranked with static shape.
template <typename ConcreteType>
class StaticShapes
    : public ::mlir::OpTrait::TraitBase<ConcreteType, StaticShapes> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyStaticShapes(op);
  }
};

/// The op moves data and computes nothing: its result holds elements of its
/// one tensor operand, rearranged, selected or repeated (reshape, transpose,
/// slice, broadcast). Analyses look through such ops to the value they
/// view: a parameter stays a parameter, a role stays with its producer.
template <typename ConcreteType>
class DataMovement
    : public ::mlir::OpTrait::TraitBase<ConcreteType, DataMovement> {};

/// An elementwise op that can compute in a narrower float type by retyping
/// it: its float operands and result share one element type, and the op
/// means the same in bf16/f16 as in f32 (ds-assign-precision's `compute`).
template <typename ConcreteType>
class Retypable : public ::mlir::OpTrait::TraitBase<ConcreteType, Retypable> {};

/// A pointwise nonlinearity (GELU, ReLU, SiLU, sigmoid, tanh): the op between
/// the two projections of a feed-forward block.
template <typename ConcreteType>
class Activation : public ::mlir::OpTrait::TraitBase<ConcreteType, Activation> {
};
} // namespace OpTrait
} // namespace mlir::ds

#endif // DS_DIALECT_DS_IR_DSTRAITS_H

//===- DSTraits.h - ds op traits -------------------------------*- C++ -*-===//
//
// Traits shared by ds ops.
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
} // namespace OpTrait
} // namespace mlir::ds

#endif // DS_DIALECT_DS_IR_DSTRAITS_H

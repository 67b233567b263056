//===- DSInterfaces.td - ds op interfaces ------------------*- tablegen -*-===//
//
// Cross-cutting op behaviour lives in interfaces, not in isa<> chains inside
// passes. The first is differentiation: every differentiable op gives its
// vector-Jacobian product (VJP) through DifferentiableOpInterface, and
// `ds-autodiff` composes them.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSINTERFACES_TD
#define DS_DIALECT_DS_IR_DSINTERFACES_TD

include "mlir/IR/OpBase.td"

def DS_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    An op that reverse-mode automatic differentiation can propagate through.

    Given the cotangents (adjoints) of the op's results, `buildVJP` emits the
    ops computing the cotangent of each operand: for results `y = f(x)` and
    incoming cotangent `dy`, it builds `dx = dy . (df/dx)`. The emitted ops
    are inserted at the builder's insertion point, which `ds-autodiff` places
    after the forward op's last use in the forward region; they may use the
    op's operands and results freely (their values stay available).

    Conventions:
    - `resultGrads[i]` is null when result `i` has no cotangent (it does not
      reach the loss); implementations treat it as zero.
    - `operandGrads` receives one entry per operand, in operand order; an
      entry is null when the operand receives no gradient (integer operands,
      RNG state, running statistics).
    - Gradients have exactly the type of the value they belong to: an op
      whose operand was broadcast reduces the gradient back to that shape.
  }];

  let methods = [
    InterfaceMethod<[{
        Returns true if operand `index` is differentiable: it receives a
        gradient from `buildVJP`. By default every floating-point tensor
        operand is.
      }],
      "bool", "isDifferentiableOperand", (ins "unsigned":$index), [{}],
      [{
        return ::llvm::isa<::mlir::FloatType>(::mlir::getElementTypeOrSelf(
            $_op->getOperand(index).getType()));
      }]>,
    InterfaceMethod<[{
        Builds the vector-Jacobian product of this op. See the interface
        description for the conventions.
      }],
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // DS_DIALECT_DS_IR_DSINTERFACES_TD

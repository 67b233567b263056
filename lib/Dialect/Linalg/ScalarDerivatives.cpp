//===- ScalarDerivatives.cpp - Forward-mode rules for scalar ops ----------===//
//
// Implements ScalarDerivatives.h. Each rule is the textbook derivative,
// written with the op's result where that is cheaper and as accurate
// (exp' = exp, tanh' = 1 - tanh^2, rsqrt' = -rsqrt^3 / 2, as PyTorch's
// derivatives.yaml does).
//
//===----------------------------------------------------------------------===//

#include "ScalarDerivatives.h"

#include "ds/Dialect/DS/Utils/ScalarBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/TypeSwitch.h"

#include "llvm/Support/MathExtras.h"
#include <cmath>

using namespace mlir;
using namespace mlir::ds;

bool mlir::ds::hasScalarDerivative(Operation *op) {
  if (llvm::none_of(op->getResultTypes(),
                    [](Type t) { return isa<FloatType>(t); }))
    return true;
  // Keep in step with the TypeSwitch of buildScalarTangent.
  return op->getNumResults() == 1 && op->getNumRegions() == 0 &&
         isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MaxNumFOp,
             arith::MinimumFOp, arith::MinNumFOp, arith::SelectOp,
             arith::ExtFOp, arith::TruncFOp, arith::ConstantOp, arith::SIToFPOp,
             arith::UIToFPOp, math::AbsFOp, math::ExpOp, math::Exp2Op,
             math::ExpM1Op, math::LogOp, math::Log2Op, math::Log10Op,
             math::Log1pOp, math::SqrtOp, math::RsqrtOp, math::CbrtOp,
             math::TanhOp, math::SinOp, math::CosOp, math::TanOp, math::SinhOp,
             math::CoshOp, math::AsinOp, math::AcosOp, math::AtanOp,
             math::Atan2Op, math::ErfOp, math::ErfcOp, math::PowFOp,
             math::FPowIOp, math::FmaOp, math::FloorOp, math::CeilOp,
             math::RoundOp, math::RoundEvenOp, math::TruncOp>(op);
}

namespace {
/// Tangent arithmetic in the result's type, where a null Value is zero.
class TangentBuilder {
public:
  TangentBuilder(OpBuilder &b, Operation *op)
      : s(b, op->getLoc()), type(op->getResult(0).getType()) {}

  Value c(double v) { return s.floatOf(type, v); }
  Value add(Value x, Value y) {
    if (!x)
      return y;
    if (!y)
      return x;
    return s.add(x, y);
  }
  Value neg(Value t) {
    return t ? Value(arith::NegFOp::create(s.b, s.loc, t)) : Value();
  }
  /// The tangent `t` times the factor `f`.
  Value scale(Value t, Value f) { return t ? s.mul(t, f) : Value(); }
  Value orZero(Value t) { return t ? t : c(0.0); }
  Value square(Value x) { return s.mul(x, x); }
  /// `f` where `zeroIf` holds is replaced by 0 (PyTorch's masked_fill).
  Value zeroWhere(Value zeroIf, Value f) { return s.select(zeroIf, c(0.0), f); }
  template <typename OpTy> Value unary(Value x) {
    return OpTy::create(s.b, s.loc, x);
  }

  ScalarBuilder s;
  Type type;
};
} // namespace

FailureOr<Value> mlir::ds::buildScalarTangent(OpBuilder &b, Operation *op,
                                              ArrayRef<Value> operandTangents) {
  if (!hasScalarDerivative(op))
    return failure();
  if (op->getNumResults() != 1 || !isa<FloatType>(op->getResult(0).getType()))
    return Value();
  if (llvm::all_of(operandTangents, [](Value t) { return !t; }))
    return Value();
  TangentBuilder tb(b, op);
  ScalarBuilder &s = tb.s;
  Value r = op->getResult(0);
  auto x = [&](unsigned i) { return op->getOperand(i); };
  auto t = [&](unsigned i) { return operandTangents[i]; };
  using P = arith::CmpFPredicate;
  const double ln2 = llvm::numbers::ln2, ln10 = llvm::numbers::ln10;

  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](arith::AddFOp) { return tb.add(t(0), t(1)); })
      .Case([&](arith::SubFOp) { return tb.add(t(0), tb.neg(t(1))); })
      .Case([&](arith::MulFOp) {
        return tb.add(tb.scale(t(0), x(1)), tb.scale(t(1), x(0)));
      })
      .Case([&](arith::DivFOp) {
        // (t0 - r t1) / x1
        return s.div(tb.orZero(tb.add(t(0), tb.neg(tb.scale(t(1), r)))), x(1));
      })
      .Case([&](arith::NegFOp) { return tb.neg(t(0)); })
      .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
            arith::MinNumFOp>([&](Operation *o) {
        // The winner's tangent; on a tie the mean of both (torch.maximum
        // splits the gradient in half, as ds.maximum does).
        bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(o);
        Value ta = tb.orZero(t(0)), tc = tb.orZero(t(1));
        Value half = s.mul(s.add(ta, tc), tb.c(0.5));
        return s.select(
            s.cmpf(isMax ? P::OGT : P::OLT, x(0), x(1)), ta,
            s.select(s.cmpf(isMax ? P::OLT : P::OGT, x(0), x(1)), tc, half));
      })
      .Case([&](arith::SelectOp) {
        return s.select(x(0), tb.orZero(t(1)), tb.orZero(t(2)));
      })
      .Case<arith::ExtFOp, arith::TruncFOp>(
          [&](Operation *) { return s.convert(t(0), tb.type); })
      .Case([&](math::AbsFOp) {
        Value negT = tb.neg(t(0));
        return s.select(
            s.cmpf(P::OGT, x(0), tb.c(0.0)), t(0),
            s.select(s.cmpf(P::OLT, x(0), tb.c(0.0)), negT, tb.c(0.0)));
      })
      .Case([&](math::ExpOp) { return tb.scale(t(0), r); })
      .Case([&](math::Exp2Op) { return tb.scale(t(0), s.mul(r, tb.c(ln2))); })
      .Case([&](math::ExpM1Op) { return tb.scale(t(0), s.add(r, tb.c(1.0))); })
      .Case([&](math::LogOp) { return s.div(t(0), x(0)); })
      .Case([&](math::Log2Op) { return s.div(t(0), s.mul(x(0), tb.c(ln2))); })
      .Case([&](math::Log10Op) { return s.div(t(0), s.mul(x(0), tb.c(ln10))); })
      .Case([&](math::Log1pOp) { return s.div(t(0), s.add(x(0), tb.c(1.0))); })
      .Case([&](math::SqrtOp) { return s.div(s.mul(t(0), tb.c(0.5)), r); })
      .Case([&](math::RsqrtOp) {
        return tb.scale(t(0), s.mul(tb.c(-0.5), s.mul(tb.square(r), r)));
      })
      .Case([&](math::CbrtOp) {
        return s.div(t(0), s.mul(tb.c(3.0), tb.square(r)));
      })
      .Case([&](math::TanhOp) {
        return tb.scale(t(0), s.sub(tb.c(1.0), tb.square(r)));
      })
      .Case([&](math::SinOp) {
        return tb.scale(t(0), tb.unary<math::CosOp>(x(0)));
      })
      .Case([&](math::CosOp) {
        return tb.neg(tb.scale(t(0), tb.unary<math::SinOp>(x(0))));
      })
      .Case([&](math::TanOp) {
        return tb.scale(t(0), s.add(tb.c(1.0), tb.square(r)));
      })
      .Case([&](math::SinhOp) {
        return tb.scale(t(0), tb.unary<math::CoshOp>(x(0)));
      })
      .Case([&](math::CoshOp) {
        return tb.scale(t(0), tb.unary<math::SinhOp>(x(0)));
      })
      .Case([&](math::AsinOp) {
        return tb.scale(
            t(0), tb.unary<math::RsqrtOp>(s.sub(tb.c(1.0), tb.square(x(0)))));
      })
      .Case([&](math::AcosOp) {
        return tb.neg(tb.scale(
            t(0), tb.unary<math::RsqrtOp>(s.sub(tb.c(1.0), tb.square(x(0))))));
      })
      .Case([&](math::AtanOp) {
        return s.div(t(0), s.add(tb.c(1.0), tb.square(x(0))));
      })
      .Case([&](math::Atan2Op) {
        // atan2(y, x)' = (x dy - y dx) / (x^2 + y^2)
        Value num = tb.add(tb.scale(t(0), x(1)), tb.neg(tb.scale(t(1), x(0))));
        return s.div(num, s.add(tb.square(x(0)), tb.square(x(1))));
      })
      .Case<math::ErfOp, math::ErfcOp>([&](Operation *o) {
        // erf'(x) = 2 / sqrt(pi) * exp(-x^2); erfc' = -erf'.
        double k = 2.0 / std::sqrt(llvm::numbers::pi);
        if (isa<math::ErfcOp>(o))
          k = -k;
        Value e = tb.unary<math::ExpOp>(tb.neg(tb.square(x(0))));
        return tb.scale(t(0), s.mul(tb.c(k), e));
      })
      .Case([&](math::PowFOp) {
        Value base, expo;
        if (t(0)) {
          // y x^(y-1), 0 where y == 0 (PyTorch's pow_backward).
          Value d = s.mul(x(1), s.pow(x(0), s.sub(x(1), tb.c(1.0))));
          base = s.mul(t(0), tb.zeroWhere(s.cmpf(P::OEQ, x(1), tb.c(0.0)), d));
        }
        if (t(1)) {
          // x^y log x, 0 where x == 0 and y >= 0.
          Value d = s.mul(r, tb.unary<math::LogOp>(x(0)));
          Value mask = s.andi(s.cmpf(P::OEQ, x(0), tb.c(0.0)),
                              s.cmpf(P::OGE, x(1), tb.c(0.0)));
          expo = s.mul(t(1), tb.zeroWhere(mask, d));
        }
        return tb.add(base, expo);
      })
      .Case([&](math::FPowIOp) {
        // n x^(n-1), 0 for n == 0.
        Value n = x(1);
        Type intType = n.getType();
        Value one = arith::ConstantOp::create(b, op->getLoc(),
                                              b.getIntegerAttr(intType, 1));
        Value zero = arith::ConstantOp::create(b, op->getLoc(),
                                               b.getIntegerAttr(intType, 0));
        Value nf = arith::SIToFPOp::create(b, op->getLoc(), tb.type, n);
        Value p = math::FPowIOp::create(b, op->getLoc(), x(0), s.sub(n, one));
        Value d = tb.zeroWhere(s.cmpi(arith::CmpIPredicate::eq, n, zero),
                               s.mul(nf, p));
        return s.mul(t(0), d);
      })
      .Case([&](math::FmaOp) {
        return tb.add(tb.add(tb.scale(t(0), x(1)), tb.scale(t(1), x(0))), t(2));
      })
      // Piecewise constant; integer-to-float conversions and constants
      // never have an active operand.
      .Default([](Operation *) { return Value(); });
}

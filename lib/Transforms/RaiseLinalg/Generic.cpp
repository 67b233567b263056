//===- Generic.cpp - Raise linalg.generic bodies into ds ops --------------===//
//
// Per-op raising of a `linalg.generic` on tensors. Every input is brought
// into the op's iteration space (RaiseUtils), where dimensions the input
// does not vary along have size 1; then the body's scalar ops are
// translated one by one into ds ops on those tensors, whose explicit
// broadcasting repeats the size-1 dimensions exactly as the loop nest
// would. Captured scalar constants become rank-0 tensors. A yielded value
// is combined with its output when the op reduces (`addf` -> reduce_sum,
// `maximumf` -> reduce_max, with keep_dims) and finally moved into the
// result's layout. Scalar ops ds has no op for are composed of ds ops
// (pow, exp2, fma, log1p, expm1), each chosen to compute what PyTorch
// computes for the same op to within the parity tolerances, not merely a
// formula that agrees in exact arithmetic.
//
// The translation is demand-driven, from the yielded values: ops nobody
// needs (the `cf.assert`s torch-mlir puts around gathers, an argmax's index
// computation whose result is unused) are never looked at.
//
//===----------------------------------------------------------------------===//

#include "RaiseUtils.h"

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/Linalg/IndexingMaps.h"
#include "ds/Transforms/ImportLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::raise;

namespace {

/// Whether `v` is a scalar constant within `rtol` of `value`.
bool isConstantNear(Value v, double value, double rtol = 1e-6) {
  std::optional<double> c = getScalarConstant(v);
  return c && std::abs(*c - value) <= rtol * std::abs(value);
}

/// The operands of a commutative binary op of type OpTy, with the one
/// satisfying `pred` first.
template <typename OpTy>
std::optional<std::pair<Value, Value>>
matchCommutative(Value v, function_ref<bool(Value)> pred) {
  auto op = v.getDefiningOp<OpTy>();
  if (!op)
    return std::nullopt;
  if (pred(op.getRhs()))
    return std::make_pair(op.getRhs(), op.getLhs());
  if (pred(op.getLhs()))
    return std::make_pair(op.getLhs(), op.getRhs());
  return std::nullopt;
}

/// If `v` is `x * ((erf(x / sqrt(2)) + 1) * 0.5)` (torch-mlir's exact GELU,
/// operands in any order, or `x * rsqrt(2)` for the division), returns x.
Value matchExactGelu(arith::MulFOp mul) {
  auto tryX = [&](Value x, Value y) -> Value {
    auto half = matchCommutative<arith::MulFOp>(
        y, [](Value c) { return isConstantNear(c, 0.5); });
    if (!half)
      return {};
    auto one = matchCommutative<arith::AddFOp>(
        half->second, [](Value c) { return isConstantNear(c, 1.0); });
    if (!one)
      return {};
    auto erf = one->second.getDefiningOp<math::ErfOp>();
    if (!erf)
      return {};
    Value s = erf.getOperand();
    if (auto div = s.getDefiningOp<arith::DivFOp>())
      return div.getLhs() == x && isConstantNear(div.getRhs(), std::sqrt(2.0))
                 ? x
                 : Value();
    auto scaled = matchCommutative<arith::MulFOp>(
        s, [](Value c) { return isConstantNear(c, 1.0 / std::sqrt(2.0)); });
    return scaled && scaled->second == x ? x : Value();
  };
  if (Value x = tryX(mul.getLhs(), mul.getRhs()))
    return x;
  return tryX(mul.getRhs(), mul.getLhs());
}

/// A ds predicate for an arith.cmpf/cmpi predicate, and whether the ds
/// comparison computes its negation (the unordered float predicates are
/// the negations of the ordered ones ds has).
std::optional<std::pair<ComparePredicate, bool>>
translatePredicate(Operation *cmp) {
  using CP = ComparePredicate;
  if (auto f = dyn_cast<arith::CmpFOp>(cmp)) {
    switch (f.getPredicate()) {
    case arith::CmpFPredicate::OEQ:
      return std::make_pair(CP::eq, false);
    case arith::CmpFPredicate::UNE:
      return std::make_pair(CP::ne, false);
    case arith::CmpFPredicate::OLT:
      return std::make_pair(CP::lt, false);
    case arith::CmpFPredicate::OLE:
      return std::make_pair(CP::le, false);
    case arith::CmpFPredicate::OGT:
      return std::make_pair(CP::gt, false);
    case arith::CmpFPredicate::OGE:
      return std::make_pair(CP::ge, false);
    case arith::CmpFPredicate::UGE:
      return std::make_pair(CP::lt, true);
    case arith::CmpFPredicate::UGT:
      return std::make_pair(CP::le, true);
    case arith::CmpFPredicate::ULE:
      return std::make_pair(CP::gt, true);
    case arith::CmpFPredicate::ULT:
      return std::make_pair(CP::ge, true);
    default:
      return std::nullopt;
    }
  }
  if (auto i = dyn_cast<arith::CmpIOp>(cmp)) {
    switch (i.getPredicate()) {
    case arith::CmpIPredicate::eq:
      return std::make_pair(CP::eq, false);
    case arith::CmpIPredicate::ne:
      return std::make_pair(CP::ne, false);
    case arith::CmpIPredicate::slt:
      return std::make_pair(CP::lt, false);
    case arith::CmpIPredicate::sle:
      return std::make_pair(CP::le, false);
    case arith::CmpIPredicate::sgt:
      return std::make_pair(CP::gt, false);
    case arith::CmpIPredicate::sge:
      return std::make_pair(CP::ge, false);
    default:
      return std::nullopt;
    }
  }
  return std::nullopt;
}

class GenericRaiser {
public:
  GenericRaiser(RewriterBase &rewriter, linalg::GenericOp op)
      : b(rewriter), op(op), loc(op.getLoc()), body(op.getBody()) {}

  FailureOr<SmallVector<Value>> run();

private:
  FailureOr<Value> translate(Value v);
  FailureOr<Value> translateOp(Operation *bodyOp);
  /// A ds i1 tensor for condition `c` and whether it is negated.
  FailureOr<std::pair<Value, bool>> translateCondition(Value c);
  FailureOr<Value> translateExtract(tensor::ExtractOp extract);
  FailureOr<Value> reduce(unsigned resultIndex, Value yielded);
  FailureOr<Value> translatePow(Operation *pow);
  FailureOr<Value> translateLog1p(Operation *log1p);
  FailureOr<Value> translateExpm1(Operation *expm1);
  /// log1p or expm1 of `x` with Kahan's correction for |x| < 1.
  Value kahanCorrected(Value x, bool isLog1p);
  /// x^n by repeated squaring; 1 / x^|n| for negative n; 1 for n = 0.
  Value integerPower(Value x, int64_t n);
  /// A rank-0 constant `value` of the (float) element type of `like`.
  Value constantLike(Value like, double value) {
    return scalarTensorConstant(
        b, loc, b.getFloatAttr(getElementTypeOrSelf(like.getType()), value));
  }
  /// A translated float operand `i` of `o`.
  FailureOr<Value> floatOperand(Operation *o, unsigned i) {
    FailureOr<Value> x = translate(o->getOperand(i));
    if (failed(x) || !isa<FloatType>(getElementTypeOrSelf(x->getType())))
      return failure();
    return x;
  }

  template <typename DSOp> FailureOr<Value> binary(Operation *o) {
    FailureOr<Value> l = translate(o->getOperand(0));
    FailureOr<Value> r = failed(l) ? l : translate(o->getOperand(1));
    if (failed(r))
      return failure();
    return Value(DSOp::create(b, loc, *l, *r));
  }
  template <typename DSOp> FailureOr<Value> unary(Operation *o) {
    FailureOr<Value> x = translate(o->getOperand(0));
    if (failed(x) || !isa<FloatType>(getElementTypeOrSelf(x->getType())))
      return failure();
    return Value(DSOp::create(b, loc, *x));
  }
  FailureOr<Value> castTo(Operation *o) {
    FailureOr<Value> x = translate(o->getOperand(0));
    Type to = o->getResult(0).getType();
    if (failed(x) || !(isa<FloatType>(to) || to.isSignlessInteger()) ||
        to.isInteger(1))
      return failure();
    auto t = cast<RankedTensorType>(x->getType());
    return Value(CastOp::create(b, loc, t.clone(to), *x));
  }

  RewriterBase &b;
  linalg::GenericOp op;
  Location loc;
  Block *body;
  SmallVector<int64_t> loops;
  SmallVector<SmallVector<int64_t>> operandDims;
  bool reduces = false;
  llvm::DenseMap<Value, Value> mapped;
};

} // namespace

FailureOr<Value> GenericRaiser::translate(Value v) {
  if (Value m = mapped.lookup(v))
    return m;
  FailureOr<Value> result = failure();
  if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == body) {
    unsigned i = arg.getArgNumber();
    Value operand = op->getOperand(i);
    bool isInit = i >= op.getNumDpsInputs();
    // An output read by a reduction is the accumulator, handled by reduce();
    // an uninitialised output has nothing to read.
    if (isInit && (reduces || operand.getDefiningOp<tensor::EmptyOp>()))
      return failure();
    if (!isDSCompatible(operand.getType()))
      return failure();
    result = placeInLoops(b, loc, operand, operandDims[i], loops);
  } else if (v.getParentBlock() != body) {
    // Captured from outside: only scalar constants.
    Attribute attr;
    auto typed = dyn_cast_or_null<TypedAttr>(
        matchPattern(v, m_Constant(&attr)) ? attr : Attribute());
    Type t = v.getType();
    if (!typed || !(isa<FloatType>(t) || t.isSignlessInteger()))
      return failure();
    result = scalarTensorConstant(b, loc, typed);
  } else {
    Operation *def = v.getDefiningOp();
    if (def->getNumResults() != 1)
      return failure();
    result = translateOp(def);
  }
  if (succeeded(result))
    mapped[v] = *result;
  return result;
}

FailureOr<std::pair<Value, bool>> GenericRaiser::translateCondition(Value c) {
  Operation *def = c.getDefiningOp();
  if (def && def->getBlock() == body &&
      isa<arith::CmpFOp, arith::CmpIOp>(def)) {
    auto pred = translatePredicate(def);
    if (!pred)
      return failure();
    FailureOr<Value> l = translate(def->getOperand(0));
    FailureOr<Value> r = failed(l) ? l : translate(def->getOperand(1));
    if (failed(r))
      return failure();
    Value cmp = CompareOp::create(b, loc, pred->first, *l, *r);
    return std::make_pair(cmp, pred->second);
  }
  FailureOr<Value> v = translate(c);
  if (failed(v))
    return failure();
  return std::make_pair(*v, false);
}

FailureOr<Value> GenericRaiser::translateExtract(tensor::ExtractOp extract) {
  Value table = extract.getTensor();
  auto tableType = dyn_cast<RankedTensorType>(table.getType());
  if (table.getParentBlock() == body || !tableType ||
      !isDSCompatible(tableType) || !isa<FloatType>(tableType.getElementType()))
    return failure();
  // Each index is a loop index or an integer value cast to index (gathered).
  int64_t n = loops.size();
  SmallVector<int64_t> dims;
  int64_t gathered = -1;
  Value gatherIndex;
  for (auto [k, index] : llvm::enumerate(extract.getIndices())) {
    if (auto loopIndex = index.getDefiningOp<linalg::IndexOp>()) {
      dims.push_back(loopIndex.getDim());
      continue;
    }
    auto cast = index.getDefiningOp<arith::IndexCastOp>();
    if (!cast || gathered >= 0 || !cast.getIn().getType().isSignlessInteger())
      return failure();
    gathered = k;
    gatherIndex = cast.getIn();
    dims.push_back(n); // The class dimension, one past the loops.
  }
  if (gathered < 0)
    return placeInLoops(b, loc, table, dims, loops);

  // A row lookup: table[idx, d] with idx read from an integer operand.
  if (tableType.getRank() == 2 && gathered == 0 && dims[1] < n) {
    if (auto arg = dyn_cast<BlockArgument>(gatherIndex);
        arg && arg.getOwner() == body &&
        arg.getArgNumber() < op.getNumDpsInputs()) {
      Value indices = op->getOperand(arg.getArgNumber());
      ArrayRef<int64_t> indexDims = operandDims[arg.getArgNumber()];
      if (isDSCompatible(indices.getType()) &&
          !llvm::is_contained(indexDims, dims[1])) {
        Value rows = EmbeddingOp::create(b, loc, table, indices);
        SmallVector<int64_t> rowDims(indexDims);
        rowDims.push_back(dims[1]);
        return placeInLoops(b, loc, rows, rowDims, loops);
      }
    }
  }

  // Otherwise a one-hot selection along an extra (class) dimension:
  // sum_c (idx == c ? table[..., c, ...] : 0).
  FailureOr<Value> idx = translate(gatherIndex);
  if (failed(idx))
    return failure();
  auto idxType = cast<RankedTensorType>(idx->getType());
  int64_t classes = tableType.getDimSize(gathered);
  SmallVector<int64_t> extLoops(loops);
  extLoops.push_back(classes);
  SmallVector<int64_t> idxShape(n, 1);
  if (idxType.getRank() == n)
    idxShape.assign(idxType.getShape().begin(), idxType.getShape().end());
  idxShape.push_back(1);
  Value idxExt = reshapeTo(
      b, loc, broadcastTo(b, loc, *idx, ArrayRef(idxShape).drop_back()),
      idxShape);
  SmallVector<int64_t> iotaShape(n, 1);
  iotaShape.push_back(classes);
  auto iotaType = RankedTensorType::get(iotaShape, idxType.getElementType());
  SmallVector<APInt> iota;
  unsigned width = idxType.getElementType().getIntOrFloatBitWidth();
  for (int64_t c = 0; c < classes; ++c)
    iota.push_back(APInt(width, c, /*isSigned=*/true));
  Value classIds = arith::ConstantOp::create(
      b, loc, iotaType, DenseElementsAttr::get(iotaType, iota));
  Value oneHot =
      CompareOp::create(b, loc, ComparePredicate::eq, idxExt, classIds);
  FailureOr<Value> tableExt = placeInLoops(b, loc, table, dims, extLoops);
  if (failed(tableExt))
    return failure();
  Value zero = scalarTensorConstant(
      b, loc, b.getFloatAttr(tableType.getElementType(), 0.0));
  Value picked = SelectOp::create(b, loc, oneHot, *tableExt, zero);
  return Value(ReduceSumOp::create(b, loc, picked, b.getDenseI64ArrayAttr({n}),
                                   /*keep_dims=*/false));
}

FailureOr<Value> GenericRaiser::translateOp(Operation *o) {
  if (auto mul = dyn_cast<arith::MulFOp>(o))
    if (Value x = matchExactGelu(mul)) {
      FailureOr<Value> in = translate(x);
      if (failed(in))
        return failure();
      return Value(GeluOp::create(b, loc, *in, GeluApproximation::none));
    }
  return llvm::TypeSwitch<Operation *, FailureOr<Value>>(o)
      .Case<arith::AddFOp, arith::AddIOp>(
          [&](auto) { return binary<AddOp>(o); })
      .Case<arith::SubFOp, arith::SubIOp>(
          [&](auto) { return binary<SubOp>(o); })
      .Case<arith::MulFOp, arith::MulIOp>(
          [&](auto) { return binary<MulOp>(o); })
      .Case<arith::DivFOp>([&](auto) { return binary<DivOp>(o); })
      .Case<arith::MaximumFOp, arith::MaxNumFOp>(
          [&](auto) { return binary<MaximumOp>(o); })
      .Case<arith::MinimumFOp, arith::MinNumFOp>(
          [&](auto) { return binary<MinimumOp>(o); })
      .Case<arith::NegFOp>([&](auto) { return unary<NegOp>(o); })
      .Case<math::ExpOp>([&](auto) { return unary<ExpOp>(o); })
      .Case<math::LogOp>([&](auto) { return unary<LogOp>(o); })
      .Case<math::TanhOp>([&](auto) { return unary<TanhOp>(o); })
      .Case<math::SqrtOp>([&](auto) { return unary<SqrtOp>(o); })
      .Case<math::RsqrtOp>([&](auto) { return unary<RsqrtOp>(o); })
      .Case<math::AbsFOp>([&](auto) { return unary<AbsOp>(o); })
      .Case<math::FPowIOp, math::PowFOp>([&](auto) { return translatePow(o); })
      .Case<math::Log1pOp>([&](auto) { return translateLog1p(o); })
      .Case<math::ExpM1Op>([&](auto) { return translateExpm1(o); })
      .Case<math::Exp2Op>([&](auto) -> FailureOr<Value> {
        // 2^x = exp(x ln 2).
        FailureOr<Value> x = floatOperand(o, 0);
        if (failed(x))
          return failure();
        Value ln2 = constantLike(*x, std::log(2.0));
        return Value(ExpOp::create(b, loc, MulOp::create(b, loc, *x, ln2)));
      })
      .Case<math::FmaOp>([&](auto) -> FailureOr<Value> {
        // Rounded twice where fma rounds once: within the tolerances.
        FailureOr<Value> x = floatOperand(o, 0);
        FailureOr<Value> y = failed(x) ? x : floatOperand(o, 1);
        FailureOr<Value> z = failed(y) ? y : floatOperand(o, 2);
        if (failed(z))
          return failure();
        return Value(AddOp::create(b, loc, MulOp::create(b, loc, *x, *y), *z));
      })
      .Case<arith::ConstantOp>([&](arith::ConstantOp c) -> FailureOr<Value> {
        // A scalar constant defined in the body, as captured ones.
        Type t = c.getType();
        auto typed = dyn_cast<TypedAttr>(c.getValue());
        if (!typed || !(isa<FloatType>(t) || t.isSignlessInteger()))
          return failure();
        return scalarTensorConstant(b, loc, typed);
      })
      .Case<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::FPToSIOp,
            arith::ExtSIOp, arith::TruncIOp>([&](auto) { return castTo(o); })
      .Case<arith::CmpFOp, arith::CmpIOp>([&](auto) -> FailureOr<Value> {
        FailureOr<std::pair<Value, bool>> c =
            translateCondition(o->getResult(0));
        if (failed(c))
          return failure();
        if (!c->second)
          return c->first;
        // not(c) = (c == false).
        Value f = scalarTensorConstant(b, loc, b.getBoolAttr(false));
        return Value(
            CompareOp::create(b, loc, ComparePredicate::eq, c->first, f));
      })
      .Case<arith::SelectOp>([&](arith::SelectOp s) -> FailureOr<Value> {
        FailureOr<std::pair<Value, bool>> c =
            translateCondition(s.getCondition());
        if (failed(c))
          return failure();
        FailureOr<Value> t = translate(s.getTrueValue());
        FailureOr<Value> f = failed(t) ? t : translate(s.getFalseValue());
        if (failed(f))
          return failure();
        if (c->second)
          std::swap(t, f);
        return Value(SelectOp::create(b, loc, c->first, *t, *f));
      })
      .Case<tensor::ExtractOp>(
          [&](tensor::ExtractOp e) { return translateExtract(e); })
      .Default([](Operation *) { return failure(); });
}

/// The largest |n| of a constant integer exponent raised as a product:
/// beyond it the squarings would add up more rounding than std::pow's.
constexpr int64_t kMaxProductExponent = 64;

Value GenericRaiser::integerPower(Value x, int64_t n) {
  if (n == 0)
    return constantLike(x, 1.0);
  // Square-and-multiply: x^2 = x*x and x^3 = x*(x*x), bit for bit what
  // PyTorch's pow kernel computes for these exponents; others differ from
  // std::pow by a few ulps.
  uint64_t m = n < 0 ? -static_cast<uint64_t>(n) : n;
  Value result, square = x;
  while (true) {
    if (m & 1)
      result = result ? Value(MulOp::create(b, loc, result, square)) : square;
    m >>= 1;
    if (!m)
      break;
    square = MulOp::create(b, loc, square, square);
  }
  // PyTorch: 1 / x for -1 (reciprocal), 1 / (x*x) for -2.
  if (n < 0)
    result = DivOp::create(b, loc, constantLike(x, 1.0), result);
  return result;
}

FailureOr<Value> GenericRaiser::translatePow(Operation *pow) {
  FailureOr<Value> x = floatOperand(pow, 0);
  if (failed(x))
    return failure();
  // A constant exponent is computed exactly as PyTorch's pow kernel
  // special-cases it: sqrt, rsqrt, products of x.
  if (std::optional<double> c = getScalarConstant(pow->getOperand(1))) {
    if (*c == 0.5)
      return Value(SqrtOp::create(b, loc, *x));
    if (*c == -0.5)
      return Value(RsqrtOp::create(b, loc, *x));
    if (*c == std::trunc(*c) && std::abs(*c) <= kMaxProductExponent)
      return integerPower(*x, static_cast<int64_t>(*c));
  }
  // exp(y log x) is only right for x > 0 (NaN for x < 0, where an integer
  // y has a real answer): never use it for an integer exponent.
  if (isa<math::FPowIOp>(pow))
    return failure();
  FailureOr<Value> y = floatOperand(pow, 1);
  if (failed(y))
    return failure();
  Value logX = LogOp::create(b, loc, *x);
  return Value(ExpOp::create(b, loc, MulOp::create(b, loc, *y, logX)));
}

FailureOr<Value> GenericRaiser::translateLog1p(Operation *log1p) {
  FailureOr<Value> x = floatOperand(log1p, 0);
  if (failed(x))
    return failure();
  // log(1 + x) loses every digit of a tiny x; Kahan's correction
  // log(u) * x / (u - 1), u = 1 + x, keeps them (u - 1 is exact), with
  // x itself where u rounds to 1. Outside |x| < 1 plain log(1 + x) is
  // accurate and handles -1 and +inf.
  return kahanCorrected(*x, /*isLog1p=*/true);
}

FailureOr<Value> GenericRaiser::translateExpm1(Operation *expm1) {
  FailureOr<Value> x = floatOperand(expm1, 0);
  if (failed(x))
    return failure();
  // The same correction: (u - 1) * x / log(u), u = exp(x), for |x| < 1
  // (x where u rounds to 1); exp(x) - 1 elsewhere, where it is accurate
  // and gives -1 and +inf at the ends.
  return kahanCorrected(*x, /*isLog1p=*/false);
}

Value GenericRaiser::kahanCorrected(Value x, bool isLog1p) {
  Value one = constantLike(x, 1.0), zero = constantLike(x, 0.0);
  // u = 1 + v or exp(v); the result is log u or u - 1, corrected by
  // x / (the other one).
  auto terms = [&](Value v) {
    Value u = isLog1p ? Value(AddOp::create(b, loc, one, v))
                      : Value(ExpOp::create(b, loc, v));
    Value logU = LogOp::create(b, loc, u);
    Value uMinusOne = SubOp::create(b, loc, u, one);
    return isLog1p ? std::make_tuple(u, logU, uMinusOne)
                   : std::make_tuple(u, uMinusOne, logU);
  };
  Value isSmall = CompareOp::create(b, loc, ComparePredicate::lt,
                                    AbsOp::create(b, loc, x), one);
  Value plain =
      isLog1p ? Value(LogOp::create(b, loc, AddOp::create(b, loc, one, x)))
              : Value(SubOp::create(b, loc, ExpOp::create(b, loc, x), one));
  // The corrected branch sees 0 where it is not taken and a denominator of
  // 1 where u rounds to 1, so that neither it nor its gradient is ever
  // 0 / 0 or inf * 0: ds-autodiff differentiates both sides of a select,
  // and a NaN on the side not taken would still reach the gradient.
  Value xs = SelectOp::create(b, loc, isSmall, x, zero);
  auto [us, num, other] = terms(xs);
  Value usIsOne = CompareOp::create(b, loc, ComparePredicate::eq, us, one);
  Value den = SelectOp::create(b, loc, usIsOne, one, other);
  Value corrected = MulOp::create(b, loc, num, DivOp::create(b, loc, xs, den));
  Value small = SelectOp::create(b, loc, usIsOne, xs, corrected);
  return SelectOp::create(b, loc, isSmall, small, plain);
}

FailureOr<Value> GenericRaiser::reduce(unsigned resultIndex, Value yielded) {
  BlockArgument acc = body->getArgument(op.getNumDpsInputs() + resultIndex);
  Operation *combine = yielded.getDefiningOp();
  if (!combine || combine->getBlock() != body || combine->getNumOperands() != 2)
    return failure();
  bool isSum = isa<arith::AddFOp>(combine);
  bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(combine);
  if (!isSum && !isMax)
    return failure();
  Value other;
  if (combine->getOperand(0) == acc)
    other = combine->getOperand(1);
  else if (combine->getOperand(1) == acc)
    other = combine->getOperand(0);
  else
    return failure();
  FailureOr<Value> x = translate(other);
  if (failed(x))
    return failure();
  // Reduce over the full extent of every reduction loop.
  SmallVector<int64_t> reductionDims, shape(loops.size(), 1);
  auto xType = cast<RankedTensorType>(x->getType());
  if (xType.getRank() != 0)
    shape.assign(xType.getShape().begin(), xType.getShape().end());
  for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
    if (it == utils::IteratorType::reduction) {
      reductionDims.push_back(d);
      shape[d] = loops[d];
    }
  Value full = broadcastTo(b, loc, *x, shape);
  DenseI64ArrayAttr dims = b.getDenseI64ArrayAttr(reductionDims);
  Value r = isSum ? Value(ReduceSumOp::create(b, loc, full, dims, true))
                  : Value(ReduceMaxOp::create(b, loc, full, dims, true));
  // Fold in the initial value unless it is the identity.
  Value init = op.getDpsInits()[resultIndex];
  double identity = isSum ? 0.0 : -std::numeric_limits<double>::infinity();
  if (!isFilledWith(init, identity)) {
    if (!isDSCompatible(init.getType()))
      return failure();
    FailureOr<Value> placed = placeInLoops(
        b, loc, init, operandDims[op.getNumDpsInputs() + resultIndex], loops);
    if (failed(placed))
      return failure();
    r = isSum ? Value(AddOp::create(b, loc, r, *placed))
              : Value(MaximumOp::create(b, loc, r, *placed));
  }
  return r;
}

FailureOr<SmallVector<Value>> GenericRaiser::run() {
  if (!op.hasPureTensorSemantics())
    return failure();
  loops = op.getStaticLoopRanges();
  if (llvm::any_of(loops, ShapedType::isDynamic))
    return failure();
  for (AffineMap map : op.getIndexingMapsArray()) {
    FailureOr<SmallVector<int64_t>> dims = getMapResultDims(map);
    if (failed(dims))
      return failure();
    operandDims.push_back(*dims);
  }
  reduces = op.getNumReductionLoops() > 0;
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  SmallVector<Value> results;
  for (OpResult res : op->getResults()) {
    if (res.use_empty()) {
      results.push_back(Value());
      continue;
    }
    auto type = cast<RankedTensorType>(res.getType());
    if (!isa<FloatType>(type.getElementType()) || !type.hasStaticShape())
      return failure();
    unsigned i = res.getResultNumber();
    Value yielded = yield.getOperand(i);
    FailureOr<Value> w = reduces ? reduce(i, yielded) : translate(yielded);
    if (failed(w))
      return failure();
    FailureOr<Value> r = extractFromLoops(
        b, loc, *w, operandDims[op.getNumDpsInputs() + i], loops, type);
    if (failed(r))
      return failure();
    results.push_back(*r);
  }
  return results;
}

FailureOr<SmallVector<Value>> mlir::ds::raiseGeneric(RewriterBase &rewriter,
                                                     linalg::GenericOp op) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  return GenericRaiser(rewriter, op).run();
}

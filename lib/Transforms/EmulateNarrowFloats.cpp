//===- EmulateNarrowFloats.cpp - Narrow float casts as integer code -------===//
//
// Implements ds-emulate-narrow-floats: `arith.truncf` into bf16, f16,
// f8E4M3FN and f8E5M2 and `arith.extf` out of them become integer code on
// `arith.bitcast`s of the operands, with exactly the semantics of the arith
// ops (IEEE round to nearest, ties to even; NaN stays NaN; overflow to inf,
// or to NaN for f8E4M3FN, which has no inf; subnormals kept), which are
// also those of PyTorch's `.to()`.
//
// Why integer code and not calls (convert-arith-to-apfloat) or LLVM's own
// fptrunc: LLVM cannot represent the FP8 types at all, an APFloat call per
// element is two orders of magnitude too slow for a training step, and
// LLVM's bf16 fptrunc is a libcall per element or, with AVX512-BF16, an
// instruction that flushes subnormals. The code below is a fixed sequence
// of shifts, adds, compares and selects on the operand's shape, so on the
// vectors of ds-vectorize-cpu it becomes straight-line AVX-512 code (two
// dozen instructions per 16 elements). Every format is described by its
// field widths and bias, so one algorithm serves every pair of formats
// (f32 and f64 sources, any of the four targets).
//
// Rounding f32 -> narrow, on the magnitude bits `a` (the sign is put back
// at the end):
//   1. normal results: rebias the exponent and round the mantissa with the
//      usual integer RNE: (a - rebias + 2^(s-1) - 1 + lsb) >> s, where s is
//      the number of mantissa bits dropped; a carry into the exponent is the
//      correct next binade (or inf);
//   2. results below the target's smallest normal: the significand with
//      its implicit bit, shifted right by a per-element amount with the same
//      RNE rule (this is also where values round up to the smallest normal,
//      or down to zero);
//   3. values at or beyond the overflow threshold (the midpoint above the
//      largest finite value when that one has an odd mantissa, just above it
//      otherwise) become inf, or NaN for f8E4M3FN;
//   4. NaN becomes a quiet NaN (payload kept where the format has one).
// Extension is exact: shift and rebias for normal numbers, all-ones
// exponent for inf/NaN, and for subnormals the integer significand
// converted to the wide type and scaled by a power of two (exact, and the
// product is a normal number, so flush-to-zero modes cannot touch it).
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_EMULATENARROWFLOATSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

#define DEBUG_TYPE "ds-emulate-narrow-floats"

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The bit layout of a binary float format with an implicit leading bit.
struct FloatLayout {
  unsigned width = 0, mantBits = 0, expBits = 0;
  int64_t bias = 0;
  /// IEEE-like: the all-ones exponent holds inf and NaN. Otherwise (the
  /// "FN" formats) only all-ones exponent and mantissa is NaN, no inf.
  bool ieee = true;

  uint64_t absMask() const { return (uint64_t(1) << (width - 1)) - 1; }
  uint64_t mantMask() const { return (uint64_t(1) << mantBits) - 1; }
  /// The bits of +inf (IEEE-like formats).
  uint64_t infBits() const {
    return ((uint64_t(1) << expBits) - 1) << mantBits;
  }
  uint64_t quietBit() const { return uint64_t(1) << (mantBits - 1); }
  /// The exponent field and mantissa of the largest finite value.
  uint64_t maxExpField() const {
    return ieee ? (uint64_t(1) << expBits) - 2 : (uint64_t(1) << expBits) - 1;
  }
  uint64_t maxMant() const { return ieee ? mantMask() : mantMask() - 1; }
};

/// The layout of `type` when it is one of the formats handled here.
std::optional<FloatLayout> getLayout(Type type) {
  if (type.isF64())
    return FloatLayout{64, 52, 11, 1023, true};
  if (type.isF32())
    return FloatLayout{32, 23, 8, 127, true};
  if (type.isBF16())
    return FloatLayout{16, 7, 8, 127, true};
  if (type.isF16())
    return FloatLayout{16, 10, 5, 15, true};
  if (isa<Float8E5M2Type>(type))
    return FloatLayout{8, 2, 5, 15, true};
  if (isa<Float8E4M3FNType>(type))
    return FloatLayout{8, 3, 4, 7, false};
  return std::nullopt;
}

/// Builds integer code of one shape (a scalar, or a vector of `shape`).
struct Emitter {
  OpBuilder &b;
  Location loc;
  Type like; // The original operand type: a scalar or a vector.

  /// `elem` in the shape of `like`.
  Type shaped(Type elem) const {
    if (auto v = dyn_cast<VectorType>(like))
      return VectorType::get(v.getShape(), elem, v.getScalableDims());
    return elem;
  }
  Type intType(unsigned width) const { return shaped(b.getIntegerType(width)); }
  Value cst(unsigned width, uint64_t value) const {
    APInt bits(width, value);
    Type type = intType(width);
    if (auto v = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(
          b, loc, DenseElementsAttr::get(v, ArrayRef<APInt>(bits)));
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, bits));
  }
  unsigned widthOf(Value v) const {
    return getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth();
  }
  Value c(Value like, uint64_t value) const {
    return cst(widthOf(like), value);
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value ori(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value shl(Value x, Value y) { return arith::ShLIOp::create(b, loc, x, y); }
  Value shr(Value x, Value y) { return arith::ShRUIOp::create(b, loc, x, y); }
  Value ult(Value x, Value y) { return cmp(arith::CmpIPredicate::ult, x, y); }
  Value uge(Value x, Value y) { return cmp(arith::CmpIPredicate::uge, x, y); }
  Value ugt(Value x, Value y) { return cmp(arith::CmpIPredicate::ugt, x, y); }
  Value eq(Value x, Value y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value bitcast(Value x, Type elem) {
    return arith::BitcastOp::create(b, loc, shaped(elem), x);
  }
};

/// `x` (f32 or f64, layout `src`) rounded to nearest-even into `dstType`
/// (layout `dst`, narrower in both fields), as integer code.
Value emitTruncate(OpBuilder &builder, Location loc, Value x,
                   const FloatLayout &src, Type dstType,
                   const FloatLayout &dst) {
  Emitter e{builder, loc, x.getType()};
  unsigned w = src.width;
  unsigned shift = src.mantBits - dst.mantBits;
  auto k = [&](uint64_t v) { return e.cst(w, v); };

  Value u = e.bitcast(x, builder.getIntegerType(w));
  Value a = e.andi(u, k(src.absMask()));
  // The sign, already at the target's sign position.
  Value sign =
      e.andi(e.shr(u, k(w - dst.width)), k(uint64_t(1) << (dst.width - 1)));

  // 1. Normal results: rebias, round the dropped bits to nearest-even. The
  //    rebias is a multiple of 2^(shift+1), so `a`'s lsb is the result's.
  uint64_t rebias = uint64_t(src.bias - dst.bias) << src.mantBits;
  Value lsb = e.andi(e.shr(a, k(shift)), k(1));
  Value biased = rebias ? e.sub(a, k(rebias)) : a;
  Value mag = e.shr(
      e.add(biased, e.add(lsb, k((uint64_t(1) << (shift - 1)) - 1))), k(shift));

  if (dst.bias < src.bias) {
    // 2. Below the target's smallest normal 2^(1 - dst.bias): the result is
    //    round(m / 2^sh) with m the significand and its implicit bit and
    //    sh = (src.bias + 1 - dst.bias + shift) - exponent. sh is clamped to
    //    [1, mantBits + 2]: beyond that everything rounds to zero, and the
    //    clamp keeps the shifts defined in the lanes the select discards.
    Value minNormal = k(uint64_t(src.bias - dst.bias + 1) << src.mantBits);
    Value isSub = e.ult(a, minNormal);
    Value exp = e.shr(a, k(src.mantBits));
    Value m =
        e.ori(e.andi(a, k(src.mantMask())), k(uint64_t(1) << src.mantBits));
    Value sh = e.sub(k(src.bias + 1 - dst.bias + shift), exp);
    sh = arith::MinUIOp::create(builder, loc, sh, k(src.mantBits + 2));
    sh = arith::MaxUIOp::create(builder, loc, sh, k(1));
    Value halfMinus1 = e.sub(e.shl(k(1), e.sub(sh, k(1))), k(1));
    Value subLsb = e.andi(e.shr(m, sh), k(1));
    Value sub = e.shr(e.add(m, e.add(halfMinus1, subLsb)), sh);
    mag = e.select(isSub, sub, mag);

    // 3. Overflow: from the midpoint above the largest finite value when
    //    that value's mantissa is odd (the tie rounds up), else just above.
    uint64_t maxBits =
        (uint64_t(dst.maxExpField() - dst.bias + src.bias) << src.mantBits) |
        (dst.maxMant() << shift);
    uint64_t threshold = maxBits + (uint64_t(1) << (shift - 1));
    if (!(dst.maxMant() & 1))
      threshold += 1;
    Value overflowValue = k(dst.ieee ? dst.infBits() : dst.absMask());
    mag = e.select(e.uge(a, k(threshold)), overflowValue, mag);
  }

  // 4. NaN: quiet, with the payload's leading bits where there is one.
  Value isNaN = e.ugt(a, k(src.infBits()));
  Value nan = dst.ieee ? e.ori(e.andi(e.shr(a, k(shift)), k(dst.mantMask())),
                               k(dst.infBits() | dst.quietBit()))
                       : k(dst.absMask());
  mag = e.select(isNaN, nan, mag);

  Value bits = e.ori(mag, sign);
  Value narrow =
      arith::TruncIOp::create(builder, loc, e.intType(dst.width), bits);
  return arith::BitcastOp::create(builder, loc, e.shaped(dstType), narrow);
}

/// `y` (layout `src`) extended exactly to `dstType` (f32 or f64, layout
/// `dst`), as integer code.
Value emitExtend(OpBuilder &builder, Location loc, Value y,
                 const FloatLayout &src, Type dstType, const FloatLayout &dst) {
  Emitter e{builder, loc, y.getType()};
  unsigned w = dst.width;
  unsigned shift = dst.mantBits - src.mantBits;
  auto k = [&](uint64_t v) { return e.cst(w, v); };

  Value narrow = e.bitcast(y, builder.getIntegerType(src.width));
  Value z = arith::ExtUIOp::create(builder, loc, e.intType(w), narrow);
  Value sign =
      e.shl(e.andi(z, k(uint64_t(1) << (src.width - 1))), k(w - src.width));
  Value a = e.andi(z, k(src.absMask()));
  Value out = e.shl(a, k(shift));
  if (src.bias != dst.bias || src.expBits != dst.expBits) {
    // Normal numbers: shift the fields into place and rebias.
    out = e.add(out, k(uint64_t(dst.bias - src.bias) << dst.mantBits));
    // Subnormals (and zero): the integer significand times
    // 2^(1 - bias - mantBits), exact in the wide type.
    Type wideFloat = getElementTypeOrSelf(dstType);
    Value isSub = e.ult(a, k(uint64_t(1) << src.mantBits));
    Value asFloat =
        arith::UIToFPOp::create(builder, loc, e.shaped(wideFloat), a);
    double scale = std::ldexp(1.0, 1 - int(src.bias) - int(src.mantBits));
    Value scaleV = arith::ConstantOp::create(
        builder, loc,
        isa<VectorType>(e.like)
            ? TypedAttr(DenseElementsAttr::get(
                  cast<ShapedType>(e.shaped(wideFloat)),
                  ArrayRef<APFloat>(
                      builder.getFloatAttr(wideFloat, scale).getValue())))
            : TypedAttr(builder.getFloatAttr(wideFloat, scale)));
    Value sub = e.bitcast(arith::MulFOp::create(builder, loc, asFloat, scaleV),
                          builder.getIntegerType(w));
    out = e.select(isSub, sub, out);
    if (src.ieee) {
      // Inf and NaN keep their mantissa under an all-ones exponent.
      Value special = e.ori(e.shl(a, k(shift)), k(dst.infBits()));
      out = e.select(e.uge(a, k(src.infBits())), special, out);
    }
  }
  // NaN: quiet.
  Value isNaN =
      src.ieee ? e.ugt(a, k(src.infBits())) : e.eq(a, k(src.absMask()));
  out = e.select(isNaN, e.ori(out, k(dst.infBits() | dst.quietBit())), out);
  return e.bitcast(e.ori(out, sign), getElementTypeOrSelf(dstType));
}

/// Whether `type` (a scalar or vector element type) is emulated.
bool isEmulated(Type elem, ArrayRef<Type> types) {
  return llvm::is_contained(types, elem);
}

/// An 8-bit float type the LLVM lowering cannot represent as a float.
bool isNarrowFloat8(Type elem) {
  auto f = dyn_cast<FloatType>(elem);
  return f && f.getWidth() <= 8;
}

/// A round-to-nearest-even truncf (the default, or said explicitly).
bool isNearestEven(arith::TruncFOp op) {
  std::optional<arith::RoundingMode> mode = op.getRoundingmode();
  return !mode || *mode == arith::RoundingMode::to_nearest_even;
}

bool isScalarOrVector(Type type) {
  return !isa<ShapedType>(type) || isa<VectorType>(type);
}

/// Under keep-f32-casts: a cast between f32 and bf16 or f16, which the
/// target converts with one instruction.
bool isKeptCast(Type from, Type to, bool keepF32Casts) {
  auto half = [](Type t) { return t.isBF16() || t.isF16(); };
  return keepF32Casts &&
         ((from.isF32() && half(to)) || (half(from) && to.isF32()));
}

/// A kept cast stays, without the `contract` flag of
/// arith-emulate-unsupported-floats: with it on both, arith folds
/// extf(truncf(x)) to x, which would drop a rounding after a narrow op.
template <typename CastOp>
LogicalResult keepCast(CastOp op, PatternRewriter &rewriter) {
  arith::FastMathFlags flags =
      op.getFastmath().value_or(arith::FastMathFlags::none);
  if (!bitEnumContainsAny(flags, arith::FastMathFlags::contract))
    return rewriter.notifyMatchFailure(op, "a kept cast");
  flags = bitEnumClear(flags, arith::FastMathFlags::contract);
  rewriter.modifyOpInPlace(op, [&] {
    if (flags == arith::FastMathFlags::none)
      op.removeFastmathAttr();
    else
      op.setFastmath(flags);
  });
  return success();
}

struct TruncFToIntegers : OpRewritePattern<arith::TruncFOp> {
  TruncFToIntegers(MLIRContext *ctx, ArrayRef<Type> types, bool keepF32Casts)
      : OpRewritePattern(ctx), types(types), keepF32Casts(keepF32Casts) {}
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type srcElem = getElementTypeOrSelf(op.getIn().getType());
    Type dstElem = getElementTypeOrSelf(op.getType());
    if (isKeptCast(srcElem, dstElem, keepF32Casts) && isNearestEven(op))
      return keepCast(op, rewriter);
    if (!isEmulated(dstElem, types) || !isNearestEven(op) ||
        !isScalarOrVector(op.getType()))
      return rewriter.notifyMatchFailure(op, "not an emulated truncf");
    Location loc = op.getLoc();
    Value in = op.getIn();
    // Narrow sources (f16/bf16 -> FP8) are first extended to f32, which is
    // exact, so the result is still rounded once.
    if (!srcElem.isF32() && !srcElem.isF64()) {
      Emitter e{rewriter, loc, in.getType()};
      in = arith::ExtFOp::create(rewriter, loc, e.shaped(rewriter.getF32Type()),
                                 in);
      srcElem = rewriter.getF32Type();
    }
    std::optional<FloatLayout> src = getLayout(srcElem),
                               dst = getLayout(dstElem);
    if (!src || !dst)
      return rewriter.notifyMatchFailure(op, "unknown float layout");
    rewriter.replaceOp(op,
                       emitTruncate(rewriter, loc, in, *src, dstElem, *dst));
    return success();
  }
  SmallVector<Type> types;
  bool keepF32Casts;
};

struct ExtFToIntegers : OpRewritePattern<arith::ExtFOp> {
  ExtFToIntegers(MLIRContext *ctx, ArrayRef<Type> types, bool keepF32Casts)
      : OpRewritePattern(ctx), types(types), keepF32Casts(keepF32Casts) {}
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    Type srcElem = getElementTypeOrSelf(op.getIn().getType());
    Type dstElem = getElementTypeOrSelf(op.getType());
    if (isKeptCast(srcElem, dstElem, keepF32Casts))
      return keepCast(op, rewriter);
    if (!isEmulated(srcElem, types) || !isScalarOrVector(op.getType()))
      return rewriter.notifyMatchFailure(op, "not an emulated extf");
    Location loc = op.getLoc();
    Emitter e{rewriter, loc, op.getType()};
    // Narrow results (FP8 -> f16/bf16): through f32, exactly.
    Type wide = dstElem.isF64() ? dstElem : rewriter.getF32Type();
    std::optional<FloatLayout> src = getLayout(srcElem), dst = getLayout(wide);
    if (!src || !dst)
      return rewriter.notifyMatchFailure(op, "unknown float layout");
    Value result =
        emitExtend(rewriter, loc, op.getIn(), *src, e.shaped(wide), *dst);
    if (wide != dstElem)
      result = arith::TruncFOp::create(rewriter, loc, op.getType(), result);
    rewriter.replaceOp(op, result);
    return success();
  }
  SmallVector<Type> types;
  bool keepF32Casts;
};

struct EmulateNarrowFloatsPass
    : public mlir::ds::impl::EmulateNarrowFloatsPassBase<
          EmulateNarrowFloatsPass> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    SmallVector<Type> types;
    if (typeNames.empty()) {
      types = getDefaultNarrowFloatTypes(ctx);
    } else {
      SmallVector<Type> supported = getDefaultNarrowFloatTypes(ctx);
      for (const std::string &name : typeNames) {
        Type t = parseType(name, ctx);
        if (!t || !llvm::is_contained(supported, t)) {
          getOperation()->emitError()
              << "ds-emulate-narrow-floats: cannot emulate '" << name
              << "' (supported: bf16, f16, f8E4M3FN, f8E5M2)";
          return signalPassFailure();
        }
        types.push_back(t);
      }
    }
    if (failed(checkNarrowFloatCasts(getOperation(), types)))
      return signalPassFailure();
    RewritePatternSet patterns(ctx);
    populateEmulateNarrowFloatsPatterns(patterns, types, keepF32Casts);
    // No folding: arith-emulate-unsupported-floats marks its extf/truncf
    // pairs `contract`, and arith folds extf(truncf(x)) with that flag to
    // x, which would drop the rounding after every narrow op (PyTorch
    // rounds after each one).
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace

SmallVector<Type> mlir::ds::getDefaultNarrowFloatTypes(MLIRContext *ctx) {
  return {BFloat16Type::get(ctx), Float16Type::get(ctx),
          Float8E4M3FNType::get(ctx), Float8E5M2Type::get(ctx)};
}

void mlir::ds::populateEmulateNarrowFloatsPatterns(RewritePatternSet &patterns,
                                                   ArrayRef<Type> types,
                                                   bool keepF32Casts) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<TruncFToIntegers, ExtFToIntegers>(ctx, types, keepF32Casts);
}

LogicalResult mlir::ds::checkNarrowFloatCasts(Operation *root,
                                              ArrayRef<Type> types) {
  WalkResult result = root->walk([&](Operation *op) {
    if (!isa<arith::TruncFOp, arith::ExtFOp>(op))
      return WalkResult::advance();
    Type from = getElementTypeOrSelf(op->getOperand(0).getType());
    Type to = getElementTypeOrSelf(op->getResult(0).getType());
    for (Type t : {from, to}) {
      if (isNarrowFloat8(t) && !isEmulated(t, types)) {
        // LLVM cannot lower FP8 casts itself: this one would fail there.
        if (llvm::is_contained(getDefaultNarrowFloatTypes(t.getContext()), t))
          op->emitOpError() << "on " << t
                            << " needs emulation, but the pass's types= "
                               "option leaves it out";
        else
          op->emitOpError() << "on " << t
                            << " cannot be emulated: ds-emulate-narrow-floats "
                               "handles f8E4M3FN and f8E5M2";
        return WalkResult::interrupt();
      }
    }
    if (auto trunc = dyn_cast<arith::TruncFOp>(op);
        trunc && isEmulated(to, types) && !isNearestEven(trunc)) {
      op->emitOpError() << "with rounding mode '"
                        << arith::stringifyRoundingMode(
                               *trunc.getRoundingmode())
                        << "' cannot be emulated: ds-emulate-narrow-floats "
                           "rounds to nearest, ties to even";
      return WalkResult::interrupt();
    }
    if (!isScalarOrVector(op->getResult(0).getType()) &&
        (isEmulated(from, types) || isEmulated(to, types))) {
      op->emitOpError() << "on tensors cannot be emulated: "
                           "ds-emulate-narrow-floats runs after bufferization "
                           "on scalars and vectors";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

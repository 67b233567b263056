//===- LowerFP8CastsToNVVM.cpp - FP8 casts as cvt instructions ------------===//
//
// Implements ds-lower-fp8-casts-to-nvvm (see Passes.td): a kernel's
// arith.truncf into f8E4M3FN / f8E5M2 and arith.extf out of them become the
// conversion instructions of sm_89 and newer (cvt.rn.satfinite.e4m3x2.f32,
// cvt.rn.f16x2.e4m3x2 and their e5m2 forms), with the arith ops' semantics:
// round to nearest, ties to even; overflow to NaN (E4M3FN, which has no
// inf) or inf (E5M2), where the instruction saturates to the largest finite
// value, so a compare and a select put the arith result back.
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_LOWERFP8CASTSTONVVMPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

bool isFP8(Type t) { return isa<Float8E4M3FNType, Float8E5M2Type>(t); }

/// The smallest f32 magnitude the arith cast rounds past the largest finite
/// FP8 value, and the bits it then gives (positive; the sign bit is 0x80).
/// E4M3FN: 448 is the largest; 464, the midpoint to the next binade's
/// first step, ties to the even 448, and anything above is NaN. E5M2:
/// 57344 is the largest; the midpoint 61440 ties up (57344's mantissa is
/// odd), to inf.
struct Overflow {
  float threshold;
  bool inclusive;
  uint8_t bits;
};

Overflow overflowOf(Type fp8) {
  if (isa<Float8E4M3FNType>(fp8))
    return {464.0f, /*inclusive=*/false, 0x7F};
  return {61440.0f, /*inclusive=*/true, 0x7C};
}

struct TruncFToCvt : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type dst = op.getType();
    Type src = op.getIn().getType();
    std::optional<arith::RoundingMode> mode = op.getRoundingmode();
    // f64 sources stay emulated: through f32 they would round twice.
    if (!isFP8(dst) || !isa<Float32Type, Float16Type, BFloat16Type>(src) ||
        (mode && *mode != arith::RoundingMode::to_nearest_even))
      return rewriter.notifyMatchFailure(op, "not a scalar FP8 rounding");
    Location loc = op.getLoc();
    Type f32 = rewriter.getF32Type(), i8 = rewriter.getI8Type();
    Value x = op.getIn();
    if (!src.isF32()) // exact
      x = arith::ExtFOp::create(rewriter, loc, f32, x);
    // Both halves of the pair are x, so either byte is its rounding.
    Value pair = NVVM::ConvertF32x2ToF8x2Op::create(
        rewriter, loc, rewriter.getI16Type(), x, x, NVVM::FPRoundingMode::RN,
        NVVM::SaturationMode::SATFINITE, /*relu=*/false, dst);
    Value bits = arith::TruncIOp::create(rewriter, loc, i8, pair);
    Overflow o = overflowOf(dst);
    auto f32Const = [&](float v) {
      return arith::ConstantOp::create(rewriter, loc, f32,
                                       rewriter.getF32FloatAttr(v));
    };
    auto i8Const = [&](unsigned v) {
      return arith::ConstantOp::create(rewriter, loc, i8,
                                       rewriter.getIntegerAttr(i8, v));
    };
    Value above = arith::CmpFOp::create(rewriter, loc,
                                        o.inclusive ? arith::CmpFPredicate::OGE
                                                    : arith::CmpFPredicate::OGT,
                                        x, f32Const(o.threshold));
    Value below = arith::CmpFOp::create(rewriter, loc,
                                        o.inclusive ? arith::CmpFPredicate::OLE
                                                    : arith::CmpFPredicate::OLT,
                                        x, f32Const(-o.threshold));
    bits = arith::SelectOp::create(rewriter, loc, above, i8Const(o.bits), bits);
    bits = arith::SelectOp::create(rewriter, loc, below, i8Const(o.bits | 0x80),
                                   bits);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, dst, bits);
    return success();
  }
};

struct ExtFToCvt : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    Type src = op.getIn().getType();
    Type dst = op.getType();
    if (!isFP8(src) || !isa<FloatType>(dst))
      return rewriter.notifyMatchFailure(op, "not a scalar FP8 widening");
    Location loc = op.getLoc();
    Type i8 = rewriter.getI8Type(), i16 = rewriter.getI16Type();
    Value bits = arith::BitcastOp::create(rewriter, loc, i8, op.getIn());
    // The value in both bytes, so either lane of the pair is its widening.
    Value wide = arith::ExtUIOp::create(rewriter, loc, i16, bits);
    Value both = arith::OrIOp::create(
        rewriter, loc, wide,
        arith::ShLIOp::create(
            rewriter, loc, wide,
            arith::ConstantOp::create(rewriter, loc, i16,
                                      rewriter.getIntegerAttr(i16, 8))));
    Value pair =
        LLVM::BitcastOp::create(rewriter, loc, VectorType::get({2}, i8), both);
    Value halves = NVVM::ConvertF8x2ToF16x2Op::create(
        rewriter, loc, VectorType::get({2}, rewriter.getF16Type()), pair,
        /*relu=*/false, src);
    Value lane = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI32Type(),
                                          rewriter.getI32IntegerAttr(0));
    Value h = LLVM::ExtractElementOp::create(rewriter, loc, halves, lane);
    // Every FP8 value is an f16 one, and an f32 and a bf16 one: exact.
    Value result = h;
    if (!dst.isF16()) {
      Type via = dst.isBF16() ? rewriter.getF32Type() : dst;
      result = arith::ExtFOp::create(rewriter, loc, via, h);
      if (via != dst)
        result = arith::TruncFOp::create(rewriter, loc, dst, result);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct LowerFP8CastsToNVVMPass
    : public mlir::ds::impl::LowerFP8CastsToNVVMPassBase<
          LowerFP8CastsToNVVMPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<TruncFToCvt, ExtFToCvt>(&getContext());
    GreedyRewriteConfig config;
    config.enableFolding(
        false); // keep every rounding (see EmulateNarrowFloats)
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace

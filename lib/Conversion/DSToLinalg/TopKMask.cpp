//===- TopKMask.cpp - ds.top_k_mask as a radix select ---------------------===//
//
// The k largest of n scores without a sort or an n x n ranking. Each score
// and its index form a unique key: the score's bits as an integer whose
// unsigned order is the scores' (NaN lowest, -0 equal to +0), then the
// index, so that among equal scores the higher index ranks higher, as the
// op specifies. The k-th largest key is found a digit at a time from the
// top, as radix select does (CUB's and PyTorch's top-k on GPUs):
//
//   atOrAbove[d]  #{keys that share the digits chosen so far, whose next
//                 digit is d or more}
//   digit         the last d with atOrAbove[d] >= r (r: the rank sought
//                 among those keys, first k)
//   r            -= atOrAbove[digit + 1]
//
// and the mask is every key at or above the one found: exactly k of them.
// Digits are 8 bits (256 bins) up to 65536 keys, 4 bits beyond. A pass is
// a bins x n reduction, two reductions over the bins and a scalar update,
// without control flow, so the step stays one straight line on the CPU
// and on the GPU. An f32 score with n <= 65536 takes 4 + 2 passes, 1536 n
// compares: the n x n ranking this replaces took 4.3e9 for the 65536
// blocks of a 4096 x 1024 weight in 8 x 8 blocks.
//
// buildKthLargest runs the score's digits alone: the k-th largest value,
// not which element (a quantile; the three-tier encoder on the device).
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/TypeUtilities.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::lowering;

namespace {

/// Digits of 8 bits (256 bins) up to this many keys, of 4 bits above: a
/// pass costs bins x n compares and three launches on the GPU (the
/// histogram, its split reduction's finish, the pick), two where the
/// histogram has bins enough to fill the GPU without a split.
constexpr int64_t kMaxKeysForByteDigits = 65536;

Value intConstant(OpBuilder &b, Location loc, Type type, const APInt &value) {
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, value));
}

Value intConstant(OpBuilder &b, Location loc, Type type, uint64_t value) {
  return intConstant(b, loc, type, APInt(type.getIntOrFloatBitWidth(), value));
}

/// Where a pass's digit lies: in the score's bits (`inScore`) or the
/// index's, at bit `shift`.
struct Digit {
  bool inScore;
  unsigned shift;
};

/// Builds the keys and their digits inside linalg bodies.
class Keys {
public:
  Keys(Type scoreType, int64_t n)
      : scoreType(scoreType), scoreBits(scoreType.getIntOrFloatBitWidth()),
        digitBits(n <= kMaxKeysForByteDigits ? 8 : 4) {
    unsigned indexBits = std::max(1u, llvm::Log2_64_Ceil(n));
    indexDigits = llvm::divideCeil(indexBits, digitBits);
  }

  int64_t bins() const { return int64_t(1) << digitBits; }

  /// The digits from the most significant: the score's, then the index's.
  SmallVector<Digit> digits() const {
    SmallVector<Digit> out;
    for (unsigned s = scoreBits; s > 0; s -= digitBits)
      out.push_back({true, s - digitBits});
    for (unsigned s = indexDigits * digitBits; s > 0; s -= digitBits)
      out.push_back({false, s - digitBits});
    return out;
  }

  /// The score's key bits (an integer of the score's width): unsigned
  /// order is the scores' order, NaN is 0 (below -inf's 0x007fffff for
  /// f32), -0 is +0.
  Value scoreKey(OpBuilder &b, Location loc, Value score) const {
    score = convertFloat(b, loc, score, scoreType);
    auto ft = cast<FloatType>(scoreType);
    Type it = b.getIntegerType(scoreBits);
    Value zeroF = arith::ConstantOp::create(b, loc, b.getFloatAttr(ft, 0.0));
    Value zero = intConstant(b, loc, it, 0);
    Value bits = arith::BitcastOp::create(b, loc, it, score);
    bits = arith::SelectOp::create(
        b, loc,
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, score, zeroF),
        zero, bits);
    // Negative: all bits flipped (larger magnitudes rank lower); otherwise
    // the sign bit set (above every negative).
    Value negative =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, bits, zero);
    Value flipped = arith::XOrIOp::create(
        b, loc, bits, intConstant(b, loc, it, APInt::getAllOnes(scoreBits)));
    Value lifted = arith::OrIOp::create(
        b, loc, bits, intConstant(b, loc, it, APInt::getSignMask(scoreBits)));
    Value key = arith::SelectOp::create(b, loc, negative, flipped, lifted);
    Value nan =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, score, score);
    return arith::SelectOp::create(b, loc, nan, zero, key);
  }

  /// The index key: loop dimension `dim` as an i64.
  static Value indexKey(OpBuilder &b, Location loc, unsigned dim) {
    return arith::IndexCastUIOp::create(b, loc, b.getI64Type(),
                                        linalg::IndexOp::create(b, loc, dim));
  }

  /// Whether the key (scoreKey, indexKey) has the digits above `digit` of
  /// the prefix (scorePrefix, indexPrefix).
  Value sharesPrefix(OpBuilder &b, Location loc, Digit digit, Value scoreKey,
                     Value indexKey, Value scorePrefix,
                     Value indexPrefix) const {
    auto above = [&](Value key, Value prefix, unsigned shift) -> Value {
      unsigned width = key.getType().getIntOrFloatBitWidth();
      unsigned low = shift + digitBits;
      if (low >= width)
        return arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
      Value mask = intConstant(b, loc, key.getType(),
                               APInt::getHighBitsSet(width, width - low));
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                   arith::AndIOp::create(b, loc, key, mask),
                                   arith::AndIOp::create(b, loc, prefix, mask));
    };
    if (digit.inScore)
      return above(scoreKey, scorePrefix, digit.shift);
    Value sameScore = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            scoreKey, scorePrefix);
    return arith::AndIOp::create(b, loc, sameScore,
                                 above(indexKey, indexPrefix, digit.shift));
  }

  /// The digit's value in the key, as an i64 in [0, bins).
  Value digitOf(OpBuilder &b, Location loc, Digit digit, Value scoreKey,
                Value indexKey) const {
    Value key = digit.inScore ? scoreKey : indexKey;
    Type type = key.getType();
    Value shifted = arith::ShRUIOp::create(
        b, loc, key, intConstant(b, loc, type, digit.shift));
    Value d = arith::AndIOp::create(b, loc, shifted,
                                    intConstant(b, loc, type, bins() - 1));
    if (type.getIntOrFloatBitWidth() > 64)
      return arith::TruncIOp::create(b, loc, b.getI64Type(), d);
    if (type.getIntOrFloatBitWidth() < 64)
      return arith::ExtUIOp::create(b, loc, b.getI64Type(), d);
    return d;
  }

  Type scoreType;
  unsigned scoreBits;
  unsigned digitBits;
  unsigned indexDigits;
};

/// A linalg.generic over `loops` (the leading `numParallel` parallel, the
/// rest reductions) whose outputs start as `inits`.
SmallVector<Value> buildGeneric(
    OpBuilder &b, Location loc, unsigned numLoops, unsigned numParallel,
    ValueRange inputs, ArrayRef<AffineMap> inputMaps, ValueRange inits,
    ArrayRef<AffineMap> initMaps,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<AffineMap> maps(inputMaps);
  maps.append(initMaps.begin(), initMaps.end());
  SmallVector<utils::IteratorType> iterators(numLoops,
                                             utils::IteratorType::reduction);
  for (unsigned i = 0; i < numParallel; ++i)
    iterators[i] = utils::IteratorType::parallel;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange(inits), inputs, inits, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return generic.getResults();
}

/// The keys of `scores` (1-D float).
Keys keysOf(OpBuilder &b, Value scores) {
  auto type = cast<RankedTensorType>(scores.getType());
  Type elem = type.getElementType();
  Type scoreType =
      elem.getIntOrFloatBitWidth() > 32 ? b.getF64Type() : b.getF32Type();
  return Keys(scoreType, type.getNumElements());
}

/// The k-th largest key (k a rank-0 i64 tensor clamped to [1, n]) as its
/// rank-0 (score key, index key); with `scoreOnly` its score key alone (the
/// index key stays 0): the k-th largest score, ties being equal there.
std::pair<Value, Value> selectKey(OpBuilder &b, Location loc, Value scores,
                                  Value k, const Keys &keys, bool scoreOnly) {
  auto type = cast<RankedTensorType>(scores.getType());
  int64_t n = type.getNumElements();
  MLIRContext *ctx = b.getContext();
  Type i64 = b.getI64Type();
  Type scoreInt = b.getIntegerType(keys.scoreBits);

  AffineMap scalar0 = AffineMap::get(0, 0, {}, ctx);
  AffineMap scalar1 = AffineMap::get(1, 0, {}, ctx);
  AffineMap scalar2 = AffineMap::get(2, 0, {}, ctx);
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  AffineMap first = AffineMap::get(2, 0, d0), second = AffineMap::get(2, 0, d1);
  AffineMap id1 = AffineMap::getMultiDimIdentityMap(1, ctx);

  // r = clamp(k, 1, n): the rank of the key to find (k <= 0 selects none).
  Value r = buildParallel(
      b, loc, RankedTensorType::get({}, i64), ValueRange{k}, {scalar0},
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value v = arith::MaxSIOp::create(nb, l, args[0], createI64(nb, l, 1));
        return arith::MinSIOp::create(nb, l, v, createI64(nb, l, n));
      });
  Value scorePrefix = createZeros(b, loc, {}, scoreInt);
  Value indexPrefix = createZeros(b, loc, {}, i64);

  for (Digit digit : keys.digits()) {
    if (scoreOnly && !digit.inScore)
      break;
    // atOrAbove[d]: the keys with the prefix whose digit is d or more
    // (loops d, i): non-increasing in d, atOrAbove[0] >= r.
    Value atOrAbove =
        buildGeneric(
            b, loc, 2, 1, ValueRange{scores, scorePrefix, indexPrefix},
            {second, scalar2, scalar2}, createZeros(b, loc, {keys.bins()}, i64),
            {first},
            [&](OpBuilder &nb, Location l, ValueRange args) {
              Value sk = keys.scoreKey(nb, l, args[0]);
              Value ik = Keys::indexKey(nb, l, 1);
              Value hit = arith::AndIOp::create(
                  nb, l,
                  keys.sharesPrefix(nb, l, digit, sk, ik, args[1], args[2]),
                  arith::CmpIOp::create(nb, l, arith::CmpIPredicate::uge,
                                        keys.digitOf(nb, l, digit, sk, ik),
                                        Keys::indexKey(nb, l, 0)));
              return SmallVector<Value>{arith::AddIOp::create(
                  nb, l, args[3], arith::ExtUIOp::create(nb, l, i64, hit))};
            })
            .front();
    // The digit of the r-th key is the last d with atOrAbove[d] >= r: their
    // number less one. The keys above it, atOrAbove[digit + 1], are the
    // largest atOrAbove[d] below r (0 if none). Two reductions of one
    // output each (an add, a max), which the GPU runs as block reductions.
    auto overBins = [&](Value init, auto combine) {
      return buildGeneric(b, loc, 1, 0, ValueRange{atOrAbove, r},
                          {id1, scalar1}, init, {scalar1},
                          [&](OpBuilder &nb, Location l, ValueRange args) {
                            Value reached = arith::CmpIOp::create(
                                nb, l, arith::CmpIPredicate::sge, args[0],
                                args[1]);
                            return SmallVector<Value>{
                                combine(nb, l, args[0], reached, args[2])};
                          })
          .front();
    };
    Value digitsReached = overBins(
        createZeros(b, loc, {}, i64),
        [&](OpBuilder &nb, Location l, Value, Value reached, Value acc) {
          return arith::AddIOp::create(
              nb, l, acc, arith::ExtUIOp::create(nb, l, i64, reached));
        });
    Value keysAbove = overBins(
        createZeros(b, loc, {}, i64),
        [&](OpBuilder &nb, Location l, Value count, Value reached, Value acc) {
          Value below = arith::SelectOp::create(nb, l, reached,
                                                createI64(nb, l, 0), count);
          return arith::MaxSIOp::create(nb, l, acc, below);
        });
    // prefix |= digit << shift; r -= keysAbove.
    Value &prefix = digit.inScore ? scorePrefix : indexPrefix;
    Type prefixType = getElementTypeOrSelf(prefix.getType());
    SmallVector<Value> next = buildGeneric(
        b, loc, 0, 0, ValueRange{prefix, r, digitsReached, keysAbove},
        {scalar0, scalar0, scalar0, scalar0},
        ValueRange{createEmpty(b, loc, {}, prefixType),
                   createEmpty(b, loc, {}, i64)},
        {scalar0, scalar0}, [&](OpBuilder &nb, Location l, ValueRange args) {
          Value d = arith::SubIOp::create(nb, l, args[2], createI64(nb, l, 1));
          if (prefixType != i64)
            d = arith::TruncIOp::create(nb, l, prefixType, d);
          Value bits = arith::ShLIOp::create(
              nb, l, d, intConstant(nb, l, prefixType, digit.shift));
          return SmallVector<Value>{
              arith::OrIOp::create(nb, l, args[0], bits),
              arith::SubIOp::create(nb, l, args[1], args[3])};
        });
    prefix = next[0];
    r = next[1];
  }
  return {scorePrefix, indexPrefix};
}

} // namespace

Value lowering::buildTopKMask(OpBuilder &b, Location loc, Value scores,
                              Value k) {
  int64_t n = cast<RankedTensorType>(scores.getType()).getNumElements();
  AffineMap id1 = AffineMap::getMultiDimIdentityMap(1, b.getContext());
  AffineMap scalar1 = AffineMap::get(1, 0, {}, b.getContext());
  Keys keys = keysOf(b, scores);
  auto [scorePrefix, indexPrefix] =
      selectKey(b, loc, scores, k, keys, /*scoreOnly=*/false);
  // The keys at or above the one found, when k > 0.
  return buildParallel(
      b, loc, RankedTensorType::get({n}, b.getI8Type()),
      ValueRange{scores, scorePrefix, indexPrefix, k},
      {id1, scalar1, scalar1, scalar1},
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        using P = arith::CmpIPredicate;
        Value sk = keys.scoreKey(nb, l, args[0]);
        Value ik = Keys::indexKey(nb, l, 0);
        Value higher = arith::CmpIOp::create(nb, l, P::ugt, sk, args[1]);
        Value tieAtOrAbove = arith::AndIOp::create(
            nb, l, arith::CmpIOp::create(nb, l, P::eq, sk, args[1]),
            arith::CmpIOp::create(nb, l, P::uge, ik, args[2]));
        Value kept = arith::AndIOp::create(
            nb, l, arith::OrIOp::create(nb, l, higher, tieAtOrAbove),
            arith::CmpIOp::create(nb, l, P::sgt, args[3], createI64(nb, l, 0)));
        return arith::ExtUIOp::create(nb, l, nb.getI8Type(), kept);
      });
}

Value lowering::buildKthLargest(OpBuilder &b, Location loc, Value scores,
                                Value k) {
  Keys keys = keysOf(b, scores);
  Value key = selectKey(b, loc, scores, k, keys, /*scoreOnly=*/true).first;
  // The key's score: positive keys have the sign bit set, negative ones
  // all bits flipped (the NaN key 0 becomes all ones, a NaN).
  auto floatType = cast<FloatType>(keys.scoreType);
  return buildParallel(
      b, loc, RankedTensorType::get({}, floatType), ValueRange{key},
      {AffineMap::get(0, 0, {}, b.getContext())},
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Type it = args[0].getType();
        unsigned width = it.getIntOrFloatBitWidth();
        Value zero = intConstant(nb, l, it, 0);
        Value positive = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt,
                                               args[0], zero);
        Value bits = arith::SelectOp::create(
            nb, l, positive,
            arith::XOrIOp::create(
                nb, l, args[0],
                intConstant(nb, l, it, APInt::getSignMask(width))),
            arith::XOrIOp::create(
                nb, l, args[0],
                intConstant(nb, l, it, APInt::getAllOnes(width))));
        return arith::BitcastOp::create(nb, l, floatType, bits);
      });
}

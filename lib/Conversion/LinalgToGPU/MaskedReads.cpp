//===- MaskedReads.cpp - Elements a generic never uses --------------------===//
//
// Implements MaskedReads.h.
//
//===----------------------------------------------------------------------===//

#include "MaskedReads.h"
#include "KernelUtils.h"

#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace mlir::ds::gpu_kernels {

namespace {

/// Whether `v` is computed from `op`'s loop indices and constants alone,
/// by pure ops of its body (or is a constant defined outside it).
bool indexOnly(Value v, linalg::GenericOp op) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false; // a block argument: an element, or not op's at all
  if (def->getBlock() != op.getBody())
    return matchPattern(v, m_Constant());
  if (isa<linalg::IndexOp>(def))
    return true;
  if (def->getNumRegions() != 0 || !isMemoryEffectFree(def) ||
      def->getNumResults() != 1)
    return false;
  return llvm::all_of(def->getOperands(),
                      [&](Value operand) { return indexOnly(operand, op); });
}

/// `v` (indexOnly) computed at loop indices `ivs`, cloned at `b`.
Value cloneIndexExpr(OpBuilder &b, Value v, ArrayRef<Value> ivs,
                     IRMapping &map) {
  if (Value mapped = map.lookupOrNull(v))
    return mapped;
  Operation *def = v.getDefiningOp();
  if (auto index = dyn_cast<linalg::IndexOp>(def)) {
    map.map(v, ivs[index.getDim()]);
    return ivs[index.getDim()];
  }
  for (Value operand : def->getOperands())
    cloneIndexExpr(b, operand, ivs, map);
  b.clone(*def, map);
  return map.lookup(v);
}

/// Whether `v` depends on loop `dim` of `op` (through its body's ops).
bool readsLoop(Value v, unsigned dim, linalg::GenericOp op) {
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != op.getBody())
    return false;
  if (auto index = dyn_cast<linalg::IndexOp>(def))
    return index.getDim() == dim;
  return llvm::any_of(def->getOperands(), [&](Value operand) {
    return readsLoop(operand, dim, op);
  });
}

/// Whether `v` is loop `dim`'s index plus or minus values that do not read
/// it: then it grows with the index, one for one.
bool growsWith(Value v, unsigned dim, linalg::GenericOp op) {
  Operation *def = v.getDefiningOp();
  if (auto index = dyn_cast_or_null<linalg::IndexOp>(def))
    return index.getDim() == dim;
  if (auto add = dyn_cast_or_null<arith::AddIOp>(def)) {
    bool lhs = readsLoop(add.getLhs(), dim, op);
    bool rhs = readsLoop(add.getRhs(), dim, op);
    return lhs != rhs && growsWith(lhs ? add.getLhs() : add.getRhs(), dim, op);
  }
  if (auto sub = dyn_cast_or_null<arith::SubIOp>(def))
    return !readsLoop(sub.getRhs(), dim, op) &&
           growsWith(sub.getLhs(), dim, op);
  return false;
}

/// Whether condition `cond` holds on an interval of loop `dim`'s indices
/// whose other indices are fixed, or on everything outside one: an order
/// comparison of that index (plus or minus others) with values that do not
/// read it. Then it holds at every index of a run if and only if it holds
/// at the run's two ends (a causal mask's `j > i` over a vector's lanes).
bool monotoneIn(Value cond, unsigned dim, linalg::GenericOp op) {
  // Signed orders only: an unsigned one wraps where the index plus a
  // negative value crosses zero.
  auto cmp = cond.getDefiningOp<arith::CmpIOp>();
  if (!cmp || !llvm::is_contained(
                  {arith::CmpIPredicate::slt, arith::CmpIPredicate::sle,
                   arith::CmpIPredicate::sgt, arith::CmpIPredicate::sge},
                  cmp.getPredicate()))
    return false;
  bool lhs = readsLoop(cmp.getLhs(), dim, op);
  bool rhs = readsLoop(cmp.getRhs(), dim, op);
  return lhs != rhs && growsWith(lhs ? cmp.getLhs() : cmp.getRhs(), dim, op);
}

/// The loops the conditions of `mask` read.
SmallVector<unsigned> loopsRead(const ReadMask &mask) {
  llvm::SmallDenseSet<unsigned, 4> dims;
  SmallVector<Value> work;
  llvm::DenseSet<Value> seen;
  for (auto [cond, inTrueArm] : mask.selects)
    work.push_back(cond);
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *def = v.getDefiningOp();
    linalg::GenericOp op = mask.op;
    if (!def || def->getBlock() != op.getBody())
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(def))
      dims.insert(index.getDim());
    llvm::append_range(work, def->getOperands());
  }
  SmallVector<unsigned> sorted(dims.begin(), dims.end());
  llvm::sort(sorted);
  return sorted;
}

/// Evaluates an indexOnly integer value at given loop indices, for the
/// launch report's estimate; none for an op it does not know.
class IndexEvaluator {
public:
  IndexEvaluator(linalg::GenericOp op, ArrayRef<int64_t> ivs)
      : op(op), ivs(ivs) {}

  std::optional<int64_t> eval(Value v) {
    if (auto it = cache.find(v); it != cache.end())
      return it->second;
    std::optional<int64_t> r = compute(v);
    if (r)
      cache[v] = *r;
    return r;
  }

private:
  std::optional<int64_t> compute(Value v) {
    APInt constant;
    if (matchPattern(v, m_ConstantInt(&constant)))
      return v.getType().isInteger(1) ? int64_t(constant.getBoolValue())
                                      : constant.getSExtValue();
    Operation *def = v.getDefiningOp();
    if (!def)
      return std::nullopt;
    if (auto index = dyn_cast<linalg::IndexOp>(def))
      return ivs[index.getDim()];
    SmallVector<int64_t> x;
    for (Value operand : def->getOperands()) {
      std::optional<int64_t> e = eval(operand);
      if (!e)
        return std::nullopt;
      x.push_back(*e);
    }
    auto u = [&](int i) { return static_cast<uint64_t>(x[i]); };
    auto nonZero = [&](int i) { return x[i] != 0; };
    return llvm::TypeSwitch<Operation *, std::optional<int64_t>>(def)
        .Case([&](arith::AddIOp) { return x[0] + x[1]; })
        .Case([&](arith::SubIOp) { return x[0] - x[1]; })
        .Case([&](arith::MulIOp) { return x[0] * x[1]; })
        .Case([&](arith::DivUIOp) -> std::optional<int64_t> {
          if (!nonZero(1))
            return std::nullopt;
          return static_cast<int64_t>(u(0) / u(1));
        })
        .Case([&](arith::RemUIOp) -> std::optional<int64_t> {
          if (!nonZero(1))
            return std::nullopt;
          return static_cast<int64_t>(u(0) % u(1));
        })
        .Case([&](arith::DivSIOp) -> std::optional<int64_t> {
          if (!nonZero(1))
            return std::nullopt;
          return x[0] / x[1];
        })
        .Case([&](arith::RemSIOp) -> std::optional<int64_t> {
          if (!nonZero(1))
            return std::nullopt;
          return x[0] % x[1];
        })
        .Case([&](arith::AndIOp) { return x[0] & x[1]; })
        .Case([&](arith::OrIOp) { return x[0] | x[1]; })
        .Case([&](arith::XOrIOp) {
          int64_t r = x[0] ^ x[1];
          return def->getResult(0).getType().isInteger(1) ? r & 1 : r;
        })
        .Case([&](arith::SelectOp) { return x[0] ? x[1] : x[2]; })
        .Case([&](arith::MinSIOp) { return std::min(x[0], x[1]); })
        .Case([&](arith::MaxSIOp) { return std::max(x[0], x[1]); })
        .Case([&](arith::MinUIOp) {
          return static_cast<int64_t>(std::min(u(0), u(1)));
        })
        .Case([&](arith::MaxUIOp) {
          return static_cast<int64_t>(std::max(u(0), u(1)));
        })
        .Case<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
              arith::ExtUIOp>([&](auto) { return x[0]; })
        .Case([&](arith::CmpIOp cmp) {
          return static_cast<int64_t>(arith::applyCmpPredicate(
              cmp.getPredicate(), APInt(64, x[0]), APInt(64, x[1])));
        })
        .Default([](Operation *) { return std::nullopt; });
  }

  linalg::GenericOp op;
  ArrayRef<int64_t> ivs;
  DenseMap<Value, int64_t> cache;
};

} // namespace

std::optional<ReadMask> readMask(linalg::GenericOp op, OpOperand *input) {
  BlockArgument arg = op.getMatchingBlockArgument(input);
  // Each element read at one iteration: skipping the iterations that do not
  // use it skips the element. (A row's statistic, read at every element of
  // the row, is loaded anyway, and is cheap.)
  if (arg.use_empty() || !op.getMatchingIndexingMap(input).isPermutation())
    return std::nullopt;
  ReadMask mask{op, {}};
  SmallVector<Value> work{arg};
  llvm::DenseSet<Value> seen{arg};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      auto select = dyn_cast<arith::SelectOp>(user);
      if (select && use.getOperandNumber() != 0 &&
          indexOnly(select.getCondition(), op)) {
        std::pair<Value, bool> arm{select.getCondition(),
                                   use.getOperandNumber() == 1};
        if (!llvm::is_contained(mask.selects, arm))
          mask.selects.push_back(arm);
        continue;
      }
      if (user->getBlock() != op.getBody() || isa<linalg::YieldOp>(user) ||
          user->getNumRegions() != 0 || !isMemoryEffectFree(user))
        return std::nullopt;
      for (Value r : user->getResults())
        if (seen.insert(r).second)
          work.push_back(r);
    }
  }
  if (mask.selects.empty())
    return std::nullopt;
  return mask;
}

Value emitUnused(OpBuilder &b, Location loc, const ReadMask &mask,
                 ArrayRef<Value> ivs, unsigned innermost, int64_t width) {
  // A vector's lanes are a run of the innermost loop: where every condition
  // is monotone along it, its two ends decide for all of them.
  bool ends = llvm::all_of(mask.selects, [&](auto select) {
    return monotoneIn(select.first, innermost, mask.op);
  });
  Value all, yes;
  for (int64_t k = 0; k < width; ++k) {
    if (ends && k != 0 && k != width - 1)
      continue;
    SmallVector<Value> lane(ivs);
    if (k > 0)
      lane[innermost] = arith::AddIOp::create(b, loc, ivs[innermost],
                                              indexConstant(b, loc, k));
    IRMapping map;
    for (auto [cond, inTrueArm] : mask.selects) {
      Value c = cloneIndexExpr(b, cond, lane, map);
      // The element is unused where the select takes its other arm.
      if (inTrueArm && !yes)
        yes = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
      Value unused = inTrueArm ? arith::XOrIOp::create(b, loc, c, yes) : c;
      all =
          all ? arith::AndIOp::create(b, loc, all, unused).getResult() : unused;
    }
  }
  return all;
}

std::optional<double> usedFraction(ArrayRef<ReadMask> masks) {
  if (masks.empty())
    return std::nullopt;
  llvm::SmallDenseSet<unsigned, 4> read;
  for (const ReadMask &mask : masks)
    for (unsigned d : loopsRead(mask))
      read.insert(d);
  SmallVector<unsigned> dims(read.begin(), read.end());
  llvm::sort(dims);
  linalg::GenericOp first = masks.front().op;
  SmallVector<int64_t> sizes = first.getStaticLoopRanges();
  // Sample points per loop: 4096 points in all at most (the estimate runs
  // at every masked load the builders emit; 16384 cost 8 % of the 12-layer
  // FP8 step's compile).
  int64_t perLoop = dims.size() <= 1   ? 4096
                    : dims.size() == 2 ? 64
                    : dims.size() == 3 ? 16
                                       : 8;
  SmallVector<SmallVector<int64_t>> samples;
  for (unsigned d : dims) {
    if (ShapedType::isDynamic(sizes[d]) || sizes[d] <= 0)
      return std::nullopt;
    SmallVector<int64_t> s;
    int64_t n = std::min(sizes[d], perLoop);
    for (int64_t i = 0; i < n; ++i)
      s.push_back(n == sizes[d] ? i : (2 * i + 1) * sizes[d] / (2 * n));
    samples.push_back(std::move(s));
  }
  int64_t used = 0, total = 0;
  SmallVector<int64_t> ivs(sizes.size(), 0);
  SmallVector<size_t> at(dims.size(), 0);
  while (true) {
    for (auto [k, d] : llvm::enumerate(dims))
      ivs[d] = samples[k][at[k]];
    // Used where some mask's select takes the element's arm.
    bool unused = true;
    for (const ReadMask &mask : masks) {
      IndexEvaluator eval(mask.op, ivs);
      for (auto [cond, inTrueArm] : mask.selects) {
        std::optional<int64_t> c = eval.eval(cond);
        if (!c)
          return std::nullopt;
        unused = unused && ((*c != 0) != inTrueArm);
      }
    }
    used += !unused;
    ++total;
    size_t k = 0;
    for (; k < at.size(); ++k) {
      if (++at[k] < samples[k].size())
        break;
      at[k] = 0;
    }
    if (k == at.size())
      break;
  }
  return static_cast<double>(used) / static_cast<double>(total);
}

bool unusedOnRowTails(const ReadMask &mask, unsigned rowLoop, unsigned colLoop,
                      int64_t rows, int64_t cols,
                      function_ref<int64_t(int64_t)> tailStart) {
  for (unsigned d : loopsRead(mask))
    if (d != rowLoop && d != colLoop)
      return false;
  for (auto [cond, inTrueArm] : mask.selects)
    if (readsLoop(cond, colLoop, mask.op) &&
        !monotoneIn(cond, colLoop, mask.op))
      return false;
  linalg::GenericOp op = mask.op;
  SmallVector<int64_t> ivs(op.getNumLoops(), 0);
  auto unusedAt = [&](int64_t i, int64_t j) {
    ivs[rowLoop] = i;
    ivs[colLoop] = j;
    IndexEvaluator eval(mask.op, ivs);
    for (auto [cond, inTrueArm] : mask.selects) {
      std::optional<int64_t> c = eval.eval(cond);
      if (!c || (*c != 0) == inTrueArm)
        return false;
    }
    return true;
  };
  for (int64_t i = 0; i < rows; ++i) {
    int64_t start = tailStart(i);
    if (start < cols && (!unusedAt(i, start) || !unusedAt(i, cols - 1)))
      return false;
  }
  return true;
}

Value loadUnlessUnused(OpBuilder &b, Location loc, Value unused, Type type,
                       std::optional<double> fraction,
                       function_ref<Value(OpBuilder &, Location)> load) {
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, unused,
                                /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value zero =
        arith::ConstantOp::create(b, loc, cast<TypedAttr>(b.getZeroAttr(type)));
    scf::YieldOp::create(b, loc, zero);
    b.setInsertionPointToStart(ifOp.elseBlock());
    Value loaded = load(b, loc);
    if (fraction)
      loaded.getDefiningOp()->setAttr(DSDialect::kReadFractionAttrName,
                                      b.getF64FloatAttr(*fraction));
    scf::YieldOp::create(b, loc, loaded);
  }
  return ifOp.getResult(0);
}

Value loadIfUsed(OpBuilder &b, Location loc, OpOperand &input,
                 ArrayRef<Value> ivs, Type type,
                 function_ref<Value(OpBuilder &, Location)> load,
                 unsigned innermost, int64_t width) {
  auto op = cast<linalg::GenericOp>(input.getOwner());
  std::optional<ReadMask> mask;
  if (op.isDpsInput(&input))
    mask = readMask(op, &input);
  if (!mask)
    return load(b, loc);
  return loadUnlessUnused(b, loc,
                          emitUnused(b, loc, *mask, ivs, innermost, width),
                          type, usedFraction(*mask), load);
}

} // namespace mlir::ds::gpu_kernels

//===- CostModel.cpp - What one op of a training step costs ---------------===//
//
// FLOPs by the usual conventions (a multiply-add is 2 FLOPs; GEMM and
// convolution are 2 x the multiply-adds of their contraction), counted
// from static shapes: the model is for placing work on devices, so it needs
// the ratios between ops and layers to be right, not the last percent of
// any one kernel. The per-element weights below are documented once here:
//
//   elementwise arithmetic, compares, selects, casts        1 / element
//   sqrt, rsqrt                                             2
//   exp, log, tanh, erf (transcendentals)                   4
//   sigmoid 6, silu 7, gelu 10, gelu_grad 14
//   reductions                                              1 / input element
//   softmax, log_softmax, layer/batch norm, cross-entropy   8 / element
//   rms_norm 5, mse_loss 3, fake_quant 6 (its gradient 3), quantize 5
//   dropout 4, random_normal 10 (Philox + transform), top_k_mask 2
//   data movement (reshape, transpose, slice, concat, ...)  0
//
// Matmul-like ops count their contraction exactly: ds.matmul 2 M N K per
// batch, ds.conv2d and its two gradients 2 N Cout (Cin / groups) KH KW
// OH OW, linalg ops the arithmetic of their body times their iteration
// space (which gives linalg.matmul and the linalg convolutions the same
// counts). Block-sparse products count the dense FLOPs times the block
// density the sparsity schedule ends at, apart from dense FLOPs, since a
// device runs them at its own sparse rate.
//
//===----------------------------------------------------------------------===//

#include "ds/Analysis/CostModel.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/CastInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <mutex>
#include <numeric>

using namespace mlir;
using namespace mlir::ds;
using ::ds::partition::Precision;

namespace {

/// Elements of a shaped type (its static dimensions; the project's tensors
/// have no dynamic ones), 1 for a scalar.
double numElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped)
    return 1;
  if (!shaped.hasRank())
    return 1;
  double n = 1;
  for (int64_t d : shaped.getShape())
    if (!ShapedType::isDynamic(d))
      n *= double(d);
  return n;
}
double numElements(Value v) { return numElements(v.getType()); }

/// Dimension `i` of a ranked tensor, counted from the end when negative.
double dimOf(Value v, int64_t i) {
  auto t = cast<ShapedType>(v.getType());
  int64_t rank = t.getRank();
  int64_t d = t.getDimSize(i < 0 ? rank + i : i);
  return ShapedType::isDynamic(d) ? 1 : double(d);
}

/// The precision of an element type; none for i1, wide integers and
/// index, which carry predicates and indices, not arithmetic a device
/// rates (bookkeeping on them counts at F32).
std::optional<Precision> precisionOfType(Type type) {
  Type elem = getElementTypeOrSelf(type);
  if (auto f = dyn_cast<FloatType>(elem)) {
    unsigned w = f.getWidth();
    if (w > 32)
      return Precision::F64;
    if (w > 16) // f32, tf32
      return Precision::F32;
    if (w > 8) // bf16, f16 (F16 runs at the BF16 rate)
      return Precision::BF16;
    return Precision::FP8; // f8 formats, and the narrower f6 / f4
  }
  if (auto i = dyn_cast<IntegerType>(elem))
    if (i.getWidth() > 1 && i.getWidth() <= 8)
      return Precision::INT8; // i8, i4 grid indices
  return std::nullopt;
}

/// Whether an op only re-labels its operand's buffer (a view): it moves no
/// bytes once lowered.
bool isView(Operation *op) {
  return isa<ReshapeOp, StopGradientOp, arith::ConstantOp, tensor::EmptyOp,
             tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::ReshapeOp,
             tensor::CastOp, tensor::BitcastOp>(op);
}

/// FLOPs per element of a scalar (or elementwise) arith or math op.
double scalarWeight(Operation *op) {
  if (isa<arith::ConstantOp>(op))
    return 0;
  if (isa<math::FmaOp>(op))
    return 2;
  if (isa<math::SqrtOp, math::RsqrtOp, math::CbrtOp>(op))
    return 2;
  if (isa<math::AbsFOp, math::AbsIOp, math::FloorOp, math::CeilOp,
          math::RoundOp, math::RoundEvenOp, math::TruncOp, math::CopySignOp,
          math::CountLeadingZerosOp, math::CountTrailingZerosOp, math::CtPopOp>(
          op))
    return 1;
  if (op->getDialect() && op->getDialect()->getNamespace() == "math")
    return 4; // exp, log, tanh, erf, sin, cos, powf, ...
  return 1;
}

/// FLOPs of one execution of a linalg op: the arithmetic of its body per
/// point of the iteration space. Casts in a body are the operand widening
/// of a mixed-precision contraction (bf16 x bf16 -> f32), free in the
/// kernel.
double linalgFlops(linalg::LinalgOp op) {
  double points = 1;
  for (int64_t r : op.getStaticLoopRanges())
    if (!ShapedType::isDynamic(r))
      points *= double(r);
  double perPoint = 0;
  for (Operation &inner : op.getBlock()->without_terminator())
    if (!isa<CastOpInterface>(inner))
      perPoint += scalarWeight(&inner);
  return points * perPoint;
}

/// The flops of ds ops that are a fixed count per element of their result
/// (`perResult`) or first operand (`perInput`); 0 and 0 when not one.
struct PerElement {
  double perResult = 0, perInput = 0;
};
PerElement elementWeights(Operation *op) {
  return TypeSwitch<Operation *, PerElement>(op)
      // Data movement and views.
      .Case<ReshapeOp, TransposeOp, SliceOp, ConcatOp, BroadcastOp,
            InsertSliceOp, StopGradientOp, EmbeddingOp, CommRankOp,
            CommBroadcastOp, AllReduceOp, AllReduceWaitOp, SendOp, RecvOp>(
          [](auto) { return PerElement{}; })
      // One arithmetic op per element.
      .Case<AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, ReluOp, NegOp,
            AbsOp, RoundOp, CastOp, CompareOp, SelectOp, CausalMaskOp>(
          [](auto) {
            return PerElement{1, 0};
          })
      .Case<SqrtOp, RsqrtOp>([](auto) {
        return PerElement{2, 0};
      })
      .Case<ExpOp, LogOp, TanhOp>([](auto) {
        return PerElement{4, 0};
      })
      .Case<SigmoidOp>([](auto) {
        return PerElement{6, 0};
      })
      .Case<SiluOp>([](auto) {
        return PerElement{7, 0};
      })
      .Case<GeluOp>([](auto) {
        return PerElement{10, 0};
      })
      .Case<GeluGradOp>([](auto) {
        return PerElement{14, 0};
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([](auto) {
        return PerElement{0, 1};
      })
      .Case<SoftmaxOp, LogSoftmaxOp, LayerNormOp, BatchNormOp>([](auto) {
        return PerElement{0, 8};
      })
      .Case<RmsNormOp>([](auto) {
        return PerElement{0, 5};
      })
      // Log-softmax of the logits and a gather; the gradient recomputes the
      // softmax and subtracts the one-hot labels.
      .Case<CrossEntropyOp, CrossEntropyGradOp>([](auto) {
        return PerElement{0, 8};
      })
      .Case<MseLossOp>([](auto) {
        return PerElement{0, 3};
      })
      // The scatter-add of the rows.
      .Case<EmbeddingGradOp>([](auto) {
        return PerElement{0, 1};
      })
      .Case<DropoutOp>([](auto) {
        return PerElement{4, 0};
      })
      .Case<RandomNormalOp>([](auto) {
        return PerElement{10, 0};
      })
      .Case<FakeQuantOp, QuantizeOp>([](auto) {
        return PerElement{0, 6};
      })
      .Case<FakeQuantGradOp>([](auto) {
        return PerElement{0, 3};
      })
      .Case<TopKMaskOp>([](auto) {
        return PerElement{0, 2};
      })
      .Default([](Operation *) {
        return PerElement{-1, -1};
      });
}

/// 2 N Cout (Cin / groups) KH KW OH OW from the result-side tensor `y`
/// ([N, Cout, OH, OW]) and the weight ([Cout, Cin / groups, KH, KW]).
double convFlops(Value y, Value weight) {
  double perOutput = numElements(weight) / dimOf(weight, 0);
  return 2 * numElements(y) * perOutput;
}

/// Density of one weight under ERK (RigL's Erdos-Renyi-Kernel
/// distribution) at sparsity `sp`, as ds-update-sparsity-masks computes
/// its targets: densities proportional to (R + C) / (R C), the layers that
/// would exceed 1 dense and the others re-solved, active blocks rounded.
/// `shapes` are the [R, C] of every masked weight of the step.
SmallVector<double> erkDensities(ArrayRef<std::pair<double, double>> shapes,
                                 ArrayRef<double> blocks, double sp) {
  size_t n = shapes.size();
  SmallVector<double> raw(n), size(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    size[i] = shapes[i].first * shapes[i].second;
    raw[i] = (shapes[i].first + shapes[i].second) / size[i];
    total += size[i];
  }
  SmallVector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Stable (ties by index), as the pass sorts.
  llvm::sort(order, [&](size_t a, size_t b) {
    return raw[a] != raw[b] ? raw[a] > raw[b] : a < b;
  });
  double target = (1 - sp) * total, eps = 0;
  // The smallest j such that, with the j largest-raw layers dense, layer
  // order[j] stays at density <= 1 (the pass's fallback: j = n - 1).
  for (size_t j = 0; j < n; ++j) {
    double dense = 0, weighted = 0;
    for (size_t i = 0; i < n; ++i)
      (i < j ? dense : weighted) +=
          i < j ? size[order[i]] : raw[order[i]] * size[order[i]];
    eps = (target - dense) / weighted;
    if (eps * raw[order[j]] <= 1)
      break;
  }
  SmallVector<double> density(n);
  for (size_t i = 0; i < n; ++i) {
    double d = std::clamp(eps * raw[i], 0.0, 1.0);
    density[i] = blocks[i] > 0 ? std::round(d * blocks[i]) / blocks[i] : d;
  }
  return density;
}

/// The mask state a block-sparse op reads, or null. The weight gradient
/// samples on `select(regrowing, ones, mask)`: through selects, the operand
/// that is a step argument is the mask.
Value maskOf(Operation *op) {
  Value mask;
  if (auto mm = dyn_cast<BlockSparseMatMulOp>(op))
    mask = mm.getMask();
  else if (auto sd = dyn_cast<BlockSampledMatMulOp>(op))
    mask = sd.getMask();
  while (mask) {
    auto select = mask.getDefiningOp<SelectOp>();
    if (!select)
      break;
    mask = isa<BlockArgument>(select.getOnTrue()) ? select.getOnTrue()
                                                  : select.getOnFalse();
  }
  return mask;
}

/// ERK densities per mask, cached per step function: every block-sparse op
/// of a step asks, and each answer needs all the step's masks. An entry is
/// used only while the mask asked about is one it holds and the sparsity
/// settings are the same attribute, so a function rebuilt at the same
/// address recomputes.
struct ErkCache {
  std::mutex mutex;
  DenseMap<Operation *, std::pair<DictionaryAttr, DenseMap<Value, double>>>
      byFunc;
};
ErkCache &erkCache() {
  static ErkCache cache;
  return cache;
}

double erkDensityOf(Operation *func, DictionaryAttr settings, Value mask,
                    double sp) {
  ErkCache &cache = erkCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto &entry = cache.byFunc[func];
  if (entry.first == settings) {
    auto it = entry.second.find(mask);
    if (it != entry.second.end())
      return it->second;
  }
  SmallVector<Value> masks;
  SmallVector<std::pair<double, double>> shapes;
  SmallVector<double> blocks;
  DenseSet<Value> seen;
  func->walk([&](Operation *op) {
    Value m = maskOf(op);
    if (!m || !seen.insert(m).second)
      return;
    int64_t b = op->getAttrOfType<IntegerAttr>("block").getInt();
    masks.push_back(m);
    shapes.push_back({dimOf(m, 0) * b, dimOf(m, 1) * b});
    blocks.push_back(numElements(m));
  });
  SmallVector<double> density = erkDensities(shapes, blocks, sp);
  entry.first = settings;
  entry.second.clear();
  for (auto [m, d] : llvm::zip(masks, density))
    entry.second[m] = d;
  auto it = entry.second.find(mask);
  return it == entry.second.end() ? 1 - sp : it->second;
}

} // namespace

OpCost &OpCost::operator+=(const OpCost &other) {
  for (unsigned p = 0; p < ::ds::partition::kNumPrecisions; ++p) {
    denseFlops[p] += other.denseFlops[p];
    sparseFlops[p] += other.sparseFlops[p];
  }
  bytesMoved += other.bytesMoved;
  return *this;
}

double mlir::ds::bytesOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t)
    return 0;
  Type elem = t.getElementType();
  unsigned bits = elem.isIntOrFloat() ? elem.getIntOrFloatBitWidth()
                  : elem.isIndex()    ? 64
                                      : 0;
  // i1 tensors are stored a byte per element; i4 and f4 pack two.
  double bytes = bits == 1 ? 1 : double(bits) / 8;
  return numElements(t) * bytes;
}

Precision mlir::ds::precisionOf(Operation *op) {
  // The first operand that has one decides: it is the data operand of
  // nearly every op (a matmul's lhs, an embedding's table), where a later
  // operand may be a scale (ds.quantized_matmul) or a mask.
  for (Value v : op->getOperands())
    if (auto p = precisionOfType(v.getType()))
      return *p;
  for (Value v : op->getResults())
    if (auto p = precisionOfType(v.getType()))
      return *p;
  return Precision::F32;
}

double mlir::ds::blockDensityOf(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  auto func = op->getParentOfType<FunctionOpInterface>();
  auto table =
      module
          ? module->getAttrOfType<DictionaryAttr>(DSDialect::kSparsityAttrName)
          : DictionaryAttr();
  if (!table || table.empty())
    return 1;
  auto settings =
      func ? table.getAs<DictionaryAttr>(func.getName()) : DictionaryAttr();
  // A step renamed or copied after ds-sparsify-matmul (an evaluation copy)
  // still runs on the one schedule there is.
  if (!settings && table.size() == 1)
    settings = dyn_cast<DictionaryAttr>(table.begin()->getValue());
  if (!settings)
    return 1;
  auto final = settings.getAs<FloatAttr>("final");
  if (!final)
    return 1;
  double sp = std::clamp(final.getValueAsDouble(), 0.0, 1.0);
  auto distribution = settings.getAs<StringAttr>("distribution");
  Value mask = maskOf(op);
  if (distribution && distribution.getValue() == "erk" && mask && func)
    return erkDensityOf(func, settings, mask, sp);
  // Uniform: every weight at the target; global: the target over all
  // weights, which is what the sum over the step needs.
  return 1 - sp;
}

OpCost mlir::ds::costOf(Operation *op) {
  OpCost cost;
  unsigned precision = unsigned(precisionOf(op));

  // Bytes: every operand read, every result written; views move nothing.
  if (!isView(op) && !isa<func::ReturnOp>(op) &&
      !op->hasTrait<mlir::OpTrait::IsTerminator>()) {
    for (Value v : op->getOperands())
      cost.bytesMoved += bytesOf(v);
    for (Value v : op->getResults())
      cost.bytesMoved += bytesOf(v);
  }

  // 1. Contractions.
  if (auto mm = dyn_cast<MatMulOp>(op)) {
    double k = dimOf(mm.getLhs(), mm.getTransposeLhs() ? -2 : -1);
    cost.denseFlops[precision] = 2 * numElements(mm.getResult()) * k;
    return cost;
  }
  if (auto qm = dyn_cast<QuantizedMatMulOp>(op)) {
    // The integer GEMM, then the f32 epilogue (zero-point corrections and
    // the scales: about 4 per result element).
    double k = dimOf(qm.getLhs(), -1);
    cost.denseFlops[unsigned(Precision::INT8)] =
        2 * numElements(qm.getResult()) * k;
    cost.denseFlops[unsigned(Precision::F32)] = 4 * numElements(qm.getResult());
    return cost;
  }
  if (auto sp = dyn_cast<BlockSparseMatMulOp>(op)) {
    double density = blockDensityOf(op);
    double k = dimOf(sp.getInput(), -1);
    cost.sparseFlops[precision] = 2 * numElements(sp.getResult()) * k * density;
    // Only the active blocks of the weight are read.
    cost.bytesMoved -= bytesOf(sp.getWeight()) * (1 - density);
    return cost;
  }
  if (auto sd = dyn_cast<BlockSampledMatMulOp>(op)) {
    // result [R, C] = lhs[m, R]^T rhs[m, C] over the rows m.
    double rows = numElements(sd.getLhs()) / dimOf(sd.getLhs(), -1);
    cost.sparseFlops[precision] =
        2 * rows * numElements(sd.getResult()) * blockDensityOf(op);
    return cost;
  }
  if (auto conv = dyn_cast<Conv2DOp>(op)) {
    cost.denseFlops[precision] =
        convFlops(conv.getResult(), conv.getWeight()) +
        (conv.getBias() ? numElements(conv.getResult()) : 0);
    return cost;
  }
  if (auto gi = dyn_cast<Conv2DGradInputOp>(op)) {
    cost.denseFlops[precision] = convFlops(gi.getGrad(), gi.getOther());
    return cost;
  }
  if (auto gw = dyn_cast<Conv2DGradWeightOp>(op)) {
    cost.denseFlops[precision] = convFlops(gw.getGrad(), gw.getResult());
    return cost;
  }
  // 2. Pooling: one op per window element, per output (forward) or per
  // incoming gradient element (backward).
  if (isa<MaxPool2DOp, AvgPool2DOp, MaxPool2DGradOp, AvgPool2DGradOp>(op)) {
    auto kernel = op->getAttrOfType<DenseI64ArrayAttr>("kernel").asArrayRef();
    double window = double(kernel[0]) * double(kernel[1]);
    Value per = isa<MaxPool2DOp, AvgPool2DOp>(op) ? op->getResult(0)
                                                  : op->getOperand(1);
    cost.denseFlops[precision] = numElements(per) * window;
    return cost;
  }
  // 3. Communication: the reduction is the network's and the planner's
  // all-reduce term; compressing a bucket costs a few ops per element
  // (error feedback, thresholds or top-k, packing).
  if (auto start = dyn_cast<AllReduceStartOp>(op)) {
    if (start.getScheme() != CompressionScheme::none)
      cost.denseFlops[precision] = 4 * numElements(start.getBucket());
    return cost;
  }
  // 4. The other ds ops, by their per-element weight.
  if (op->getDialect() && isa<DSDialect>(op->getDialect())) {
    PerElement w = elementWeights(op);
    if (w.perResult >= 0) {
      double flops = 0;
      if (w.perResult > 0)
        flops += w.perResult * numElements(op->getResult(0));
      if (w.perInput > 0)
        flops += w.perInput * numElements(op->getOperand(0));
      cost.denseFlops[precision] = flops;
      return cost;
    }
  }
  // 5. linalg: the body's arithmetic times the iteration space.
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    cost.denseFlops[precision] = linalgFlops(linalgOp);
    return cost;
  }
  // 6. Scalar and elementwise arith / math; tensor ops move data only.
  if (isa_and_nonnull<arith::ArithDialect, math::MathDialect>(
          op->getDialect())) {
    double n = op->getNumResults() ? numElements(op->getResult(0)) : 0;
    cost.denseFlops[precision] = scalarWeight(op) * n;
    return cost;
  }
  if (isa_and_nonnull<tensor::TensorDialect>(op->getDialect()) ||
      op->hasTrait<mlir::OpTrait::IsTerminator>() || isa<func::CallOp>(op))
    return cost;
  // Ops with regions are costed through the ops they hold (whoever walks
  // the step visits those).
  if (op->getNumRegions() > 0) {
    cost.bytesMoved = 0;
    return cost;
  }
  // 7. Unknown: one FLOP per result element.
  double n = 0;
  for (Value v : op->getResults())
    n += numElements(v);
  cost.denseFlops[precision] = n;
  return cost;
}

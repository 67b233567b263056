//===- Sparsity.h - Block sparsity shared by its passes ---------*- C++ -*-===//
//
// What ds-sparsify-matmul, ds-update-sparsity-masks and ds-insert-optimizer
// share about dynamic block sparsity:
//  - SparsityConfig: the settings, recorded by ds-sparsify-matmul in the
//    module attribute `ds.sparsity` (per step function) for the later pass
//    and the report;
//  - the schedule as scalar IR on the `iteration` counter;
//  - the block arithmetic as ds ops: block scores, a mask broadcast to its
//    weight, counting active blocks.
// Internal to lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_TRANSFORMS_SPARSITY_SPARSITY_H
#define DS_LIB_TRANSFORMS_SPARSITY_SPARSITY_H

#include "ds/Dialect/DS/Utils/ScalarBuilder.h"
#include "ds/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <string>

namespace mlir::ds::sparsity {

/// The state kind of a weight's block mask: `sparsity.mask@<param>`.
inline constexpr llvm::StringLiteral kMaskStateKind = "sparsity.mask";
/// The metric that is 1 on mask-update iterations (the optimizer skips).
inline constexpr llvm::StringLiteral kMaskUpdateMetric = "sparsity.mask_update";
/// The scheduled sparsity s(t) of the step (f64).
inline constexpr llvm::StringLiteral kScheduledMetric = "sparsity.scheduled";
/// Per-weight metrics: `<name>@<param>`.
inline constexpr llvm::StringLiteral kSparsityMetric = "sparsity";
inline constexpr llvm::StringLiteral kDroppedMetric = "sparsity.dropped";
inline constexpr llvm::StringLiteral kGrownMetric = "sparsity.grown";

/// ds-sparsify-matmul's settings, as the pass options give them.
struct SparsityConfig {
  int64_t block = 8;
  SparsitySchedule schedule = SparsitySchedule::Cosine;
  double initial = 0.8, final = 0.98, hold = 0.3;
  int64_t totalSteps = 0, updateEvery = 100;
  bool regrow = false;
  double dropFraction = 0.3, regrowEnd = 0.75;
  BlockScore score = BlockScore::L1;
  SparsityDistribution distribution = SparsityDistribution::Uniform;

  static SparsityConfig fromOptions(const SparsifyMatMulPassOptions &o);
  /// Checks the settings; fails with "in option 'O' of pass
  /// 'ds-sparsify-matmul': why" in `error`.
  LogicalResult validate(std::string &error) const;

  /// The dictionary recorded in the module's `ds.sparsity`.
  DictionaryAttr toAttr(MLIRContext *ctx) const;
  /// Reads it back; fails with a message in `error`.
  static FailureOr<SparsityConfig> fromAttr(DictionaryAttr attr,
                                            std::string &error);
  /// "cosine 0.8 -> 0.98 hold 0.3 ..." for messages and reports.
  std::string describe() const;
};

/// Records `config` for `func` in its module's `ds.sparsity`.
void recordConfig(FunctionOpInterface func, const SparsityConfig &config);
/// The config recorded for `func`; a located error when there is none.
FailureOr<SparsityConfig> lookupConfig(FunctionOpInterface func);

/// The scheduled sparsity at iteration `t` (an f64 scalar): see
/// ds-sparsify-matmul's description.
Value scheduledSparsity(ScalarBuilder &s, const SparsityConfig &c, Value t);
/// Whether regrowth happens at iteration `t` (i1): `regrow` and
/// 0 < t < regrow-end T.
Value isRegrowing(ScalarBuilder &s, const SparsityConfig &c, Value t);
/// RigL's drop fraction at iteration `t` (f64): drop-fraction (1 +
/// cos(pi t / (regrow-end T))) / 2.
Value dropFraction(ScalarBuilder &s, const SparsityConfig &c, Value t);
/// Whether iteration `ti` (i64) updates the masks (i1): a multiple of
/// update-every and iteration 0, a regrowth, or a scheduled sparsity that
/// moved since the previous update.
Value isMaskUpdate(ScalarBuilder &s, const SparsityConfig &c, Value ti);

/// The block scores of the 2-D float tensor `x` ([R, C] -> [R/b, C/b]):
/// the sum of |x| (L1) or x^2 (L2) over each block.
Value blockScores(OpBuilder &b, Location loc, Value x, int64_t block,
                  BlockScore score);
/// `x` (2-D) where its block is active in `mask`, exactly +0 elsewhere.
Value applyMask(OpBuilder &b, Location loc, Value x, Value mask, int64_t block);
/// The rank-0 i8 tensor 0, to compare masks with (`ds.compare` broadcasts
/// it).
Value maskZero(OpBuilder &b, Location loc);
/// Whether each block of `mask` is active (nonzero), as i1.
Value isActive(OpBuilder &b, Location loc, Value mask);
/// The number of active blocks of `mask` as a rank-0 f32 tensor.
Value countActive(OpBuilder &b, Location loc, Value mask);

} // namespace mlir::ds::sparsity

#endif // DS_LIB_TRANSFORMS_SPARSITY_SPARSITY_H

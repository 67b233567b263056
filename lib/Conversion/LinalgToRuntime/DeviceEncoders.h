//===- DeviceEncoders.h - Compressed buckets encoded in the step -*- C++
//-*-===//
//
// On CUDA a compressed bucket used to cross PCIe whole, with its residual,
// for the host to encode, and its new residual came back: 12 bytes an
// element, and the host's selections had to keep up with the GPU's
// backward. Here the step encodes it on the device instead, as linalg on
// tensors that ds-gpu-pipeline makes kernels, and only what the payload
// needs goes to the host, which writes the payload from it and exchanges
// it as before (lib/Runtime/CommCuda.cpp). The residual never leaves the
// device.
//
// - Three tiers (ThreeTierOnDevice.cpp): the thresholds by radix select,
//   each element's tier and value and the new residual, as one 16-bit
//   code per element and three scalars.
// - Top-k (TopKOnDevice.cpp): DGC's sampled threshold, the exact
//   re-selection, and the selected elements compacted on the device into
//   at most 2k slots, with their count: the runtime copies only the used
//   slots to the host, 8 bytes each (DGC's 0.1 %: about 0.008 bytes an
//   element). Its mean comes back sparse too (DSToRuntime.cpp,
//   lowerTopKWait).
//
// Each computes the runtime's encoder's f32 operations in its order, so
// the payload and the residual are the host encoder's bit for bit where
// the device rounds as the host does (the emulated runs and
// DeviceEncodersTest compare them).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTORUNTIME_DEVICEENCODERS_H
#define DS_LIB_CONVERSION_LINALGTORUNTIME_DEVICEENCODERS_H

#include "mlir/IR/Builders.h"

#include <optional>
#include <utility>

namespace mlir::ds {

//===----------------------------------------------------------------------===//
// Shared
//===----------------------------------------------------------------------===//

/// v = grad + residual (both f32 [n]) and its probe, a rank-0 f32 tensor
/// that is NaN exactly when an element of v is not finite.
std::pair<Value, Value> buildFeedbackSum(OpBuilder &b, Location loc, Value grad,
                                         Value residual);

/// np.quantile(a, q, method="lower") of the n values `a` (1-D f32, n >= 1)
/// as a rank-0 f32 tensor: the k-th smallest for k = floor((n - 1) q), as
/// the runtime's lowerQuantile.
Value buildLowerQuantile(OpBuilder &b, Location loc, Value a, double q);

//===----------------------------------------------------------------------===//
// Three tiers
//===----------------------------------------------------------------------===//

/// The three-tier thresholds' parameters, when the step fixes them.
struct ThreeTierParams {
  bool fixed;       // thresholds given (p0 = 1), else quantiles (p0 = 0)
  double low, high; // p1, p2
};

/// `params` (ds.all_reduce_start's [mode, low, high]) when it is a
/// constant the runtime would accept; nothing otherwise (the host then
/// encodes, and names what is wrong).
std::optional<ThreeTierParams> constantThreeTierParams(Value params);

/// What the device encoder computes for the runtime.
struct DeviceThreeTier {
  Value codes;    // [n] i16: DSRT_THREE_TIER_CODE_* (ds_runtime.h)
  Value scalars;  // [3] f32: s8, t16, the probe (NaN: a non-finite bucket)
  Value residual; // [n] f32: the new residual (the old one when not finite)
};

/// Encodes the f32 bucket `grad` plus `residual` (both [n], n >= 1) as the
/// runtime's three-tier encoder does (DSRT_COMPRESS_THREE_TIER), in linalg
/// on tensors.
DeviceThreeTier buildThreeTierOnDevice(OpBuilder &b, Location loc, Value grad,
                                       Value residual,
                                       const ThreeTierParams &params);

//===----------------------------------------------------------------------===//
// Top-k
//===----------------------------------------------------------------------===//

/// The fraction of a top-k bucket sent (p0): a constant, or (DGC's
/// warm-up) a value the step computes, one of several constants.
struct TopKRatio {
  Value params;    // tensor<3xf64>: p0 first; read when min < max
  double min, max; // the values p0 can take lie in [min, max]
  bool fixed() const { return min == max; }
};

/// `params` ([p0, 0, 0]) when each p0 it can hold is one the runtime
/// accepts (in [0, 1]): a constant, or tensor.from_elements of a value
/// that arith.select chooses among constants (DGC's warm-up); nothing
/// otherwise (the host then encodes, and names what is wrong).
std::optional<TopKRatio> topKRatio(Value params);

/// How many elements a top-k payload of a bucket of n sends at most: k =
/// ceil(ratio n) after the exact re-selection, else up to 2k (the
/// runtime's encodeTopK), so min(n, 2k); at least one slot.
int64_t topKSlots(int64_t n, double ratio);

/// What the device encoder computes for the runtime.
struct DeviceTopK {
  Value indices;  // [slots] i32: the sent elements' indices, ascending,
                  // then -1 (DSRT_TOPK_SLOT_EMPTY)
  Value values;   // [slots] f32: their values, then 0
  Value count;    // [1] i32: the slots used (the runtime copies only them)
  Value scalars;  // [1] f32: the probe (NaN: a non-finite bucket)
  Value residual; // [n] f32: the new residual (the old one when not finite)
};

/// Encodes the f32 bucket `grad` plus `residual` (both [n], 1 <= n <
/// 2^31) as the runtime's top-k encoder does (DSRT_COMPRESS_TOPK with
/// p0 = ratio), in linalg on tensors, into topKSlots(n, ratio.max) slots.
DeviceTopK buildTopKOnDevice(OpBuilder &b, Location loc, Value grad,
                             Value residual, const TopKRatio &ratio);

} // namespace mlir::ds

#endif // DS_LIB_CONVERSION_LINALGTORUNTIME_DEVICEENCODERS_H

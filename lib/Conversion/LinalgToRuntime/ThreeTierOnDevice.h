//===- ThreeTierOnDevice.h - The three-tier encoder in the step -*- C++ -*-===//
//
// On CUDA a three-tier bucket used to cross PCIe whole, with its residual,
// for the host to encode, and its new residual came back: 12 bytes an
// element, and the host's quantile selection had to keep up with the
// GPU's backward. Here the step encodes it on the device instead (the
// thresholds by radix select, the tiers, the 8-bit and f16 values, the
// new residual) into one 16-bit code per element, and only the codes and
// three scalars go to the host, which writes the payload from them and
// exchanges it as before (lib/Runtime/CommCuda.cpp). The residual never
// leaves the device.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_CONVERSION_LINALGTORUNTIME_THREETIERONDEVICE_H
#define DS_LIB_CONVERSION_LINALGTORUNTIME_THREETIERONDEVICE_H

#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::ds {

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

} // namespace mlir::ds

#endif // DS_LIB_CONVERSION_LINALGTORUNTIME_THREETIERONDEVICE_H

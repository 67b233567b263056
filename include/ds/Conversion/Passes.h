//===- Passes.h - ds lowering passes ---------------------------*- C++ -*-===//

#ifndef DS_CONVERSION_PASSES_H
#define DS_CONVERSION_PASSES_H

#include "ds/Conversion/DSToLinalg.h"

#include "mlir/Pass/Pass.h"

namespace mlir::gpu {
class GPUModuleOp;
} // namespace mlir::gpu

namespace mlir::ds {

/// 32-bit kernel indices stay below this: 2^31 less a grid-stride loop's
/// reach past the last element (16 elements a thread times at most 2^23
/// threads; ds-gpu-pipeline keeps max-blocks x block-size within that).
constexpr int64_t kIndex32Limit = (int64_t(1) << 31) - (int64_t(1) << 27);

/// Whether every index the kernels of `module` can form is within
/// (-limit, limit): its memrefs static with every addressed element below
/// `limit`, its index constants within it, and no kernel taking an index
/// argument (ds-convert-kernels-to-nvvm{index32}).
bool kernelsFitIn32BitIndices(gpu::GPUModuleOp module, int64_t limit);

#define GEN_PASS_DECL
#include "ds/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Conversion/Passes.h.inc"

} // namespace mlir::ds

#endif // DS_CONVERSION_PASSES_H

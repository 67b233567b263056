//===- QuantizedExport.h - The int8 model ds-run exports --------*- C++ -*-===//
//
// What `ds-run --export-quantized DIR` writes: the trained integer weights,
// their scales and zero points and the activations' quantization
// parameters as .npy files, every other parameter in f32, and a JSON index
// (quantized.json) keyed by the layer names with the attribute names of
// torch.ao's reference quantized modules, which ds_torch.load_quantized
// turns into a torch.ao model.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_QUANTIZEDEXPORT_H
#define DS_RUNNER_QUANTIZEDEXPORT_H

#include "ds/Runner/Npy.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace ds::runner {

/// One value the integer inference copy quantizes, as --export-quantized
/// writes it: its grid and where its parameters are kept.
struct QuantizedValue {
  /// The weight parameter of the layer ("fc1.weight").
  std::string layer;
  /// The layer's weight, or else its activation input.
  bool weight = false;
  /// State keys of the scale and zero point (qat.*.scale@<layer>, ...).
  std::string scaleKey, zeroPointKey;
  /// The grid [qmin, qmax] (as the fake-quantizer has it, unshifted).
  int64_t qmin = 0, qmax = 0;
  /// Per channel along this axis; per tensor when unset.
  std::optional<int64_t> axis;
  /// Weights: the state key of the prepared int8 indices.
  std::string int8Key;
  /// Weights: stored [out, in] (the layer multiplies by its transpose, as
  /// nn.Linear); false for a [in, out] weight.
  bool transposed = true;
};

/// The values the integer inference step `integer` (after
/// ds-convert-fake-quant) and its weight preparation `weights` (after
/// splitWeightPreparation; may be null) quantize, whose scales and zero
/// points are state arguments and whose grids are constant: every layer's
/// weight, and per layer the activation it reads.
std::vector<QuantizedValue>
describeQuantized(mlir::FunctionOpInterface integer,
                  mlir::FunctionOpInterface weights);

/// The index file of an export directory.
inline constexpr const char *kQuantizedIndexFile = "quantized.json";

/// Writes an export directory (see the file comment). `lookup` returns the
/// tensor of a state key, of a parameter name, or of a prepared int8 weight
/// (QuantizedValue::int8Key), or null; `params` are the model's parameters
/// and `buffers` its other forward state (batch-norm running statistics),
/// name and value; `left` lists the layers the integer graph left
/// fake-quantized in f32. `info` is copied into the index. The directory is
/// assembled beside `dir` and swapped into place, so `dir` is never
/// half-written; an existing `dir` must be empty or an earlier export.
llvm::Error writeQuantizedExport(
    llvm::StringRef dir, const std::vector<QuantizedValue> &values,
    llvm::function_ref<const HostTensor *(llvm::StringRef key)> lookup,
    llvm::ArrayRef<std::pair<std::string, const HostTensor *>> params,
    llvm::ArrayRef<std::pair<std::string, const HostTensor *>> buffers,
    llvm::ArrayRef<std::string> left, llvm::json::Object info);

} // namespace ds::runner

#endif // DS_RUNNER_QUANTIZEDEXPORT_H

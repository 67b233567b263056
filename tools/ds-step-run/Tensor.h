//===- Tensor.h - Host tensors and .npy files for ds-step-run --*- C++ -*-===//
//
// ds-step-run depends on libdsrt only (no MLIR, no LLVM), so it has its own
// small tensor and .npy reader/writer. The dtypes and their .npy
// descriptors are those of ds-run's (lib/Runner/Npy.cpp): bf16 is stored as
// its raw bits, '<u2'.
//
//===----------------------------------------------------------------------===//

#ifndef DS_STEP_RUN_TENSOR_H
#define DS_STEP_RUN_TENSOR_H

#include <cstdint>
#include <string>
#include <vector>

namespace ds::steprun {

struct Tensor {
  std::string dtype; ///< "f32", "bf16", "i64", ... (step.json's names)
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numElements() const;
};

/// Bytes per element of a dtype, 0 when unknown.
size_t elementSize(const std::string &dtype);
/// "[32, 16]".
std::string formatShape(const std::vector<int64_t> &shape);
/// "f32 [32, 16]".
std::string describe(const Tensor &t);

/// Reads a little-endian, C-ordered .npy file; the error names the file.
bool readNpy(const std::string &path, Tensor &out, std::string &error);
/// Writes `t` as .npy (to a temporary file renamed into place).
bool writeNpy(const std::string &path, const Tensor &t, std::string &error);

/// The element at `i` as a double (floating-point and integer dtypes).
double elementAsDouble(const Tensor &t, int64_t i);

} // namespace ds::steprun

#endif // DS_STEP_RUN_TENSOR_H

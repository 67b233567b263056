//===- Npy.h - Host tensors and .npy files ----------------------*- C++ -*-===//
//
// The runner's host-side tensor: a dtype, a shape and a flat byte buffer in C
// (row-major) order. Parameters, optimizer state, batches and checkpoints are
// all HostTensors; the element types are the ones a training step's signature
// can use. Tensors travel to and from disk as NumPy .npy files (format v1.0,
// v2.0 and v3.0, little-endian, C order), so that data sets and checkpoints
// can be produced and inspected with NumPy directly.
//
// bf16 has no NumPy dtype. It is written with the descriptor '<u2' (the raw
// bit pattern) and read back as bf16 only when the caller says it expects
// bf16; everywhere else '<u2' is rejected.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_NPY_H
#define DS_RUNNER_NPY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds::runner {

/// Element types of host tensors.
enum class DType { F16, BF16, F32, F64, I8, I32, I64, U8, Bool };

/// Size of one element in bytes.
size_t elementSize(DType dtype);

/// MLIR-like name of `dtype`: "f16", "bf16", "f32", "f64", "i8", "i32",
/// "i64", "ui8", "i1".
llvm::StringRef dtypeName(DType dtype);

/// Parses an MLIR-like element type name ("f32", "i64", "bf16", ...). Also
/// accepts "u8" for ui8 and "bool" for i1. Returns std::nullopt otherwise.
std::optional<DType> parseDType(llvm::StringRef name);

/// True for F16, BF16, F32 and F64.
bool isFloat(DType dtype);

/// True for I8, I32, I64, U8 and Bool.
inline bool isInteger(DType dtype) { return !isFloat(dtype); }

/// Product of the dimensions of `shape` (1 for a scalar).
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// Formats a shape as "[32, 16]" ("[]" for a scalar).
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// Converts between IEEE binary16 / bfloat16 bit patterns and float. The
/// narrowing conversions round to nearest even and keep NaN a NaN.
float halfToFloat(uint16_t bits);
uint16_t floatToHalf(float value);
float bf16ToFloat(uint16_t bits);
uint16_t floatToBf16(float value);

/// A dense tensor in host memory, elements in C order.
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  /// A zero-filled tensor of the given type and shape.
  HostTensor(DType dtype, llvm::ArrayRef<int64_t> shape);

  int64_t numElements() const { return runner::numElements(shape); }
  size_t elementSize() const { return runner::elementSize(dtype); }
  size_t sizeInBytes() const { return bytes.size(); }

  /// Typed access to the elements. `T` must have the element's size (use
  /// uint16_t for F16 and BF16, uint8_t or bool for Bool).
  template <typename T> T *data() {
    assert(sizeof(T) == elementSize() && "element type size mismatch");
    return reinterpret_cast<T *>(bytes.data());
  }
  template <typename T> const T *data() const {
    assert(sizeof(T) == elementSize() && "element type size mismatch");
    return reinterpret_cast<const T *>(bytes.data());
  }
  template <typename T> llvm::MutableArrayRef<T> values() {
    return {data<T>(), static_cast<size_t>(numElements())};
  }
  template <typename T> llvm::ArrayRef<T> values() const {
    return {data<T>(), static_cast<size_t>(numElements())};
  }

  /// Element `i` (flat index) converted to double / int64_t, whatever the
  /// dtype.
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  /// Stores `value` into element `i`, converted to the dtype (rounded to
  /// nearest for floats, truncated towards zero for integers, != 0 for
  /// Bool).
  void setDouble(int64_t i, double value);
  void setInt(int64_t i, int64_t value);

  /// Same dtype, shape and bytes.
  bool operator==(const HostTensor &other) const {
    return dtype == other.dtype && shape == other.shape && bytes == other.bytes;
  }
  bool operator!=(const HostTensor &other) const { return !(*this == other); }
};

/// Writes `tensor` as an .npy file (v1.0, or v2.0 when the header does not
/// fit v1.0) to `os`.
void writeNpy(llvm::raw_ostream &os, const HostTensor &tensor);

/// Serialises `tensor` as the bytes of an .npy file (v1.0, or v2.0 when the
/// header does not fit v1.0).
std::string encodeNpy(const HostTensor &tensor);

/// Parses the bytes of an .npy file. `name` prefixes every error message
/// (normally the file's path). When `expected` is set the file's dtype must
/// be that one ("x.npy: expected dtype i64, got f32"); it is also the only
/// way to read bf16 (stored as '<u2').
llvm::Expected<HostTensor> decodeNpy(llvm::StringRef contents,
                                     llvm::StringRef name,
                                     std::optional<DType> expected = {});

/// Reads an .npy file; see decodeNpy.
llvm::Expected<HostTensor> readNpy(llvm::StringRef path,
                                   std::optional<DType> expected = {});

/// Writes `tensor` to `path` through a temporary file in the same directory
/// and a rename, so `path` never holds a partially written file.
llvm::Error writeNpyAtomic(llvm::StringRef path, const HostTensor &tensor);

/// Checks that `tensor` has the given dtype and shape (a negative expected
/// dimension matches any size). The error reads "<what>: expected shape
/// [32, 16] (f32), got [32, 15] (f32)".
llvm::Error checkTensor(const HostTensor &tensor, DType dtype,
                        llvm::ArrayRef<int64_t> shape, llvm::StringRef what);

} // namespace ds::runner

#endif // DS_RUNNER_NPY_H

//===- Npy.cpp - Host tensors and .npy files ------------------------------===//
//
// Implements HostTensor's element access, the f16/bf16 conversions, and the
// .npy reader and writer. The reader is strict: anything this runner cannot
// represent exactly (big-endian data, Fortran order, structured or unknown
// dtypes, a short or overlong data section) is an error that names the file
// and the problem, never a silent reinterpretation. The writer produces what
// numpy.save produces (v1.0, header padded to 64 bytes), falling back to
// v2.0 for headers longer than 64 KiB.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/Npy.h"
#include "ds/Runner/Report.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>

using namespace ds::runner;
using llvm::ArrayRef;
using llvm::Expected;
using llvm::StringRef;

//===----------------------------------------------------------------------===//
// DType
//===----------------------------------------------------------------------===//

size_t ds::runner::elementSize(DType dtype) {
  switch (dtype) {
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  llvm_unreachable("unknown dtype");
}

StringRef ds::runner::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I8:
    return "i8";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::U8:
    return "ui8";
  case DType::Bool:
    return "i1";
  }
  llvm_unreachable("unknown dtype");
}

std::optional<DType> ds::runner::parseDType(StringRef name) {
  return llvm::StringSwitch<std::optional<DType>>(name)
      .Case("f16", DType::F16)
      .Case("bf16", DType::BF16)
      .Case("f32", DType::F32)
      .Case("f64", DType::F64)
      .Case("i8", DType::I8)
      .Case("i32", DType::I32)
      .Case("i64", DType::I64)
      .Cases({"ui8", "u8"}, DType::U8)
      .Cases({"i1", "bool"}, DType::Bool)
      .Default(std::nullopt);
}

bool ds::runner::isFloat(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 ||
         dtype == DType::F64;
}

int64_t ds::runner::numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string ds::runner::formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  return s + "]";
}

//===----------------------------------------------------------------------===//
// f16 / bf16
//===----------------------------------------------------------------------===//

static uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

static float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float ds::runner::halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    float mag = std::ldexp(float(mant), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31)
    return bitsFloat(sign | 0x7f800000u | (mant << 13));
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t ds::runner::floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = (x >> 16) & 0x8000;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) // Inf stays Inf, NaN stays a (quiet) NaN.
    return sign | 0x7c00 | (x > 0x7f800000u ? 0x200 | ((x >> 13) & 0x3ff) : 0);
  if (x >= 0x477ff000u) // >= 65520 rounds to Inf.
    return sign | 0x7c00;
  if (x < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is the subnormal
    // round(|f| * 2^24), which may round up to the smallest normal (0x400).
    float scaled = bitsFloat(x) * 16777216.0f;
    return sign | uint16_t(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent (-112 << 23) and round to nearest even on
  // the 13 dropped mantissa bits; a carry propagates into the exponent.
  uint32_t odd = (x >> 13) & 1;
  x += 0xc8000fffu + odd;
  return sign | uint16_t(x >> 13);
}

float ds::runner::bf16ToFloat(uint16_t bits) {
  return bitsFloat(uint32_t(bits) << 16);
}

uint16_t ds::runner::floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet, keep the sign.
    return uint16_t((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

//===----------------------------------------------------------------------===//
// HostTensor
//===----------------------------------------------------------------------===//

HostTensor::HostTensor(DType dtype, ArrayRef<int64_t> shape)
    : dtype(dtype), shape(shape.begin(), shape.end()),
      bytes(size_t(runner::numElements(shape)) * runner::elementSize(dtype)) {
  assert(llvm::all_of(shape, [](int64_t d) { return d >= 0; }) &&
         "negative dimension");
}

double HostTensor::getDouble(int64_t i) const {
  switch (dtype) {
  case DType::F16:
    return halfToFloat(data<uint16_t>()[i]);
  case DType::BF16:
    return bf16ToFloat(data<uint16_t>()[i]);
  case DType::F32:
    return data<float>()[i];
  case DType::F64:
    return data<double>()[i];
  default:
    return double(getInt(i));
  }
}

int64_t HostTensor::getInt(int64_t i) const {
  switch (dtype) {
  case DType::I8:
    return data<int8_t>()[i];
  case DType::I32:
    return data<int32_t>()[i];
  case DType::I64:
    return data<int64_t>()[i];
  case DType::U8:
    return data<uint8_t>()[i];
  case DType::Bool:
    return data<uint8_t>()[i] != 0;
  default:
    return int64_t(getDouble(i));
  }
}

void HostTensor::setDouble(int64_t i, double value) {
  switch (dtype) {
  case DType::F16:
    data<uint16_t>()[i] = floatToHalf(float(value));
    return;
  case DType::BF16:
    data<uint16_t>()[i] = floatToBf16(float(value));
    return;
  case DType::F32:
    data<float>()[i] = float(value);
    return;
  case DType::F64:
    data<double>()[i] = value;
    return;
  case DType::Bool:
    data<uint8_t>()[i] = value != 0.0;
    return;
  default:
    setInt(i, int64_t(value));
    return;
  }
}

void HostTensor::setInt(int64_t i, int64_t value) {
  switch (dtype) {
  case DType::I8:
    data<int8_t>()[i] = int8_t(value);
    return;
  case DType::I32:
    data<int32_t>()[i] = int32_t(value);
    return;
  case DType::I64:
    data<int64_t>()[i] = value;
    return;
  case DType::U8:
    data<uint8_t>()[i] = uint8_t(value);
    return;
  case DType::Bool:
    data<uint8_t>()[i] = value != 0;
    return;
  default:
    setDouble(i, double(value));
    return;
  }
}

//===----------------------------------------------------------------------===//
// .npy encoding
//===----------------------------------------------------------------------===//

/// The numpy descriptor this runner writes for `dtype`.
static StringRef npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return "<f2";
  case DType::BF16:
    return "<u2"; // Raw bit pattern; see the file comment of Npy.h.
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::I8:
    return "|i1";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  case DType::U8:
    return "|u1";
  case DType::Bool:
    return "|b1";
  }
  llvm_unreachable("unknown dtype");
}

static constexpr char kMagic[] = "\x93NUMPY";
static constexpr size_t kMagicSize = 6;

/// Writes the preamble and header of an .npy file for `tensor`.
static void writeNpyHeader(llvm::raw_ostream &os, const HostTensor &tensor) {
  std::string dict = "{'descr': '" + npyDescr(tensor.dtype).str() +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    dict += std::to_string(tensor.shape[i]) + ", ";
  if (tensor.shape.size() > 1)
    dict.resize(dict.size() - 2); // (3, 4) but (3,) and ().
  else if (tensor.shape.size() == 1)
    dict.pop_back();
  dict += "), }";

  // numpy pads the header with spaces and a final '\n' so that the data
  // starts at a multiple of 64 bytes.
  auto padded = [&](size_t preamble) {
    size_t total = preamble + dict.size() + 1;
    return dict.size() + 1 + (64 - total % 64) % 64;
  };
  bool v1 = padded(10) <= 0xffff;
  size_t headerLen = padded(v1 ? 10 : 12);
  os.write(kMagic, kMagicSize);
  os << char(v1 ? 1 : 2) << char(0);
  for (unsigned b = 0; b < (v1 ? 2u : 4u); ++b)
    os << char((headerLen >> (8 * b)) & 0xff);
  os << dict;
  os.indent(headerLen - dict.size() - 1);
  os << '\n';
}

void ds::runner::writeNpy(llvm::raw_ostream &os, const HostTensor &tensor) {
  writeNpyHeader(os, tensor);
  os.write(reinterpret_cast<const char *>(tensor.bytes.data()),
           tensor.bytes.size());
}

std::string ds::runner::encodeNpy(const HostTensor &tensor) {
  std::string out;
  llvm::raw_string_ostream os(out);
  writeNpy(os, tensor);
  return out;
}

llvm::Error ds::runner::writeNpyAtomic(StringRef path,
                                       const HostTensor &tensor) {
  // Stream header and data straight from the tensor: no second copy of a
  // possibly large buffer.
  return writeFileAtomic(path,
                         [&](llvm::raw_ostream &os) { writeNpy(os, tensor); });
}

//===----------------------------------------------------------------------===//
// .npy decoding
//===----------------------------------------------------------------------===//

namespace {
/// The three fields of an .npy header.
struct NpyHeader {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// Parses the Python dict literal of an .npy header, e.g.
/// "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }".
class HeaderParser {
public:
  explicit HeaderParser(StringRef text) : text(text) {}

  /// Returns an empty string on success, else what is wrong.
  std::string parse(NpyHeader &header) {
    bool seenDescr = false, seenOrder = false, seenShape = false;
    skipSpace();
    if (!consume('{'))
      return "expected '{'";
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return "expected a quoted key";
      skipSpace();
      if (!consume(':'))
        return "expected ':' after '" + key + "'";
      skipSpace();
      if (key == "descr") {
        if (!text.empty() && text.front() == '[')
          return "structured dtypes are not supported";
        if (!parseString(header.descr))
          return "expected a string for 'descr'";
        seenDescr = true;
      } else if (key == "fortran_order") {
        if (text.consume_front("True"))
          header.fortranOrder = true;
        else if (text.consume_front("False"))
          header.fortranOrder = false;
        else
          return "expected True or False for 'fortran_order'";
        seenOrder = true;
      } else if (key == "shape") {
        if (!parseShape(header.shape))
          return "expected a tuple of non-negative integers for 'shape'";
        seenShape = true;
      } else {
        return "unexpected key '" + key + "'";
      }
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (!consume('}'))
        return "expected ',' or '}'";
      break;
    }
    if (!seenDescr || !seenOrder || !seenShape)
      return "missing 'descr', 'fortran_order' or 'shape'";
    return "";
  }

private:
  void skipSpace() { text = text.ltrim(" \t\r\n"); }
  bool consume(char c) { return text.consume_front(StringRef(&c, 1)); }

  bool parseString(std::string &out) {
    if (text.empty() || (text.front() != '\'' && text.front() != '"'))
      return false;
    char quote = text.front();
    size_t end = text.find(quote, 1);
    if (end == StringRef::npos)
      return false;
    out = text.slice(1, end).str();
    text = text.drop_front(end + 1);
    return true;
  }

  bool parseShape(std::vector<int64_t> &shape) {
    if (!consume('('))
      return false;
    while (true) {
      skipSpace();
      if (consume(')'))
        return true;
      size_t digits = 0;
      while (digits < text.size() && llvm::isDigit(text[digits]))
        ++digits;
      // Python 2 era files may write dimensions as longs ("3L").
      int64_t dim;
      if (digits == 0 || digits > 18 ||
          text.take_front(digits).getAsInteger(10, dim))
        return false;
      shape.push_back(dim);
      text = text.drop_front(digits);
      consume('L');
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      return consume(')');
    }
  }

  StringRef text;
};
} // namespace

static llvm::Error fileError(StringRef name, const llvm::Twine &what) {
  return llvm::createStringError(name + ": " + what);
}

/// Maps a numpy descriptor to a dtype; `expected` enables '<u2' as bf16.
static Expected<DType> dtypeFromDescr(StringRef descr, StringRef name,
                                      std::optional<DType> expected) {
  if (descr.size() < 2)
    return fileError(name, "unsupported dtype '" + descr + "'");
  char order = descr.front();
  StringRef kind = descr.drop_front();
  // One-byte types have no byte order; numpy writes '|'.
  if (kind == "i1" || kind == "u1" || kind == "b1")
    return kind == "i1" ? DType::I8 : kind == "u1" ? DType::U8 : DType::Bool;
  if (order == '>')
    return fileError(name, "big-endian data ('" + descr +
                               "') is not supported; convert with "
                               "arr.astype(arr.dtype.newbyteorder('<'))");
  if (order != '<' && order != '=')
    return fileError(name, "unsupported dtype '" + descr + "'");
  if (kind == "f2")
    return DType::F16;
  if (kind == "f4")
    return DType::F32;
  if (kind == "f8")
    return DType::F64;
  if (kind == "i4")
    return DType::I32;
  if (kind == "i8")
    return DType::I64;
  if (kind == "u2" || kind == "V2") {
    if (expected == DType::BF16)
      return DType::BF16;
    return fileError(name, "unsupported dtype '" + descr +
                               "' (16-bit data is read as bf16 only where "
                               "bf16 is expected)");
  }
  return fileError(name, "unsupported dtype '" + descr + "'");
}

Expected<HostTensor> ds::runner::decodeNpy(StringRef contents, StringRef name,
                                           std::optional<DType> expected) {
  if (contents.size() < kMagicSize + 4 ||
      contents.take_front(kMagicSize) != StringRef(kMagic, kMagicSize))
    return fileError(name, "not an .npy file (bad magic)");
  auto byteAt = [&](size_t i) { return uint32_t(uint8_t(contents[i])); };
  unsigned major = byteAt(6), minor = byteAt(7);
  if (major < 1 || major > 3)
    return fileError(name, "unsupported .npy format version " +
                               llvm::Twine(major) + "." + llvm::Twine(minor));
  size_t preamble = major == 1 ? 10 : 12;
  if (contents.size() < preamble)
    return fileError(name, "truncated header");
  size_t headerLen = byteAt(8) | byteAt(9) << 8;
  if (major > 1)
    headerLen |= byteAt(10) << 16 | byteAt(11) << 24;
  if (contents.size() < preamble + headerLen)
    return fileError(name, "truncated header (" + llvm::Twine(headerLen) +
                               " header bytes announced, file has " +
                               llvm::Twine(contents.size()) + " bytes)");

  NpyHeader header;
  std::string problem =
      HeaderParser(contents.substr(preamble, headerLen)).parse(header);
  if (!problem.empty())
    return fileError(name, "malformed .npy header: " + problem);
  if (header.fortranOrder)
    return fileError(name, "Fortran-order arrays are not supported; save "
                           "numpy.ascontiguousarray(arr) instead");
  Expected<DType> dtype = dtypeFromDescr(header.descr, name, expected);
  if (!dtype)
    return dtype.takeError();
  if (expected && *expected != *dtype)
    return fileError(name, "expected dtype " + dtypeName(*expected) + ", got " +
                               dtypeName(*dtype));

  // Size of the data section, guarding against overflow from a hostile
  // header.
  uint64_t count = elementSize(*dtype);
  for (int64_t dim : header.shape)
    if (__builtin_mul_overflow(count, uint64_t(dim), &count))
      return fileError(name, "malformed .npy header: shape " +
                                 formatShape(header.shape) + " is too large");
  uint64_t available = contents.size() - preamble - headerLen;
  if (available < count)
    return fileError(
        name, "truncated data: shape " + formatShape(header.shape) + " (" +
                  dtypeName(*dtype) + ") needs " + llvm::Twine(count) +
                  " bytes, file has " + llvm::Twine(available));
  if (available > count)
    return fileError(name, "unexpected " + llvm::Twine(available - count) +
                               " bytes after the data of shape " +
                               formatShape(header.shape) + " (" +
                               dtypeName(*dtype) + ")");

  HostTensor tensor;
  tensor.dtype = *dtype;
  tensor.shape = std::move(header.shape);
  const uint8_t *begin =
      reinterpret_cast<const uint8_t *>(contents.data()) + preamble + headerLen;
  tensor.bytes.assign(begin, begin + count);
  return tensor;
}

Expected<HostTensor> ds::runner::readNpy(StringRef path,
                                         std::optional<DType> expected) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fileError(path, "cannot read: " + buffer.getError().message());
  return decodeNpy((*buffer)->getBuffer(), path, expected);
}

llvm::Error ds::runner::checkTensor(const HostTensor &tensor, DType dtype,
                                    ArrayRef<int64_t> shape, StringRef what) {
  bool ok = tensor.dtype == dtype && tensor.shape.size() == shape.size();
  for (size_t i = 0; ok && i < shape.size(); ++i)
    ok = shape[i] < 0 || shape[i] == tensor.shape[i];
  if (ok)
    return llvm::Error::success();
  return llvm::createStringError(what + ": expected shape " +
                                 formatShape(shape) + " (" + dtypeName(dtype) +
                                 "), got " + formatShape(tensor.shape) + " (" +
                                 dtypeName(tensor.dtype) + ")");
}

//===- Tensor.cpp - Host tensors and .npy files for ds-step-run -----------===//

#include "Tensor.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace ds::steprun;

namespace {
struct DTypeInfo {
  const char *name, *descr;
  size_t size;
};
// ds-run's dtype names (dtypeName in lib/Runner/Npy.cpp, as step.json has
// them) and the descriptors it writes.
constexpr DTypeInfo kDTypes[] = {
    {"f16", "<f2", 2}, {"bf16", "<u2", 2}, {"f32", "<f4", 4},
    {"f64", "<f8", 8}, {"i8", "|i1", 1},   {"i32", "<i4", 4},
    {"i64", "<i8", 8}, {"ui8", "|u1", 1},  {"i1", "|b1", 1},
};

const DTypeInfo *lookup(const std::string &dtype) {
  for (const DTypeInfo &d : kDTypes)
    if (dtype == d.name)
      return &d;
  return nullptr;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ff, bits;
  if (exp == 0x1f)
    bits = sign | 0x7f800000u | (mant << 13);
  else if (exp != 0)
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  else if (mant == 0)
    bits = sign;
  else { // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while (!(mant & 0x400));
    bits = sign | uint32_t(112 - e) << 23 | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
} // namespace

int64_t Tensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

size_t ds::steprun::elementSize(const std::string &dtype) {
  const DTypeInfo *d = lookup(dtype);
  return d ? d->size : 0;
}

std::string ds::steprun::formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string ds::steprun::describe(const Tensor &t) {
  return t.dtype + " " + formatShape(t.shape);
}

double ds::steprun::elementAsDouble(const Tensor &t, int64_t i) {
  const uint8_t *p = t.bytes.data() + i * elementSize(t.dtype);
  auto read = [&](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return double(v);
  };
  if (t.dtype == "f32")
    return read(float());
  if (t.dtype == "f64")
    return read(double());
  if (t.dtype == "f16")
    return halfToFloat(uint16_t(read(uint16_t())));
  if (t.dtype == "bf16") {
    uint32_t bits = uint32_t(uint16_t(read(uint16_t()))) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  if (t.dtype == "i64")
    return read(int64_t());
  if (t.dtype == "i32")
    return read(int32_t());
  if (t.dtype == "i8")
    return read(int8_t());
  return read(uint8_t());
}

bool ds::steprun::readNpy(const std::string &path, Tensor &out,
                          std::string &error) {
  auto fail = [&](const std::string &why) {
    error = path + ": " + why;
    return false;
  };
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail("cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return fail("not a .npy file");
  uint32_t headerLen = 0;
  if (magic[6] == 1) {
    uint8_t len[2];
    in.read(reinterpret_cast<char *>(len), 2);
    headerLen = len[0] | (len[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    uint8_t len[4];
    in.read(reinterpret_cast<char *>(len), 4);
    headerLen =
        len[0] | (len[1] << 8) | (len[2] << 16) | (uint32_t(len[3]) << 24);
  } else {
    return fail("unsupported .npy version " + std::to_string(int(magic[6])));
  }
  std::string header(headerLen, '\0');
  if (!in.read(header.data(), headerLen))
    return fail("truncated header");
  auto field = [&](const std::string &key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos)
      return "";
    size_t colon = header.find(':', k);
    return colon == std::string::npos ? "" : header.substr(colon + 1);
  };
  std::string descr = field("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos)
    return fail("no 'descr' in the header");
  descr = descr.substr(q1 + 1, q2 - q1 - 1);
  std::string order = field("fortran_order");
  if (order.find("True") < order.find(','))
    return fail("Fortran-ordered arrays are not supported");
  std::string shapeText = field("shape");
  size_t open = shapeText.find('('), close = shapeText.find(')');
  if (open == std::string::npos || close == std::string::npos)
    return fail("no 'shape' in the header");
  out.shape.clear();
  std::stringstream dims(shapeText.substr(open + 1, close - open - 1));
  std::string dim;
  while (std::getline(dims, dim, ','))
    if (dim.find_first_not_of(" ") != std::string::npos)
      out.shape.push_back(std::stoll(dim));
  // Accept '=' and '|' for the byte order of one-byte types as NumPy does.
  const DTypeInfo *match = nullptr;
  for (const DTypeInfo &d : kDTypes)
    if (descr == d.descr ||
        (descr.size() == 3 && descr.substr(1) == std::string(d.descr + 1) &&
         (descr[0] == '=' || (descr[0] == '|' && d.size == 1))))
      match = match ? match : &d;
  if (!match)
    return fail("unsupported dtype '" + descr + "'");
  out.dtype = match->name; // '<u2' is bf16's raw bits, as ds-run writes it
  out.bytes.resize(size_t(out.numElements()) * match->size);
  if (!in.read(reinterpret_cast<char *>(out.bytes.data()),
               std::streamsize(out.bytes.size())))
    return fail("truncated data (expected " + std::to_string(out.bytes.size()) +
                " bytes for " + describe(out) + ")");
  return true;
}

bool ds::steprun::writeNpy(const std::string &path, const Tensor &t,
                           std::string &error) {
  const DTypeInfo *d = lookup(t.dtype);
  if (!d) {
    error = path + ": unknown dtype " + t.dtype;
    return false;
  }
  std::string shape = "(";
  for (int64_t s : t.shape)
    shape += std::to_string(s) + ",";
  if (t.shape.size() > 1)
    shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '" + std::string(d->descr) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so that the data starts at a multiple of 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string tmp = path + ".tmp";
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    uint16_t len = uint16_t(header.size());
    os.write("\x93NUMPY\x01\x00", 8);
    char l[2] = {char(len & 0xff), char(len >> 8)};
    os.write(l, 2);
    os << header;
    os.write(reinterpret_cast<const char *>(t.bytes.data()),
             std::streamsize(t.bytes.size()));
    if (!os) {
      error = path + ": write failed";
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = path + ": cannot rename the temporary file";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

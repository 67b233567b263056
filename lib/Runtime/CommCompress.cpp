//===- CommCompress.cpp - Gradient compressors and their payloads ---------===//
//
// The encoders and decoders of compressed gradient all-reduces: the seed's
// three tiers (int8 for the largest magnitudes, f16 for the middle, nothing
// for the rest), DGC's sampled top-k, and the f16/bf16 roundings of DDP's
// compression hooks. A Python reference reimplements every step in NumPy
// and compares decoded values and payload bytes exactly, so each step
// follows ds_runtime.h to the letter: f32 arithmetic, NumPy's "lower"
// quantiles, rint's ties-to-even, and hand-written round-to-nearest-even
// conversions (no dependence on the compiler's _Float16 support). The byte
// format is documented in docs/CompressedPayloads.md; the decoder checks a
// whole payload before adding any of it, since a payload comes from
// another process.
//
//===----------------------------------------------------------------------===//

#include "CommInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace dsrt;
using namespace dsrt::comm;

namespace {

uint32_t bitsOf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}

float floatOf(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

//===----------------------------------------------------------------------===//
// Payload writing and reading (little-endian)
//===----------------------------------------------------------------------===//

void putU8(std::vector<uint8_t> &out, uint8_t v) { out.push_back(v); }

void putU32(std::vector<uint8_t> &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void putF32(std::vector<uint8_t> &out, float v) { putU32(out, bitsOf(v)); }

void putU16(std::vector<uint8_t> &out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}

void putLeb128(std::vector<uint8_t> &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

/// Ascending indices as LEB128 gaps: the first index, then each index minus
/// the previous one minus 1.
void putIndices(std::vector<uint8_t> &out, const std::vector<uint32_t> &idx) {
  uint64_t next = 0;
  for (uint32_t i : idx) {
    putLeb128(out, i - next);
    next = uint64_t(i) + 1;
  }
}

/// A bounds-checked cursor over a payload.
struct Reader {
  const uint8_t *data;
  int64_t size;
  int64_t pos = 0;

  bool has(int64_t bytes) const { return bytes <= size - pos; }
  bool u8(uint8_t &v) {
    if (!has(1))
      return false;
    v = data[pos++];
    return true;
  }
  bool u32(uint32_t &v) {
    if (!has(4))
      return false;
    v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t(data[pos + i]) << (8 * i);
    pos += 4;
    return true;
  }
  bool f32(float &v) {
    uint32_t x;
    if (!u32(x))
      return false;
    v = floatOf(x);
    return true;
  }
  /// A gap of at most 5 bytes (indices are 32-bit).
  bool leb128(uint64_t &v) {
    v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      uint8_t b;
      if (!u8(b))
        return false;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return true;
    }
    return false;
  }
};

Status malformed(const char *what) {
  return DS_ERROR("dsrt: malformed compressed payload: %s", what);
}

/// Reads `count` gaps and calls fn(k, index) for each; checks that every
/// index is below n.
template <typename Fn>
Status readIndices(Reader &r, uint32_t count, int64_t n, Fn &&fn) {
  uint64_t next = 0;
  for (uint32_t k = 0; k < count; ++k) {
    uint64_t gap;
    if (!r.leb128(gap))
      return malformed("truncated or overlong index gap");
    uint64_t index = next + gap;
    if (index >= static_cast<uint64_t>(n))
      return malformed("an index is out of range");
    fn(k, index);
    next = index + 1;
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Three tiers
//===----------------------------------------------------------------------===//

/// The element of rank floor(q * (n - 1)) of `values` in ascending order
/// (NumPy's quantile, method="lower"); reorders `values`.
float lowerQuantile(std::vector<float> &values, double q) {
  int64_t n = values.size();
  int64_t k = static_cast<int64_t>(std::floor(double(n - 1) * q));
  k = std::clamp<int64_t>(k, 0, n - 1);
  std::nth_element(values.begin(), values.begin() + k, values.end());
  return values[k];
}

/// The smallest power of two >= x (1 when x is 0: the middle tier is then
/// empty), at most 2^127 so that it stays finite.
float powerOfTwoAtLeast(float x) {
  if (!(x > 0))
    return 1.0f;
  if (x >= 0x1p127f)
    return 0x1p127f;
  int e = 0;
  float m = std::frexp(x, &e); // x = m * 2^e, m in [0.5, 1)
  return m == 0.5f ? x : std::ldexp(1.0f, e);
}

/// What a three-tier payload holds: each tier's indices (ascending) and
/// values, and the two scales.
struct ThreeTier {
  std::vector<uint32_t> highIdx, midIdx;
  std::vector<int8_t> q;
  std::vector<uint16_t> h;
  float s8 = 0, t16 = 1;

  /// The payload of a bucket of n elements, and its decoded values.
  void write(int64_t n, float *decoded, std::vector<uint8_t> &out) const {
    for (int64_t i = 0; i < n; ++i)
      decoded[i] = 0;
    for (size_t k = 0; k < highIdx.size(); ++k)
      decoded[highIdx[k]] = float(q[k]) * s8;
    for (size_t k = 0; k < midIdx.size(); ++k)
      decoded[midIdx[k]] = fromHalf(h[k]) * t16;
    out.clear();
    putU8(out, DSRT_COMPRESS_THREE_TIER);
    putU32(out, static_cast<uint32_t>(n));
    putU32(out, static_cast<uint32_t>(highIdx.size()));
    putU32(out, static_cast<uint32_t>(midIdx.size()));
    putF32(out, s8);
    putF32(out, t16);
    putIndices(out, highIdx);
    for (int8_t x : q)
      putU8(out, static_cast<uint8_t>(x));
    putIndices(out, midIdx);
    for (uint16_t x : h)
      putU16(out, x);
  }
};

void encodeThreeTier(const float *v, int64_t n, double p0, double p1, double p2,
                     float *decoded, std::vector<uint8_t> &out) {
  float low = 0, high = 0;
  if (p0 == 1) {
    low = static_cast<float>(p1);
    high = static_cast<float>(p2);
  } else if (n > 0) {
    std::vector<float> a(n);
    for (int64_t i = 0; i < n; ++i)
      a[i] = std::fabs(v[i]);
    low = lowerQuantile(a, p1);
    high = lowerQuantile(a, p2);
  }
  ThreeTier t;
  float maxHigh = 0;
  for (int64_t i = 0; i < n; ++i) {
    float a = std::fabs(v[i]);
    if (a > high) {
      t.highIdx.push_back(static_cast<uint32_t>(i));
      maxHigh = std::max(maxHigh, a);
    } else if (a > low) {
      t.midIdx.push_back(static_cast<uint32_t>(i));
    }
  }
  t.s8 = t.highIdx.empty() ? 0.0f : maxHigh / 127.0f;
  t.t16 = powerOfTwoAtLeast(high);
  t.q.resize(t.highIdx.size());
  for (size_t k = 0; k < t.highIdx.size(); ++k) {
    float r = std::nearbyint(v[t.highIdx[k]] / t.s8);
    t.q[k] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
  t.h.resize(t.midIdx.size());
  for (size_t k = 0; k < t.midIdx.size(); ++k)
    t.h[k] = toHalf(v[t.midIdx[k]] / t.t16);
  t.write(n, decoded, out);
}

template <typename Acc> Status decodeThreeTier(Reader &r, int64_t n, Acc *acc) {
  uint32_t nHigh, nMid;
  float s8, t16;
  if (!r.u32(nHigh) || !r.u32(nMid) || !r.f32(s8) || !r.f32(t16))
    return malformed("truncated header");
  if (uint64_t(nHigh) + nMid > static_cast<uint64_t>(n))
    return malformed("more tier elements than elements");
  if (!std::isfinite(s8) || !std::isfinite(t16))
    return malformed("a non-finite scale");
  // First check everything, then add.
  int64_t highAt = r.pos;
  DS_RETURN_IF_ERROR(readIndices(r, nHigh, n, [](uint32_t, uint64_t) {}));
  int64_t qAt = r.pos;
  if (!r.has(nHigh))
    return malformed("truncated 8-bit values");
  for (uint32_t k = 0; k < nHigh; ++k)
    if (static_cast<int8_t>(r.data[qAt + k]) == -128)
      return malformed("an 8-bit value of -128");
  r.pos += nHigh;
  int64_t midAt = r.pos;
  DS_RETURN_IF_ERROR(readIndices(r, nMid, n, [](uint32_t, uint64_t) {}));
  int64_t hAt = r.pos;
  if (!r.has(int64_t(nMid) * 2))
    return malformed("truncated 16-bit values");
  for (uint32_t k = 0; k < nMid; ++k)
    if ((r.data[hAt + 2 * k + 1] & 0x7c) == 0x7c)
      return malformed("a non-finite 16-bit value");
  r.pos += int64_t(nMid) * 2;
  if (r.pos != r.size)
    return malformed("trailing bytes");

  Reader high{r.data, r.size, highAt};
  (void)readIndices(high, nHigh, n, [&](uint32_t k, uint64_t i) {
    acc[i] += float(static_cast<int8_t>(r.data[qAt + k])) * s8;
  });
  Reader mid{r.data, r.size, midAt};
  (void)readIndices(mid, nMid, n, [&](uint32_t k, uint64_t i) {
    uint16_t bits = uint16_t(r.data[hAt + 2 * k]) |
                    uint16_t(uint16_t(r.data[hAt + 2 * k + 1]) << 8);
    acc[i] += fromHalf(bits) * t16;
  });
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Top-k
//===----------------------------------------------------------------------===//

/// What a top-k payload holds: the sent indices (ascending) and values.
struct TopK {
  std::vector<uint32_t> idx;
  std::vector<float> values;

  /// The payload of a bucket of n elements, and its decoded values.
  void write(int64_t n, float *decoded, std::vector<uint8_t> &out) const {
    for (int64_t i = 0; i < n; ++i)
      decoded[i] = 0;
    for (size_t k = 0; k < idx.size(); ++k)
      decoded[idx[k]] = values[k];
    out.clear();
    putU8(out, DSRT_COMPRESS_TOPK);
    putU32(out, static_cast<uint32_t>(n));
    putU32(out, static_cast<uint32_t>(idx.size()));
    putIndices(out, idx);
    for (float x : values)
      putF32(out, x);
  }
};

void encodeTopK(const float *v, int64_t n, double p0, float *decoded,
                std::vector<uint8_t> &out) {
  int64_t k = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(p0 * double(n))), 0, n);
  TopK t;
  std::vector<uint32_t> &idx = t.idx;
  if (n > 0) {
    // The threshold from a strided sample, as DGC does.
    int64_t m = std::min<int64_t>(n, std::max<int64_t>(64, (n + 99) / 100));
    std::vector<float> sample(m);
    for (int64_t i = 0; i < m; ++i)
      sample[i] = std::fabs(v[static_cast<uint64_t>(i) * n / m]);
    float threshold = lowerQuantile(sample, 1.0 - p0);
    for (int64_t i = 0; i < n; ++i)
      if (std::fabs(v[i]) >= threshold)
        idx.push_back(static_cast<uint32_t>(i));
    if (static_cast<int64_t>(idx.size()) > 2 * k) {
      // The k largest magnitudes, ties to the lower index.
      std::nth_element(idx.begin(), idx.begin() + k, idx.end(),
                       [&](uint32_t a, uint32_t b) {
                         float fa = std::fabs(v[a]), fb = std::fabs(v[b]);
                         return fa != fb ? fa > fb : a < b;
                       });
      idx.resize(k);
      std::sort(idx.begin(), idx.end());
    }
  }
  for (uint32_t i : idx)
    t.values.push_back(v[i]);
  t.write(n, decoded, out);
}

template <typename Acc> Status decodeTopK(Reader &r, int64_t n, Acc *acc) {
  uint32_t count;
  if (!r.u32(count))
    return malformed("truncated header");
  if (count > static_cast<uint64_t>(n))
    return malformed("more elements than the bucket holds");
  int64_t idxAt = r.pos;
  DS_RETURN_IF_ERROR(readIndices(r, count, n, [](uint32_t, uint64_t) {}));
  int64_t valuesAt = r.pos;
  if (!r.has(int64_t(count) * 4))
    return malformed("truncated values");
  Reader values{r.data, r.size, valuesAt};
  for (uint32_t k = 0; k < count; ++k) {
    float x;
    (void)values.f32(x);
    if (!std::isfinite(x))
      return malformed("a non-finite value");
  }
  r.pos += int64_t(count) * 4;
  if (r.pos != r.size)
    return malformed("trailing bytes");

  Reader indices{r.data, r.size, idxAt};
  values.pos = valuesAt;
  (void)readIndices(indices, count, n, [&](uint32_t, uint64_t i) {
    float x;
    (void)values.f32(x);
    acc[i] += x;
  });
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Internal API
//===----------------------------------------------------------------------===//

uint16_t dsrt::comm::toHalf(float value) {
  uint32_t x = bitsOf(value);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) // NaN: keep it quiet and keep the payload's top bits
    return sign | 0x7e00 | static_cast<uint16_t>((abs >> 13) & 0x3ff);
  if (abs >= 0x477ff000) // >= 65520 rounds to infinity
    return sign | 0x7c00;
  if (abs < 0x38800000) {
    // Below 2^-14: a subnormal f16, a multiple of 2^-24. Scaling by 2^24 is
    // exact, and nearbyint rounds half to even; 1024 is the smallest normal.
    float scaled = floatOf(abs) * 0x1p24f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent (127 -> 15), round the 13 dropped bits.
  uint32_t h = (abs - 0x38000000) >> 13;
  uint32_t rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
    ++h;
  return sign | static_cast<uint16_t>(h);
}

float dsrt::comm::fromHalf(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    float f = static_cast<float>(mantissa) * 0x1p-24f;
    return floatOf(bitsOf(f) | sign);
  }
  if (exponent == 31)
    return floatOf(sign | 0x7f800000 | (mantissa << 13));
  return floatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t dsrt::comm::toBFloat16(float value) {
  uint32_t x = bitsOf(value);
  if ((x & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((x >> 16) | 0x0040);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

float dsrt::comm::fromBFloat16(uint16_t bits) {
  return floatOf(uint32_t(bits) << 16);
}

Status dsrt::comm::checkScheme(int64_t scheme, double p0, double p1, double p2,
                               const char *what) {
  switch (scheme) {
  case DSRT_COMPRESS_NONE:
  case DSRT_COMPRESS_FP16:
  case DSRT_COMPRESS_BF16:
    return Status::success();
  case DSRT_COMPRESS_THREE_TIER:
    if (p0 == 0) {
      if (!(p1 >= 0 && p1 <= 1 && p2 >= 0 && p2 <= 1))
        return DS_ERROR("%s: three-tier quantiles must lie in [0, 1] (p1 = "
                        "%g, p2 = %g)",
                        what, p1, p2);
      return Status::success();
    }
    if (p0 == 1) {
      if (!(p1 >= 0 && p2 >= 0 && std::isfinite(p1) && std::isfinite(p2)))
        return DS_ERROR("%s: three-tier thresholds must be finite and >= 0 "
                        "(p1 = %g, p2 = %g)",
                        what, p1, p2);
      return Status::success();
    }
    return DS_ERROR("%s: three-tier p0 must be 0 (quantile thresholds) or 1 "
                    "(fixed thresholds), not %g",
                    what, p0);
  case DSRT_COMPRESS_TOPK:
    if (!(p0 >= 0 && p0 <= 1))
      return DS_ERROR("%s: the top-k fraction p0 must lie in [0, 1], not %g",
                      what, p0);
    return Status::success();
  default:
    return DS_ERROR("%s: unknown compression scheme %lld", what,
                    static_cast<long long>(scheme));
  }
}

Status dsrt::comm::encodeSparse(const float *v, int64_t n, int64_t scheme,
                                double p0, double p1, double p2, float *decoded,
                                std::vector<uint8_t> &payload) {
  if (n > static_cast<int64_t>(UINT32_MAX))
    return DS_ERROR("dsrt: a compressed bucket holds at most 2^32 - 1 "
                    "elements, not %lld",
                    static_cast<long long>(n));
  if (scheme == DSRT_COMPRESS_THREE_TIER)
    encodeThreeTier(v, n, p0, p1, p2, decoded, payload);
  else
    encodeTopK(v, n, p0, decoded, payload);
  return Status::success();
}

Status dsrt::comm::encodeThreeTierCodes(const uint16_t *codes, int64_t n,
                                        float s8, float t16, float *decoded,
                                        std::vector<uint8_t> &payload) {
  if (n > static_cast<int64_t>(UINT32_MAX))
    return DS_ERROR("dsrt: a compressed bucket holds at most 2^32 - 1 "
                    "elements, not %lld",
                    static_cast<long long>(n));
  if (!std::isfinite(s8) || !std::isfinite(t16))
    return DS_ERROR("dsrt: the device's three-tier scales are not finite "
                    "(s8 = %g, t16 = %g)",
                    double(s8), double(t16));
  ThreeTier t;
  t.s8 = s8;
  t.t16 = t16;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t c = codes[i];
    if (c == DSRT_THREE_TIER_CODE_NONE)
      continue;
    if ((c & 0xff00) == DSRT_THREE_TIER_CODE_HIGH) {
      t.highIdx.push_back(static_cast<uint32_t>(i));
      t.q.push_back(static_cast<int8_t>(c & 0xff));
    } else if ((c & 0x7c00) == 0x7c00) {
      return DS_ERROR("dsrt: the device's three-tier code 0x%04x at element "
                      "%lld is not finite",
                      unsigned(c), static_cast<long long>(i));
    } else {
      t.midIdx.push_back(static_cast<uint32_t>(i));
      t.h.push_back(c);
    }
  }
  t.write(n, decoded, payload);
  return Status::success();
}

Status dsrt::comm::encodeTopKSlots(const uint32_t *indices, const float *values,
                                   int64_t slots, int64_t n, float *decoded,
                                   std::vector<uint8_t> &payload) {
  TopK t;
  for (int64_t s = 0; s < slots; ++s) {
    uint32_t i = indices[s];
    if (i == DSRT_TOPK_SLOT_EMPTY) {
      for (int64_t rest = s; rest < slots; ++rest)
        if (indices[rest] != DSRT_TOPK_SLOT_EMPTY)
          return DS_ERROR("dsrt: the device's top-k slot %lld holds index "
                          "%u after an empty slot",
                          static_cast<long long>(rest), indices[rest]);
      break;
    }
    if (static_cast<int64_t>(i) >= n || (!t.idx.empty() && i <= t.idx.back()))
      return DS_ERROR("dsrt: the device's top-k slot %lld holds index %u (a "
                      "bucket of %lld, ascending indices)",
                      static_cast<long long>(s), i, static_cast<long long>(n));
    if (!std::isfinite(values[s]))
      return DS_ERROR("dsrt: the device's top-k value at element %u is not "
                      "finite",
                      i);
    t.idx.push_back(i);
    t.values.push_back(values[s]);
  }
  t.write(n, decoded, payload);
  return Status::success();
}

void dsrt::comm::encodeZeros(int64_t n, int64_t scheme,
                             std::vector<uint8_t> &payload) {
  payload.clear();
  putU8(payload, static_cast<uint8_t>(scheme));
  putU32(payload, static_cast<uint32_t>(n));
  putU32(payload, 0);
  if (scheme == DSRT_COMPRESS_THREE_TIER) {
    putU32(payload, 0);
    putF32(payload, 0.0f);
    putF32(payload, 1.0f);
  }
}

template <typename Acc>
Status dsrt::comm::decodeAdd(const uint8_t *payload, int64_t bytes, int64_t n,
                             Acc *acc) {
  if (bytes < 0 || (bytes > 0 && !payload))
    return malformed("no data");
  Reader r{payload, bytes};
  uint8_t scheme;
  uint32_t count;
  if (!r.u8(scheme) || !r.u32(count))
    return malformed("truncated header");
  if (count != static_cast<uint64_t>(n))
    return DS_ERROR("dsrt: malformed compressed payload: it holds %u "
                    "elements, the bucket %lld",
                    count, static_cast<long long>(n));
  if (scheme == DSRT_COMPRESS_THREE_TIER)
    return decodeThreeTier(r, n, acc);
  if (scheme == DSRT_COMPRESS_TOPK)
    return decodeTopK(r, n, acc);
  return DS_ERROR("dsrt: malformed compressed payload: unknown scheme id %u",
                  unsigned(scheme));
}

template Status dsrt::comm::decodeAdd<float>(const uint8_t *, int64_t, int64_t,
                                             float *);
template Status dsrt::comm::decodeAdd<double>(const uint8_t *, int64_t, int64_t,
                                              double *);

//===----------------------------------------------------------------------===//
// C ABI
//===----------------------------------------------------------------------===//

int dsrt_compress_encode_f32(const float *grad, const float *residual,
                             int64_t n, int64_t scheme, double p0, double p1,
                             double p2, float *decoded, uint8_t *payload,
                             int64_t *payload_bytes) {
  const char *what = "dsrt_compress_encode_f32";
  if (n < 0 || (n > 0 && !grad) || !payload_bytes) {
    (void)DS_ERROR("%s: bad arguments (n = %lld, grad %s, payload_bytes %s)",
                   what, static_cast<long long>(n), grad ? "set" : "null",
                   payload_bytes ? "set" : "null");
    return -1;
  }
  if (checkScheme(scheme, p0, p1, p2, what).failed())
    return -1;
  if (scheme != DSRT_COMPRESS_THREE_TIER && scheme != DSRT_COMPRESS_TOPK) {
    (void)DS_ERROR("%s: scheme %lld has no payload (three-tier or top-k only)",
                   what, static_cast<long long>(scheme));
    return -1;
  }
  std::vector<float> v(grad, grad + n);
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    if (residual)
      v[i] += residual[i];
    finite = finite && std::isfinite(v[i]);
  }
  std::vector<float> dec(n);
  std::vector<uint8_t> bytes;
  if (finite) {
    if (encodeSparse(v.data(), n, scheme, p0, p1, p2, dec.data(), bytes)
            .failed())
      return -1;
  } else {
    encodeZeros(n, scheme, bytes);
  }
  if (decoded && n > 0)
    std::memcpy(decoded, dec.data(), n * sizeof(float));
  int64_t size = static_cast<int64_t>(bytes.size());
  if (payload && *payload_bytes >= size)
    std::memcpy(payload, bytes.data(), size);
  *payload_bytes = size;
  return 0;
}

int dsrt_compress_decode_add_f32(const uint8_t *payload, int64_t payload_bytes,
                                 int64_t n, float *acc) {
  if (n < 0 || (n > 0 && !acc)) {
    (void)DS_ERROR("dsrt_compress_decode_add_f32: bad arguments (n = %lld)",
                   static_cast<long long>(n));
    return -1;
  }
  return decodeAdd(payload, payload_bytes, n, acc).failed() ? -1 : 0;
}

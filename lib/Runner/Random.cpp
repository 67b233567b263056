//===- Random.cpp - Counter-based random numbers --------------------------===//
//
// Implements Philox4x32-10, the dropout mask reference, RandomStream and the
// tensor fill helpers. The transcendental functions Box-Muller needs (log,
// cos) are evaluated here with short polynomial series made only of IEEE
// operations, and contraction into fused multiply-adds is disabled for this
// file: libm implementations and FMA availability differ between machines,
// and a synthetic data set or an initialisation must not.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/Random.h"
#include "ds/Runner/Npy.h"

#include <cmath>

// Keep a*b+c as two rounded operations on every target (see above).
#ifdef __clang__
#pragma clang fp contract(off)
#endif

using namespace ds::runner;

//===----------------------------------------------------------------------===//
// Philox4x32-10
//===----------------------------------------------------------------------===//

static constexpr uint32_t kPhiloxM0 = 0xD2511F53;
static constexpr uint32_t kPhiloxM1 = 0xCD9E8D57;
static constexpr uint32_t kPhiloxW0 = 0x9E3779B9; // Golden ratio.
static constexpr uint32_t kPhiloxW1 = 0xBB67AE85; // sqrt(3) - 1.

std::array<uint32_t, 4> ds::runner::philox4x32_10(std::array<uint32_t, 4> ctr,
                                                  std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    uint64_t p0 = uint64_t(kPhiloxM0) * ctr[0];
    uint64_t p1 = uint64_t(kPhiloxM1) * ctr[2];
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

bool ds::runner::dropoutKeep(uint64_t key, uint64_t counterBase, uint64_t index,
                             double p) {
  uint64_t c = counterBase + index;
  std::array<uint32_t, 4> out =
      philox4x32_10({uint32_t(c), uint32_t(c >> 32), 0, 0},
                    {uint32_t(key), uint32_t(key >> 32)});
  return double(out[0]) * 0x1p-32 >= p;
}

//===----------------------------------------------------------------------===//
// Portable log and cos
//===----------------------------------------------------------------------===//

double ds::runner::portableLog(double x) {
  // 1. x = m * 2^e with m in [sqrt(1/2), sqrt(2)); frexp is exact.
  int e;
  double m = std::frexp(x, &e);
  if (m < 0.70710678118654752440) {
    m *= 2;
    --e;
  }
  // 2. log(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1),
  //    |s| <= 0.172; 13 terms reach double precision.
  double s = (m - 1) / (m + 1);
  double s2 = s * s;
  double series = 0;
  for (int k = 12; k >= 0; --k)
    series = series * s2 + 1.0 / (2 * k + 1);
  // 3. Add e*log(2) split in two (fdlibm's constants; e*ln2Hi is exact).
  const double ln2Hi = 6.93147180369123816490e-01;
  const double ln2Lo = 1.90821492927058770002e-10;
  return e * ln2Hi + (e * ln2Lo + 2 * s * series);
}

/// cos(x) and sin(x) for |x| <= pi/4 by their Taylor series in nested form.
static double cosSeries(double x) {
  double x2 = x * x, c = 1;
  for (int k = 10; k >= 1; --k)
    c = 1 - x2 / ((2 * k - 1) * (2 * k)) * c;
  return c;
}
static double sinSeries(double x) {
  double x2 = x * x, s = 1;
  for (int k = 10; k >= 1; --k)
    s = 1 - x2 / ((2 * k) * (2 * k + 1)) * s;
  return x * s;
}

double ds::runner::portableCos2Pi(double turns) {
  // Reduce in turns, where every step is exact: r in [0, 1/2], then fold
  // to [0, 1/4] (cos(2pi(1/2 - r)) = -cos(2pi r)), then use sin beyond 1/8.
  const double twoPi = 6.28318530717958647693;
  double r = std::fabs(turns - std::nearbyint(turns));
  double sign = 1;
  if (r > 0.25) {
    r = 0.5 - r;
    sign = -1;
  }
  if (r > 0.125)
    return sign * sinSeries((0.25 - r) * twoPi);
  return sign * cosSeries(r * twoPi);
}

//===----------------------------------------------------------------------===//
// RandomStream
//===----------------------------------------------------------------------===//

RandomStream::RandomStream(uint64_t seed, uint64_t streamId)
    : key(seed), stream(streamId) {}

void RandomStream::refill() {
  uint64_t index = consumed / 4;
  block = philox4x32_10({uint32_t(index), uint32_t(index >> 32),
                         uint32_t(stream), uint32_t(stream >> 32)},
                        {uint32_t(key), uint32_t(key >> 32)});
}

void RandomStream::seek(uint64_t position) {
  consumed = position;
  if (consumed % 4 != 0)
    refill();
}

uint32_t RandomStream::nextU32() {
  if (consumed % 4 == 0)
    refill();
  return block[consumed++ % 4];
}

uint64_t RandomStream::nextU64() {
  uint64_t hi = nextU32();
  return hi << 32 | nextU32();
}

double RandomStream::uniform01() {
  // (k + 1/2) / 2^52 with k < 2^52 is exact and strictly inside (0, 1).
  return (double(nextU64() >> 12) + 0.5) * 0x1p-52;
}

uint64_t RandomStream::uniformInt(uint64_t n) {
  assert(n > 0 && "empty range");
  // Reject the lowest 2^64 mod n values so every residue is equally likely.
  uint64_t threshold = (0 - n) % n;
  while (true) {
    uint64_t x = nextU64();
    if (x >= threshold)
      return x % n;
  }
}

double RandomStream::normal() {
  double u1 = uniform01();
  double u2 = uniform01();
  return std::sqrt(-2 * portableLog(u1)) * portableCos2Pi(u2);
}

//===----------------------------------------------------------------------===//
// Fill helpers
//===----------------------------------------------------------------------===//

static llvm::Error requireFloat(const HostTensor &tensor, const char *what) {
  if (isFloat(tensor.dtype))
    return llvm::Error::success();
  return llvm::createStringError(llvm::Twine(what) + ": tensor has dtype " +
                                 dtypeName(tensor.dtype) +
                                 ", expected a float dtype");
}

llvm::Error ds::runner::fillNormal(HostTensor &tensor, double std,
                                   uint64_t seed, uint64_t streamId) {
  if (llvm::Error err = requireFloat(tensor, "fillNormal"))
    return err;
  RandomStream rng(seed, streamId);
  for (int64_t i = 0, e = tensor.numElements(); i < e; ++i)
    tensor.setDouble(i, std * rng.normal());
  return llvm::Error::success();
}

llvm::Error ds::runner::fillUniform(HostTensor &tensor, double bound,
                                    uint64_t seed, uint64_t streamId) {
  if (llvm::Error err = requireFloat(tensor, "fillUniform"))
    return err;
  RandomStream rng(seed, streamId);
  for (int64_t i = 0, e = tensor.numElements(); i < e; ++i)
    tensor.setDouble(i, bound * (2 * rng.uniform01() - 1));
  return llvm::Error::success();
}

llvm::Error ds::runner::fillConstant(HostTensor &tensor, double value) {
  int64_t n = tensor.numElements();
  if (isFloat(tensor.dtype)) {
    for (int64_t i = 0; i < n; ++i)
      tensor.setDouble(i, value);
    return llvm::Error::success();
  }
  double lo, hi;
  switch (tensor.dtype) {
  case DType::I8:
    lo = -128, hi = 127;
    break;
  case DType::U8:
    lo = 0, hi = 255;
    break;
  case DType::Bool:
    lo = 0, hi = 1;
    break;
  case DType::I32:
    lo = -2147483648.0, hi = 2147483647.0;
    break;
  default:
    lo = -0x1p63, hi = 0x1p63 - 1024; // Largest double below 2^63.
    break;
  }
  if (value != std::trunc(value) || value < lo || value > hi)
    return llvm::createStringError("fillConstant: " + std::to_string(value) +
                                   " is not a value of " +
                                   dtypeName(tensor.dtype));
  for (int64_t i = 0; i < n; ++i)
    tensor.setInt(i, int64_t(value));
  return llvm::Error::success();
}

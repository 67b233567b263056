//===- CommTest.cpp - Collectives in a world of one process ---------------===//
//
// Without mpirun the communicator is rank 0 of 1 and makes no MPI call, but
// it runs the same queue, thread, timeouts and compressors: every collective
// must then return what one rank of an MPI run returns. The compressors are
// checked on hand-made vectors whose tiers, payload bytes, decoded values
// and residuals are worked out in the comments, PowerSGD against the plain
// replay of PowerSgdReference.h and on matrices whose approximation is
// known; the multi-process behaviour is checked by ds-runtime-comm-check
// under mpirun.
//
//===----------------------------------------------------------------------===//

#include "PowerSgdReference.h"

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

dsrt_memref1_f32 view(std::vector<float> &v) {
  int64_t n = v.size();
  return {v.data(), v.data(), 0, {n}, {1}};
}

dsrt_memref1_f64 view(std::vector<double> &v) {
  int64_t n = v.size();
  return {v.data(), v.data(), 0, {n}, {1}};
}

dsrt_memref1_i64 view(std::vector<int64_t> &v) {
  int64_t n = v.size();
  return {v.data(), v.data(), 0, {n}, {1}};
}

std::string lastError() {
  const char *e = dsrt_last_error();
  return e ? e : "";
}

int64_t startPowerSgd(dsrt_memref1_f32 *g, dsrt_memref1_f32 *si,
                      dsrt_memref1_f32 *so, dsrt_memref1_i64 *shapes,
                      int64_t rank, int64_t active) {
  return _mlir_ciface_dsrt_allreduce_start_powersgd_f32(g, si, so, shapes, rank,
                                                        active);
}

int64_t startPowerSgd(dsrt_memref1_f64 *g, dsrt_memref1_f64 *si,
                      dsrt_memref1_f64 *so, dsrt_memref1_i64 *shapes,
                      int64_t rank, int64_t active) {
  return _mlir_ciface_dsrt_allreduce_start_powersgd_f64(g, si, so, shapes, rank,
                                                        active);
}

void waitAllreduce(int64_t handle, dsrt_memref1_f32 *out) {
  _mlir_ciface_dsrt_allreduce_wait_f32(handle, out);
}

void waitAllreduce(int64_t handle, dsrt_memref1_f64 *out) {
  _mlir_ciface_dsrt_allreduce_wait_f64(handle, out);
}

/// Start + wait of one PowerSGD bucket; returns the result and sets
/// *stateOut. Checks that the start leaves state_out alone.
template <typename T>
std::vector<T> powerSgd(std::vector<T> grad, std::vector<T> stateIn,
                        std::vector<int64_t> shapes, int64_t rank,
                        int64_t active, std::vector<T> *stateOut) {
  std::vector<T> out(grad.size(), T(-7)), so(stateIn.size(), T(-99));
  auto g = view(grad), si = view(stateIn), o = view(out), sov = view(so);
  dsrt_memref1_i64 sh = view(shapes);
  int64_t handle = startPowerSgd(&g, &si, &sov, &sh, rank, active);
  EXPECT_GT(handle, 0) << lastError();
  EXPECT_EQ(so, std::vector<T>(stateIn.size(), T(-99)))
      << "the start wrote state_out";
  waitAllreduce(handle, &o);
  *stateOut = so;
  return out;
}

/// "" when a and b are equal, else the first difference.
template <typename T>
std::string firstDifference(const std::vector<T> &a, const std::vector<T> &b) {
  if (a.size() != b.size())
    return "sizes " + std::to_string(a.size()) + " and " +
           std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) {
      std::ostringstream os;
      os.precision(17);
      os << "element " << i << ": " << a[i] << " vs " << b[i];
      return os.str();
    }
  return "";
}

/// Deterministic test values of magnitude about `scale`.
template <typename T>
std::vector<T> wave(int64_t n, double phase, double scale) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = T(scale * std::sin(0.37 * i + phase) * (1 + i % 7) / 4);
  return v;
}

/// A vector, a compressible 12 x 10 matrix, an incompressible 3 x 4 one, a
/// 1 x 6 row (a vector) and a compressible 16 x 9 matrix: 287 elements.
const std::vector<int64_t> kPowerSgdShapes = {5, 1, 12, 10, 3, 4, 1, 6, 16, 9};

class CommTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (dsrt_comm_launched())
      GTEST_SKIP() << "runs outside mpirun only";
    dsrt_clear_error();
    dsrt_comm_config config = {30.0, 0, 0};
    ASSERT_EQ(dsrt_comm_init(&config), 0) << lastError();
    dsrt_reset_comm_stats();
  }
  void TearDown() override {
    dsrt_comm_finalize();
    dsrt_clear_error();
  }

  /// Start + wait of one f32 bucket; returns the mean, fills residualOut.
  std::vector<float> allreduce(std::vector<float> grad, int64_t scheme,
                               double p0 = 0, double p1 = 0, double p2 = 0,
                               std::vector<float> residualIn = {},
                               std::vector<float> *residualOut = nullptr) {
    std::vector<float> out(grad.size(), -7.0f), resOut(residualIn.size());
    dsrt_memref1_f32 g = view(grad), ri = view(residualIn), ro = view(resOut),
                     o = view(out);
    int64_t handle =
        _mlir_ciface_dsrt_allreduce_start_f32(&g, &ri, &ro, scheme, p0, p1, p2);
    EXPECT_GT(handle, 0) << lastError();
    _mlir_ciface_dsrt_allreduce_wait_f32(handle, &o);
    if (residualOut)
      *residualOut = resOut;
    return out;
  }
};

//===----------------------------------------------------------------------===//
// Communicator
//===----------------------------------------------------------------------===//

TEST_F(CommTest, WorldOfOne) {
  EXPECT_EQ(dsrt_comm_launched(), 0);
  EXPECT_EQ(dsrt_comm_rank(), 0);
  EXPECT_EQ(dsrt_comm_size(), 1);
  EXPECT_EQ(dsrt_comm_rank_i64(), 0);
  EXPECT_EQ(dsrt_comm_size_i64(), 1);
  EXPECT_EQ(dsrt_comm_failed(), 0);
  // A second init only updates the configuration.
  dsrt_comm_config config = {5.0, 1, 0};
  EXPECT_EQ(dsrt_comm_init(&config), 0);
  EXPECT_EQ(dsrt_comm_init(nullptr), 0);
  EXPECT_EQ(dsrt_last_error(), nullptr);
}

TEST_F(CommTest, HostCollectivesAreIdentities) {
  std::vector<float> f = {1.5f, -2.0f, 0.25f};
  for (int op :
       {DSRT_REDUCE_SUM, DSRT_REDUCE_MEAN, DSRT_REDUCE_MAX, DSRT_REDUCE_MIN}) {
    std::vector<float> g = f;
    EXPECT_EQ(dsrt_allreduce(g.data(), g.size(), DSRT_F32, op), 0);
    EXPECT_EQ(g, f);
  }
  std::vector<double> d = {1e300, -3.0};
  EXPECT_EQ(dsrt_allreduce(d.data(), d.size(), DSRT_F64, DSRT_REDUCE_MEAN), 0);
  EXPECT_EQ(d, (std::vector<double>{1e300, -3.0}));
  std::vector<int64_t> i = {7, -9};
  EXPECT_EQ(dsrt_allreduce(i.data(), i.size(), DSRT_I64, DSRT_REDUCE_SUM), 0);
  EXPECT_EQ(i, (std::vector<int64_t>{7, -9}));
  uint8_t u[2] = {200, 3};
  EXPECT_EQ(dsrt_allreduce(u, 2, DSRT_U8, DSRT_REDUCE_MAX), 0);
  EXPECT_EQ(u[0], 200);

  char text[6] = "hello";
  EXPECT_EQ(dsrt_broadcast(text, 6, 0), 0);
  EXPECT_STREQ(text, "hello");
  char gathered[6] = {0};
  EXPECT_EQ(dsrt_allgather("world", 6, gathered), 0);
  EXPECT_STREQ(gathered, "world");
  EXPECT_EQ(dsrt_last_error(), nullptr);

  dsrt_comm_stats stats;
  dsrt_get_comm_stats(&stats);
  EXPECT_EQ(stats.collectives, 9u);
  EXPECT_EQ(stats.bytes_sent, 4 * 12.0 + 16 + 16 + 2 + 6 + 6);
  EXPECT_EQ(stats.bytes_dense, 0.0);
  // None of them exchanges a gradient bucket.
  EXPECT_EQ(stats.bytes_sent_buckets, 0.0);
}

TEST_F(CommTest, HostCollectivesRejectBadArguments) {
  int64_t i = 1;
  EXPECT_EQ(dsrt_allreduce(&i, 1, DSRT_I64, DSRT_REDUCE_MEAN), -1);
  EXPECT_NE(lastError().find("MEAN"), std::string::npos) << lastError();
  dsrt_clear_error();
  EXPECT_EQ(dsrt_broadcast(&i, 8, 1), -1);
  EXPECT_NE(lastError().find("root 1"), std::string::npos) << lastError();
  dsrt_clear_error();
  EXPECT_EQ(dsrt_allreduce(&i, 1, 42, DSRT_REDUCE_SUM), -1);
  EXPECT_EQ(dsrt_comm_failed(), 0);
}

TEST_F(CommTest, StartWaitIsTheIdentity) {
  // A strided f32 bucket and a contiguous f64 one, waited out of order.
  std::vector<float> storage = {1, 99, -2.5f, 99, 3e-7f, 99};
  dsrt_memref1_f32 g = {storage.data(), storage.data(), 0, {3}, {2}};
  std::vector<float> none;
  dsrt_memref1_f32 empty = view(none);
  int64_t h1 = _mlir_ciface_dsrt_allreduce_start_f32(
      &g, &empty, &empty, DSRT_COMPRESS_NONE, 0, 0, 0);
  std::vector<double> d = {0.1, -1e-300}, noneD, outD(2);
  dsrt_memref1_f64 gd = view(d), emptyD = view(noneD), od = view(outD);
  int64_t h2 = _mlir_ciface_dsrt_allreduce_start_f64(
      &gd, &emptyD, &emptyD, DSRT_COMPRESS_NONE, 0, 0, 0);
  EXPECT_GT(h1, 0);
  EXPECT_GT(h2, h1);
  _mlir_ciface_dsrt_allreduce_wait_f64(h2, &od);
  std::vector<float> out(3);
  dsrt_memref1_f32 o = view(out);
  _mlir_ciface_dsrt_allreduce_wait_f32(h1, &o);
  EXPECT_EQ(out, (std::vector<float>{1, -2.5f, 3e-7f}));
  EXPECT_EQ(outD, d);
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();

  dsrt_comm_stats stats;
  dsrt_get_comm_stats(&stats);
  EXPECT_EQ(stats.collectives, 2u);
  EXPECT_EQ(stats.bytes_sent, 12.0 + 16.0);
  EXPECT_EQ(stats.bytes_sent_buckets, 12.0 + 16.0);
  EXPECT_EQ(stats.bytes_dense, 12.0 + 16.0);
  EXPECT_GE(stats.wait_seconds, 0.0);

  // A handle is waited once.
  _mlir_ciface_dsrt_allreduce_wait_f32(h1, &o);
  EXPECT_NE(lastError().find("not a started f32 all-reduce"), std::string::npos)
      << lastError();
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0}));
}

TEST_F(CommTest, DeterministicModeIsTheIdentity) {
  dsrt_comm_config config = {30.0, 1, 0};
  ASSERT_EQ(dsrt_comm_init(&config), 0);
  std::vector<float> grad = {1, -2, 3.5f};
  EXPECT_EQ(allreduce(grad, DSRT_COMPRESS_NONE), grad);
  std::vector<float> in = {4, 5}, out(2);
  dsrt_memref1_f32 i = view(in), o = view(out);
  _mlir_ciface_dsrt_allreduce_f32(&i, &o, DSRT_REDUCE_SUM);
  EXPECT_EQ(out, in);
  std::vector<double> bin = {-1, 2}, bout(2);
  dsrt_memref1_f64 bi = view(bin), bo = view(bout);
  _mlir_ciface_dsrt_broadcast_f64(&bi, &bo);
  EXPECT_EQ(bout, bin);
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
}

//===----------------------------------------------------------------------===//
// Three tiers
//===----------------------------------------------------------------------===//

// Fixed thresholds 0.1 and 2: |v| > 2 is the 8-bit tier, with s8 = 127 / 127
// = 1; 0.1 < |v| <= 2 the 16-bit tier with t16 = 2; the rest is not sent.
const std::vector<float> kTierInput = {0.05f,   127, -0.1f, 1.5f,
                                       -50.25f, 0,   2.5f,  0.3f};

// 0.3 / 2 = 0.15 = 1.2 * 2^-3 rounds to 1 + 205/1024 in f16 (0x30CD).
const float kDecodedPoint3 = 0.300048828125f;

const std::vector<uint8_t> kTierPayload = {
    1,                      // scheme
    8,    0,    0,    0,    // n
    3,    0,    0,    0,    // n_high
    2,    0,    0,    0,    // n_mid
    0,    0,    0x80, 0x3f, // s8 = 1.0f
    0,    0,    0,    0x40, // t16 = 2.0f
    1,    2,    1,          // high indices 1, 4, 6 as gaps
    127,  0xce, 2,          // 127, rint(-50.25) = -50, rint(2.5) = 2 (even)
    3,    3,                // middle indices 3, 7
    0x00, 0x3a,             // f16(0.75)
    0xcd, 0x30,             // f16(0.15)
};

TEST_F(CommTest, ThreeTierEncodeWithFixedThresholds) {
  std::vector<float> decoded(8, -1);
  std::vector<uint8_t> payload(64, 0xee);
  int64_t bytes = payload.size();
  ASSERT_EQ(dsrt_compress_encode_f32(kTierInput.data(), nullptr, 8,
                                     DSRT_COMPRESS_THREE_TIER, 1, 0.1, 2.0,
                                     decoded.data(), payload.data(), &bytes),
            0)
      << lastError();
  ASSERT_EQ(bytes, int64_t(kTierPayload.size()));
  payload.resize(bytes);
  EXPECT_EQ(payload, kTierPayload);
  EXPECT_EQ(decoded,
            (std::vector<float>{0, 127, 0, 1.5f, -50, 0, 2, kDecodedPoint3}));

  // The size alone, then a buffer too small: nothing written.
  int64_t size = 0;
  EXPECT_EQ(dsrt_compress_encode_f32(kTierInput.data(), nullptr, 8,
                                     DSRT_COMPRESS_THREE_TIER, 1, 0.1, 2.0,
                                     nullptr, nullptr, &size),
            0);
  EXPECT_EQ(size, bytes);
  uint8_t small[4] = {9, 9, 9, 9};
  size = 4;
  EXPECT_EQ(dsrt_compress_encode_f32(kTierInput.data(), nullptr, 8,
                                     DSRT_COMPRESS_THREE_TIER, 1, 0.1, 2.0,
                                     nullptr, small, &size),
            0);
  EXPECT_EQ(size, bytes);
  EXPECT_EQ(small[0], 9);

  // Decoding adds.
  std::vector<float> acc(8, 1.0f);
  ASSERT_EQ(dsrt_compress_decode_add_f32(kTierPayload.data(),
                                         kTierPayload.size(), 8, acc.data()),
            0);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(acc[i], 1.0f + decoded[i]) << i;
}

TEST_F(CommTest, ThreeTierAllReduceWritesResiduals) {
  // grad + residual = kTierInput.
  std::vector<float> grad = kTierInput, residual(8, 0.0f);
  grad[1] = 100, residual[1] = 27;
  std::vector<float> resOut;
  std::vector<float> out =
      allreduce(grad, DSRT_COMPRESS_THREE_TIER, 1, 0.1, 2.0, residual, &resOut);
  EXPECT_EQ(out,
            (std::vector<float>{0, 127, 0, 1.5f, -50, 0, 2, kDecodedPoint3}));
  EXPECT_EQ(resOut, (std::vector<float>{0.05f, 0, -0.1f, 0, -0.25f, 0, 0.5f,
                                        0.3f - kDecodedPoint3}));
  dsrt_comm_stats stats;
  dsrt_get_comm_stats(&stats);
  EXPECT_EQ(stats.bytes_sent, double(kTierPayload.size()));
  EXPECT_EQ(stats.bytes_sent_buckets, double(kTierPayload.size()));
  EXPECT_EQ(stats.bytes_dense, 32.0);
  EXPECT_EQ(stats.dense_fallbacks, 0u);
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
}

TEST_F(CommTest, ThreeTierQuantileThresholds) {
  // |v| ascending: 0, 0.01, 0.1, 0.3, 0.5, 1, 2, 4. "lower" quantiles:
  // p1 = 0.25 -> rank floor(1.75) = 1 -> 0.01; p2 = 0.75 -> rank
  // floor(5.25) = 5 -> 1. High: 2, -4; middle: 0.1, -0.5, 0.3, 1 (t16 = 1).
  std::vector<float> v = {0.1f, -0.5f, 2, 0.01f, -4, 0.3f, 1, 0};
  std::vector<float> decoded(8);
  std::vector<uint8_t> payload(128);
  int64_t bytes = payload.size();
  ASSERT_EQ(dsrt_compress_encode_f32(v.data(), nullptr, 8,
                                     DSRT_COMPRESS_THREE_TIER, 0, 0.25, 0.75,
                                     decoded.data(), payload.data(), &bytes),
            0)
      << lastError();
  EXPECT_EQ(payload[5], 2); // n_high
  EXPECT_EQ(payload[9], 4); // n_mid
  float s8 = 4.0f / 127.0f;
  float t16;
  std::memcpy(&t16, &payload[17], 4);
  EXPECT_EQ(t16, 1.0f);
  EXPECT_EQ(decoded[2], std::nearbyint(2.0f / s8) * s8);
  EXPECT_EQ(decoded[4], -127 * s8);
  EXPECT_EQ(decoded[3], 0.0f);
  EXPECT_EQ(decoded[7], 0.0f);
  EXPECT_EQ(decoded[1], -0.5f);
  EXPECT_EQ(decoded[6], 1.0f);
  // f16(0.1) = 1638 / 16384 * ... : within half an f16 ulp (2^-14 here).
  EXPECT_NEAR(decoded[0], 0.1f, 0x1p-15);
  EXPECT_NE(decoded[0], 0.1f);
}

TEST_F(CommTest, ThreeTierF64KeepsAnF64Residual) {
  std::vector<double> grad = {127 + 1e-9, 0.5, 0}, resIn(3, 0), resOut(3),
                      out(3);
  dsrt_memref1_f64 g = view(grad), ri = view(resIn), ro = view(resOut),
                   o = view(out);
  // Fixed thresholds 0.25 and 0.75: 127 + 1e-9 rounds to 127.0f, the 8-bit
  // tier (s8 = 1); 0.5 is in the 16-bit tier (t16 = 1), exact.
  int64_t h = _mlir_ciface_dsrt_allreduce_start_f64(
      &g, &ri, &ro, DSRT_COMPRESS_THREE_TIER, 1, 0.25, 0.75);
  _mlir_ciface_dsrt_allreduce_wait_f64(h, &o);
  EXPECT_EQ(out, (std::vector<double>{127.0, 0.5, 0}));
  EXPECT_EQ(resOut, (std::vector<double>{(127 + 1e-9) - 127.0, 0, 0}));
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
}

TEST_F(CommTest, DecodeRejectsTruncatedAndMalformedPayloads) {
  std::vector<float> acc(8, 3.0f);
  for (size_t size = 0; size < kTierPayload.size(); ++size) {
    dsrt_clear_error();
    EXPECT_EQ(
        dsrt_compress_decode_add_f32(kTierPayload.data(), size, 8, acc.data()),
        -1)
        << size;
    EXPECT_NE(lastError().find("malformed compressed payload"),
              std::string::npos)
        << lastError();
  }
  EXPECT_EQ(acc, std::vector<float>(8, 3.0f));
  std::vector<uint8_t> bad = kTierPayload;
  bad.push_back(0);
  EXPECT_EQ(dsrt_compress_decode_add_f32(bad.data(), bad.size(), 8, acc.data()),
            -1);
  bad = kTierPayload;
  bad[0] = 7; // unknown scheme
  EXPECT_EQ(dsrt_compress_decode_add_f32(bad.data(), bad.size(), 8, acc.data()),
            -1);
  bad = kTierPayload;
  bad[23] = 9; // the third high index becomes 15 >= n
  EXPECT_EQ(dsrt_compress_decode_add_f32(bad.data(), bad.size(), 8, acc.data()),
            -1);
  EXPECT_EQ(dsrt_compress_decode_add_f32(kTierPayload.data(),
                                         kTierPayload.size(), 9, acc.data()),
            -1);
  EXPECT_EQ(acc, std::vector<float>(8, 3.0f));
}

//===----------------------------------------------------------------------===//
// Top-k
//===----------------------------------------------------------------------===//

TEST_F(CommTest, TopKSendsWhatPassesTheSampledThreshold) {
  // n = 10 < 64: the sample is the whole vector. k = ceil(0.2 * 10) = 2;
  // the 0.8 quantile of |v| is rank floor(7.2) = 7 of 0, 0.25, 0.5, 1, 1,
  // 2, 3, 4, 7, 9, so 4; three pass (<= 2k) and are all sent.
  std::vector<float> v = {0.5f, -9, 1, 3, -2, 0, 7, 0.25f, -1, 4};
  std::vector<float> decoded(10);
  std::vector<uint8_t> payload(64);
  int64_t bytes = payload.size();
  ASSERT_EQ(dsrt_compress_encode_f32(v.data(), nullptr, 10, DSRT_COMPRESS_TOPK,
                                     0.2, 0, 0, decoded.data(), payload.data(),
                                     &bytes),
            0)
      << lastError();
  payload.resize(bytes);
  EXPECT_EQ(payload, (std::vector<uint8_t>{2, 10, 0,    0,    0,
                                           3, 0,  0,    0, // scheme, n, count
                                           1, 4,  2,       // indices 1, 6, 9
                                           0, 0,  0x10, 0xc1,    // -9
                                           0, 0,  0xe0, 0x40,    // 7
                                           0, 0,  0x80, 0x40})); // 4
  EXPECT_EQ(decoded, (std::vector<float>{0, -9, 0, 0, 0, 0, 7, 0, 0, 4}));

  std::vector<float> resOut;
  std::vector<float> out = allreduce(v, DSRT_COMPRESS_TOPK, 0.2, 0, 0,
                                     std::vector<float>(10, 0), &resOut);
  EXPECT_EQ(out, decoded);
  EXPECT_EQ(resOut,
            (std::vector<float>{0.5f, 0, 1, 3, -2, 0, 0, 0.25f, -1, 0}));
}

TEST_F(CommTest, TopKKeepsTheLargestWhenTooManyPass) {
  // All ten tie at the threshold: more than 2k = 2 pass, so the k = 1
  // largest are kept, ties to the lower index.
  std::vector<float> v(10, -1.0f), decoded(10);
  int64_t bytes = 0;
  ASSERT_EQ(dsrt_compress_encode_f32(v.data(), nullptr, 10, DSRT_COMPRESS_TOPK,
                                     0.1, 0, 0, decoded.data(), nullptr,
                                     &bytes),
            0);
  EXPECT_EQ(bytes, 9 + 1 + 4);
  EXPECT_EQ(decoded[0], -1.0f);
  for (int i = 1; i < 10; ++i)
    EXPECT_EQ(decoded[i], 0.0f);
  // A larger bucket: the sample is 64 strided elements; with distinct
  // magnitudes the sample's 0.9 quantile lets about 10 % pass, at most 2k
  // are sent, and decoding restores exactly the sent values.
  int64_t n = 1000;
  std::vector<float> big(n), dec(n), back(n, 0.0f);
  for (int64_t i = 0; i < n; ++i)
    big[i] = std::sin(0.37 * i) * (1 + i % 13);
  std::vector<uint8_t> payload(16 * n);
  bytes = payload.size();
  ASSERT_EQ(dsrt_compress_encode_f32(big.data(), nullptr, n, DSRT_COMPRESS_TOPK,
                                     0.05, 0, 0, dec.data(), payload.data(),
                                     &bytes),
            0);
  int64_t sent = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE(dec[i] == 0 || dec[i] == big[i]);
    sent += dec[i] != 0;
  }
  EXPECT_GT(sent, 0);
  EXPECT_LE(sent, 100);
  ASSERT_EQ(dsrt_compress_decode_add_f32(payload.data(), bytes, n, back.data()),
            0);
  EXPECT_EQ(back, dec);
}

//===----------------------------------------------------------------------===//
// fp16 and bf16
//===----------------------------------------------------------------------===//

TEST_F(CommTest, Fp16RoundsToNearestEven) {
  std::vector<float> grad = {
      1.0f + 0x1p-11f,     // halfway between 1 and 1 + 2^-10: to 1
      1.0f + 3 * 0x1p-11f, // halfway, the even neighbour is 1 + 2^-9
      -(1.0f + 0x1p-11f),  // -1
      65519.0f,            // below 65520: 65504
      0x1p-25f,            // half the smallest subnormal: 0
      3 * 0x1p-25f,        // 1.5 subnormal ulps: 2 ulps
      0x1p-14f - 0x1p-26f, // rounds up to the smallest normal
      0.1f};
  std::vector<float> out = allreduce(grad, DSRT_COMPRESS_FP16);
  EXPECT_EQ(out,
            (std::vector<float>{1.0f, 1.0f + 0x1p-9f, -1.0f, 65504.0f, 0.0f,
                                0x1p-23f, 0x1p-14f, 0.0999755859375f}));
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
  dsrt_comm_stats stats;
  dsrt_get_comm_stats(&stats);
  EXPECT_EQ(stats.bytes_sent, 16.0);
  EXPECT_EQ(stats.bytes_sent_buckets, 16.0);
  EXPECT_EQ(stats.bytes_dense, 32.0);
}

TEST_F(CommTest, Bf16RoundsToNearestEven) {
  std::vector<float> grad = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                             -(1.0f + 0x1p-8f + 0x1p-20f), 3.0e38f};
  std::vector<float> out = allreduce(grad, DSRT_COMPRESS_BF16);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 1.0f + 0x1p-6f, -(1.0f + 0x1p-7f),
                                     3.00405527047391e38f}));
  std::vector<double> g64 = {1.0 + 0x1p-8, 0.1}, o64(2), none;
  dsrt_memref1_f64 g = view(g64), e = view(none), o = view(o64);
  int64_t h = _mlir_ciface_dsrt_allreduce_start_f64(
      &g, &e, &e, DSRT_COMPRESS_BF16, 0, 0, 0);
  _mlir_ciface_dsrt_allreduce_wait_f64(h, &o);
  EXPECT_EQ(o64, (std::vector<double>{1.0, 0.10009765625}));
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
}

//===----------------------------------------------------------------------===//
// PowerSGD
//===----------------------------------------------------------------------===//

TEST_F(CommTest, PowerSgdStateSize) {
  // Rank 2: E and Q of 12 x 10 (120 + 20), 3 x 4 (12 + 8), 16 x 9
  // (144 + 18); the vectors have none.
  const std::vector<int64_t> &s = kPowerSgdShapes;
  EXPECT_EQ(dsrt_powersgd_state_size(s.data(), s.size(), 2), 322);
  EXPECT_EQ(dsrt_powersgd_state_size(s.data(), s.size(), 1), 299);
  // Q_k has n rank elements even where r = min(rank, m, n) is smaller.
  int64_t small[2] = {3, 4};
  EXPECT_EQ(dsrt_powersgd_state_size(small, 2, 8), 12 + 32);
  EXPECT_EQ(dsrt_powersgd_state_size(nullptr, 0, 1), 0);
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
  EXPECT_EQ(dsrt_powersgd_state_size(s.data(), 3, 1), -1);
  EXPECT_NE(lastError().find("3 shape entries"), std::string::npos)
      << lastError();
  dsrt_clear_error();
  EXPECT_EQ(dsrt_powersgd_state_size(s.data(), s.size(), 0), -1);
  EXPECT_NE(lastError().find("the rank is 0"), std::string::npos)
      << lastError();
  dsrt_clear_error();
  int64_t negative[2] = {-2, 4};
  EXPECT_EQ(dsrt_powersgd_state_size(negative, 2, 1), -1);
  dsrt_clear_error();
  int64_t huge[2] = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_EQ(dsrt_powersgd_state_size(huge, 2, 1), -1);
  EXPECT_NE(lastError().find("too large"), std::string::npos) << lastError();
}

TEST_F(CommTest, PowerSgdMatchesTheReference) {
  const std::vector<int64_t> &shapes = kPowerSgdShapes;
  for (int64_t rank : {1, 2}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    int64_t size = dsrt_powersgd_state_size(shapes.data(), shapes.size(), rank);
    // Zeros, but the incompressible 3 x 4 matrix's E and Q (state elements
    // 130 or 140 on): copied unchanged, never added.
    std::vector<float> state(size, 0.0f);
    int64_t small = rank == 1 ? 130 : 140;
    for (int64_t i = 0; i < 12 + 4 * rank; ++i)
      state[small + i] = 7.5f + i;
    std::vector<float> previousQ;
    for (int step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      std::vector<float> grad = wave<float>(287, step + rank, 1.0);
      dsrt_reset_comm_stats();
      std::vector<float> stateOut;
      std::vector<float> out =
          powerSgd(grad, state, shapes, rank, 1, &stateOut);
      EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
      dsrt_test::PowerSgdOutcome<float> ref =
          dsrt_test::powerSgdReference<float>({grad}, {state}, shapes, rank);
      EXPECT_EQ(firstDifference(out, ref.result), "");
      EXPECT_EQ(firstDifference(stateOut, ref.states[0]), "");

      // Independently of the reference: the vectors are the identity (N =
      // 1), the small matrix's state is unchanged, and E' = M - result.
      for (int64_t i : {0, 4, 125, 130, 136, 142})
        EXPECT_EQ(out[i], grad[i]) << i;
      for (int64_t i = 0; i < 12 + 4 * rank; ++i)
        EXPECT_EQ(stateOut[small + i], 7.5f + i);
      for (int64_t i = 0; i < 120; ++i)
        EXPECT_EQ(stateOut[i], (grad[5 + i] + state[i]) - out[5 + i]) << i;
      // The approximation is close but not exact.
      EXPECT_NE(out[5], grad[5]);
      // Warm start: Q' changes from step to step and is never all zeros.
      std::vector<float> q(stateOut.begin() + 120,
                           stateOut.begin() + 120 + 10 * rank);
      EXPECT_NE(q, std::vector<float>(10 * rank, 0.0f));
      EXPECT_NE(q, previousQ);
      previousQ = q;

      dsrt_comm_stats stats;
      dsrt_get_comm_stats(&stats);
      EXPECT_EQ(stats.collectives, 1u);
      // 23 uncompressed elements, P's of 12 r + 16 r, Q's of 10 r + 9 r.
      EXPECT_EQ(ref.sentElements, 23 + 47 * rank);
      EXPECT_EQ(stats.bytes_sent, 4.0 * (23 + 47 * rank));
      EXPECT_EQ(stats.bytes_sent_buckets, stats.bytes_sent);
      EXPECT_EQ(stats.bytes_dense, 4.0 * 287);
      EXPECT_EQ(stats.nonfinite_buckets, 0u);
      state = stateOut;
    }
  }
}

TEST_F(CommTest, PowerSgdF64AliasedAndStridedState) {
  const std::vector<int64_t> &shapes = kPowerSgdShapes;
  std::vector<double> state(322, 0.0);
  for (int step = 0; step < 2; ++step) {
    std::vector<double> grad = wave<double>(287, 0.5 + step, 1e-3);
    dsrt_test::PowerSgdOutcome<double> ref =
        dsrt_test::powerSgdReference<double>({grad}, {state}, shapes, 2);
    // state_in and state_out are one memref with stride 2 in a buffer
    // whose odd elements must stay untouched.
    std::vector<double> storage(2 * 322, -1.0), out(287);
    for (int64_t i = 0; i < 322; ++i)
      storage[2 * i] = state[i];
    dsrt_memref1_f64 sv = {storage.data(), storage.data(), 0, {322}, {2}};
    std::vector<int64_t> sh = shapes;
    dsrt_memref1_f64 g = view(grad), o = view(out);
    dsrt_memref1_i64 shv = view(sh);
    int64_t h = _mlir_ciface_dsrt_allreduce_start_powersgd_f64(&g, &sv, &sv,
                                                               &shv, 2, 1);
    ASSERT_GT(h, 0) << lastError();
    _mlir_ciface_dsrt_allreduce_wait_f64(h, &o);
    EXPECT_EQ(firstDifference(out, ref.result), "");
    for (int64_t i = 0; i < 322; ++i) {
      EXPECT_EQ(storage[2 * i], ref.states[0][i]) << i;
      EXPECT_EQ(storage[2 * i + 1], -1.0) << i;
      state[i] = storage[2 * i];
    }
    EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
  }
}

TEST_F(CommTest, PowerSgdRecoversLowRankMatrices) {
  // A rank-2 20 x 30 matrix is compressed exactly at rank 2 (up to
  // rounding), with an error near zero. At rank 1 the result is P P^T M, a
  // projection: the error is no larger than M (Frobenius norms).
  std::vector<int64_t> shapes = {20, 30};
  std::vector<double> grad(600);
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t j = 0; j < 30; ++j)
      grad[i * 30 + j] = std::cos(0.3 * i) * (j - 14.5) +
                         0.25 * std::sin(0.7 * i + 1) * std::cos(0.2 * j);
  for (int64_t rank : {2, 1}) {
    std::vector<double> state(600 + 30 * rank, 0.0), stateOut;
    std::vector<double> out = powerSgd(grad, state, shapes, rank, 1, &stateOut);
    double worst = 0, errorNorm = 0, norm = 0;
    for (int64_t i = 0; i < 600; ++i) {
      worst = std::max(worst, std::fabs(out[i] - grad[i]));
      errorNorm += stateOut[i] * stateOut[i];
      norm += grad[i] * grad[i];
      EXPECT_EQ(stateOut[i], grad[i] - out[i]);
    }
    if (rank == 2) {
      EXPECT_LT(worst, 1e-12);
    } else {
      EXPECT_GT(worst, 1e-3);
      EXPECT_LT(errorNorm, norm);
    }
  }
  // PyTorch's _should_compress is strict: 8 x 8 at rank 2 (2 (8 + 8) 2 =
  // 64 = 8 8) goes uncompressed, 9 x 9 (72 < 81) compressed.
  for (int64_t m : {8, 9}) {
    dsrt_reset_comm_stats();
    std::vector<int64_t> square = {m, m};
    std::vector<float> g = wave<float>(m * m, 1.0, 1.0), so;
    std::vector<float> s(m * m + 2 * m, 0.0f);
    std::vector<float> out = powerSgd(g, s, square, 2, 1, &so);
    dsrt_comm_stats stats;
    dsrt_get_comm_stats(&stats);
    EXPECT_EQ(stats.bytes_sent, m == 8 ? 4.0 * 64 : 4.0 * 36) << m;
    EXPECT_EQ(out == g, m == 8) << m;
    EXPECT_EQ(so == s, m == 8) << m;
  }
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
}

TEST_F(CommTest, PowerSgdInactiveIsTheMean) {
  std::vector<float> grad = wave<float>(287, 2.0, 1.0), stateOut;
  std::vector<float> state = wave<float>(322, 3.0, 0.1);
  std::vector<float> out =
      powerSgd(grad, state, kPowerSgdShapes, 2, 0, &stateOut);
  EXPECT_EQ(out, grad);
  EXPECT_EQ(stateOut, state);
  dsrt_comm_stats stats;
  dsrt_get_comm_stats(&stats);
  EXPECT_EQ(stats.bytes_sent, 4.0 * 287);
  EXPECT_EQ(stats.bytes_dense, 4.0 * 287);
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
}

TEST_F(CommTest, PowerSgdNonFiniteBucketsSendZeros) {
  // A state from one step, then a NaN in the first vector, an inf in the
  // compressed matrix, and an inactive NaN bucket: zeros out, the state
  // unchanged (alone, the rank's exchanged Q is zero: Q' = Q).
  std::vector<float> state(322, 0.0f), stateOut;
  powerSgd(wave<float>(287, 0.0, 1.0), state, kPowerSgdShapes, 2, 1, &state);
  ASSERT_NE(state, std::vector<float>(322, 0.0f));
  for (int64_t bad : {int64_t(2), int64_t(40)}) {
    for (int64_t active : {1, 0}) {
      std::vector<float> grad = wave<float>(287, 1.0, 1.0);
      grad[bad] = bad == 2 ? NAN : -std::numeric_limits<float>::infinity();
      std::vector<float> out =
          powerSgd(grad, state, kPowerSgdShapes, 2, active, &stateOut);
      EXPECT_EQ(out, std::vector<float>(287, 0.0f)) << bad << active;
      EXPECT_EQ(stateOut, state) << bad << active;
    }
  }
  // M = g + E overflows while g is finite.
  std::vector<float> huge(322, 0.0f);
  huge[7] = 3e38f;
  std::vector<float> grad(287, 0.0f);
  grad[12] = 3e38f;
  EXPECT_EQ(powerSgd(grad, huge, kPowerSgdShapes, 2, 1, &stateOut),
            std::vector<float>(287, 0.0f));
  EXPECT_EQ(stateOut, huge);
  // M is finite but P = M Q overflows: the 12 x 10 matrix's rows are
  // 3e38 times the signs of the first column of its first Q (the replayed
  // generator, orthogonalized), so P's first column is 3e38 times that
  // column's 1-norm, more than 1.2. The rank sends zeros from then on.
  std::vector<double> draw;
  dsrt_test::powersgd_detail::gaussian(draw, 20, 1, 12, 10, 2);
  std::vector<float> q(draw.begin(), draw.end());
  dsrt_test::powersgd_detail::orthogonalize(q, 10, 2);
  double norm1 = 0;
  for (int64_t j = 0; j < 10; ++j)
    norm1 += std::fabs(q[2 * j]);
  ASSERT_GT(norm1, 1.2);
  std::fill(grad.begin(), grad.end(), 0.0f);
  for (int64_t i = 0; i < 12; ++i)
    for (int64_t j = 0; j < 10; ++j)
      grad[5 + 10 * i + j] = q[2 * j] < 0 ? -3e38f : 3e38f;
  std::vector<float> zeros(322, 0.0f);
  EXPECT_EQ(powerSgd(grad, zeros, kPowerSgdShapes, 2, 1, &stateOut),
            std::vector<float>(287, 0.0f));
  EXPECT_EQ(stateOut, zeros);
  dsrt_comm_stats stats;
  dsrt_get_comm_stats(&stats);
  EXPECT_EQ(stats.nonfinite_buckets, 6u);
  // Where only the sum of squares overflows (M = 3e38 everywhere: this
  // draw's column sums stay below 1.13, so P is finite, but its norm is
  // not), the column becomes zeros: a zero result, E' = M, and nothing
  // non-finite.
  std::fill(grad.begin() + 5, grad.begin() + 125, 3e38f);
  EXPECT_EQ(powerSgd(grad, zeros, kPowerSgdShapes, 2, 1, &stateOut),
            std::vector<float>(287, 0.0f));
  EXPECT_EQ(std::vector<float>(stateOut.begin(), stateOut.begin() + 120),
            std::vector<float>(120, 3e38f));
  EXPECT_EQ(std::vector<float>(stateOut.begin() + 120, stateOut.end()),
            std::vector<float>(202, 0.0f));
  dsrt_get_comm_stats(&stats);
  EXPECT_EQ(stats.nonfinite_buckets, 6u);
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
}

TEST_F(CommTest, PowerSgdRejectsBadArguments) {
  std::vector<float> grad(287, 1.0f), state(322, 0.0f), shortState(321);
  std::vector<int64_t> shapes = kPowerSgdShapes, odd = {5, 1, 12};
  dsrt_memref1_f32 g = view(grad), s = view(state), ss = view(shortState);
  dsrt_memref1_i64 sh = view(shapes), oddv = view(odd);
  EXPECT_EQ(
      _mlir_ciface_dsrt_allreduce_start_powersgd_f32(&g, &s, &ss, &sh, 2, 1),
      0);
  EXPECT_NE(lastError().find("a bucket of 287 elements and a state of 322, "
                             "not 287 and 322 (in) and 321 (out)"),
            std::string::npos)
      << lastError();
  dsrt_clear_error();
  EXPECT_EQ(
      _mlir_ciface_dsrt_allreduce_start_powersgd_f32(&g, &s, &s, &oddv, 2, 1),
      0);
  EXPECT_NE(lastError().find("3 shape entries"), std::string::npos);
  dsrt_clear_error();
  EXPECT_EQ(
      _mlir_ciface_dsrt_allreduce_start_powersgd_f32(&g, &s, &s, &sh, 0, 0), 0);
  EXPECT_NE(lastError().find("the rank is 0"), std::string::npos);
  dsrt_clear_error();
  EXPECT_EQ(
      _mlir_ciface_dsrt_allreduce_start_powersgd_f32(&g, &s, &s, nullptr, 1, 1),
      0);
  EXPECT_NE(lastError().find("null shapes descriptor"), std::string::npos);
  dsrt_clear_error();
  // Waited with the f64 wait: an error, and the handle is gone.
  int64_t h =
      _mlir_ciface_dsrt_allreduce_start_powersgd_f32(&g, &s, &s, &sh, 2, 1);
  ASSERT_GT(h, 0) << lastError();
  std::vector<double> out64(287);
  dsrt_memref1_f64 o64 = view(out64);
  _mlir_ciface_dsrt_allreduce_wait_f64(h, &o64);
  EXPECT_NE(lastError().find("not a started f64 all-reduce"),
            std::string::npos);
  EXPECT_EQ(dsrt_comm_failed(), 0);
}

//===----------------------------------------------------------------------===//
// Non-finite buckets and failures
//===----------------------------------------------------------------------===//

TEST_F(CommTest, NonFiniteBucketsSendZeros) {
  float inf = std::numeric_limits<float>::infinity();
  std::vector<float> residual = {0.5f, -0.5f, 2}, resOut;
  std::vector<float> out = allreduce({1, NAN, 3}, DSRT_COMPRESS_THREE_TIER, 0,
                                     0.5, 0.9, residual, &resOut);
  EXPECT_EQ(out, std::vector<float>(3, 0.0f));
  EXPECT_EQ(resOut, residual);
  EXPECT_EQ(allreduce({inf, 1}, DSRT_COMPRESS_NONE),
            std::vector<float>(2, 0.0f));
  EXPECT_EQ(allreduce({-inf, 1}, DSRT_COMPRESS_TOPK, 0.5),
            std::vector<float>(2, 0.0f));
  // 65520 overflows f16: non-finite too.
  EXPECT_EQ(allreduce({65520.0f, 1}, DSRT_COMPRESS_FP16),
            std::vector<float>(2, 0.0f));
  dsrt_comm_stats stats;
  dsrt_get_comm_stats(&stats);
  EXPECT_EQ(stats.nonfinite_buckets, 4u);
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();
}

TEST_F(CommTest, BadSchemeParametersAreErrors) {
  std::vector<float> g = {1, 2}, none;
  dsrt_memref1_f32 gv = view(g), e = view(none);
  EXPECT_EQ(_mlir_ciface_dsrt_allreduce_start_f32(
                &gv, &e, &e, DSRT_COMPRESS_THREE_TIER, 0.5, 0, 0),
            0);
  EXPECT_NE(lastError().find("p0 must be 0"), std::string::npos) << lastError();
  dsrt_clear_error();
  EXPECT_EQ(_mlir_ciface_dsrt_allreduce_start_f32(&gv, &e, &e, 9, 0, 0, 0), 0);
  EXPECT_NE(lastError().find("unknown compression scheme"), std::string::npos);
  dsrt_clear_error();
  std::vector<float> shortResidual(1);
  dsrt_memref1_f32 r = view(shortResidual);
  EXPECT_EQ(_mlir_ciface_dsrt_allreduce_start_f32(
                &gv, &r, &r, DSRT_COMPRESS_TOPK, 0.5, 0, 0),
            0);
  EXPECT_NE(lastError().find("residuals"), std::string::npos) << lastError();
  EXPECT_EQ(dsrt_comm_failed(), 0);
}

TEST_F(CommTest, TimeoutFailsTheCommunicatorForGood) {
  // A communication thread that sleeps 500 ms before each collective, and a
  // timeout of 50 ms.
  dsrt_comm_finalize();
  setenv("DSRT_COMM_TEST_DELAY_MS", "500", 1);
  dsrt_comm_config config = {0.05, 0, 0};
  int rc = dsrt_comm_init(&config);
  unsetenv("DSRT_COMM_TEST_DELAY_MS");
  ASSERT_EQ(rc, 0) << lastError();

  auto start = std::chrono::steady_clock::now();
  std::vector<float> grad(1024, 2.0f);
  EXPECT_EQ(allreduce(grad, DSRT_COMPRESS_NONE), grad);
  EXPECT_EQ(dsrt_comm_failed(), 1);
  EXPECT_NE(lastError().find("all-reduce #"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("(4096 bytes) did not complete within 0.05 s"),
            std::string::npos)
      << lastError();

  // Afterwards: local values at once, nothing new recorded.
  dsrt_clear_error();
  std::vector<float> resOut;
  EXPECT_EQ(allreduce(kTierInput, DSRT_COMPRESS_THREE_TIER, 1, 0.1, 2.0,
                      std::vector<float>(8, 0), &resOut),
            (std::vector<float>{0, 127, 0, 1.5f, -50, 0, 2, kDecodedPoint3}));
  EXPECT_EQ(resOut[4], -0.25f);
  float x[2] = {1, 2};
  EXPECT_EQ(dsrt_allreduce(x, 2, DSRT_F32, DSRT_REDUCE_SUM), -1);
  EXPECT_EQ(x[1], 2.0f);
  std::vector<float> in = {3}, out = {0};
  dsrt_memref1_f32 i = view(in), o = view(out);
  _mlir_ciface_dsrt_allreduce_f32(&i, &o, DSRT_REDUCE_MEAN);
  EXPECT_EQ(out[0], 3.0f);
  // PowerSGD: the gradient, and state_out = state_in.
  std::vector<float> bucket = wave<float>(287, 0.0, 1.0), stateOut;
  std::vector<float> state = wave<float>(322, 1.0, 0.5);
  EXPECT_EQ(powerSgd(bucket, state, kPowerSgdShapes, 2, 1, &stateOut), bucket);
  EXPECT_EQ(stateOut, state);
  EXPECT_EQ(dsrt_last_error(), nullptr) << lastError();

  // Finalize leaves the stuck thread behind.
  dsrt_comm_finalize();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, 0.4);
  EXPECT_EQ(dsrt_comm_failed(), 1);

  // Outside mpirun a new communicator may start.
  config.timeout_seconds = 30;
  ASSERT_EQ(dsrt_comm_init(&config), 0) << lastError();
  EXPECT_EQ(dsrt_comm_failed(), 0);
  EXPECT_EQ(allreduce({5}, DSRT_COMPRESS_NONE), std::vector<float>{5});
}

} // namespace

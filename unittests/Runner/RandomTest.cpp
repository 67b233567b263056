//===- RandomTest.cpp - Philox, dropout masks and random streams ----------===//

#include "ds/Runner/Random.h"
#include "ds/Runner/Npy.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace ds::runner;

namespace {

using Block = std::array<uint32_t, 4>;

std::string message(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

// Known-answer vectors of Random123 (kat_vectors, philox4x32 10 rounds).
TEST(Philox, KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Dropout, MatchesDefinition) {
  uint64_t key = 0x0123456789abcdefull;
  for (uint64_t i = 0; i < 1000; ++i) {
    uint64_t c = 0xfffffff0ull + i; // Crosses into the high counter word.
    Block out = philox4x32_10({uint32_t(c), uint32_t(c >> 32), 0, 0},
                              {uint32_t(key), uint32_t(key >> 32)});
    bool expected = double(out[0]) / 4294967296.0 >= 0.3;
    ASSERT_EQ(dropoutKeep(key, 0xfffffff0ull, i, 0.3), expected) << i;
    ASSERT_EQ(dropoutKeep(key, 0xfffffff0ull + i, 0, 0.3), expected) << i;
  }
  // p = 0 keeps everything, p = 1 nothing.
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_TRUE(dropoutKeep(7, 0, i, 0.0));
    EXPECT_FALSE(dropoutKeep(7, 0, i, 1.0));
  }
}

TEST(Dropout, KeepFraction) {
  const int n = 100000;
  for (double p : {0.1, 0.5, 0.9}) {
    for (uint64_t key : {uint64_t(1), uint64_t(0xdeadbeefcafef00dull)}) {
      int kept = 0;
      for (int i = 0; i < n; ++i)
        kept += dropoutKeep(key, 12345, i, p);
      double sigma = std::sqrt(p * (1 - p) / n);
      EXPECT_NEAR(double(kept) / n, 1 - p, 5 * sigma) << p << " " << key;
    }
  }
  // Different keys give different masks.
  int same = 0;
  for (int i = 0; i < 1000; ++i)
    same += dropoutKeep(1, 0, i, 0.5) == dropoutKeep(2, 0, i, 0.5);
  EXPECT_LT(same, 600);
}

TEST(PortableMath, MatchesLibm) {
  for (double x : {1e-300, 1e-17, 2.2e-16, 1e-5, 0.1, 0.5, 0.70710678,
                   0.7071068, 0.9999999, 1.0, 1.5, 3.0, 1e10}) {
    EXPECT_NEAR(portableLog(x), std::log(x),
                4e-16 * std::max(1.0, std::fabs(std::log(x))))
        << x;
  }
  for (int i = 0; i <= 4000; ++i) {
    double t = i / 4000.0;
    ASSERT_NEAR(portableCos2Pi(t), std::cos(2 * M_PI * t), 1e-15) << t;
  }
  EXPECT_EQ(portableCos2Pi(0.0), 1.0);
  EXPECT_EQ(portableCos2Pi(0.5), -1.0);
}

TEST(RandomStream, IsPhiloxOfSeedAndStream) {
  uint64_t seed = 0x1122334455667788ull, stream = 0x99aabbccddeeff00ull;
  RandomStream rng(seed, stream);
  for (uint64_t block = 0; block < 3; ++block) {
    Block expected = philox4x32_10(
        {uint32_t(block), 0, uint32_t(stream), uint32_t(stream >> 32)},
        {uint32_t(seed), uint32_t(seed >> 32)});
    for (uint32_t word : expected)
      EXPECT_EQ(rng.nextU32(), word);
  }
  EXPECT_EQ(rng.position(), 12u);
}

TEST(RandomStream, Deterministic) {
  RandomStream a(42, 7), b(42, 7), otherStream(42, 8), otherSeed(43, 7);
  int sameStream = 0, sameSeed = 0;
  for (int i = 0; i < 1000; ++i) {
    uint32_t x = a.nextU32();
    ASSERT_EQ(x, b.nextU32());
    sameStream += x == otherStream.nextU32();
    sameSeed += x == otherSeed.nextU32();
  }
  EXPECT_LT(sameStream, 3);
  EXPECT_LT(sameSeed, 3);

  // position() and seek() resume a stream mid-block.
  RandomStream c(5, 1);
  for (int i = 0; i < 7; ++i)
    c.nextU32();
  uint64_t pos = c.position();
  double expected[5];
  for (double &e : expected)
    e = c.normal();
  RandomStream d(5, 1);
  d.seek(pos);
  for (double e : expected)
    EXPECT_EQ(d.normal(), e);
}

// Pins the exact output so that a change to the stream (which would change
// every initialisation and synthetic data set) cannot go unnoticed.
TEST(RandomStream, GoldenValues) {
  // Independently, a Python Philox + math.log/math.cos Box-Muller gives
  // 2632642643, 0.713730137911603 and 0.0014971685902124363 (libm's
  // rounding differs in the last bits, which is why we do not use libm).
  RandomStream rng(42, 0);
  EXPECT_EQ(rng.nextU32(), 2632642643u);
  RandomStream normals(2024, 3);
  double first = normals.normal();
  double second = normals.normal();
  EXPECT_EQ(first, 0.713730137911603);
  EXPECT_EQ(second, 0.0014971685902125153);
}

TEST(RandomStream, Distributions) {
  RandomStream rng(1234, 0);
  const int n = 100000;
  double sum = 0, sumSq = 0, uSum = 0;
  int withinOneSigma = 0;
  for (int i = 0; i < n; ++i) {
    double u = rng.uniform01();
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    uSum += u;
    double z = rng.normal();
    sum += z;
    sumSq += z * z;
    withinOneSigma += std::fabs(z) < 1;
  }
  double mean = sum / n, var = sumSq / n - mean * mean;
  EXPECT_NEAR(uSum / n, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(double(n)));
  EXPECT_NEAR(std::sqrt(var), 1.0, 0.012);
  EXPECT_NEAR(double(withinOneSigma) / n, 0.6827, 0.007);

  // uniformInt: in range and every value about equally often.
  int counts[10] = {};
  for (int i = 0; i < n; ++i) {
    uint64_t v = rng.uniformInt(10);
    ASSERT_LT(v, 10u);
    ++counts[v];
  }
  for (int c : counts)
    EXPECT_NEAR(c, n / 10, 5 * std::sqrt(n * 0.1 * 0.9));
  EXPECT_EQ(rng.uniformInt(1), 0u);
}

TEST(Fill, NormalAndUniform) {
  HostTensor f32(DType::F32, {64, 32}), f64(DType::F64, {64, 32});
  ASSERT_EQ(message(fillNormal(f32, 0.02, 9, 3)), "");
  ASSERT_EQ(message(fillNormal(f64, 0.02, 9, 3)), "");
  double sumSq = 0;
  for (int64_t i = 0; i < f64.numElements(); ++i) {
    ASSERT_EQ(f32.getDouble(i), double(float(f64.getDouble(i))));
    sumSq += f64.getDouble(i) * f64.getDouble(i);
  }
  EXPECT_NEAR(std::sqrt(sumSq / f64.numElements()), 0.02, 0.001);
  HostTensor again(DType::F32, {64, 32});
  ASSERT_EQ(message(fillNormal(again, 0.02, 9, 3)), "");
  EXPECT_EQ(again, f32);
  ASSERT_EQ(message(fillNormal(again, 0.02, 9, 4)), "");
  EXPECT_NE(again, f32);

  HostTensor u(DType::F64, {1000});
  ASSERT_EQ(message(fillUniform(u, 0.5, 1, 2)), "");
  double lo = 1, hi = -1;
  for (double v : u.values<double>()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -0.5);
  EXPECT_LE(hi, 0.5);
  EXPECT_LT(lo, -0.45);
  EXPECT_GT(hi, 0.45);

  HostTensor bf(DType::BF16, {16});
  EXPECT_EQ(message(fillNormal(bf, 1.0, 1, 1)), "");
  HostTensor ints(DType::I64, {4});
  EXPECT_EQ(message(fillNormal(ints, 1.0, 1, 1)),
            "fillNormal: tensor has dtype i64, expected a float dtype");
  EXPECT_NE(message(fillUniform(ints, 1.0, 1, 1)), "");
}

TEST(Fill, Constant) {
  HostTensor f(DType::F32, {3}), i(DType::I32, {3}), b(DType::Bool, {2}),
      s(DType::I8, {2});
  ASSERT_EQ(message(fillConstant(f, 0.5)), "");
  EXPECT_EQ(f.values<float>()[2], 0.5f);
  ASSERT_EQ(message(fillConstant(i, -7)), "");
  EXPECT_EQ(i.values<int32_t>()[1], -7);
  ASSERT_EQ(message(fillConstant(b, 1)), "");
  EXPECT_EQ(b.getInt(0), 1);
  EXPECT_NE(message(fillConstant(i, 1.5)), "");
  EXPECT_NE(message(fillConstant(s, 300)), "");
  EXPECT_NE(message(fillConstant(b, 2)), "");
}

} // namespace

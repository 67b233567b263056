//===- TopKTest.cpp - dsrt_top_k_mask against a stable sort ---------------===//
//
// The top-k of mask updates must select exactly what NumPy's
// `argsort(kind="stable")[n - k:]` selects, ties included (the integration
// test compares masks bit for bit), and NaN must rank lowest.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/ds_runtime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace {

/// The reference: a stable ascending sort (NaN first), the last k.
std::vector<int8_t> reference(const std::vector<float> &s, int64_t k) {
  int64_t n = s.size();
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    bool na = std::isnan(s[a]), nb = std::isnan(s[b]);
    if (na != nb)
      return na;
    return !na && s[a] < s[b];
  });
  std::vector<int8_t> mask(n, 0);
  for (int64_t i = n - k; i < n; ++i)
    mask[order[i]] = 1;
  return mask;
}

std::vector<int8_t> runtime(std::vector<float> s, int64_t k) {
  std::vector<int8_t> out(s.size(), 7);
  int64_t n = s.size();
  dsrt_memref1_f32 in{s.data(), s.data(), 0, {n}, {1}};
  dsrt_memref1_i8 o{out.data(), out.data(), 0, {n}, {1}};
  _mlir_ciface_dsrt_top_k_mask_f32(&in, k, &o);
  return out;
}

TEST(TopKMask, MatchesStableSortWithTiesAndNaN) {
  dsrt_clear_error();
  std::mt19937 rng(3);
  for (int64_t n : {1, 2, 7, 64, 1000}) {
    std::vector<float> s(n);
    // Few distinct values: many ties; some NaN.
    std::uniform_int_distribution<int> pick(0, 5);
    for (float &x : s)
      x = pick(rng) == 5 ? NAN : float(pick(rng));
    for (int64_t k :
         {int64_t(-3), int64_t(0), int64_t(1), n / 2, n - 1, n, n + 4})
      EXPECT_EQ(runtime(s, k), reference(s, k)) << "n=" << n << " k=" << k;
  }
  EXPECT_EQ(dsrt_last_error(), nullptr);
}

TEST(TopKMask, F64AndStrides) {
  dsrt_clear_error();
  // Every other element of a strided view; ties drop the lower index.
  std::vector<double> s = {1, -9, 2, -9, 2, -9, 0, -9, 2, -9};
  std::vector<int8_t> out(5, 7);
  dsrt_memref1_f64 in{s.data(), s.data(), 0, {5}, {2}};
  dsrt_memref1_i8 o{out.data(), out.data(), 0, {5}, {1}};
  _mlir_ciface_dsrt_top_k_mask_f64(&in, 2, &o);
  EXPECT_EQ(out, (std::vector<int8_t>{0, 0, 1, 0, 1}));
  EXPECT_EQ(dsrt_last_error(), nullptr);
}

TEST(TopKMask, LengthMismatchIsAnError) {
  dsrt_clear_error();
  std::vector<float> s(4, 1.0f);
  std::vector<int8_t> out(3, 7);
  dsrt_memref1_f32 in{s.data(), s.data(), 0, {4}, {1}};
  dsrt_memref1_i8 o{out.data(), out.data(), 0, {3}, {1}};
  _mlir_ciface_dsrt_top_k_mask_f32(&in, 2, &o);
  ASSERT_NE(dsrt_last_error(), nullptr);
  EXPECT_NE(std::string(dsrt_last_error()).find("4 scores but a mask of 3"),
            std::string::npos);
  EXPECT_EQ(out, (std::vector<int8_t>{7, 7, 7}));
  dsrt_clear_error();
}

} // namespace

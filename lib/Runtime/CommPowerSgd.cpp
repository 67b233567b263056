//===- CommPowerSgd.cpp - PowerSGD low-rank gradient compression ----------===//
//
// PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019) as PyTorch DDP's
// powerSGD_hook computes it with warm start and error feedback: every large
// enough matrix of a bucket is approximated by P Q^T of rank r, from one
// step of subspace iteration started at the previous step's Q, so that only
// the P's and Q's cross the network. ds_runtime.h states the arithmetic
// step by step; this file follows it in the element type with plain loops
// whose sums run from 0 in index order (the tests replay them bit for bit),
// laid out so that the compiler vectorizes across independent sums only.
// The start prepares the bucket; everything else runs on the communication
// thread, single-threaded, since the OpenMP team belongs to the caller.
//
//===----------------------------------------------------------------------===//

#include "CommInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <algorithm>
#include <cmath>

using namespace dsrt;
using namespace dsrt::comm;

namespace {

/// SplitMix64's increment (2^64 divided by the golden ratio), also the
/// multiplier of the seed.
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

/// The double nearest 2 pi.
constexpr double kTwoPi = 6.283185307179586476925286766559;

/// SplitMix64 (Steele, Lea and Flood, 2014).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    state += kGolden;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1), never 0: the top 53 bits plus one half, times
  /// 2^-53.
  double uniform() { return (double(next() >> 11) + 0.5) * 0x1p-53; }
};

/// Fills q[count] with N(0, 1) samples seeded by the tensor alone, so that
/// every rank draws the same: Box-Muller in double on pairs of uniforms,
/// cosine then sine, each rounded to T (an odd count drops the last sine).
template <typename T>
void fillGaussian(T *q, int64_t count, const PowerSgdTensor &t) {
  uint64_t seed = uint64_t(t.index);
  for (int64_t v : {t.m, t.n, t.rank})
    seed = seed * kGolden + uint64_t(v);
  SplitMix64 rng{seed};
  for (int64_t i = 0; i < count; i += 2) {
    double u1 = rng.uniform();
    double u2 = rng.uniform();
    double radius = std::sqrt(-2.0 * std::log(u1));
    double angle = kTwoPi * u2;
    q[i] = static_cast<T>(radius * std::cos(angle));
    if (i + 1 < count)
      q[i + 1] = static_cast<T>(radius * std::sin(angle));
  }
}

/// PyTorch's _orthogonalize_gram_schmidt with epsilon 0 on the `cols`
/// columns of the row-major rows x cols matrix a: each column in order is
/// normalized (zeros when its norm is 0 or not finite), then its projection
/// is removed from the columns after it.
template <typename T> void orthogonalize(T *a, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < cols; ++i) {
    T squares = 0;
    for (int64_t row = 0; row < rows; ++row)
      squares += a[row * cols + i] * a[row * cols + i];
    T norm = std::sqrt(squares);
    bool usable = norm > 0 && std::isfinite(norm);
    for (int64_t row = 0; row < rows; ++row)
      a[row * cols + i] = usable ? a[row * cols + i] / norm : T(0);
    for (int64_t j = i + 1; j < cols; ++j) {
      T dot = 0;
      for (int64_t row = 0; row < rows; ++row)
        dot += a[row * cols + i] * a[row * cols + j];
      for (int64_t row = 0; row < rows; ++row)
        a[row * cols + j] -= dot * a[row * cols + i];
    }
  }
}

/// p[m x r] = x[m x n] q[n x r]: p[i][c] sums x[i][j] q[j][c] over j in
/// order.
template <typename T>
void multiply(const T *x, const T *q, int64_t m, int64_t n, int64_t r, T *p) {
  for (int64_t i = 0; i < m; ++i) {
    T *row = p + i * r;
    std::fill(row, row + r, T(0));
    for (int64_t j = 0; j < n; ++j) {
      T xij = x[i * n + j];
      const T *qj = q + j * r;
      for (int64_t c = 0; c < r; ++c)
        row[c] += xij * qj[c];
    }
  }
}

/// q[n x r] = x[m x n]^T p[m x r]: q[j][c] sums x[i][j] p[i][c] over i in
/// order.
template <typename T>
void multiplyTransposed(const T *x, const T *p, int64_t m, int64_t n, int64_t r,
                        T *q) {
  std::fill(q, q + n * r, T(0));
  for (int64_t i = 0; i < m; ++i) {
    const T *pi = p + i * r;
    for (int64_t j = 0; j < n; ++j) {
      T xij = x[i * n + j];
      T *qj = q + j * r;
      for (int64_t c = 0; c < r; ++c)
        qj[c] += xij * pi[c];
    }
  }
}

/// out[m x n] = p[m x r] q[n x r]^T: out[i][j] sums p[i][c] q[j][c] over c
/// in order (through q transposed, so that the loop runs along j).
template <typename T>
void multiplyOuter(const T *p, const T *q, int64_t m, int64_t n, int64_t r,
                   T *out) {
  std::vector<T> qt(static_cast<size_t>(n * r));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < r; ++c)
      qt[c * n + j] = q[j * r + c];
  for (int64_t i = 0; i < m; ++i) {
    T *row = out + i * n;
    std::fill(row, row + n, T(0));
    for (int64_t c = 0; c < r; ++c) {
      T pic = p[i * r + c];
      const T *qc = qt.data() + c * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] += pic * qc[j];
    }
  }
}

template <typename T> bool allFinite(const std::vector<T> &v) {
  return std::all_of(v.begin(), v.end(), [](T x) { return std::isfinite(x); });
}

template <typename T> bool allZero(const T *v, int64_t count) {
  return std::all_of(v, v + count, [](T x) { return x == 0; });
}

/// This rank sends zeros from now on (a P or Q of its overflowed).
template <typename T>
void dropContribution(PowerSgdWork<T> &work, std::vector<T> &send) {
  work.finite = false;
  countNonFinite();
  std::fill(work.input.begin(), work.input.end(), T(0));
  std::fill(send.begin(), send.end(), T(0));
}

/// In-place SUM all-reduce of v (nothing for an empty v: every rank has the
/// same layout, so all of them skip it).
template <typename T> Status sumOverRanks(std::vector<T> &v, const World &w) {
  if (v.empty())
    return Status::success();
  countBucketSent(double(v.size()) * sizeof(T));
  return allreduce(v.data(), v.data(), static_cast<int64_t>(v.size()),
                   sizeof(T) == 4 ? DSRT_F32 : DSRT_F64, DSRT_REDUCE_SUM,
                   w.deterministic);
}

bool addOverflows(int64_t &acc, int64_t v) {
  return __builtin_add_overflow(acc, v, &acc);
}

} // namespace

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

Status dsrt::comm::planPowerSgd(const int64_t *shapes, int64_t count,
                                int64_t rank, PowerSgdPlan &plan,
                                const char *what) {
  if (count < 0 || count % 2 != 0 || (count > 0 && !shapes))
    return DS_ERROR("%s: %lld shape entries (two per tensor, m and n)", what,
                    static_cast<long long>(count));
  if (rank < 1)
    return DS_ERROR("%s: the rank is %lld (at least 1)", what,
                    static_cast<long long>(rank));
  plan = PowerSgdPlan();
  for (int64_t k = 0; k < count / 2; ++k) {
    PowerSgdTensor t;
    t.index = k;
    t.at = plan.elements;
    t.m = shapes[2 * k];
    t.n = shapes[2 * k + 1];
    int64_t size = 0, qSize = 0, stateSize = 0;
    bool bad = t.m < 0 || t.n < 0 || __builtin_mul_overflow(t.m, t.n, &size) ||
               addOverflows(plan.elements, size);
    if (!bad && t.m > 1 && t.n > 1) {
      t.rank = std::min({rank, t.m, t.n});
      t.stateAt = plan.stateSize;
      bad = __builtin_mul_overflow(t.n, rank, &qSize) ||
            __builtin_add_overflow(size, qSize, &stateSize) ||
            addOverflows(plan.stateSize, stateSize);
      // 2 (m + n) r < m n, in 128 bits (m n fits in 64).
      __int128 compressedSize = __int128(t.m + t.n) * t.rank;
      t.compressed = 2 * compressedSize < __int128(size);
    }
    if (bad)
      return DS_ERROR("%s: tensor %lld of shape %lld x %lld: a negative size "
                      "or a bucket or state too large",
                      what, static_cast<long long>(k),
                      static_cast<long long>(t.m), static_cast<long long>(t.n));
    if (t.compressed) {
      plan.pSize += t.m * t.rank;
      plan.qSize += t.n * t.rank;
    } else {
      plan.uncompressed += size;
    }
    plan.tensors.push_back(t);
  }
  return Status::success();
}

int64_t dsrt_powersgd_state_size(const int64_t *shapes, int64_t count,
                                 int64_t rank) {
  PowerSgdPlan plan;
  if (planPowerSgd(shapes, count, rank, plan, "dsrt_powersgd_state_size")
          .failed())
    return -1;
  return plan.stateSize;
}

//===----------------------------------------------------------------------===//
// Start and exchange
//===----------------------------------------------------------------------===//

template <typename T>
void dsrt::comm::preparePowerSgd(PowerSgdWork<T> &work,
                                 const std::vector<T> &grad, int size) {
  T divisor = static_cast<T>(size);
  work.input.resize(grad.size());
  for (const PowerSgdTensor &t : work.plan.tensors) {
    const T *g = grad.data() + t.at;
    T *x = work.input.data() + t.at;
    int64_t count = t.m * t.n;
    for (int64_t i = 0; i < count; ++i)
      x[i] = g[i] / divisor;
    if (t.compressed) {
      const T *error = work.stateIn.data() + t.stateAt;
      for (int64_t i = 0; i < count; ++i)
        x[i] = x[i] + error[i];
    }
  }
  work.finite = allFinite(work.input);
  if (!work.finite)
    std::fill(work.input.begin(), work.input.end(), T(0));
}

template <typename T>
Status dsrt::comm::exchangePowerSgd(PowerSgdWork<T> &work, const World &world,
                                    std::vector<T> &result) {
  const PowerSgdPlan &plan = work.plan;
  // The first all-reduce: the uncompressed tensors, then every P; the
  // second: every Q (first this rank's orthogonalized Q_k, as scratch).
  std::vector<T> first(static_cast<size_t>(plan.uncompressed + plan.pSize));
  std::vector<T> second(static_cast<size_t>(plan.qSize));

  int64_t u = 0, pAt = plan.uncompressed, qAt = 0;
  for (const PowerSgdTensor &t : plan.tensors) {
    const T *x = work.input.data() + t.at;
    if (!t.compressed) {
      std::copy(x, x + t.m * t.n, first.begin() + u);
      u += t.m * t.n;
      continue;
    }
    T *q = second.data() + qAt;
    const T *qIn = work.stateIn.data() + t.stateAt + t.m * t.n;
    std::copy(qIn, qIn + t.n * t.rank, q);
    if (allZero(q, t.n * t.rank))
      fillGaussian(q, t.n * t.rank, t);
    orthogonalize(q, t.n, t.rank);
    multiply(x, q, t.m, t.n, t.rank, first.data() + pAt);
    pAt += t.m * t.rank;
    qAt += t.n * t.rank;
  }
  if (work.finite && !allFinite(first))
    dropContribution(work, first);
  DS_RETURN_IF_ERROR(sumOverRanks(first, world));

  pAt = plan.uncompressed;
  qAt = 0;
  for (const PowerSgdTensor &t : plan.tensors) {
    if (!t.compressed)
      continue;
    T *p = first.data() + pAt;
    orthogonalize(p, t.m, t.rank);
    multiplyTransposed(work.input.data() + t.at, p, t.m, t.n, t.rank,
                       second.data() + qAt);
    pAt += t.m * t.rank;
    qAt += t.n * t.rank;
  }
  if (work.finite && !allFinite(second))
    dropContribution(work, second);
  DS_RETURN_IF_ERROR(sumOverRanks(second, world));

  // The result and the new state (a copy of the old one where unchanged).
  work.stateOut = work.stateIn;
  u = 0;
  pAt = plan.uncompressed;
  qAt = 0;
  for (const PowerSgdTensor &t : plan.tensors) {
    int64_t count = t.m * t.n;
    T *out = result.data() + t.at;
    if (!t.compressed) {
      std::copy(first.begin() + u, first.begin() + u + count, out);
      u += count;
      continue;
    }
    const T *p = first.data() + pAt;
    const T *q = second.data() + qAt;
    multiplyOuter(p, q, t.m, t.n, t.rank, out);
    T *error = work.stateOut.data() + t.stateAt;
    if (work.finite) {
      // PyTorch's error, M - (the mean's approximation), in the units of
      // M / N that this rank adds back next time: with every rank's M
      // equal and approximated exactly, it is zero.
      const T *x = work.input.data() + t.at;
      T ranks = static_cast<T>(world.size);
      for (int64_t i = 0; i < count; ++i)
        error[i] = x[i] - out[i] / ranks;
    }
    if (!allZero(q, t.n * t.rank))
      std::copy(q, q + t.n * t.rank, error + count);
    pAt += t.m * t.rank;
    qAt += t.n * t.rank;
  }
  return Status::success();
}

template void dsrt::comm::preparePowerSgd<float>(PowerSgdWork<float> &,
                                                 const std::vector<float> &,
                                                 int);
template void dsrt::comm::preparePowerSgd<double>(PowerSgdWork<double> &,
                                                  const std::vector<double> &,
                                                  int);
template Status dsrt::comm::exchangePowerSgd<float>(PowerSgdWork<float> &,
                                                    const World &,
                                                    std::vector<float> &);
template Status dsrt::comm::exchangePowerSgd<double>(PowerSgdWork<double> &,
                                                     const World &,
                                                     std::vector<double> &);

//===- PowerSgdReference.h - PowerSGD replayed from all ranks ---*- C++ -*-===//
//
// A second, plain implementation of the PowerSGD all-reduce of ds_runtime.h
// for the tests: given every rank's gradient and state, it replays the
// documented steps (the layout, the generator, PyTorch's Gram-Schmidt, the
// products with their sums from 0 in index order, and the sums over ranks in
// rank order, as deterministic mode and a world of one compute them) and
// returns the result and every rank's new state. CommTest calls it with one
// rank, ds-runtime-comm-check with the all-gathered inputs of all of them.
//
//===----------------------------------------------------------------------===//

#ifndef DS_UNITTESTS_RUNTIME_POWERSGDREFERENCE_H
#define DS_UNITTESTS_RUNTIME_POWERSGDREFERENCE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace dsrt_test {

/// What PowerSGD gives for one bucket.
template <typename T> struct PowerSgdOutcome {
  std::vector<T> result;              ///< the same on every rank
  std::vector<std::vector<T>> states; ///< each rank's state_out
  std::vector<bool> finite;           ///< whether each rank sent its values
  int64_t sentElements = 0;           ///< per rank: uncompressed + P + Q
};

namespace powersgd_detail {

/// SplitMix64 from 2^64 / golden ratio, seeded as ds_runtime.h says.
inline void gaussian(std::vector<double> &out, int64_t count, int64_t k,
                     int64_t m, int64_t n, int64_t r) {
  const uint64_t golden = 0x9E3779B97F4A7C15ULL;
  uint64_t s =
      ((uint64_t(k) * golden + uint64_t(m)) * golden + uint64_t(n)) * golden +
      uint64_t(r);
  auto next = [&] {
    s += golden;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  out.clear();
  while (int64_t(out.size()) < count) {
    double u1 = (double(next() >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double(next() >> 11) + 0.5) / 9007199254740992.0;
    double radius = std::sqrt(-2.0 * std::log(u1));
    out.push_back(radius * std::cos(6.283185307179586 * u2));
    out.push_back(radius * std::sin(6.283185307179586 * u2));
  }
  out.resize(count);
}

/// Column Gram-Schmidt of a rows x cols row-major matrix, PyTorch's order.
template <typename T>
void orthogonalize(std::vector<T> &a, int64_t rows, int64_t cols) {
  auto at = [&](int64_t row, int64_t col) -> T & {
    return a[row * cols + col];
  };
  for (int64_t i = 0; i < cols; ++i) {
    T squares = 0;
    for (int64_t row = 0; row < rows; ++row)
      squares += at(row, i) * at(row, i);
    T norm = std::sqrt(squares);
    for (int64_t row = 0; row < rows; ++row)
      at(row, i) = norm > 0 && std::isfinite(norm) ? at(row, i) / norm : T(0);
    for (int64_t j = i + 1; j < cols; ++j) {
      T dot = 0;
      for (int64_t row = 0; row < rows; ++row)
        dot += at(row, i) * at(row, j);
      for (int64_t row = 0; row < rows; ++row)
        at(row, j) -= dot * at(row, i);
    }
  }
}

/// Sum over ranks in rank order: rank 0's value, plus rank 1's, ...
template <typename T>
std::vector<T> sumRanks(const std::vector<std::vector<T>> &parts) {
  std::vector<T> sum = parts[0];
  for (size_t r = 1; r < parts.size(); ++r)
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += parts[r][i];
  return sum;
}

} // namespace powersgd_detail

/// PowerSGD with active != 0 over ranks 0..N-1 (N = grads.size()).
template <typename T>
PowerSgdOutcome<T> powerSgdReference(const std::vector<std::vector<T>> &grads,
                                     const std::vector<std::vector<T>> &states,
                                     const std::vector<int64_t> &shapes,
                                     int64_t rank) {
  using namespace powersgd_detail;
  int ranks = int(grads.size());
  PowerSgdOutcome<T> o;
  o.states = states;
  o.result.assign(grads[0].size(), T(0));

  // Per rank: x = grad / N (+ E for the compressed matrices), or zeros.
  struct Tensor {
    int64_t k, at, m, n, r, stateAt;
    bool compressed;
  };
  std::vector<Tensor> tensors;
  int64_t at = 0, stateAt = 0;
  for (size_t k = 0; k < shapes.size() / 2; ++k) {
    int64_t m = shapes[2 * k], n = shapes[2 * k + 1];
    bool matrix = m > 1 && n > 1;
    int64_t r = std::min({rank, m, n});
    Tensor t;
    t.k = int64_t(k);
    t.at = at;
    t.m = m;
    t.n = n;
    t.r = r;
    t.stateAt = matrix ? stateAt : -1;
    t.compressed = matrix && 2 * (m + n) * r < m * n;
    tensors.push_back(t);
    at += m * n;
    if (matrix)
      stateAt += m * n + n * rank;
  }
  std::vector<std::vector<T>> x(ranks);
  for (int p = 0; p < ranks; ++p) {
    x[p] = grads[p];
    bool finite = true;
    for (const Tensor &t : tensors)
      for (int64_t i = 0; i < t.m * t.n; ++i) {
        T v = grads[p][t.at + i] / T(ranks);
        if (t.compressed)
          v = v + states[p][t.stateAt + i];
        finite = finite && std::isfinite(v);
        x[p][t.at + i] = v;
      }
    if (!finite)
      std::fill(x[p].begin(), x[p].end(), T(0));
    o.finite.push_back(finite);
  }

  for (const Tensor &t : tensors) {
    int64_t m = t.m, n = t.n, r = t.r, size = m * n;
    if (!t.compressed) {
      o.sentElements += size;
      for (int64_t i = 0; i < size; ++i) {
        T acc = x[0][t.at + i];
        for (int p = 1; p < ranks; ++p)
          acc += x[p][t.at + i];
        o.result[t.at + i] = acc;
      }
      continue;
    }
    o.sentElements += (m + n) * r;
    // P_p = M_p Q_p with each rank's Q_k (random when all zeros),
    // orthogonalized.
    std::vector<std::vector<T>> ps(ranks, std::vector<T>(m * r));
    for (int p = 0; p < ranks; ++p) {
      std::vector<T> q(states[p].begin() + t.stateAt + size,
                       states[p].begin() + t.stateAt + size + n * r);
      if (std::all_of(q.begin(), q.end(), [](T v) { return v == 0; })) {
        std::vector<double> g;
        gaussian(g, n * r, t.k, m, n, r);
        for (int64_t i = 0; i < n * r; ++i)
          q[i] = T(g[i]);
      }
      orthogonalize(q, n, r);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t c = 0; c < r; ++c) {
          T acc = 0;
          for (int64_t j = 0; j < n; ++j)
            acc += x[p][t.at + i * n + j] * q[j * r + c];
          ps[p][i * r + c] = acc;
        }
    }
    std::vector<T> pSum = sumRanks(ps);
    orthogonalize(pSum, m, r);
    // Q_p = M_p^T P.
    std::vector<std::vector<T>> qs(ranks, std::vector<T>(n * r));
    for (int p = 0; p < ranks; ++p)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < r; ++c) {
          T acc = 0;
          for (int64_t i = 0; i < m; ++i)
            acc += x[p][t.at + i * n + j] * pSum[i * r + c];
          qs[p][j * r + c] = acc;
        }
    std::vector<T> qSum = sumRanks(qs);
    bool qZero =
        std::all_of(qSum.begin(), qSum.end(), [](T v) { return v == 0; });
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t c = 0; c < r; ++c)
          acc += pSum[i * r + c] * qSum[j * r + c];
        o.result[t.at + i * n + j] = acc;
      }
    for (int p = 0; p < ranks; ++p) {
      if (o.finite[p])
        for (int64_t i = 0; i < size; ++i)
          o.states[p][t.stateAt + i] =
              x[p][t.at + i] - o.result[t.at + i] / T(ranks);
      if (!qZero)
        std::copy(qSum.begin(), qSum.end(),
                  o.states[p].begin() + t.stateAt + size);
    }
  }
  return o;
}

} // namespace dsrt_test

#endif // DS_UNITTESTS_RUNTIME_POWERSGDREFERENCE_H

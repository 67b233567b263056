//===- BlockSparseBenchmark.cpp - Block-sparse products against dense -----===//
//
// ds-runtime-sparse-benchmark: the three block-sparse training products of a
// linear layer (forward Y = X W^T, dX = dY W, dW = dY^T X sampled on the
// mask) next to oneDNN's dense sgemm on the same shapes, in one process, the
// dense and sparse calls interleaved so that a noisy neighbour slows both
// alike; each cell is the median of several repetitions. For every shape
// (M, K, N), weight W [N, K], and block sparsity s (random 8x8 masks) it
// prints the dense and sparse times, the speedup, the useful GFLOP/s of the
// sparse call (2 * M * active weights / time) and the FLOP bound on the
// speedup, 1 / (1 - s).
//
//   ds-runtime-sparse-benchmark [--quick] [--threads N] [--reps N]
//                               [--sparsity s1,s2,...]
//
// --quick runs one shape with fewer repetitions. DSRT_SPARSE_KERNEL picks
// the kernel as for any runtime call (auto, the default, may run dense above
// the crossover density; the `path` column says which ran).
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/ds_runtime.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

struct Shape {
  int64_t m, k, n;
};

struct Options {
  bool quick = false;
  int threads = 2;
  int reps = 0; // 0: 5, or 3 with --quick
  std::vector<double> sparsities = {0.5, 0.8, 0.9, 0.95, 0.98};
};

/// Dense row-major storage and its rank-2 descriptor.
struct Matrix {
  std::vector<float> data;
  dsrt_memref2_f32 desc;

  Matrix(int64_t rows, int64_t cols, std::mt19937 &rng) : data(rows * cols) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float &v : data)
      v = dist(rng);
    desc = {data.data(), data.data(), 0, {rows, cols}, {cols, 1}};
  }
};

/// A random mask of [rows, cols] 8x8 blocks with round((1 - s) * blocks)
/// active blocks.
struct Mask {
  std::vector<int8_t> data;
  dsrt_memref2_i8 desc;
  int64_t active;

  Mask(int64_t rows, int64_t cols, double sparsity, std::mt19937 &rng)
      : data(rows * cols, 0) {
    active = std::llround((1.0 - sparsity) * double(rows * cols));
    std::vector<int64_t> order(rows * cols);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i = 0; i < active; ++i)
      data[order[i]] = 1;
    desc = {data.data(), data.data(), 0, {rows, cols}, {cols, 1}};
  }
};

double seconds(const std::function<void()> &fn) {
  auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool parse(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--quick") {
      options.quick = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      options.threads = std::atoi(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      options.reps = std::atoi(argv[++i]);
    } else if (arg == "--sparsity" && i + 1 < argc) {
      options.sparsities.clear();
      for (char *s = std::strtok(argv[++i], ","); s;
           s = std::strtok(nullptr, ","))
        options.sparsities.push_back(std::atof(s));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--threads N] [--reps N] "
                   "[--sparsity s1,s2,...]\n",
                   argv[0]);
      return false;
    }
  }
  if (options.reps <= 0)
    options.reps = options.quick ? 3 : 5;
  return options.threads >= 1;
}

/// Benchmarks the three products of one shape at one sparsity; prints three
/// rows. Returns false on a runtime error.
bool benchmark(const Shape &s, double sparsity, const Options &options) {
  std::mt19937 rng(std::hash<double>()(sparsity) ^ (s.k * 31 + s.n));
  Matrix x(s.m, s.k, rng), w(s.n, s.k, rng), dy(s.m, s.n, rng);
  Matrix y(s.m, s.n, rng), dx(s.m, s.k, rng), dw(s.n, s.k, rng);
  Mask mask(s.n / 8, s.k / 8, sparsity, rng);
  double useful = 2.0 * double(s.m) * double(mask.active) * 64.0;

  const char *names[3] = {"fwd", "dX", "dW"};
  std::function<void()> dense[3] = {
      [&] {
        dnnl_sgemm('N', 'T', s.m, s.n, s.k, 1.0f, x.data.data(), s.k,
                   w.data.data(), s.k, 0.0f, y.data.data(), s.n);
      },
      [&] {
        dnnl_sgemm('N', 'N', s.m, s.k, s.n, 1.0f, dy.data.data(), s.n,
                   w.data.data(), s.k, 0.0f, dx.data.data(), s.k);
      },
      [&] {
        dnnl_sgemm('T', 'N', s.n, s.k, s.m, 1.0f, dy.data.data(), s.n,
                   x.data.data(), s.k, 0.0f, dw.data.data(), s.k);
      }};
  std::function<void()> sparse[3] = {
      [&] {
        _mlir_ciface_dsrt_block_sparse_matmul_f32(&x.desc, &w.desc, &mask.desc,
                                                  &y.desc, 1, 8);
      },
      [&] {
        _mlir_ciface_dsrt_block_sparse_matmul_f32(&dy.desc, &w.desc, &mask.desc,
                                                  &dx.desc, 0, 8);
      },
      [&] {
        _mlir_ciface_dsrt_block_sparse_sddmm_f32(&dy.desc, &x.desc, &mask.desc,
                                                 &dw.desc, 8);
      }};

  for (int p = 0; p < 3; ++p) {
    // One untimed call of each warms caches, pages and oneDNN's kernels.
    dense[p]();
    sparse[p]();
    dsrt_stats before, after;
    dsrt_get_stats(&before);
    std::vector<double> denseTimes, sparseTimes;
    for (int r = 0; r < options.reps; ++r) {
      denseTimes.push_back(seconds(dense[p]));
      sparseTimes.push_back(seconds(sparse[p]));
    }
    dsrt_get_stats(&after);
    if (const char *error = dsrt_last_error()) {
      std::fprintf(stderr, "runtime error: %s\n", error);
      return false;
    }
    bool fellBack = after.sparse_fallback_calls > before.sparse_fallback_calls;
    double d = median(denseTimes), sp = median(sparseTimes);
    std::printf("%5lld %5lld %5lld  %5.1f%%  %-3s  %9.2f %9.2f %7.2fx %8.1f "
                "%7.1fx  %s\n",
                static_cast<long long>(s.m), static_cast<long long>(s.k),
                static_cast<long long>(s.n), 100.0 * sparsity, names[p],
                1e3 * d, 1e3 * sp, d / sp, useful / sp * 1e-9,
                1.0 / std::max(1.0 - sparsity, 1e-9),
                fellBack ? "dense" : "sparse");
    std::fflush(stdout);
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  if (!parse(argc, argv, options))
    return 2;
  dsrt_set_num_threads(options.threads);
  const char *kernel = std::getenv("DSRT_SPARSE_KERNEL");
  std::printf("# block-sparse products vs oneDNN dnnl_sgemm, %d thread(s), "
              "median of %d, DSRT_SPARSE_KERNEL=%s\n",
              options.threads, options.reps, kernel ? kernel : "auto");
  std::printf("# W [N, K]; fwd Y = X W^T, dX = dY W, dW = dY^T X on the "
              "mask; GFLOP/s = 2 M active / sparse time\n");
  std::printf("%5s %5s %5s  %6s  %-3s  %9s %9s %8s %8s %8s  %s\n", "M", "K",
              "N", "sparse", "op", "dense ms", "sparse ms", "speedup",
              "GFLOP/s", "limit", "path");
  std::vector<Shape> shapes = {{2048, 1024, 1024}};
  if (!options.quick) {
    shapes.push_back({2048, 1024, 4096});
    shapes.push_back({2048, 4096, 1024});
  }
  for (const Shape &s : shapes)
    for (double sparsity : options.sparsities)
      if (!benchmark(s, sparsity, options))
        return 1;
  return 0;
}

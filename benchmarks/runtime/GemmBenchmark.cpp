//===- GemmBenchmark.cpp - libdsrt GEMM speed against raw oneDNN ----------===//
//
// The f32 batched GEMM of the runtime next to a direct dnnl_sgemm call on
// the same data, so the overhead of the C ABI (checks, layout planning,
// batch distribution) shows as a ratio. GFLOP/s is reported as the `flops`
// counter. Run with --benchmark_min_time=... on a quiet machine; the thread
// count is the benchmark's second argument.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/ds_runtime.h"

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <vector>

namespace {

/// Dense row-major [batches, rows, cols] storage and its descriptor.
struct Tensor {
  std::vector<float> data;
  dsrt_memref3_f32 desc;

  Tensor(int64_t batches, int64_t rows, int64_t cols, float value)
      : data(batches * rows * cols, value) {
    desc = {data.data(),
            data.data(),
            0,
            {batches, rows, cols},
            {rows * cols, cols, 1}};
  }
};

void setFlops(benchmark::State &state, double perIteration) {
  state.counters["flops"] = benchmark::Counter(
      perIteration, benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}

/// Args: {n, threads}: one n x n x n GEMM through the runtime.
void BM_RuntimeSquare(benchmark::State &state) {
  int64_t n = state.range(0);
  dsrt_set_num_threads(static_cast<int>(state.range(1)));
  Tensor a(1, n, n, 0.5f), b(1, n, n, 0.25f), c(1, n, n, 0.0f);
  for (auto _ : state) {
    _mlir_ciface_dsrt_matmul_f32(&a.desc, &b.desc, &c.desc, 0, 0);
    benchmark::DoNotOptimize(c.data.data());
  }
  if (dsrt_last_error())
    state.SkipWithError(dsrt_last_error());
  setFlops(state, 2.0 * n * n * n);
}

/// Args: {n, threads}: the same GEMM as one direct dnnl_sgemm call.
void BM_OneDnnSquare(benchmark::State &state) {
  int64_t n = state.range(0);
  dsrt_set_num_threads(static_cast<int>(state.range(1)));
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
               c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  setFlops(state, 2.0 * n * n * n);
}

/// Args: {threads}: attention scores, 64 batches of Q K^T, 128x128x64.
void BM_RuntimeAttentionBatch(benchmark::State &state) {
  dsrt_set_num_threads(static_cast<int>(state.range(0)));
  Tensor q(64, 128, 64, 0.5f), k(64, 128, 64, 0.25f), s(64, 128, 128, 0.0f);
  for (auto _ : state) {
    _mlir_ciface_dsrt_matmul_f32(&q.desc, &k.desc, &s.desc, 0, 1);
    benchmark::DoNotOptimize(s.data.data());
  }
  if (dsrt_last_error())
    state.SkipWithError(dsrt_last_error());
  setFlops(state, 2.0 * 64 * 128 * 128 * 64);
}

/// Args: {threads}: the same 64 GEMMs as a loop of dnnl_sgemm calls.
void BM_OneDnnAttentionLoop(benchmark::State &state) {
  dsrt_set_num_threads(static_cast<int>(state.range(0)));
  std::vector<float> q(64 * 128 * 64, 0.5f), k(64 * 128 * 64, 0.25f),
      s(64 * 128 * 128);
  for (auto _ : state) {
    for (int64_t b = 0; b < 64; ++b)
      dnnl_sgemm('N', 'T', 128, 128, 64, 1.0f, q.data() + b * 128 * 64, 64,
                 k.data() + b * 128 * 64, 64, 0.0f, s.data() + b * 128 * 128,
                 128);
    benchmark::DoNotOptimize(s.data());
  }
  setFlops(state, 2.0 * 64 * 128 * 128 * 64);
}

/// A tiny GEMM: the fixed cost of one runtime call.
void BM_RuntimeCallOverhead(benchmark::State &state) {
  dsrt_set_num_threads(1);
  Tensor a(1, 4, 4, 0.5f), b(1, 4, 4, 0.25f), c(1, 4, 4, 0.0f);
  for (auto _ : state)
    _mlir_ciface_dsrt_matmul_f32(&a.desc, &b.desc, &c.desc, 0, 0);
}

/// Args: {m, k, n, kind}: a linear layer's GEMM, activations [m, k] times
/// a weight stored [n, k] (transposed), as quantized inference runs it.
/// kind 0: f32 through the runtime; 1: int8 with 7-bit activations (the x86
/// qconfig's reduce_range: oneDNN's u8 x s8 GEMM); 2: int8 with full-range
/// activations (two GEMMs on 7-bit halves where the CPU has no VNNI).
void BM_LinearLayer(benchmark::State &state) {
  int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  int kind = static_cast<int>(state.range(3));
  dsrt_set_num_threads(0);
  if (kind == 0) {
    Tensor a(1, m, k, 0.5f), b(1, n, k, 0.25f), c(1, m, n, 0.0f);
    for (auto _ : state) {
      _mlir_ciface_dsrt_matmul_f32(&a.desc, &b.desc, &c.desc, 0, 1);
      benchmark::DoNotOptimize(c.data.data());
    }
  } else {
    std::vector<int8_t> a(m * k), b(n * k);
    std::vector<int32_t> c(m * n);
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = kind == 1 ? int8_t(i * 37 % 128) : int8_t(i * 37 % 256 - 128);
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = int8_t(i * 91 % 256 - 128);
    dsrt_memref3_i8 ad = {a.data(), a.data(), 0, {1, m, k}, {m * k, k, 1}};
    dsrt_memref3_i8 bd = {b.data(), b.data(), 0, {1, n, k}, {n * k, k, 1}};
    dsrt_memref3_i32 cd = {c.data(), c.data(), 0, {1, m, n}, {m * n, n, 1}};
    for (auto _ : state) {
      _mlir_ciface_dsrt_matmul_s8s8s32(&ad, &bd, &cd, 0, 1);
      benchmark::DoNotOptimize(c.data());
    }
  }
  if (dsrt_last_error())
    state.SkipWithError(dsrt_last_error());
  setFlops(state, 2.0 * m * n * k);
}

} // namespace

BENCHMARK(BM_RuntimeSquare)
    ->ArgsProduct({{1024, 2048}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_OneDnnSquare)
    ->ArgsProduct({{1024, 2048}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_RuntimeAttentionBatch)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_OneDnnAttentionLoop)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_RuntimeCallOverhead);
BENCHMARK(BM_LinearLayer)
    ->ArgsProduct({{64}, {256, 1024}, {1024, 256}, {0, 1, 2}})
    ->ArgNames({"m", "k", "n", "kind"})
    ->UseRealTime();

BENCHMARK_MAIN();

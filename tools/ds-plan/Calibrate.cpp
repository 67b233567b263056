//===- Calibrate.cpp - Measure this CPU as a planner device ---------------===//
//
// Each rate is the best of three timed runs after a warm-up, with the
// runtime's thread count (OMP_NUM_THREADS or all cores), so the numbers are
// what a ds-run step on this machine can reach, not what the datasheet
// promises:
//
//  - f32 / int8 / f64: the runtime's GEMM entry points on n x n x n
//    products (n = 128, 256, 512, 1024; f64, a plain reference loop, only
//    to 512), their geometric mean kept: a training step's GEMMs come in
//    every size, and the largest's peak made predicted stage times 1.3x
//    too short for a d_model-128 GPT (benchmarks/pipeline_bench.py);
//  - sparse speed-up: the 8x8 block-sparse product at density 0.1 on the
//    1024-cubed shape, per executed FLOP, over the dense f32 rate;
//  - memory bandwidth: a copy by every runtime thread (read + write bytes,
//    STREAM's convention); memory: the physical RAM;
//  - link: two CPU devices of one node exchange through shared memory, so
//    the link bandwidth is one thread's copy and the latency a ping-pong of
//    two threads on one cache line. An MPI ping-pong would need this tool
//    to launch itself under mpirun; it measures the same shared-memory path
//    (Open MPI's vader transport) plus MPI's own overhead of a microsecond
//    or so.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "ds/Runtime/ds_runtime.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

using namespace ds;
using partition::DeviceProfile;
using partition::Precision;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The best of `runs` timings of `fn` after one untimed warm-up call.
template <typename Fn> double bestOf(unsigned runs, Fn fn) {
  fn();
  double best = 1e300;
  for (unsigned i = 0; i < runs; ++i) {
    double start = now();
    fn();
    best = std::min(best, now() - start);
  }
  return best;
}

/// A rank-3 descriptor of a dense row-major [1, rows, cols] matrix.
template <typename Desc, typename T>
Desc describe(std::vector<T> &data, int64_t rows, int64_t cols) {
  return Desc{
      data.data(), data.data(), 0, {1, rows, cols}, {rows * cols, cols, 1}};
}

/// Fills `v` with small pseudo-random values (fixed seed).
template <typename T> void fill(std::vector<T> &v, int lo, int hi) {
  std::mt19937 gen(42);
  std::uniform_int_distribution<int> dist(lo, hi);
  for (T &x : v)
    x = T(dist(gen));
}

/// Rate (FLOP/s) of one n-cubed GEMM through the runtime entry point
/// `gemm`, or 0 when the runtime records an error.
template <typename TIn, typename TOut, typename DescIn, typename DescOut,
          typename Gemm>
double gemmRate(int64_t n, Gemm gemm) {
  std::vector<TIn> a(n * n), b(n * n);
  std::vector<TOut> c(n * n);
  fill(a, -64, 63);
  fill(b, -64, 63);
  DescIn da = describe<DescIn>(a, n, n), db = describe<DescIn>(b, n, n);
  DescOut dc = describe<DescOut>(c, n, n);
  dsrt_clear_error();
  double t = bestOf(3, [&] { gemm(&da, &db, &dc, 0, 0); });
  if (dsrt_last_error())
    return 0;
  return 2.0 * double(n) * double(n) * double(n) / t;
}

/// The geometric mean of the rates over `sizes`, each logged (0 when one
/// failed).
template <typename Measure>
double typicalRate(llvm::raw_ostream &log, llvm::StringRef what,
                   llvm::ArrayRef<int64_t> sizes, Measure measure) {
  double logSum = 0;
  for (int64_t n : sizes) {
    double rate = measure(n);
    log << llvm::formatv("ds-plan: calibrate: {0} GEMM {1}^3: {2} GFLOP/s\n",
                         what, n, llvm::format("%.1f", rate / 1e9));
    if (rate <= 0)
      return 0;
    logSum += std::log(rate);
  }
  return std::exp(logSum / double(sizes.size()));
}

/// Executed FLOP/s of the 8x8 block-sparse product (density 0.1) over
/// `denseRate`.
double sparseSpeedup(llvm::raw_ostream &log, double denseRate) {
  const int64_t n = 1024, block = 8, blocks = n / block;
  std::vector<float> x(n * n), w(n * n), y(n * n);
  fill(x, -4, 4);
  fill(w, -4, 4);
  std::vector<int8_t> mask(blocks * blocks, 0);
  std::mt19937 gen(7);
  std::bernoulli_distribution active(0.1);
  int64_t count = 0;
  for (int8_t &m : mask)
    count += (m = active(gen) ? 1 : 0);
  auto desc2 = [](auto &v, int64_t rows, int64_t cols) {
    using T = std::remove_reference_t<decltype(v[0])>;
    using Desc = std::conditional_t<std::is_same_v<T, float>, dsrt_memref2_f32,
                                    dsrt_memref2_i8>;
    return Desc{v.data(), v.data(), 0, {rows, cols}, {cols, 1}};
  };
  auto dx = desc2(x, n, n), dw = desc2(w, n, n), dy = desc2(y, n, n);
  auto dm = desc2(mask, blocks, blocks);
  dsrt_clear_error();
  double t = bestOf(3, [&] {
    _mlir_ciface_dsrt_block_sparse_matmul_f32(&dx, &dw, &dm, &dy, 1, block);
  });
  if (dsrt_last_error() || denseRate <= 0 || count == 0)
    return 1;
  double density = double(count) / double(blocks * blocks);
  double rate = 2.0 * n * n * n * density / t;
  log << llvm::formatv("ds-plan: calibrate: block-sparse 8x8 at density "
                       "{0}: {1} GFLOP/s executed ({2}x the dense rate)\n",
                       llvm::format("%.3f", density),
                       llvm::format("%.1f", rate / 1e9),
                       llvm::format("%.2f", rate / denseRate));
  return rate / denseRate;
}

/// Bytes/s of copying `bytes` with `threads` threads, each its own slice;
/// `perByte` counts what one byte costs (2: read + write).
double copyBandwidth(std::vector<char> &src, std::vector<char> &dst,
                     unsigned threads, double perByte) {
  size_t bytes = src.size(), slice = (bytes + threads - 1) / threads;
  double t = bestOf(5, [&] {
    std::vector<std::thread> pool;
    for (unsigned i = 0; i < threads; ++i)
      pool.emplace_back([&, i] {
        size_t begin = std::min(bytes, i * slice);
        size_t end = std::min(bytes, begin + slice);
        std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
      });
    for (std::thread &th : pool)
      th.join();
  });
  return perByte * double(bytes) / t;
}

/// One-way latency of a ping-pong of two threads on one atomic: the best
/// batch of 100 round trips, over at most 50 batches or half a second (on
/// a loaded machine a batch where both threads kept their cores is what
/// two pinned workers would see). Waiters yield after spinning a while, so
/// that the two threads make progress on a single free core too.
double pingPongLatency() {
  constexpr int batch = 100, maxBatches = 50;
  std::atomic<int> turn{0};
  std::atomic<bool> stop{false};
  auto waitFor = [&](int value) {
    for (unsigned spins = 0; turn.load(std::memory_order_acquire) != value;)
      if (++spins > 1000)
        std::this_thread::yield();
  };
  std::thread peer([&] {
    for (int i = 0;; ++i) {
      for (unsigned spins = 0;
           turn.load(std::memory_order_acquire) != 2 * i + 1; ++spins) {
        if (stop.load(std::memory_order_relaxed))
          return;
        if (spins > 1000)
          std::this_thread::yield();
      }
      turn.store(2 * i + 2, std::memory_order_release);
    }
  });
  double best = 1e300, deadline = now() + 0.5;
  int i = 0;
  for (int b = 0; b < maxBatches && (b < 3 || now() < deadline); ++b) {
    double start = now();
    for (int k = 0; k < batch; ++k, ++i) {
      turn.store(2 * i + 1, std::memory_order_release);
      waitFor(2 * i + 2);
    }
    best = std::min(best, (now() - start) / (2.0 * batch));
  }
  stop.store(true);
  peer.join();
  return best;
}

double physicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? double(pages) * double(size) : 0;
}

/// "model name" of /proc/cpuinfo, or "".
std::string cpuModel() {
  auto file = llvm::MemoryBuffer::getFileAsStream("/proc/cpuinfo");
  if (!file)
    return "";
  llvm::StringRef text = (*file)->getBuffer();
  size_t at = text.find("model name");
  if (at == llvm::StringRef::npos)
    return "";
  llvm::StringRef line = text.substr(at).split('\n').first;
  return line.split(':').second.trim().str();
}

} // namespace

DeviceProfile plan::calibrateThisMachine(llvm::raw_ostream &log) {
  DeviceProfile cpu;
  cpu.name = "cpu";
  cpu.kind = "custom";
  unsigned threads = unsigned(dsrt_get_num_threads());
  log << "ds-plan: calibrate: " << threads << " runtime threads"
      << (cpuModel().empty() ? "" : ", " + cpuModel()) << "\n";

  auto f32 = [](int64_t n) {
    return gemmRate<float, float, dsrt_memref3_f32, dsrt_memref3_f32>(
        n, _mlir_ciface_dsrt_matmul_f32);
  };
  auto s8 = [](int64_t n) {
    return gemmRate<int8_t, int32_t, dsrt_memref3_i8, dsrt_memref3_i32>(
        n, _mlir_ciface_dsrt_matmul_s8s8s32);
  };
  auto f64 = [](int64_t n) {
    return gemmRate<double, double, dsrt_memref3_f64, dsrt_memref3_f64>(
        n, _mlir_ciface_dsrt_matmul_f64);
  };
  cpu.flops[unsigned(Precision::F32)] =
      typicalRate(log, "f32", {128, 256, 512, 1024}, f32);
  cpu.flops[unsigned(Precision::INT8)] =
      typicalRate(log, "int8", {128, 256, 512, 1024}, s8);
  cpu.flops[unsigned(Precision::F64)] =
      typicalRate(log, "f64", {128, 256, 512}, f64);
  // No bf16 or fp8 GEMM in the runtime: 0 makes the planner run those
  // FLOPs at the next wider precision the device has (f32), which is what
  // ds-run does on this CPU (it widens them).
  cpu.sparseSpeedup = sparseSpeedup(log, cpu.flops[unsigned(Precision::F32)]);

  cpu.memoryBytes = physicalMemory();
  // 256 MiB per buffer, far beyond the caches, unless memory is scarce.
  size_t bytes =
      size_t(std::min(256.0 * (1 << 20), std::max(cpu.memoryBytes / 16, 1e6)));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  cpu.memoryBandwidth = copyBandwidth(src, dst, threads, 2);
  cpu.linkBandwidth = copyBandwidth(src, dst, 1, 1);
  cpu.linkLatency = pingPongLatency();
  log << llvm::formatv(
      "ds-plan: calibrate: memory {0} GB, copy {1} GB/s ({2} threads); "
      "link {3} GB/s, {4} us\n",
      llvm::format("%.1f", cpu.memoryBytes / 1e9),
      llvm::format("%.1f", cpu.memoryBandwidth / 1e9), threads,
      llvm::format("%.1f", cpu.linkBandwidth / 1e9),
      llvm::format("%.2f", cpu.linkLatency * 1e6));
  return cpu;
}

std::string plan::clusterFileFor(const DeviceProfile &cpu) {
  std::string text;
  llvm::raw_string_ostream os(text);
  std::string model = cpuModel();
  os << "# This machine as a pipeline-planner device, measured by "
        "`ds-plan --calibrate`\n"
     << "# (" << (model.empty() ? "unknown CPU" : model) << ", "
     << dsrt_get_num_threads() << " runtime threads). Each rate is the best "
     << "of 3 runs:\n"
     << "#   flops: the geometric mean over the runtime's GEMMs at n^3 = "
        "128^3..1024^3 (f32:\n#     oneDNN sgemm;"
     << " int8: the exact s8s8s32 GEMM; f64: the reference loop); "
        "bf16 and fp8 are\n"
     << "#     0 (no such GEMM in the runtime: the planner runs them at "
        "the f32 rate);\n"
     << "#   sparse_speedup: the 8x8 block-sparse matmul at density 0.1, "
        "per executed\n"
     << "#     FLOP, over the dense f32 rate;\n"
     << "#   memory: physical RAM; memory_bandwidth: a copy by every "
        "runtime thread\n"
     << "#     (bytes read + written);\n"
     << "#   link_*: two CPU devices of one node talk through shared "
        "memory: one\n"
     << "#     thread's copy, and a two-thread ping-pong on one cache "
        "line (not MPI).\n"
     << "# Raise `count` for several such machines, giving each `node` "
        "its own number.\n";
  auto num = [](double v) { return llvm::format("%.4g", v); };
  const char *keys[] = {"f64", "f32", "bf16", "fp8", "int8"};
  os << "devices:\n"
     << "  - kind: custom\n"
     << "    name: " << cpu.name << "\n"
     << "    count: 1\n"
     << "    node: 0\n"
     << "    flops:\n";
  for (unsigned p = 0; p < partition::kNumPrecisions; ++p)
    os << "      " << keys[p] << ": " << num(cpu.flops[p]) << "\n";
  os << "    sparse_speedup: " << num(cpu.sparseSpeedup) << "\n"
     << "    memory: " << num(cpu.memoryBytes) << "\n"
     << "    memory_bandwidth: " << num(cpu.memoryBandwidth) << "\n"
     << "    link_bandwidth: " << num(cpu.linkBandwidth) << "\n"
     << "    link_latency: " << num(cpu.linkLatency) << "\n";
  return text;
}

//===- NcclCheck.cpp - The collectives on NCCL, through their C ABI -------===//
//
// ds-runtime-nccl-check: one process (a world of one) with
// DS_CUDA_COLLECTIVES=nccl calls the dsrt_cuda_* collectives that NCCL
// serves (lib/Runtime/CommNccl.cpp) the way a compiled step calls them, on
// device buffers, and checks what they write, the errors of misuse and the
// counters; test/Runtime/cuda/nccl-single.test runs it on the stub driver
// and the stub NCCL and checks their logs. The same binary runs on one real
// GPU with the real NCCL. Prints "PASS: ..." / "FAIL: ..." lines, then
// "N passed, M failed", and exits non-zero on a failure. With the argument
// `async-error` (the stub NCCL with DS_STUB_NCCL_ASYNC_ERROR, which makes
// the communicator report a lost peer once idle): the watchdog aborts the
// communicator while nothing runs, the error is recorded, the MPI layer's
// communicator fails, and the finalisation returns. With `graphs`: a
// data-parallel step in miniature captured into a CUDA graph and launched
// with new inputs each time writes and counts what the direct step does,
// and a staged collective refuses the capture. With `topk-slots`: a top-k
// start of slots the step encoded on the device, staged through the host
// (DS_CUDA_TOPK_EXCHANGE=host). With `topk-gather`: such slots gathered on
// NCCL for the step to decode, the calls' misuse, and the rule that stages
// slots outweighing their bucket.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/ds_runtime.h"
#include "ds/Runtime/ds_runtime_cuda.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace {

int failures = 0, passes = 0;

void report(bool ok, const std::string &name, const std::string &detail = "") {
  (ok ? passes : failures) += 1;
  std::printf("%s: %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(),
              !ok && !detail.empty() ? ": " : "", ok ? "" : detail.c_str());
  std::fflush(stdout);
}

std::string lastError() {
  const char *e = dsrt_last_error();
  return e ? e : "(no error)";
}

bool noError(const std::string &name) {
  bool ok = dsrt_last_error() == nullptr;
  report(ok, name, lastError());
  dsrt_clear_error();
  return ok;
}

void expectError(const std::string &name, const char *needle) {
  std::string error = lastError();
  std::printf("error: %s\n", error.c_str());
  report(error.find(needle) != std::string::npos, name,
         "expected '" + std::string(needle) + "'");
  dsrt_clear_error();
}

/// A device vector of T and its descriptor (ds_runtime.h's layout).
template <typename T, typename D> struct DeviceVector {
  T *data = nullptr;
  D desc{};
  explicit DeviceVector(const std::vector<T> &values) {
    int64_t n = static_cast<int64_t>(values.size());
    if (n > 0) {
      data = static_cast<T *>(dsrt_cuda_alloc(n * sizeof(T)));
      dsrt_cuda_copy_to_device(data, values.data(), n * sizeof(T));
    }
    desc = D{data, data, 0, {n}, {1}};
  }
  ~DeviceVector() {
    if (data)
      dsrt_cuda_free(data);
  }
  std::vector<T> read() const {
    std::vector<T> out(desc.sizes[0]);
    if (!out.empty())
      dsrt_cuda_copy_to_host(out.data(), data, out.size() * sizeof(T));
    return out;
  }
};
using F32 = DeviceVector<float, dsrt_memref1_f32>;
using F64 = DeviceVector<double, dsrt_memref1_f64>;
/// 16-bit values (f16 or bf16 bits), as a step's fp16/bf16 start takes them.
using Bits16 = DeviceVector<uint16_t, dsrt_memref1_raw>;
/// Top-k slots' indices and counts, as a step's device encoder writes them.
using U32 = DeviceVector<uint32_t, dsrt_memref1_raw>;

template <typename T> std::string show(const std::vector<T> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void run() {
  constexpr int64_t kFirstHandle = int64_t(1) << 48;
  F32 none({});
  F32 bucket({1.0f, -2.0f, 3.5f, 0.25f});
  F64 probe({0.0});

  // A start and its wait: the mean over one rank is the bucket.
  int64_t h = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
      &bucket.desc, &none.desc, &none.desc, DSRT_COMPRESS_NONE, &probe.desc);
  report(h >= kFirstHandle, "an uncompressed start is NCCL's",
         "handle " + std::to_string(h));
  report(std::string(dsrt_comm_device_backend()).rfind("nccl ", 0) == 0,
         "the backend is NCCL", dsrt_comm_device_backend());
  F32 out({0, 0, 0, 0});
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
  noError("start and wait");
  report(out.read() == bucket.read(), "the mean of one rank is the bucket",
         show(out.read()));

  // The step zeroed a non-finite bucket and its probe is NaN: counted.
  dsrt_comm_stats before{}, after{};
  dsrt_get_comm_stats(&before);
  F32 zeros({0, 0, 0, 0});
  F64 nan({std::numeric_limits<double>::quiet_NaN()});
  h = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
      &zeros.desc, &none.desc, &none.desc, DSRT_COMPRESS_NONE, &nan.desc);
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
  dsrt_cuda_synchronize();
  dsrt_get_comm_stats(&after);
  noError("a non-finite bucket");
  report(after.nonfinite_buckets == before.nonfinite_buckets + 1 &&
             after.collectives == before.collectives + 1,
         "its probe is counted once the copy happened",
         std::to_string(after.nonfinite_buckets - before.nonfinite_buckets));

  // Misuse: the other type's wait (zeros written, as the CPU's), another
  // count, a handle waited twice.
  h = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
      &bucket.desc, &none.desc, &none.desc, DSRT_COMPRESS_NONE, &probe.desc);
  F64 out64({7, 7, 7, 7});
  _mlir_ciface_dsrt_cuda_allreduce_wait_f64(h, &out64.desc);
  expectError("the f64 wait of an f32 start", "is a started f32 all-reduce");
  report(out64.read() == std::vector<double>(4, 0.0), "which writes zeros",
         show(out64.read()));
  h = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
      &bucket.desc, &none.desc, &none.desc, DSRT_COMPRESS_NONE, &probe.desc);
  F32 three({0, 0, 0});
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &three.desc);
  expectError("a wait of another count",
              "the bucket has 4 elements, the output 3");
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
  expectError("a handle waited twice", "is not a started f32 all-reduce");

  // f64, the blocking reductions and the broadcast, on the step stream.
  F64 b64({0.5, 1.5});
  F64 m64({0, 0});
  F64 none64({});
  h = _mlir_ciface_dsrt_cuda_allreduce_start_f64(
      &b64.desc, &none64.desc, &none64.desc, DSRT_COMPRESS_NONE, &probe.desc);
  _mlir_ciface_dsrt_cuda_allreduce_wait_f64(h, &m64.desc);
  noError("an f64 start and wait");
  report(h >= kFirstHandle && m64.read() == b64.read(), "f64 on NCCL",
         show(m64.read()));
  F32 in({2.0f, -1.0f});
  F32 red({0, 0});
  for (int64_t op :
       {DSRT_REDUCE_SUM, DSRT_REDUCE_MEAN, DSRT_REDUCE_MAX, DSRT_REDUCE_MIN}) {
    _mlir_ciface_dsrt_cuda_allreduce_f32(&in.desc, &red.desc, op);
    report(red.read() == in.read(),
           "a blocking all-reduce, op " + std::to_string(op), show(red.read()));
  }
  F32 cast({0, 0});
  _mlir_ciface_dsrt_cuda_broadcast_f32(&in.desc, &cast.desc);
  report(cast.read() == in.read(), "a broadcast", show(cast.read()));
  noError("the blocking collectives");

  // In place: the wait's output is the bucket, reduced where it lies.
  F32 lies({4.0f, 8.0f});
  h = _mlir_ciface_dsrt_cuda_allreduce_start_in_place_f32(&lies.desc,
                                                          &probe.desc);
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &lies.desc);
  noError("an all-reduce in place");
  report(h >= kFirstHandle && lies.read() == std::vector<float>{4.0f, 8.0f},
         "in place on NCCL", show(lies.read()));

  // DDP's fp16/bf16 hooks: the step's rounded values summed in 16 bits in
  // place (one rank: the values themselves), the dense bytes those of the
  // f32 bucket; a probe's NaN counted; a 16-bit handle waited as f32.
  F32 wide({1.0f, 2.0f});
  for (bool bf16 : {false, true}) {
    // 1 and 2: the bucket divided by N = 1, rounded.
    Bits16 halves(bf16 ? std::vector<uint16_t>{0x3f80, 0x4000}
                       : std::vector<uint16_t>{0x3c00, 0x4000});
    std::vector<uint16_t> sent = halves.read();
    dsrt_get_comm_stats(&before);
    h = bf16 ? _mlir_ciface_dsrt_cuda_allreduce_start_half_bf16(
                   &wide.desc, &halves.desc, &probe.desc)
             : _mlir_ciface_dsrt_cuda_allreduce_start_half_f16(
                   &wide.desc, &halves.desc, &probe.desc);
    if (bf16)
      _mlir_ciface_dsrt_cuda_allreduce_wait_half_bf16(h, &halves.desc);
    else
      _mlir_ciface_dsrt_cuda_allreduce_wait_half_f16(h, &halves.desc);
    dsrt_get_comm_stats(&after);
    std::string name = bf16 ? "bf16" : "f16";
    noError("a " + name + " start and wait");
    report(h >= kFirstHandle && halves.read() == sent,
           "the " + name + " sum of one rank, in place on NCCL",
           show(halves.read()));
    report(after.bytes_dense - before.bytes_dense == 8 &&
               after.bytes_sent - before.bytes_sent == 4 &&
               after.bytes_sent_buckets - before.bytes_sent_buckets == 4,
           "counted as half the f32 bucket's bytes",
           std::to_string(after.bytes_sent - before.bytes_sent));
  }
  Bits16 poisoned({0, 0});
  dsrt_get_comm_stats(&before);
  h = _mlir_ciface_dsrt_cuda_allreduce_start_half_f16(
      &wide.desc, &poisoned.desc, &nan.desc);
  _mlir_ciface_dsrt_cuda_allreduce_wait_half_f16(h, &poisoned.desc);
  dsrt_cuda_synchronize();
  dsrt_get_comm_stats(&after);
  noError("a non-finite f16 bucket");
  report(after.nonfinite_buckets == before.nonfinite_buckets + 1,
         "its probe is counted too");
  h = _mlir_ciface_dsrt_cuda_allreduce_start_half_bf16(
      &wide.desc, &poisoned.desc, &probe.desc);
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &wide.desc);
  expectError("the f32 wait of a bf16 start", "is a started bf16 all-reduce");

  // The communicator ends with the MPI layer, before the driver's session.
  dsrt_comm_finalize();
  noError("the finalisation");
}

/// The watchdog on an asynchronous error: one collective, then an idle
/// wait of 2.5 s (the stub reports the error after its idle time, the
/// watchdog asks every 0.5 s).
void runAsyncError() {
  F32 in({1.0f, 2.0f});
  F32 out({0, 0});
  _mlir_ciface_dsrt_cuda_allreduce_f32(&in.desc, &out.desc, DSRT_REDUCE_SUM);
  noError("a collective before the error");
  // The stub reports the error once the communicator has been idle 0.5 s,
  // and the watchdog asks every 0.5 s: about a second, but a loaded
  // machine may starve the watchdog's thread, so wait up to 30 s.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  while ((!dsrt_last_error() || !dsrt_comm_failed()) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  expectError("the watchdog aborts on NCCL's asynchronous error",
              "NCCL reports an asynchronous error");
  report(dsrt_comm_failed() != 0, "the MPI layer's communicator failed too");
  dsrt_comm_finalize();
  report(true, "the finalisation returns");
}

/// The inputs of launch k: a bucket of 4 values and its probe, NaN (the
/// step found the bucket non-finite) on odd launches.
std::vector<float> graphBucket(int k) {
  return {float(k + 1), -float(k + 2), 0.5f * float(k), 3.0f};
}
double graphProbe(int k) {
  return k % 2 ? std::numeric_limits<double>::quiet_NaN() : 0.0;
}

/// A data-parallel step in miniature on NCCL (a "kernel" writing the bucket
/// and its probe, an in-place start, a start on a copy, a blocking sum, a
/// broadcast, the waits) run directly once, then captured into a CUDA graph
/// and launched 4 times with new inputs: each launch writes what the step
/// writes (one rank: its inputs) and counts its collectives, bytes and
/// non-finite buckets as the direct step did. Then a staged collective
/// refuses a capture.
void runGraphs() {
  F32 source(graphBucket(0));
  F64 probeSource({graphProbe(0)});
  F32 bucket({0, 0, 0, 0}), copied({0, 0, 0, 0}), sum({0, 0, 0, 0}),
      cast({0, 0, 0, 0}), none({});
  F64 probe({0.0});
  void *stream = dsrt_cuda_stream();
  auto enqueue = [&] {
    mgpuMemcpy(bucket.data, source.data, 4 * sizeof(float), stream);
    mgpuMemcpy(probe.data, probeSource.data, sizeof(double), stream);
    int64_t inPlace = _mlir_ciface_dsrt_cuda_allreduce_start_in_place_f32(
        &bucket.desc, &probe.desc);
    int64_t onCopy = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
        &source.desc, &none.desc, &none.desc, DSRT_COMPRESS_NONE, &probe.desc);
    _mlir_ciface_dsrt_cuda_allreduce_f32(&source.desc, &sum.desc,
                                         DSRT_REDUCE_SUM);
    _mlir_ciface_dsrt_cuda_broadcast_f32(&source.desc, &cast.desc);
    _mlir_ciface_dsrt_cuda_allreduce_wait_f32(onCopy, &copied.desc);
    _mlir_ciface_dsrt_cuda_allreduce_wait_f32(inPlace, &bucket.desc);
  };
  auto written = [&] {
    return std::vector<std::vector<float>>{bucket.read(), copied.read(),
                                           sum.read(), cast.read()};
  };
  auto delta = [](const dsrt_comm_stats &a, const dsrt_comm_stats &b) {
    return std::vector<double>{
        double(b.collectives - a.collectives), b.bytes_sent - a.bytes_sent,
        b.bytes_dense - a.bytes_dense,
        double(b.nonfinite_buckets - a.nonfinite_buckets),
        b.bytes_sent_buckets - a.bytes_sent_buckets};
  };

  // The first collective also decides the backend (collectives of the
  // MPI layer): counted from the second step.
  enqueue();
  dsrt_comm_stats before{}, after{};
  dsrt_get_comm_stats(&before);
  enqueue();
  dsrt_cuda_synchronize();
  dsrt_get_comm_stats(&after);
  noError("the step, directly");
  std::vector<double> direct = delta(before, after);
  report(direct[0] == 4 && direct[3] == 0, "a direct step: 4 collectives",
         show(direct));
  // The two starts' buckets, uncompressed, and the all-reduce and the
  // broadcast besides.
  report(direct[4] == direct[2] && direct[1] > direct[4],
         "a direct step: its buckets' bytes apart", show(direct));

  dsrt_get_comm_stats(&before);
  report(dsrt_cuda_graph_begin() == 0, "a capture begins", lastError());
  enqueue();
  void *graph = dsrt_cuda_graph_end();
  noError("the step, captured");
  report(graph != nullptr, "the step on NCCL is a graph");
  dsrt_get_comm_stats(&after);
  report(delta(before, after) == std::vector<double>(5, 0.0),
         "a capture counts nothing (it ran nothing)",
         show(delta(before, after)));

  for (int k = 1; graph && k <= 4; ++k) {
    std::vector<float> values = graphBucket(k);
    double nan = graphProbe(k);
    dsrt_cuda_copy_to_device(source.data, values.data(), 4 * sizeof(float));
    dsrt_cuda_copy_to_device(probeSource.data, &nan, sizeof(double));
    dsrt_get_comm_stats(&before);
    std::string name = "launch " + std::to_string(k);
    report(dsrt_cuda_graph_launch(graph) == 0, name, lastError());
    // Read before any wait, the probes count only once the launch's event
    // says they have landed (at once on the stub, whose copies to pinned
    // memory land at that query): all of them or none yet.
    dsrt_comm_stats early{};
    dsrt_get_comm_stats(&early);
    double counted = double(early.nonfinite_buckets - before.nonfinite_buckets);
    std::vector<std::vector<float>> out = written();
    dsrt_get_comm_stats(&after);
    report(out == std::vector<std::vector<float>>(4, values),
           name + " writes what the step writes",
           show(out[0]) + show(out[1]) + show(out[2]) + show(out[3]));
    std::vector<double> expected = direct;
    expected[3] = k % 2 ? 2 : 0; // the two starts' probes
    report(delta(before, after) == expected,
           name + " counts what the step counts", show(delta(before, after)));
    report(counted == 0 || counted == expected[3],
           name + " counts no probe before it has landed",
           std::to_string(counted));
  }
  dsrt_cuda_graph_destroy(graph);
  noError("the graph's launches and destruction");

  // A three-tier start the host encodes: no graph.
  F32 residual({0, 0, 0, 0}), residualOut({0, 0, 0, 0});
  report(dsrt_cuda_graph_begin() == 0, "a second capture begins", lastError());
  int64_t h = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
      &source.desc, &residual.desc, &residualOut.desc, DSRT_COMPRESS_THREE_TIER,
      &probe.desc);
  void *refused = dsrt_cuda_graph_end();
  expectError("a staged collective in a capture",
              "cannot be captured into a CUDA graph");
  report(h == 0, "is not started");
  report(refused == nullptr, "and leaves no graph");

  dsrt_comm_finalize();
  noError("the finalisation");
}

/// A top-k start the step encoded on the device (slots, their count, the
/// probe), staged through the host: only the used slots and the one after
/// them reach the host, on the staging thread's stream; the mean of one
/// rank is the sent elements, zeros elsewhere; a count the slots
/// contradict is refused.
void runTopKSlots() {
  // NCCL would gather these slots (8 of a bucket of 1000); this checks the
  // staged path.
  setenv("DS_CUDA_TOPK_EXCHANGE", "host", 1);
  constexpr uint32_t kEmpty = DSRT_TOPK_SLOT_EMPTY;
  constexpr int64_t n = 1000;
  U32 indices({3, 17, 400, 999, kEmpty, kEmpty, kEmpty, kEmpty});
  F32 values({0.5f, -2.0f, 3.25f, 1e-3f, 0, 0, 0, 0});
  F32 probe({0.0f});
  auto start = [&](const U32 &i, const F32 &v, uint32_t used,
                   const F32 &p) -> int64_t {
    U32 count({used});
    return _mlir_ciface_dsrt_cuda_allreduce_start_topk_f32(
        const_cast<dsrt_memref1_raw *>(&i.desc),
        const_cast<dsrt_memref1_f32 *>(&v.desc), &count.desc,
        const_cast<dsrt_memref1_f32 *>(&p.desc), n, /*fixed_fraction=*/1);
  };
  std::vector<float> want(n, 0.0f);
  want[3] = 0.5f;
  want[17] = -2.0f;
  want[400] = 3.25f;
  want[999] = 1e-3f;
  F32 out(std::vector<float>(n, 7.0f));
  dsrt_comm_stats before{}, after{};
  dsrt_get_comm_stats(&before);
  dsrt_cuda_stats copiesBefore{}, copiesAfter{};
  dsrt_cuda_get_stats(&copiesBefore);
  int64_t h = start(indices, values, 4, probe);
  report(h != 0, "a top-k start of device slots is staged");
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
  noError("its wait");
  // To the host: the count and the probe, then 5 indices and 5 values; to
  // the device: the count (the test's upload) and the dense mean.
  dsrt_cuda_get_stats(&copiesAfter);
  report(
      copiesAfter.bytes_to_host - copiesBefore.bytes_to_host == 48 &&
          copiesAfter.bytes_to_device - copiesBefore.bytes_to_device ==
              4 + 4.0 * n,
      "the runtime counts its copies",
      std::to_string(copiesAfter.bytes_to_host - copiesBefore.bytes_to_host) +
          " bytes to the host, " +
          std::to_string(copiesAfter.bytes_to_device -
                         copiesBefore.bytes_to_device) +
          " to the device");
  report(out.read() == want, "the mean of one rank is the sent elements");
  dsrt_get_comm_stats(&after);
  report(after.bytes_dense == before.bytes_dense + 4.0 * n &&
             after.bytes_sent_buckets > before.bytes_sent_buckets,
         "counted as a bucket of 1000 f32",
         std::to_string(after.bytes_dense - before.bytes_dense));

  // The sparse wait of the compiled step: the 4 elements that are not
  // zero, then their indices and values copied into vectors of 4.
  h = start(indices, values, 4, probe);
  int64_t u = dsrt_cuda_allreduce_wait_topk_f32(h);
  report(u == 4, "the sparse wait counts the mean's 4 elements",
         std::to_string(u));
  U32 gotIndices(std::vector<uint32_t>(4, 0));
  F32 gotValues(std::vector<float>(4, 0.0f));
  _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(h, &gotIndices.desc,
                                                 &gotValues.desc, &out.desc);
  noError("its take");
  report(gotIndices.read() == std::vector<uint32_t>{3, 17, 400, 999} &&
             gotValues.read() == std::vector<float>{0.5f, -2.0f, 3.25f, 1e-3f},
         "which copies their indices and values");
  _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(h, &gotIndices.desc,
                                                 &gotValues.desc, &out.desc);
  expectError("a take without its wait", "has no top-k mean waiting");
  h = start(indices, values, 4, probe);
  (void)dsrt_cuda_allreduce_wait_topk_f32(h);
  U32 three({0, 0, 0});
  _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(h, &three.desc,
                                                 &gotValues.desc, &out.desc);
  expectError("a take into vectors of another length",
              "needs contiguous device vectors of 4 indices and values");
  F32 bucket({1.0f, 2.0f});
  F32 none({});
  F64 zero({0.0});
  h = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
      &bucket.desc, &none.desc, &none.desc, DSRT_COMPRESS_NONE, &zero.desc);
  report(dsrt_cuda_allreduce_wait_topk_f32(h) == 0,
         "the sparse wait of another start is 0");
  expectError("and an error", "is not a started f32 top-k all-reduce");
  F32 two({0, 0});
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &two.desc);
  noError("which its own wait still takes");

  // A start the host encodes takes the sparse wait too, which writes its
  // residual back as the dense one. p0 = 0.25 of 8 (k = 2): DGC's
  // threshold is the sample's 6th smallest magnitude, 1, which 3 pass
  // (no more than 2k).
  {
    F32 grad({0.1f, -5.0f, 0.2f, 3.0f, 0.0f, 0.5f, -0.25f, 1.0f});
    F32 residualIn(std::vector<float>(8, 0.0f));
    F32 residualOut(std::vector<float>(8, 9.0f));
    F64 params({0.25, 0.0, 0.0});
    h = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
        &grad.desc, &residualIn.desc, &residualOut.desc, DSRT_COMPRESS_TOPK,
        &params.desc);
    u = dsrt_cuda_allreduce_wait_topk_f32(h);
    U32 sentIndices({0, 0, 0});
    F32 sentValues({0, 0, 0});
    F32 mean(std::vector<float>(8, 7.0f));
    _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(
        h, &sentIndices.desc, &sentValues.desc, &mean.desc);
    noError("a host-encoded top-k start's sparse wait");
    report(u == 3 && sentIndices.read() == std::vector<uint32_t>{1, 3, 7} &&
               sentValues.read() == std::vector<float>{-5.0f, 3.0f, 1.0f},
           "gives the three at the threshold or above", std::to_string(u));
    report(mean.read() == std::vector<float>(8, 7.0f),
           "and leaves the output to the step's scatter");
    report(residualOut.read() == std::vector<float>{0.1f, 0.0f, 0.2f, 0.0f,
                                                    0.0f, 0.5f, -0.25f, 0.0f},
           "and the residual of the others", show(residualOut.read()));

    // p0 = 1: 7 of the 8 are not zero, more than half, so the whole mean
    // comes back dense, into the output.
    F64 all({1.0, 0.0, 0.0});
    h = _mlir_ciface_dsrt_cuda_allreduce_start_f32(
        &grad.desc, &residualIn.desc, &residualOut.desc, DSRT_COMPRESS_TOPK,
        &all.desc);
    u = dsrt_cuda_allreduce_wait_topk_f32(h);
    U32 noIndices({});
    F32 noValues({});
    _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(h, &noIndices.desc,
                                                   &noValues.desc, &mean.desc);
    noError("a mean more than half dense");
    report(u == -1 && mean.read() == grad.read(),
           "comes back whole (the wait says -1)",
           std::to_string(u) + ": " + show(mean.read()));
  }

  // Every slot used: none after them to fetch.
  U32 full({5, 6});
  F32 fullValues({1.0f, 2.0f});
  std::fill(want.begin(), want.end(), 0.0f);
  want[5] = 1.0f;
  want[6] = 2.0f;
  h = start(full, fullValues, 2, probe);
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
  noError("every slot used");
  report(out.read() == want, "which are all sent");

  // Counts the slots contradict, and one above them. The wait then
  // writes zeros, as the CPU's wait of a failed start.
  for (uint32_t used : {5u, 3u, 9u}) {
    h = start(indices, values, used, probe);
    _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
    expectError("a count of " + std::to_string(used) + " for 4 used slots",
                used > 8 ? "exceeds its 8 slots" : "does not match its slots");
  }

  // A non-finite bucket: zeros sent and counted, the slots not read (the
  // count may be anything).
  F32 nan({std::numeric_limits<float>::quiet_NaN()});
  dsrt_get_comm_stats(&before);
  h = start(indices, values, 9, nan);
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
  noError("a non-finite top-k bucket");
  dsrt_get_comm_stats(&after);
  report(out.read() == std::vector<float>(n, 0.0f) &&
             after.nonfinite_buckets == before.nonfinite_buckets + 1,
         "sends zeros and is counted");
  dsrt_comm_finalize();
  noError("the finalisation");
}

/// Top-k slots gathered on NCCL: the start copies them into the runtime's
/// buffer and all-gathers it (one rank here), the wait hands each rank's
/// slots to the step, which decodes them (convert-ds-to-runtime), and the
/// take frees the buffer. Only the probe crosses PCIe.
void runTopKGather() {
  constexpr uint32_t kEmpty = DSRT_TOPK_SLOT_EMPTY;
  constexpr int64_t n = 1000;
  std::vector<uint32_t> sentIndices{3,      17,     400,    999,
                                    kEmpty, kEmpty, kEmpty, kEmpty};
  std::vector<float> sentValues{0.5f, -2.0f, 3.25f, 1e-3f, 0, 0, 0, 0};
  U32 indices(sentIndices);
  F32 values(sentValues);
  F32 probe({0.0f});
  auto start = [&](const F32 &p, int64_t fixedFraction = 1) -> int64_t {
    U32 count({4});
    return _mlir_ciface_dsrt_cuda_allreduce_start_topk_f32(
        &indices.desc, &values.desc, &count.desc,
        const_cast<dsrt_memref1_f32 *>(&p.desc), n, fixedFraction);
  };
  dsrt_comm_stats before{}, after{};
  dsrt_get_comm_stats(&before);
  int64_t h = start(probe);
  report(h != 0 && dsrt_cuda_allreduce_ranks_topk_f32(h) == 1,
         "a top-k start of device slots is gathered on NCCL (1 rank)");
  U32 gotIndices(std::vector<uint32_t>(8, 0));
  F32 gotValues(std::vector<float>(8, 0.0f));
  _mlir_ciface_dsrt_cuda_allreduce_slots_topk_f32(h, 0, &gotIndices.desc,
                                                  &gotValues.desc);
  expectError("the slots before the wait", "is not waited for yet");
  report(dsrt_cuda_allreduce_wait_topk_f32(h) == 0,
         "its wait leaves nothing to take");
  _mlir_ciface_dsrt_cuda_allreduce_slots_topk_f32(h, 0, &gotIndices.desc,
                                                  &gotValues.desc);
  noError("rank 0's slots");
  report(gotIndices.read() == sentIndices && gotValues.read() == sentValues,
         "are the ones sent");
  _mlir_ciface_dsrt_cuda_allreduce_slots_topk_f32(h, 1, &gotIndices.desc,
                                                  &gotValues.desc);
  expectError("a rank past the group", "rank 1's 8 slots");
  U32 fewer(std::vector<uint32_t>(4, 0));
  F32 fewerValues(std::vector<float>(4, 0.0f));
  _mlir_ciface_dsrt_cuda_allreduce_slots_topk_f32(h, 0, &fewer.desc,
                                                  &fewerValues.desc);
  expectError("slots of another number", "rank 0's 4 slots");
  U32 noIndices({});
  F32 noValues({});
  F32 out(std::vector<float>(n, 7.0f));
  _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(h, &noIndices.desc,
                                                 &noValues.desc, &out.desc);
  noError("its take");
  report(out.read() == std::vector<float>(n, 7.0f) &&
             dsrt_cuda_allreduce_ranks_topk_f32(h) == 0,
         "leaves the output to the step's decoder and ends the start");
  dsrt_get_comm_stats(&after);
  report(after.bytes_dense == before.bytes_dense + 4.0 * n &&
             after.bytes_sent_buckets == before.bytes_sent_buckets + 64,
         "counted as a bucket of 1000 f32 that sent 8 slots",
         std::to_string(after.bytes_sent_buckets - before.bytes_sent_buckets));
  // A compiled step's sequence: to the host only the probe; to the device
  // only the test's upload of the count.
  dsrt_cuda_stats copiesBefore{}, copiesAfter{};
  dsrt_cuda_get_stats(&copiesBefore);
  h = start(probe);
  (void)dsrt_cuda_allreduce_wait_topk_f32(h);
  _mlir_ciface_dsrt_cuda_allreduce_slots_topk_f32(h, 0, &gotIndices.desc,
                                                  &gotValues.desc);
  _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(h, &noIndices.desc,
                                                 &noValues.desc, &out.desc);
  dsrt_cuda_synchronize();
  dsrt_cuda_get_stats(&copiesAfter);
  report(
      copiesAfter.bytes_to_host - copiesBefore.bytes_to_host == 4 &&
          copiesAfter.bytes_to_device - copiesBefore.bytes_to_device == 4,
      "only the probe crosses PCIe",
      std::to_string(copiesAfter.bytes_to_host - copiesBefore.bytes_to_host) +
          " bytes to the host, " +
          std::to_string(copiesAfter.bytes_to_device -
                         copiesBefore.bytes_to_device) +
          " to the device");

  // The dense wait of a gathered start is an error (zeros written).
  h = start(probe);
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
  expectError("the dense wait of a gathered start",
              "is a started top-k all-gather");
  report(out.read() == std::vector<float>(n, 0.0f), "which writes zeros");
  // A non-finite bucket's probe is counted (its slots are empty: the
  // step's encoder writes them so).
  F32 nan({std::numeric_limits<float>::quiet_NaN()});
  dsrt_get_comm_stats(&before);
  h = start(nan);
  (void)dsrt_cuda_allreduce_wait_topk_f32(h);
  _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(h, &noIndices.desc,
                                                 &noValues.desc, &out.desc);
  dsrt_cuda_synchronize();
  dsrt_get_comm_stats(&after);
  noError("a non-finite gathered bucket");
  report(after.nonfinite_buckets == before.nonfinite_buckets + 1, "is counted");
  // Slots that outweigh their bucket (8 for 6 elements, one rank) are
  // staged: a ring all-reduce would send less.
  U32 small({1, 4, kEmpty, kEmpty, kEmpty, kEmpty, kEmpty, kEmpty});
  U32 two({2});
  h = _mlir_ciface_dsrt_cuda_allreduce_start_topk_f32(&small.desc, &values.desc,
                                                      &two.desc, &probe.desc, 6,
                                                      /*fixed_fraction=*/1);
  report(h != 0 && dsrt_cuda_allreduce_ranks_topk_f32(h) == 0,
         "slots outweighing their bucket are staged");
  F32 six(std::vector<float>(6, 0.0f));
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &six.desc);
  noError("and waited for");
  report(six.read() == std::vector<float>{0, 0.5f, 0, 0, -2.0f, 0}, "as before",
         show(six.read()));
  // Slots of a fraction the step chooses (DGC's warm-up: those of 25 %)
  // are staged too: gathered, they would send the largest fraction's
  // slots at every step.
  h = start(probe, /*fixedFraction=*/0);
  report(h != 0 && dsrt_cuda_allreduce_ranks_topk_f32(h) == 0,
         "slots of a varying fraction are staged");
  _mlir_ciface_dsrt_cuda_allreduce_wait_f32(h, &out.desc);
  noError("and waited for as before");
  dsrt_comm_finalize();
  noError("the finalisation");
}

} // namespace

int main(int argc, char **argv) {
  if (dsrt_cuda_init() != 0) {
    std::printf("FAIL: no device: %s\n", lastError().c_str());
    return 1;
  }
  if (argc > 1 && std::strcmp(argv[1], "async-error") == 0)
    runAsyncError();
  else if (argc > 1 && std::strcmp(argv[1], "graphs") == 0)
    runGraphs();
  else if (argc > 1 && std::strcmp(argv[1], "topk-slots") == 0)
    runTopKSlots();
  else if (argc > 1 && std::strcmp(argv[1], "topk-gather") == 0)
    runTopKGather();
  else
    run();
  dsrt_cuda_shutdown();
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}

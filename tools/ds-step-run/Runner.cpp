//===- Runner.cpp - The training loop of ds-step-run ----------------------===//

#include "Runner.h"

#include "ds/Runtime/ds_runtime.h"
#ifdef DSRT_HAVE_CUDA
#include "ds/Runtime/DeviceTensors.h"
#include "ds/Runtime/StepGraphs.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

using namespace ds::steprun;

namespace {
double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// One memref descriptor per tensor: {allocated, aligned, offset, sizes...,
/// strides...}, row-major.
std::vector<int64_t> descriptor(void *data, const std::vector<int64_t> &shape) {
  auto base = reinterpret_cast<int64_t>(data);
  std::vector<int64_t> d = {base, base, 0};
  d.insert(d.end(), shape.begin(), shape.end());
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  d.insert(d.end(), strides.begin(), strides.end());
  return d;
}

/// Where the step's tensors live: host memory, or device buffers.
class Buffers {
public:
  virtual ~Buffers() = default;
  /// The data pointer of argument `i` / result `r`.
  virtual void *arg(size_t i) = 0;
  virtual void *result(size_t r) = 0;
  /// Copies host bytes into argument `i`.
  virtual bool upload(size_t i, const Tensor &t) = 0;
  /// Result `r` becomes argument `i`'s value for the next step.
  virtual void adopt(size_t r, size_t i) = 0;
  /// Enqueues a copy of result `r`'s bytes to `host` (pinned on a device).
  virtual void enqueueRead(size_t r, void *host, size_t bytes) = 0;
  /// Waits until every enqueued read has landed.
  virtual bool wait() = 0;
  /// Host memory for the scalar ring.
  virtual void *ringAlloc(size_t bytes) = 0;
  /// Copies argument `i` (result `r`) back into `t`.
  virtual bool download(size_t i, Tensor &t) = 0;
  virtual bool downloadResult(size_t r, Tensor &t) = 0;
};

class HostBuffers final : public Buffers {
public:
  HostBuffers(const StepManifest &m, std::vector<Tensor> &&args)
      : args(std::move(args)) {
    for (const TensorSpec &r : m.results)
      results.push_back(r.zeros());
  }
  void *arg(size_t i) override { return args[i].bytes.data(); }
  void *result(size_t r) override { return results[r].bytes.data(); }
  bool upload(size_t i, const Tensor &t) override {
    args[i].bytes = t.bytes;
    return true;
  }
  void adopt(size_t r, size_t i) override {
    std::swap(results[r].bytes, args[i].bytes);
  }
  void enqueueRead(size_t r, void *host, size_t bytes) override {
    std::memcpy(host, results[r].bytes.data(), bytes);
  }
  bool wait() override { return true; }
  void *ringAlloc(size_t bytes) override {
    ring.assign(bytes, 0);
    return ring.data();
  }
  bool download(size_t i, Tensor &t) override {
    t = args[i];
    return true;
  }
  bool downloadResult(size_t r, Tensor &t) override {
    t = results[r];
    return true;
  }

private:
  std::vector<Tensor> args, results;
  std::vector<uint8_t> ring;
};

#ifdef DSRT_HAVE_CUDA
class DeviceBuffers final : public Buffers {
public:
  bool allocate(const StepManifest &m) {
    std::vector<size_t> argBytes, resultBytes;
    for (const TensorSpec &a : m.args)
      argBytes.push_back(a.bytes());
    for (const TensorSpec &r : m.results)
      resultBytes.push_back(r.bytes());
    return tensors.allocate(argBytes, resultBytes);
  }
  void *arg(size_t i) override { return tensors.arg(i); }
  void *result(size_t r) override { return tensors.result(r); }
  bool upload(size_t i, const Tensor &t) override {
    return tensors.upload(i, t.bytes.data(), t.bytes.size());
  }
  void adopt(size_t r, size_t i) override { tensors.adopt(r, i); }
  void enqueueRead(size_t r, void *host, size_t bytes) override {
    tensors.enqueueRead(r, host, bytes);
  }
  bool wait() override { return tensors.wait(); }
  void *ringAlloc(size_t bytes) override { return tensors.ring(bytes); }
  bool download(size_t i, Tensor &t) override {
    return tensors.download(i, t.bytes.data());
  }
  bool downloadResult(size_t r, Tensor &t) override {
    return tensors.downloadResult(r, t.bytes.data());
  }

private:
  ds::runtime::DeviceTensors tensors;
};
#endif

std::string runtimeError(const std::string &what) {
  const char *e = dsrt_last_error();
  return what + ": " + (e ? e : "unknown runtime error");
}
} // namespace

bool ds::steprun::runSteps(const StepManifest &m, const StepLibrary &library,
                           std::vector<Tensor> args, const RunOptions &options,
                           RunResult &result, std::string &error) {
  // The batch inputs and their data sets.
  std::vector<size_t> inputs;
  for (size_t i = 0; i < m.args.size(); ++i) {
    const TensorSpec &spec = m.args[i];
    if (spec.role != "input")
      continue;
    auto it = options.data.find(spec.name);
    if (it == options.data.end()) {
      error = "no data for input '" + spec.name + "' (" + spec.dtype + " " +
              formatShape(spec.shape) + "): give --data " + spec.name +
              "=FILE.npy";
      return false;
    }
    const Tensor &d = it->second;
    bool rowsMatch =
        !spec.shape.empty() && d.shape.size() == spec.shape.size() &&
        std::equal(d.shape.begin() + 1, d.shape.end(), spec.shape.begin() + 1);
    if (d.dtype != spec.dtype || !rowsMatch || d.shape[0] < 1) {
      error = "data for input '" + spec.name + "' is " + describe(d) +
              "; the step takes batches of " + spec.dtype + " " +
              formatShape(spec.shape) + " (rows of the same shape)";
      return false;
    }
    inputs.push_back(i);
  }
  for (const auto &[name, tensor] : options.data) {
    bool known = false;
    for (size_t i : inputs)
      known |= m.args[i].name == name;
    if (!known) {
      error = "--data " + name + ": the step has no input '" + name + "'";
      return false;
    }
  }

  std::unique_ptr<Buffers> buffers;
  if (m.device == "cuda") {
#ifdef DSRT_HAVE_CUDA
    auto device = std::make_unique<DeviceBuffers>();
    if (!device->allocate(m)) {
      error = runtimeError("cannot allocate the step's device buffers");
      return false;
    }
    for (size_t i = 0; i < m.args.size(); ++i)
      if (m.args[i].role != "input" && !device->upload(i, args[i])) {
        error = runtimeError("cannot upload '" + m.args[i].name + "'");
        return false;
      }
    buffers = std::move(device);
#else
    error = "this ds-step-run was built without the CUDA backend";
    return false;
#endif
  } else {
    for (size_t i : inputs)
      args[i] = m.args[i].zeros();
    buffers = std::make_unique<HostBuffers>(m, std::move(args));
  }

  // The scalars read every step: the loss, then each one-element metric.
  std::vector<size_t> scalars = {size_t(m.lossIndex())};
  for (size_t r = 0; r < m.results.size(); ++r)
    if (m.results[r].role == "metric" && m.results[r].bytes() <= 8 &&
        m.results[r].shape.size() <= 1 &&
        (m.results[r].shape.empty() || m.results[r].shape[0] == 1))
      scalars.push_back(r);
  size_t slotBytes = 8 * scalars.size();
  int64_t every = std::max<int64_t>(1, options.reportEvery);
  auto *ring = static_cast<uint8_t *>(buffers->ringAlloc(slotBytes * every));
  if (!ring) {
    error = runtimeError("cannot allocate the report ring");
    return false;
  }

  std::vector<Tensor> batch;
  for (size_t i : inputs)
    batch.push_back(m.args[i].zeros());
  double hostSeconds = 0, firstDone = 0;
  // The steps not timed: the first (libraries, kernels, cuBLASLt plans),
  // and with graphs the next three too (the second buffer set's first
  // step, then one capture per set).
  int64_t untimed =
      std::min<int64_t>(options.steps, options.cudaGraphs ? 4 : 1);
  result.timedFrom = untimed + 1;
#ifdef DSRT_HAVE_CUDA
  dsrt_cuda_stats firstStats{};
#endif
  double start = now();
  int64_t pendingFrom = 0; // the first step whose scalars are not read
  auto readRing = [&](int64_t upTo) -> bool {
    if (!buffers->wait()) {
      error = runtimeError("the device failed");
      return false;
    }
    for (int64_t s = pendingFrom; s < upTo; ++s) {
      const uint8_t *slot = ring + (s % every) * slotBytes;
      StepRecord record;
      record.step = s + 1;
      for (size_t k = 0; k < scalars.size(); ++k) {
        const TensorSpec &spec = m.results[scalars[k]];
        Tensor t;
        t.dtype = spec.dtype;
        t.shape = {1};
        t.bytes.assign(slot + 8 * k, slot + 8 * k + elementSize(spec.dtype));
        double v = elementAsDouble(t, 0);
        if (k == 0)
          record.loss = v;
        else
          record.metrics.emplace_back(spec.name, v);
      }
      double skipped = 0;
      for (auto &[name, v] : record.metrics)
        if (name == "found_inf")
          skipped = v;
      if (!std::isfinite(record.loss) && skipped == 0) {
        error = "the loss is " + std::to_string(record.loss) + " at step " +
                std::to_string(record.step) +
                " (not a step loss scaling skipped)";
        return false;
      }
      if (!options.quiet &&
          (record.step % every == 0 || record.step == options.steps)) {
        std::printf("ds-step-run: step %6lld/%lld  loss %.6f\n",
                    (long long)record.step, (long long)options.steps,
                    record.loss);
        std::fflush(stdout);
      }
      result.steps.push_back(std::move(record));
    }
    pendingFrom = upTo;
    return true;
  };

  std::vector<std::vector<int64_t>> descriptors(m.args.size() +
                                                m.results.size());
  std::vector<void *> pointers(descriptors.size()), packed(descriptors.size());
#ifdef DSRT_HAVE_CUDA
  // Declared after `buffers`, so its graphs go before the buffers they use.
  std::unique_ptr<ds::runtime::StepGraphs> graphs;
  if (options.cudaGraphs && m.device == "cuda")
    graphs = std::make_unique<ds::runtime::StepGraphs>();
#endif
  for (int64_t step = 0; step < options.steps; ++step) {
    double hostStart = now();
    // This step's batch: rows step*B ... of each data set, wrapping (this
    // rank's B rows of the global batch of N*B).
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor &d = options.data.at(m.args[inputs[k]].name);
      int64_t rows = m.args[inputs[k]].shape[0], count = d.shape[0];
      int64_t first = (step * options.worldSize + options.rank) * rows;
      size_t rowBytes = batch[k].bytes.size() / size_t(rows);
      for (int64_t j = 0; j < rows; ++j)
        std::memcpy(batch[k].bytes.data() + j * rowBytes,
                    d.bytes.data() + ((first + j) % count) * rowBytes,
                    rowBytes);
      if (!buffers->upload(inputs[k], batch[k])) {
        error = runtimeError("cannot upload input '" + m.args[inputs[k]].name +
                             "'");
        return false;
      }
    }
    for (size_t i = 0; i < descriptors.size(); ++i) {
      bool isArg = i < m.args.size();
      descriptors[i] = descriptor(
          isArg ? buffers->arg(i) : buffers->result(i - m.args.size()),
          isArg ? m.args[i].shape : m.results[i - m.args.size()].shape);
      pointers[i] = descriptors[i].data();
      packed[i] = &pointers[i];
    }
    dsrt_clear_error();
    auto enqueueStep = [&] {
      library.call(packed.data());
      return dsrt_last_error() == nullptr;
    };
#ifdef DSRT_HAVE_CUDA
    if (graphs) {
      ds::runtime::StepGraphs::Key key;
      for (size_t i = 0; i < descriptors.size(); ++i)
        key.push_back(reinterpret_cast<const void *>(descriptors[i][1]));
      (void)graphs->run(key, enqueueStep);
    } else {
      (void)enqueueStep();
    }
#else
    (void)enqueueStep();
#endif
    if (dsrt_last_error()) {
      error = runtimeError("step " + std::to_string(step + 1) + " failed");
      return false;
    }
    uint8_t *slot = ring + (step % every) * slotBytes;
    for (size_t k = 0; k < scalars.size(); ++k)
      buffers->enqueueRead(scalars[k], slot + 8 * k,
                           m.results[scalars[k]].bytes());
    // The updates become next step's arguments.
    for (size_t r = 0; r < m.results.size(); ++r)
      if (m.results[r].role == "update")
        buffers->adopt(r, size_t(m.results[r].of));
    if (step >= untimed)
      hostSeconds += now() - hostStart;
    if ((step + 1) % every == 0 || step + 1 == options.steps) {
      if (!readRing(step + 1))
        return false;
    }
    if (step == untimed - 1) {
      if (!buffers->wait()) {
        error = runtimeError("the device failed");
        return false;
      }
      firstDone = now();
#ifdef DSRT_HAVE_CUDA
      dsrt_cuda_get_stats(&firstStats);
      if (options.profile && dsrt_cuda_profile_begin() != 0) {
        error = runtimeError("cannot profile");
        return false;
      }
#endif
    }
  }
  if (!buffers->wait()) {
    error = runtimeError("the device failed");
    return false;
  }
#ifdef DSRT_HAVE_CUDA
  result.graphsCaptured = graphs ? graphs->captures() : 0;
  if (options.profile && options.steps > untimed) {
    const dsrt_cuda_profile_entry *entries = nullptr;
    int64_t count = dsrt_cuda_profile_end(&entries);
    if (count < 0) {
      error = runtimeError("cannot read the profile");
      return false;
    }
    for (int64_t i = 0; i < count; ++i)
      result.profile.push_back(
          {entries[i].name, entries[i].calls, entries[i].ms});
  }
#endif
  if (options.steps > untimed) {
    double timed = double(options.steps - untimed);
    result.msPerStep = 1e3 * (now() - firstDone) / timed;
    result.hostMsPerStep = 1e3 * hostSeconds / timed;
#ifdef DSRT_HAVE_CUDA
    if (m.device == "cuda") {
      dsrt_cuda_stats last;
      dsrt_cuda_get_stats(&last);
      double n = timed;
      result.hasDeviceCounts = true;
      result.launchesPerStep =
          double(last.kernel_launches - firstStats.kernel_launches) / n;
      result.gemmsPerStep = double(last.gemms - firstStats.gemms) / n;
      result.gemmGflopPerStep =
          (last.gemm_flops - firstStats.gemm_flops) * 1e-9 / n;
      result.allocationsPerStep =
          double(last.stream_allocations - firstStats.stream_allocations) / n;
      result.graphLaunchesPerStep =
          double(last.graph_launches - firstStats.graph_launches) / n;
      result.hostKernelLaunchesPerStep =
          result.launchesPerStep -
          double(last.graph_kernels - firstStats.graph_kernels) / n;
      result.bytesToHostPerStep =
          (last.bytes_to_host - firstStats.bytes_to_host) / n;
      result.bytesToDevicePerStep =
          (last.bytes_to_device - firstStats.bytes_to_device) / n;
    }
#endif
  } else {
    result.msPerStep = 1e3 * (now() - start);
  }
  result.finalArgs.assign(m.args.size(), Tensor());
  for (size_t i = 0; i < m.args.size(); ++i) {
    if (m.args[i].role == "input")
      continue;
    result.finalArgs[i] = m.args[i].zeros();
    if (!buffers->download(i, result.finalArgs[i])) {
      error = runtimeError("cannot read '" + m.args[i].name + "' back");
      return false;
    }
  }
  if (!options.keepResults)
    return true;
  result.lastResults.assign(m.results.size(), Tensor());
  for (size_t r = 0; r < m.results.size(); ++r) {
    const TensorSpec &spec = m.results[r];
    if (spec.role == "update") {
      result.lastResults[r] = result.finalArgs[size_t(spec.of)];
      continue;
    }
    result.lastResults[r] = spec.zeros();
    if (!buffers->downloadResult(r, result.lastResults[r])) {
      error = runtimeError("cannot read result '" + spec.name + "' back");
      return false;
    }
  }
  return true;
}

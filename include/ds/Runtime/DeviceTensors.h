//===- DeviceTensors.h - A step's tensors resident on the device -*- C++
//-*-===//
//
// The device side of a training loop that keeps its state on a CUDA device:
// one device buffer per step argument and per result; an update result's
// buffer becomes its argument's buffer for the next step (a pointer swap,
// no copy); and a pinned ring into which the scalars the host reports are
// copied on the step stream, read after one wait every few steps. Shared by
// ds-run's Trainer and ds-step-run (which links libdsrt only), hence header
// only and free of LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_DEVICETENSORS_H
#define DS_RUNTIME_DEVICETENSORS_H

#include "ds/Runtime/ds_runtime.h"
#include "ds/Runtime/ds_runtime_cuda.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ds::runtime {

class DeviceTensors {
public:
  DeviceTensors() = default;
  DeviceTensors(const DeviceTensors &) = delete;
  DeviceTensors &operator=(const DeviceTensors &) = delete;
  ~DeviceTensors() {
    for (void *p : args)
      dsrt_cuda_free(p);
    for (void *p : results)
      dsrt_cuda_free(p);
    if (ringMemory)
      dsrt_cuda_host_free(ringMemory);
  }

  /// Allocates one buffer per argument and result (a zero-byte tensor gets
  /// one byte: it still needs an address). False with the runtime's error.
  bool allocate(const std::vector<size_t> &argBytes,
                const std::vector<size_t> &resultBytes) {
    for (size_t bytes : argBytes) {
      args.push_back(dsrt_cuda_alloc(int64_t(std::max<size_t>(bytes, 1))));
      argSizes.push_back(bytes);
    }
    for (size_t bytes : resultBytes) {
      results.push_back(dsrt_cuda_alloc(int64_t(std::max<size_t>(bytes, 1))));
      resultSizes.push_back(bytes);
    }
    return dsrt_last_error() == nullptr;
  }

  void *arg(size_t i) const { return args[i]; }
  void *result(size_t r) const { return results[r]; }

  /// Enqueues a copy of `bytes` host bytes into argument `i`. Pageable
  /// memory may be reused at once (the driver stages it).
  bool upload(size_t i, const void *host, size_t bytes) {
    return bytes == 0 ||
           dsrt_cuda_copy_to_device(args[i], host, int64_t(bytes)) == 0;
  }
  /// Copies argument `i` (or result `r`) to `host`; waits for the stream.
  bool download(size_t i, void *host) {
    return argSizes[i] == 0 ||
           dsrt_cuda_copy_to_host(host, args[i], int64_t(argSizes[i])) == 0;
  }
  bool downloadResult(size_t r, void *host) {
    return resultSizes[r] == 0 ||
           dsrt_cuda_copy_to_host(host, results[r], int64_t(resultSizes[r])) ==
               0;
  }

  /// Result `r` becomes argument `i`'s value; its old buffer receives the
  /// next step's result.
  void adopt(size_t r, size_t i) { std::swap(results[r], args[i]); }

  /// Pinned host memory for the report ring (replacing any earlier one).
  void *ring(size_t bytes) {
    if (ringMemory)
      dsrt_cuda_host_free(ringMemory);
    ringMemory = dsrt_cuda_host_alloc(int64_t(std::max<size_t>(bytes, 1)));
    return ringMemory;
  }
  /// Enqueues a copy of result `r`'s first `bytes` bytes into `host` (in the
  /// ring): it lands when the stream gets there.
  void enqueueRead(size_t r, void *host, size_t bytes) {
    mgpuMemcpy(host, results[r], int64_t(bytes), dsrt_cuda_stream());
  }
  /// Waits until everything enqueued has run. False with the runtime's
  /// error (a failed kernel or copy).
  bool wait() { return dsrt_cuda_synchronize() == 0 && !dsrt_last_error(); }

private:
  std::vector<void *> args, results;
  std::vector<size_t> argSizes, resultSizes;
  void *ringMemory = nullptr;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_DEVICETENSORS_H

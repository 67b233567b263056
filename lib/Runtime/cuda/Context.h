//===- Context.h - Session and stream of the CUDA backend -------*- C++ -*-===//
//
// What the files of the CUDA backend share: the per-process session (one
// device, its primary context, the step stream), entry checks that
// initialise it on demand and make its context current on the calling
// thread, and RAII owners of the driver objects the runtime creates.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CUDA_CONTEXT_H
#define DS_LIB_RUNTIME_CUDA_CONTEXT_H

#include "Driver.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

namespace dsrt::cuda {

//===----------------------------------------------------------------------===//
// The session
//===----------------------------------------------------------------------===//

/// Initialises the backend if needed (dsrt_cuda_init) and makes its context
/// current on the calling thread: every entry point starts with it. The
/// driver's current context is per thread, and compiled code may call from
/// threads the runtime has never seen (the JIT's global constructors).
Status ensureReady();

/// The step stream; only valid after ensureReady() succeeded.
CUstream stepStream();

/// `stream` as a CUstream, the step stream for null.
inline CUstream resolveStream(void *stream) {
  return stream ? static_cast<CUstream>(stream) : stepStream();
}

/// The counters behind dsrt_cuda_get_stats (relaxed atomics: compiled code
/// may enqueue from several threads).
struct Counters {
  std::atomic<uint64_t> kernelLaunches{0}, gemms{0}, gemmFlops{0},
      streamAllocations{0}, waits{0}, graphLaunches{0}, graphKernels{0},
      bytesToHost{0}, bytesToDevice{0};
};
/// Where work enqueued now is counted: the process's counters, or while a
/// CUDA graph is being captured (Graph.cpp) that graph's tally, which each
/// launch of the graph adds to the process's counters.
Counters &counters();
/// The process's counters (dsrt_cuda_get_stats).
Counters &processCounters();
/// Counts a copy the runtime makes from device to host memory, or back
/// (dsrt_cuda_stats' bytes_to_host and bytes_to_device).
inline void countToHost(size_t bytes) {
  counters().bytesToHost.fetch_add(bytes, std::memory_order_relaxed);
}
inline void countToDevice(size_t bytes) {
  counters().bytesToDevice.fetch_add(bytes, std::memory_order_relaxed);
}

/// True while the step stream is being captured into a CUDA graph.
bool capturing();
/// Records "<fn>: <what> while the step stream is being captured into a
/// CUDA graph ..." when capturing(): a graph cannot wait for itself, and
/// what a synchronising call waits for has not run yet.
Status refuseWhileCapturing(const char *fn, const char *what);
/// Ends a capture left in progress, dropping what it recorded (shutdown).
void abandonCapture();

/// What a call captured into a CUDA graph leaves the host to do at each
/// launch of the graph, which runs no host code: another layer's counts
/// and watch of the work it enqueued (CommNccl.cpp's collectives). The
/// graph owns it; it may outlive the session (dsrt_cuda_shutdown before
/// the graph's destruction), so its destructor must not call the driver.
class LaunchHook {
public:
  virtual ~LaunchHook() = default;
  /// Right before the capture ends: the last chance to enqueue on the
  /// captured stream (a fork joined back, which the driver requires).
  virtual void beforeEnd() {}
  /// Right before each launch of the graph: the previous launch may still
  /// be running.
  virtual void beforeLaunch() {}
  /// Right after each launch, which the step stream has taken.
  virtual void afterLaunch() {}
};
/// The capture in progress's hook for `owner` (one per owner and graph),
/// made by `make` the first time it is asked for; null when not capturing.
LaunchHook *captureHook(const void *owner,
                        std::unique_ptr<LaunchHook> (*make)());

/// 10 * major + minor; only valid after ensureReady() succeeded.
int computeCapability();

/// The most dynamic shared memory a block may opt in to, in bytes.
int maxSharedMemoryOptin();

/// mgpuSetDefaultDevice: picks the device before initialisation; after it,
/// a different device is an error (the runtime drives one device).
Status selectDevice(int device);

//===----------------------------------------------------------------------===//
// Memory (Memory.cpp)
//===----------------------------------------------------------------------===//

/// mgpuMemAlloc: `bytes` (> 0) of device memory ordered on `stream`, or of
/// managed memory when `hostShared`.
Status allocateOnStream(int64_t bytes, CUstream stream, bool hostShared,
                        void *&ptr);

/// mgpuMemFree: frees what allocateOnStream returned, ordered on `stream`
/// (managed memory after waiting for it).
Status freeOnStream(void *ptr, CUstream stream);

/// Runs `hook` in every later dsrt_cuda_shutdown, with the context current
/// and the step stream idle, before the session goes: for what another
/// layer keeps on the device (NCCL's communicator). In registration order.
void addShutdownHook(void (*hook)());

/// Called by dsrt_cuda_shutdown before the stream and context go: frees the
/// cuBLASLt state (CublasLt.cpp).
void shutdownCublasLt();
/// Likewise: forgets the kernels mgpuModuleGetFunction cached
/// (MgpuWrappers.cpp), whose modules die with the context.
void forgetKernelFunctions();

//===----------------------------------------------------------------------===//
// RAII owners
//===----------------------------------------------------------------------===//

/// Owns one driver handle and destroys it with Deleter, which records (and
/// otherwise ignores) a failure: a destructor cannot return one.
template <typename T, typename Deleter> class UniqueHandle {
public:
  UniqueHandle() = default;
  explicit UniqueHandle(T handle) : handle(handle) {}
  UniqueHandle(UniqueHandle &&other) noexcept
      : handle(std::exchange(other.handle, T())) {}
  UniqueHandle &operator=(UniqueHandle &&other) noexcept {
    reset(std::exchange(other.handle, T()));
    return *this;
  }
  UniqueHandle(const UniqueHandle &) = delete;
  UniqueHandle &operator=(const UniqueHandle &) = delete;
  ~UniqueHandle() { reset(); }

  T get() const { return handle; }
  explicit operator bool() const { return handle != T(); }
  /// Gives up ownership (to compiled code, which destroys it itself).
  T release() { return std::exchange(handle, T()); }
  void reset(T replacement = T()) {
    if (handle != T())
      Deleter()(handle);
    handle = replacement;
  }

private:
  T handle = T();
};

struct StreamDeleter {
  void operator()(CUstream stream) const {
    (void)DS_CU(cuStreamDestroy, stream);
  }
};
struct EventDeleter {
  void operator()(CUevent event) const { (void)DS_CU(cuEventDestroy, event); }
};
struct DeviceMemoryDeleter {
  void operator()(CUdeviceptr ptr) const { (void)DS_CU(cuMemFree, ptr); }
};

using StreamHandle = UniqueHandle<CUstream, StreamDeleter>;
using EventHandle = UniqueHandle<CUevent, EventDeleter>;
using DeviceMemory = UniqueHandle<CUdeviceptr, DeviceMemoryDeleter>;

} // namespace dsrt::cuda

#endif // DS_LIB_RUNTIME_CUDA_CONTEXT_H

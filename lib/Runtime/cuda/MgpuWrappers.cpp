//===- MgpuWrappers.cpp - MLIR's GPU runtime ABI on the step stream -------===//
//
// The mgpu* functions that MLIR's gpu-to-llvm lowering and gpu.binary's
// offloading translation call, with the semantics ds_runtime_cuda.h states:
// streams are the step stream, allocations are stream-ordered, and nothing
// aborts (upstream's CudaRuntimeWrappers.cpp prints and carries on; here a
// failure is recorded for the runner to stop on). Every function initialises
// the runtime on demand, since the first call may come from the global
// constructor that loads the compiled code's GPU binary.
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "Profile.h"

#include "ds/Runtime/ds_runtime_cuda.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

/// Dynamic shared memory a kernel may use without opting in.
constexpr int32_t kDefaultSharedLimit = 48 * 1024;

/// Records "<fn>: <call> failed: <result>" for a failed result.
Status checkIn(CUresult result, const char *fn, const char *call,
               const char *file, int line) {
  if (result == CUDA_SUCCESS)
    return Status::success();
  char text[256];
  formatResult(result, text, sizeof(text));
  return recordError(file, line, "%s: %s failed: %s", fn, call, text);
}

/// Loads a cubin, fatbin or PTX image; the driver's JIT log, if any, goes
/// into the error (it says which PTX line failed to compile).
void *loadModule(const void *image, int optLevel, const char *fn) {
  char log[2048] = {0};
  CUjit_option options[3] = {CU_JIT_ERROR_LOG_BUFFER,
                             CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                             CU_JIT_OPTIMIZATION_LEVEL};
  void *values[3] = {log, reinterpret_cast<void *>(sizeof(log) - 1),
                     reinterpret_cast<void *>(static_cast<intptr_t>(optLevel))};
  unsigned numOptions = optLevel >= 0 ? 3 : 2;
  CUmodule module = nullptr;
  CUresult result =
      driver().cuModuleLoadDataEx(&module, image, numOptions, options, values);
  if (result == CUDA_SUCCESS)
    return module;
  char text[256];
  formatResult(result, text, sizeof(text));
  (void)DS_ERROR("%s: cuModuleLoadDataEx failed: %s%s%s", fn, text,
                 log[0] ? "; JIT log: " : "", log);
  return nullptr;
}

/// A grid, block or cluster extent as the driver's unsigned int.
bool toExtent(int64_t value, const char *fn, const char *what, unsigned &out) {
  if (value < 1 || value > std::numeric_limits<unsigned>::max()) {
    (void)DS_ERROR("%s: %s extent %lld out of range [1, 2^32)", fn, what,
                   static_cast<long long>(value));
    return false;
  }
  out = static_cast<unsigned>(value);
  return true;
}

/// Opts the kernel in to more than 48 KiB of dynamic shared memory.
Status prepareSharedMemory(CUfunction function, int32_t smem, const char *fn) {
  if (smem < 0)
    return DS_ERROR("%s: negative dynamic shared memory (%d bytes)", fn, smem);
  if (smem <= kDefaultSharedLimit)
    return Status::success();
  if (smem > maxSharedMemoryOptin())
    return DS_ERROR("%s: the kernel asks for %d bytes of dynamic shared "
                    "memory; this device allows at most %d per block",
                    fn, smem, maxSharedMemoryOptin());
  return checkIn(
      driver().cuFuncSetAttribute(
          function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
      fn, "cuFuncSetAttribute", __FILE__, __LINE__);
}

/// The address of a memref's first element and its size in bytes; a
/// non-dense memref records an error. `descriptor` is
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
Status denseMemRef(int64_t rank, void *descriptor, int64_t elementBytes,
                   const char *fn, char *&data, int64_t &bytes) {
  if (!descriptor || rank < 0 || elementBytes <= 0)
    return DS_ERROR("%s: bad memref (rank %lld, %lld-byte elements)", fn,
                    static_cast<long long>(rank),
                    static_cast<long long>(elementBytes));
  struct Header {
    char *allocated;
    char *aligned;
    int64_t offset;
  };
  auto *header = static_cast<Header *>(descriptor);
  auto *sizes = reinterpret_cast<int64_t *>(header + 1);
  int64_t *strides = sizes + rank;
  int64_t elements = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (sizes[d] > 1 && strides[d] != elements)
      return DS_ERROR("%s: only dense memrefs can be registered; dimension "
                      "%lld has stride %lld, expected %lld",
                      fn, static_cast<long long>(d),
                      static_cast<long long>(strides[d]),
                      static_cast<long long>(elements));
    if (sizes[d] < 0 || __builtin_mul_overflow(elements, sizes[d], &elements))
      return DS_ERROR("%s: bad size %lld in dimension %lld", fn,
                      static_cast<long long>(sizes[d]),
                      static_cast<long long>(d));
  }
  if (__builtin_mul_overflow(elements, elementBytes, &bytes))
    return DS_ERROR("%s: memref size overflows", fn);
  data = header->aligned + header->offset * elementBytes;
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Modules and kernels
//===----------------------------------------------------------------------===//

void *mgpuModuleLoad(void *data, int64_t size) {
  if (ensureReady().failed())
    return nullptr;
  if (!data || size <= 0) {
    (void)DS_ERROR("mgpuModuleLoad: empty GPU binary (%lld bytes)",
                   static_cast<long long>(size));
    return nullptr;
  }
  // The driver reads the image's size from its own header.
  return loadModule(data, /*optLevel=*/-1, "mgpuModuleLoad");
}

void *mgpuModuleLoadJIT(void *ptx, int32_t optLevel) {
  if (ensureReady().failed())
    return nullptr;
  if (!ptx || optLevel < 0 || optLevel > 4) {
    (void)DS_ERROR("mgpuModuleLoadJIT: %s", ptx ? "optimisation level not in "
                                                  "[0, 4]"
                                                : "no PTX");
    return nullptr;
  }
  return loadModule(ptx, optLevel, "mgpuModuleLoadJIT");
}

namespace {
/// mgpuModuleGetFunction's answers. gpu-to-llvm looks the kernel up before
/// every launch; the driver's lookup is a hash of the name, this one a
/// pointer comparison (the name is a constant of the generated code; its
/// text is compared too, so a reused buffer cannot alias).
struct KernelFunctions {
  struct Entry {
    void *module;
    const char *namePtr;
    std::string name;
    CUfunction function;
  };
  std::mutex mutex;
  std::vector<Entry> entries;
};
KernelFunctions &kernelFunctions() {
  static auto *cache = new KernelFunctions; // outlives static destructors
  return *cache;
}
} // namespace

std::string dsrt::cuda::kernelName(CUfunction function) {
  KernelFunctions &cache = kernelFunctions();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (const KernelFunctions::Entry &e : cache.entries)
    if (e.function == function)
      return e.name;
  return "?";
}

void dsrt::cuda::forgetKernelFunctions() {
  std::lock_guard<std::mutex> lock(kernelFunctions().mutex);
  kernelFunctions().entries.clear();
}

void mgpuModuleUnload(void *module) {
  {
    KernelFunctions &cache = kernelFunctions();
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.entries.erase(std::remove_if(cache.entries.begin(),
                                       cache.entries.end(),
                                       [&](const KernelFunctions::Entry &e) {
                                         return e.module == module;
                                       }),
                        cache.entries.end());
  }
  // After dsrt_cuda_shutdown the context, and every module in it, is gone.
  if (!module || !dsrt_cuda_stream() || ensureReady().failed())
    return;
  (void)DS_CU(cuModuleUnload, static_cast<CUmodule>(module));
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  if (!module) {
    (void)DS_ERROR("mgpuModuleGetFunction(\"%s\"): no module (loading the GPU "
                   "binary failed)",
                   name ? name : "");
    return nullptr;
  }
  if (ensureReady().failed())
    return nullptr;
  KernelFunctions &cache = kernelFunctions();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (const KernelFunctions::Entry &e : cache.entries)
    if (e.module == module && e.namePtr == name && e.name == name)
      return e.function;
  CUfunction function = nullptr;
  CUresult result = driver().cuModuleGetFunction(
      &function, static_cast<CUmodule>(module), name);
  if (result != CUDA_SUCCESS) {
    char text[256];
    formatResult(result, text, sizeof(text));
    (void)DS_ERROR("mgpuModuleGetFunction(\"%s\"): cuModuleGetFunction "
                   "failed: %s",
                   name ? name : "", text);
    return nullptr;
  }
  cache.entries.push_back({module, name, name, function});
  return function;
}

void mgpuLaunchKernel(void *function, int64_t gridX, int64_t gridY,
                      int64_t gridZ, int64_t blockX, int64_t blockY,
                      int64_t blockZ, int32_t smem, void *stream, void **params,
                      void **extra,
                      int64_t /*paramsCount: the driver knows the layout*/) {
  const char *fn = "mgpuLaunchKernel";
  if (!function) {
    (void)DS_ERROR("%s: no kernel (its module or function lookup failed)", fn);
    return;
  }
  unsigned g[3], b[3];
  if (!toExtent(gridX, fn, "grid", g[0]) ||
      !toExtent(gridY, fn, "grid", g[1]) ||
      !toExtent(gridZ, fn, "grid", g[2]) ||
      !toExtent(blockX, fn, "block", b[0]) ||
      !toExtent(blockY, fn, "block", b[1]) ||
      !toExtent(blockZ, fn, "block", b[2]) || ensureReady().failed())
    return;
  auto *f = static_cast<CUfunction>(function);
  if (prepareSharedMemory(f, smem, fn).failed())
    return;
  ProfiledWork work(profiling() ? kernelName(f) : std::string());
  counters().kernelLaunches.fetch_add(1, std::memory_order_relaxed);
  (void)checkIn(driver().cuLaunchKernel(f, g[0], g[1], g[2], b[0], b[1], b[2],
                                        static_cast<unsigned>(smem),
                                        resolveStream(stream), params, extra),
                fn, "cuLaunchKernel", __FILE__, __LINE__);
}

void mgpuLaunchClusterKernel(void *function, int64_t clusterX, int64_t clusterY,
                             int64_t clusterZ, int64_t gridX, int64_t gridY,
                             int64_t gridZ, int64_t blockX, int64_t blockY,
                             int64_t blockZ, int32_t smem, void *stream,
                             void **params, void **extra) {
  const char *fn = "mgpuLaunchClusterKernel";
  if (!function) {
    (void)DS_ERROR("%s: no kernel (its module or function lookup failed)", fn);
    return;
  }
  unsigned c[3], g[3], b[3];
  if (!toExtent(clusterX, fn, "cluster", c[0]) ||
      !toExtent(clusterY, fn, "cluster", c[1]) ||
      !toExtent(clusterZ, fn, "cluster", c[2]) ||
      !toExtent(gridX, fn, "grid", g[0]) ||
      !toExtent(gridY, fn, "grid", g[1]) ||
      !toExtent(gridZ, fn, "grid", g[2]) ||
      !toExtent(blockX, fn, "block", b[0]) ||
      !toExtent(blockY, fn, "block", b[1]) ||
      !toExtent(blockZ, fn, "block", b[2]))
    return;
  for (int d = 0; d < 3; ++d)
    if (g[d] % c[d] != 0) {
      (void)DS_ERROR("%s: grid %u,%u,%u is not a multiple of cluster "
                     "%u,%u,%u",
                     fn, g[0], g[1], g[2], c[0], c[1], c[2]);
      return;
    }
  if (ensureReady().failed())
    return;
  auto *f = static_cast<CUfunction>(function);
  if (prepareSharedMemory(f, smem, fn).failed())
    return;
  // Clusters of more than 8 blocks are "non-portable": the kernel must
  // allow them explicitly (Hopper takes up to 16).
  if (uint64_t(c[0]) * c[1] * c[2] > 8 &&
      checkIn(driver().cuFuncSetAttribute(
                  f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
              fn, "cuFuncSetAttribute", __FILE__, __LINE__)
          .failed())
    return;

  CUlaunchAttribute attributes[2];
  std::memset(attributes, 0, sizeof(attributes));
  attributes[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attributes[0].value.clusterDim.x = c[0];
  attributes[0].value.clusterDim.y = c[1];
  attributes[0].value.clusterDim.z = c[2];
  // As upstream: spread a cluster's blocks over the GPCs.
  attributes[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
  attributes[1].value.clusterSchedulingPolicyPreference =
      CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  CUlaunchConfig config;
  std::memset(&config, 0, sizeof(config));
  config.gridDimX = g[0];
  config.gridDimY = g[1];
  config.gridDimZ = g[2];
  config.blockDimX = b[0];
  config.blockDimY = b[1];
  config.blockDimZ = b[2];
  config.sharedMemBytes = static_cast<unsigned>(smem);
  config.hStream = resolveStream(stream);
  config.attrs = attributes;
  config.numAttrs = 2;
  ProfiledWork work(profiling() ? kernelName(f) : std::string());
  counters().kernelLaunches.fetch_add(1, std::memory_order_relaxed);
  (void)checkIn(driver().cuLaunchKernelEx(&config, f, params, extra), fn,
                "cuLaunchKernelEx", __FILE__, __LINE__);
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

void *mgpuStreamCreate(void) {
  if (ensureReady().failed())
    return nullptr;
  return stepStream();
}

void mgpuStreamDestroy(void *stream) {
  // The step stream lives as long as the runtime; null is what a failed
  // mgpuStreamCreate returned.
  if (!stream || stream == dsrt_cuda_stream())
    return;
  (void)DS_ERROR("mgpuStreamDestroy: %p is not the step stream, the only "
                 "stream mgpuStreamCreate returns",
                 stream);
}

void mgpuStreamSynchronize(void *stream) {
  counters().waits.fetch_add(1, std::memory_order_relaxed);
  if (ensureReady().failed() ||
      refuseWhileCapturing(
          "mgpuStreamSynchronize",
          "wait for the stream (the graph has only recorded its work)")
          .failed())
    return;
  (void)DS_CU(cuStreamSynchronize, resolveStream(stream));
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  if (!event) {
    (void)DS_ERROR("mgpuStreamWaitEvent: the event is null");
    return;
  }
  if (ensureReady().failed())
    return;
  (void)DS_CU(cuStreamWaitEvent, resolveStream(stream),
              static_cast<CUevent>(event), 0);
}

void *mgpuEventCreate(void) {
  if (ensureReady().failed())
    return nullptr;
  CUevent event = nullptr;
  if (DS_CU(cuEventCreate, &event, CU_EVENT_DISABLE_TIMING).failed())
    return nullptr;
  return event;
}

void mgpuEventDestroy(void *event) {
  if (!event || ensureReady().failed())
    return;
  (void)DS_CU(cuEventDestroy, static_cast<CUevent>(event));
}

void mgpuEventSynchronize(void *event) {
  if (!event) {
    (void)DS_ERROR("mgpuEventSynchronize: the event is null");
    return;
  }
  if (ensureReady().failed() ||
      refuseWhileCapturing(
          "mgpuEventSynchronize",
          "wait for an event (the graph has only recorded its work)")
          .failed())
    return;
  (void)DS_CU(cuEventSynchronize, static_cast<CUevent>(event));
}

void mgpuEventRecord(void *event, void *stream) {
  if (!event) {
    (void)DS_ERROR("mgpuEventRecord: the event is null");
    return;
  }
  if (ensureReady().failed())
    return;
  (void)DS_CU(cuEventRecord, static_cast<CUevent>(event),
              resolveStream(stream));
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

void *mgpuMemAlloc(int64_t bytes, void *stream, int8_t isHostShared) {
  if (bytes < 0) {
    (void)DS_ERROR("mgpuMemAlloc: negative size (%lld bytes)",
                   static_cast<long long>(bytes));
    return nullptr;
  }
  // A zero-sized memref is valid and needs no memory (the driver would
  // refuse 0 bytes).
  if (bytes == 0 || ensureReady().failed())
    return nullptr;
  counters().streamAllocations.fetch_add(1, std::memory_order_relaxed);
  void *ptr = nullptr;
  if (allocateOnStream(bytes, resolveStream(stream), isHostShared != 0, ptr)
          .failed())
    return nullptr;
  return ptr;
}

void mgpuMemFree(void *ptr, void *stream) {
  if (!ptr || ensureReady().failed())
    return;
  (void)freeOnStream(ptr, resolveStream(stream));
}

void mgpuMemcpy(void *dst, void *src, int64_t bytes, void *stream) {
  if (bytes < 0) {
    (void)DS_ERROR("mgpuMemcpy: negative size (%lld bytes)",
                   static_cast<long long>(bytes));
    return;
  }
  if (bytes == 0 || ensureReady().failed())
    return;
  // Unified addressing: the driver tells host from device pointers.
  (void)DS_CU(cuMemcpyAsync, reinterpret_cast<CUdeviceptr>(dst),
              reinterpret_cast<CUdeviceptr>(src), static_cast<size_t>(bytes),
              resolveStream(stream));
}

void mgpuMemset16(void *dst, int16_t value, int64_t count, void *stream) {
  if (count < 0) {
    (void)DS_ERROR("mgpuMemset16: negative count %lld",
                   static_cast<long long>(count));
    return;
  }
  if (count == 0 || ensureReady().failed())
    return;
  (void)DS_CU(cuMemsetD16Async, reinterpret_cast<CUdeviceptr>(dst),
              static_cast<unsigned short>(value), static_cast<size_t>(count),
              resolveStream(stream));
}

void mgpuMemset32(void *dst, int32_t value, int64_t count, void *stream) {
  if (count < 0) {
    (void)DS_ERROR("mgpuMemset32: negative count %lld",
                   static_cast<long long>(count));
    return;
  }
  if (count == 0 || ensureReady().failed())
    return;
  (void)DS_CU(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(dst),
              static_cast<unsigned>(value), static_cast<size_t>(count),
              resolveStream(stream));
}

void mgpuMemHostRegister(void *ptr, int64_t bytes) {
  if (!ptr || bytes <= 0) {
    (void)DS_ERROR("mgpuMemHostRegister: nothing to register (%p, %lld "
                   "bytes)",
                   ptr, static_cast<long long>(bytes));
    return;
  }
  if (ensureReady().failed())
    return;
  (void)DS_CU(cuMemHostRegister, ptr, static_cast<size_t>(bytes), 0);
}

void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                               int64_t elementBytes) {
  char *data = nullptr;
  int64_t bytes = 0;
  if (denseMemRef(rank, descriptor, elementBytes, "mgpuMemHostRegisterMemRef",
                  data, bytes)
          .failed() ||
      bytes == 0) // An empty memref has no pages to lock.
    return;
  mgpuMemHostRegister(data, bytes);
}

void mgpuMemHostUnregister(void *ptr) {
  if (!ptr || ensureReady().failed())
    return;
  (void)DS_CU(cuMemHostUnregister, ptr);
}

void mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                                 int64_t elementBytes) {
  char *data = nullptr;
  int64_t bytes = 0;
  if (denseMemRef(rank, descriptor, elementBytes, "mgpuMemHostUnregisterMemRef",
                  data, bytes)
          .failed() ||
      bytes == 0)
    return;
  mgpuMemHostUnregister(data);
}

void mgpuSetDefaultDevice(int32_t device) { (void)selectDevice(device); }

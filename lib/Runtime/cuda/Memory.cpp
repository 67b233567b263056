//===- Memory.cpp - Device, managed and pinned memory ---------------------===//
//
// Two kinds of device memory. Temporaries of compiled code (mgpuMemAlloc)
// are stream-ordered: cuMemAllocAsync on the step stream returns at once,
// and their cuMemFreeAsync lets later work of the same step reuse the
// memory without any synchronisation. The runner's persistent state
// (dsrt_cuda_alloc) uses plain cuMemAlloc, valid on any stream. Managed
// memory (gpu.alloc host_shared) has no stream-ordered free, so the runtime
// remembers which pointers are managed and frees those after waiting.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "ds/Runtime/ds_runtime_cuda.h"

#include <mutex>
#include <unordered_set>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

std::mutex managedMutex;
/// Pointers from cuMemAllocManaged not yet freed.
std::unordered_set<void *> managedPointers;

CUdeviceptr devicePointer(const void *ptr) {
  return reinterpret_cast<CUdeviceptr>(ptr);
}

/// Refuses a negative byte count; true when there is something to do.
bool checkBytes(int64_t bytes, const char *fn, Status &status) {
  status = Status::success();
  if (bytes < 0)
    status = DS_ERROR("%s: negative size (%lld bytes)", fn,
                      static_cast<long long>(bytes));
  return !status.failed() && bytes > 0;
}

} // namespace

Status dsrt::cuda::allocateOnStream(int64_t bytes, CUstream stream,
                                    bool hostShared, void *&ptr) {
  CUdeviceptr raw = 0;
  if (hostShared) {
    // Its free waits for the stream, and a graph would hold it for good.
    DS_RETURN_IF_ERROR(refuseWhileCapturing(
        "mgpuMemAlloc", "allocate managed memory (a graph cannot hold it)"));
    DS_RETURN_IF_ERROR(
        DS_CU(cuMemAllocManaged, &raw, bytes, CU_MEM_ATTACH_GLOBAL));
    ptr = reinterpret_cast<void *>(raw);
    std::lock_guard<std::mutex> lock(managedMutex);
    managedPointers.insert(ptr);
    return Status::success();
  }
  DS_RETURN_IF_ERROR(DS_CU(cuMemAllocAsync, &raw, bytes, stream));
  ptr = reinterpret_cast<void *>(raw);
  return Status::success();
}

Status dsrt::cuda::freeOnStream(void *ptr, CUstream stream) {
  bool managed = false;
  {
    std::lock_guard<std::mutex> lock(managedMutex);
    managed = managedPointers.erase(ptr) != 0;
  }
  if (!managed)
    return DS_CU(cuMemFreeAsync, devicePointer(ptr), stream);
  // Work already enqueued may still use it.
  DS_RETURN_IF_ERROR(refuseWhileCapturing(
      "mgpuMemFree", "free managed memory (that waits for the stream)"));
  DS_RETURN_IF_ERROR(DS_CU(cuStreamSynchronize, stream));
  return DS_CU(cuMemFree, devicePointer(ptr));
}

void *dsrt_cuda_alloc(int64_t bytes) {
  Status status = Status::success();
  if (!checkBytes(bytes, "dsrt_cuda_alloc", status) || ensureReady().failed())
    return nullptr;
  CUdeviceptr raw = 0;
  if (DS_CU(cuMemAlloc, &raw, static_cast<size_t>(bytes)).failed())
    return nullptr;
  return reinterpret_cast<void *>(raw);
}

void dsrt_cuda_free(void *ptr) {
  if (!ptr || ensureReady().failed() ||
      refuseWhileCapturing("dsrt_cuda_free",
                           "free memory (that waits for the stream)")
          .failed())
    return;
  if (DS_CU(cuStreamSynchronize, stepStream()).failed())
    return; // Freeing memory the stream may still use would be worse.
  (void)DS_CU(cuMemFree, devicePointer(ptr));
}

int dsrt_cuda_copy_to_device(void *dst, const void *src, int64_t bytes) {
  Status status = Status::success();
  if (!checkBytes(bytes, "dsrt_cuda_copy_to_device", status))
    return status.failed() ? -1 : 0;
  if (ensureReady().failed() ||
      DS_CU(cuMemcpyHtoDAsync, devicePointer(dst), src,
            static_cast<size_t>(bytes), stepStream())
          .failed())
    return -1;
  countToDevice(static_cast<size_t>(bytes));
  return 0;
}

int dsrt_cuda_copy_to_host(void *dst, const void *src, int64_t bytes) {
  Status status = Status::success();
  if (!checkBytes(bytes, "dsrt_cuda_copy_to_host", status))
    return status.failed() ? -1 : 0;
  // It waits for the stream: the host-staged collectives' waits count too.
  counters().waits.fetch_add(1, std::memory_order_relaxed);
  if (ensureReady().failed() ||
      refuseWhileCapturing("dsrt_cuda_copy_to_host",
                           "copy to the host (that waits for the stream)")
          .failed() ||
      DS_CU(cuMemcpyDtoHAsync, dst, devicePointer(src),
            static_cast<size_t>(bytes), stepStream())
          .failed() ||
      DS_CU(cuStreamSynchronize, stepStream()).failed())
    return -1;
  countToHost(static_cast<size_t>(bytes));
  return 0;
}

void *dsrt_cuda_host_alloc(int64_t bytes) {
  Status status = Status::success();
  if (!checkBytes(bytes, "dsrt_cuda_host_alloc", status) ||
      ensureReady().failed())
    return nullptr;
  void *ptr = nullptr;
  if (DS_CU(cuMemHostAlloc, &ptr, static_cast<size_t>(bytes), 0).failed())
    return nullptr;
  return ptr;
}

void dsrt_cuda_host_free(void *ptr) {
  if (!ptr || ensureReady().failed() ||
      refuseWhileCapturing("dsrt_cuda_host_free",
                           "free pinned memory (that waits for the stream)")
          .failed())
    return;
  // A copy from or to it may still be in flight.
  if (DS_CU(cuStreamSynchronize, stepStream()).failed())
    return;
  (void)DS_CU(cuMemFreeHost, ptr);
}

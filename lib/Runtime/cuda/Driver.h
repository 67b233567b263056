//===- Driver.h - The CUDA driver API, loaded at run time -------*- C++ -*-===//
//
// The runtime calls the driver through a table of function pointers filled
// by dlopen/dlsym instead of linking libcuda: libdsrt must load, and its CPU
// paths run, on machines without a driver, and tests substitute a stub
// driver (test/lib/StubCuda) by pointing DS_CUDA_DRIVER at it.
//
// The table is generated from cuda.h itself: each entry is declared with
// decltype of the header's prototype, so a signature cannot drift, and is
// looked up under the name cuda.h's macros map it to (cuMemAlloc ->
// cuMemAlloc_v2), the versioned symbol a program linked against libcuda
// would bind to. Error messages use the unversioned name.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CUDA_DRIVER_H
#define DS_LIB_RUNTIME_CUDA_DRIVER_H

#include "../RuntimeInternal.h"

#include <cuda.h>

namespace dsrt::cuda {

/// Every driver function the runtime calls.
#define DSRT_CUDA_DRIVER_FUNCTIONS(X)                                          \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuInit)                                                                    \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxSetCurrent)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventQuery)                                                              \
  X(cuEventElapsedTime)                                                        \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemAllocAsync)                                                           \
  X(cuMemFreeAsync)                                                            \
  X(cuMemAllocManaged)                                                         \
  X(cuMemHostAlloc)                                                            \
  X(cuMemFreeHost)                                                             \
  X(cuMemHostRegister)                                                         \
  X(cuMemHostUnregister)                                                       \
  X(cuMemcpyAsync)                                                             \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemsetD16Async)                                                          \
  X(cuMemsetD32Async)                                                          \
  X(cuMemsetD2D16Async)                                                        \
  X(cuMemsetD2D32Async)                                                        \
  X(cuDeviceGetDefaultMemPool)                                                 \
  X(cuMemPoolSetAttribute)                                                     \
  X(cuPointerGetAttribute)                                                     \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuLaunchKernelEx)                                                          \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiateWithFlags)                                               \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)

/// The loaded driver: one pointer per function, named as cuda.h names it
/// after macro expansion (so `api.cuMemAlloc` is the cuMemAlloc_v2 entry).
struct DriverApi {
#define DSRT_CUDA_DECLARE_ENTRY(fn) decltype(&::fn) fn = nullptr;
  DSRT_CUDA_DRIVER_FUNCTIONS(DSRT_CUDA_DECLARE_ENTRY)
#undef DSRT_CUDA_DECLARE_ENTRY
};

/// Loads the driver (DS_CUDA_DRIVER, default "libcuda.so.1") and resolves
/// every entry, once per process; a failed attempt is retried by the next
/// call. Records "no CUDA device: ..." on failure. Thread-safe.
Status loadDriver();

/// The table; valid only after loadDriver() succeeded.
const DriverApi &driver();

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", for any result code.
void formatResult(CUresult result, char *out, size_t size);

/// Records "<fn> failed: <name> (<text>)" at file:line for a failed result.
Status checkResult(CUresult result, const char *fn, const char *file, int line);

} // namespace dsrt::cuda

/// Calls driver function `fn` with the remaining arguments and evaluates to
/// a Status; a failure is recorded with the function's name and the result
/// code, e.g. DS_RETURN_IF_ERROR(DS_CU(cuMemAlloc, &ptr, bytes)).
#define DS_CU(fn, ...)                                                         \
  ::dsrt::cuda::checkResult(::dsrt::cuda::driver().fn(__VA_ARGS__), #fn,       \
                            __FILE__, __LINE__)

#endif // DS_LIB_RUNTIME_CUDA_DRIVER_H

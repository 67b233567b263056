//===- Driver.cpp - Loading the CUDA driver with dlopen -------------------===//
//
// Fills the DriverApi table of Driver.h once per process. The library is
// never closed: the driver keeps threads and state that do not survive
// dlclose, and CUDA objects handed to compiled code may outlive any scope
// the runtime could close it in.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

using namespace dsrt;
using namespace dsrt::cuda;

/// Stringises after macro expansion: DSRT_CUDA_SYMBOL(cuMemAlloc) is
/// "cuMemAlloc_v2", the symbol cuda.h binds the name to.
#define DSRT_CUDA_SYMBOL(fn) DSRT_CUDA_SYMBOL_IMPL(fn)
#define DSRT_CUDA_SYMBOL_IMPL(fn) #fn

namespace {

DriverApi table;
std::mutex loadMutex;
/// Set, with release order, once `table` is complete.
std::atomic<bool> loaded{false};

} // namespace

Status dsrt::cuda::loadDriver() {
  if (loaded.load(std::memory_order_acquire))
    return Status::success();
  std::lock_guard<std::mutex> lock(loadMutex);
  if (loaded.load(std::memory_order_relaxed))
    return Status::success();

  const char *path = std::getenv("DS_CUDA_DRIVER");
  if (!path || !*path)
    path = "libcuda.so.1";
  // RTLD_LOCAL: the driver's symbols must not satisfy anyone else's
  // undefined references (a stub in tests, the real one in production).
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    return DS_ERROR("no CUDA device: cannot load the CUDA driver %s (%s)", path,
                    why ? why : "unknown dlopen error");
  }

  DriverApi api;
  const char *missing = nullptr;
#define DSRT_CUDA_RESOLVE_ENTRY(fn)                                            \
  if (!missing) {                                                              \
    api.fn = reinterpret_cast<decltype(api.fn)>(                               \
        dlsym(handle, DSRT_CUDA_SYMBOL(fn)));                                  \
    if (!api.fn)                                                               \
      missing = DSRT_CUDA_SYMBOL(fn);                                          \
  }
  DSRT_CUDA_DRIVER_FUNCTIONS(DSRT_CUDA_RESOLVE_ENTRY)
#undef DSRT_CUDA_RESOLVE_ENTRY
  if (missing) {
    dlclose(handle);
    return DS_ERROR("no CUDA device: the CUDA driver %s has no %s (a driver "
                    "older than CUDA 12?)",
                    path, missing);
  }
  table = api;
  loaded.store(true, std::memory_order_release);
  return Status::success();
}

const DriverApi &dsrt::cuda::driver() { return table; }

void dsrt::cuda::formatResult(CUresult result, char *out, size_t size) {
  const char *name = nullptr, *text = nullptr;
  if (loaded.load(std::memory_order_acquire)) {
    if (table.cuGetErrorName(result, &name) != CUDA_SUCCESS)
      name = nullptr;
    if (table.cuGetErrorString(result, &text) != CUDA_SUCCESS)
      text = nullptr;
  }
  if (name)
    std::snprintf(out, size, "%s (%s)", name, text ? text : "no description");
  else
    std::snprintf(out, size, "CUresult %d", static_cast<int>(result));
}

Status dsrt::cuda::checkResult(CUresult result, const char *fn,
                               const char *file, int line) {
  if (result == CUDA_SUCCESS)
    return Status::success();
  char text[256];
  formatResult(result, text, sizeof(text));
  return recordError(file, line, "%s failed: %s", fn, text);
}

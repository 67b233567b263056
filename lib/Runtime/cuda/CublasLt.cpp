//===- CublasLt.cpp - Loading cuBLASLt and its per-process session --------===//
//
// cuBLASLt is found at the first GEMM: DS_CUBLASLT_LIBRARY if set, else the
// soname of the toolkit the runtime was built against (libcublasLt.so.13),
// else the development symlink. Like the driver it is never unloaded. The
// session's workspace is 32 MiB, what cuBLAS documents as enough for every
// Hopper kernel (4 MiB suffices on older GPUs): a smaller one makes the
// heuristic skip the fastest split-K kernels.
//
//===----------------------------------------------------------------------===//

#include "CublasLt.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
/// The FP8 scale slots after the workspace (LtSession::scaleSlots).
constexpr size_t kScaleSlotBytes = 256;

CublasLtApi table;
bool loaded = false;
/// Null until the first GEMM, and again after dsrt_cuda_shutdown.
LtSession *session = nullptr;

Status loadLibrary() {
  if (loaded)
    return Status::success();
  const char *env = std::getenv("DS_CUBLASLT_LIBRARY");
  const char *candidates[] = {"libcublasLt.so.13", "libcublasLt.so"};
  std::string tried;
  void *handle = nullptr;
  const char *path = nullptr;
  auto attempt = [&](const char *candidate) {
    handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
    path = candidate;
    if (!handle) {
      const char *why = dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + candidate + " (" +
               (why ? why : "unknown dlopen error") + ")";
    }
  };
  if (env && *env) {
    attempt(env);
  } else {
    for (const char *candidate : candidates)
      if (!handle)
        attempt(candidate);
  }
  if (!handle)
    return DS_ERROR("cannot load cuBLASLt: %s; set DS_CUBLASLT_LIBRARY to its "
                    "path",
                    tried.c_str());

  CublasLtApi api;
  const char *missing = nullptr;
#define DSRT_CUBLASLT_RESOLVE_ENTRY(fn)                                        \
  if (!missing) {                                                              \
    api.fn = reinterpret_cast<decltype(api.fn)>(dlsym(handle, #fn));           \
    if (!api.fn)                                                               \
      missing = #fn;                                                           \
  }
  DSRT_CUBLASLT_FUNCTIONS(DSRT_CUBLASLT_RESOLVE_ENTRY)
#undef DSRT_CUBLASLT_RESOLVE_ENTRY
  if (missing) {
    dlclose(handle);
    return DS_ERROR("cannot use cuBLASLt %s: it has no %s (older than CUDA "
                    "12?)",
                    path, missing);
  }
  table = api;
  loaded = true;
  return Status::success();
}

} // namespace

const CublasLtApi &dsrt::cuda::cublasLt() { return table; }

Status dsrt::cuda::checkStatus(cublasStatus_t status, const char *fn,
                               const char *file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  const char *name = loaded ? table.cublasLtGetStatusName(status) : nullptr;
  if (name)
    return recordError(file, line, "%s failed: %s", fn, name);
  return recordError(file, line, "%s failed: cublasStatus_t %d", fn,
                     static_cast<int>(status));
}

Status dsrt::cuda::ltSession(LtSession *&out) {
  if (session) {
    out = session;
    return Status::success();
  }
  DS_RETURN_IF_ERROR(loadLibrary());
  cublasLtHandle_t handle = nullptr;
  DS_RETURN_IF_ERROR(DS_LT(cublasLtCreate, &handle));
  CUdeviceptr workspace = 0;
  if (DS_CU(cuMemAlloc, &workspace, kWorkspaceBytes + kScaleSlotBytes)
          .failed()) {
    (void)table.cublasLtDestroy(handle);
    return Status::failure();
  }
  session = new LtSession{handle, workspace, kWorkspaceBytes,
                          workspace + kWorkspaceBytes};
  out = session;
  return Status::success();
}

void dsrt::cuda::shutdownCublasLt() {
  if (!session)
    return;
  clearMatmulPlans();
  // The caller has synchronised the step stream: no GEMM still uses these.
  DeviceMemory workspace(session->workspace);
  (void)DS_LT(cublasLtDestroy, session->handle);
  delete session;
  session = nullptr;
}

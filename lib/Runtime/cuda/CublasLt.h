//===- CublasLt.h - cuBLASLt, loaded at run time ----------------*- C++ -*-===//
//
// cuBLASLt is loaded with dlopen at the first GEMM, like the driver (see
// Driver.h): the runtime links nothing of CUDA, and tests substitute a stub.
// The table is declared from cublasLt.h's prototypes with decltype. The
// session built on it (a handle and the workspace every GEMM shares) lives
// until dsrt_cuda_shutdown.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CUDA_CUBLASLT_H
#define DS_LIB_RUNTIME_CUDA_CUBLASLT_H

#include "Context.h"

#include <cublasLt.h>

namespace dsrt::cuda {

/// Every cuBLASLt function the runtime calls.
#define DSRT_CUBLASLT_FUNCTIONS(X)                                             \
  X(cublasLtGetStatusName)                                                     \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmul)

struct CublasLtApi {
#define DSRT_CUBLASLT_DECLARE_ENTRY(fn) decltype(&::fn) fn = nullptr;
  DSRT_CUBLASLT_FUNCTIONS(DSRT_CUBLASLT_DECLARE_ENTRY)
#undef DSRT_CUBLASLT_DECLARE_ENTRY
};

/// The loaded library; valid only after ltSession() succeeded.
const CublasLtApi &cublasLt();

/// Records "<fn> failed: CUBLAS_STATUS_... " for a failed status.
Status checkStatus(cublasStatus_t status, const char *fn, const char *file,
                   int line);

/// What every GEMM shares: the handle, the workspace and, just past it,
/// two 16-byte aligned slots for FP8 scales (Matmul.cpp copies a scale that
/// is not 16-byte aligned into one: cuBLASLt refuses such a scale pointer).
struct LtSession {
  cublasLtHandle_t handle = nullptr;
  CUdeviceptr workspace = 0;
  size_t workspaceBytes = 0;
  CUdeviceptr scaleSlots = 0;
};

/// The session, created on the first call: loads cuBLASLt, creates the
/// handle, allocates the workspace. Requires ensureReady() to have
/// succeeded on this thread. Not thread-safe: Matmul.cpp serialises GEMMs.
Status ltSession(LtSession *&session);

/// Drops the cached GEMM plans (Matmul.cpp), before the handle goes.
void clearMatmulPlans();

/// Calls cuBLASLt function `fn` and evaluates to a Status, recording the
/// function's name and the status on failure.
#define DS_LT(fn, ...)                                                         \
  ::dsrt::cuda::checkStatus(::dsrt::cuda::cublasLt().fn(__VA_ARGS__), #fn,     \
                            __FILE__, __LINE__)

//===----------------------------------------------------------------------===//
// RAII owners of cuBLASLt descriptors
//===----------------------------------------------------------------------===//

struct MatmulDescDeleter {
  void operator()(cublasLtMatmulDesc_t desc) const {
    (void)DS_LT(cublasLtMatmulDescDestroy, desc);
  }
};
struct MatrixLayoutDeleter {
  void operator()(cublasLtMatrixLayout_t layout) const {
    (void)DS_LT(cublasLtMatrixLayoutDestroy, layout);
  }
};
struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreference_t pref) const {
    (void)DS_LT(cublasLtMatmulPreferenceDestroy, pref);
  }
};

using MatmulDesc = UniqueHandle<cublasLtMatmulDesc_t, MatmulDescDeleter>;
using MatrixLayout = UniqueHandle<cublasLtMatrixLayout_t, MatrixLayoutDeleter>;
using MatmulPreference =
    UniqueHandle<cublasLtMatmulPreference_t, PreferenceDeleter>;

} // namespace dsrt::cuda

#endif // DS_LIB_RUNTIME_CUDA_CUBLASLT_H

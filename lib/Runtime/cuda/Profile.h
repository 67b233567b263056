//===- Profile.h - Device time of each kernel and GEMM ----------*- C++ -*-===//
//
// dsrt_cuda_profile_begin/end (ds_runtime_cuda.h): while profiling, every
// kernel launch and cuBLASLt GEMM is bracketed by two events on the step
// stream, and at the end the device time between them is summed per name
// (a kernel's symbol; a GEMM's types and shape). The events cost a little
// device time each, so the totals are for finding where a step's time
// goes, not for timing it (ds-step-run's ms/step does that, unprofiled).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CUDA_PROFILE_H
#define DS_LIB_RUNTIME_CUDA_PROFILE_H

#include "Driver.h"

#include <atomic>
#include <string>

namespace dsrt::cuda {

/// True between dsrt_cuda_profile_begin and dsrt_cuda_profile_end.
bool profiling();

/// Brackets the work `name` enqueues on the step stream within its scope
/// with two events while profiling(); does nothing otherwise. A failed
/// event call records its error like any driver call (the step fails).
class ProfiledWork {
public:
  explicit ProfiledWork(const std::string &name);
  ~ProfiledWork();
  ProfiledWork(const ProfiledWork &) = delete;
  ProfiledWork &operator=(const ProfiledWork &) = delete;

private:
  long index = -1;
};

/// The symbol of a kernel mgpuModuleGetFunction returned (MgpuWrappers.cpp),
/// "?" for one it does not know.
std::string kernelName(CUfunction function);

} // namespace dsrt::cuda

#endif // DS_LIB_RUNTIME_CUDA_PROFILE_H

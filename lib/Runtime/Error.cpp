//===- Error.cpp - The process-wide error slot ----------------------------===//
//
// Generated code calls the runtime without any way to handle a failure, so a
// failing call records a message here and returns; the runner polls
// dsrt_last_error() after each step. The first error wins: it is the cause,
// later ones are usually its consequences. The message lives in a static
// buffer so that recording works even when the failure is running out of
// memory, and it is published through an atomic pointer so that readers
// never take the lock.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

using namespace dsrt;

namespace {

/// Long enough for a message that names three shapes and a source location.
constexpr size_t kMessageCapacity = 1024;

std::mutex slotMutex;
char slotMessage[kMessageCapacity];
/// Null, or slotMessage once it holds a complete message.
std::atomic<const char *> published{nullptr};

/// "lib/Runtime/Gemm.cpp" -> "Gemm.cpp": the build path is noise.
const char *baseName(const char *path) {
  const char *slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

} // namespace

Status dsrt::recordError(const char *file, int line, const char *fmt, ...) {
  std::lock_guard<std::mutex> lock(slotMutex);
  if (published.load(std::memory_order_relaxed))
    return Status::failure();

  va_list args;
  va_start(args, fmt);
  int used = std::vsnprintf(slotMessage, kMessageCapacity, fmt, args);
  va_end(args);
  if (used < 0)
    used = 0;
  size_t length = std::min(static_cast<size_t>(used), kMessageCapacity - 1);
  std::snprintf(slotMessage + length, kMessageCapacity - length, " [%s:%d]",
                baseName(file), line);
  published.store(slotMessage, std::memory_order_release);
  return Status::failure();
}

bool dsrt::hasError() {
  return published.load(std::memory_order_acquire) != nullptr;
}

const char *dsrt_last_error(void) {
  return published.load(std::memory_order_acquire);
}

void dsrt_clear_error(void) {
  std::lock_guard<std::mutex> lock(slotMutex);
  published.store(nullptr, std::memory_order_release);
}

//===- StubCommon.h - What both CUDA stubs share ----------------*- C++ -*-===//
//
// The stub libcuda.so.1 and libcublasLt.so (test-only; see StubCuda.cpp)
// append one line per call to the file named by DS_STUB_CUDA_LOG, and the
// cuBLASLt stub names the streams the driver stub made and enqueues its
// GEMMs on them. Both include this header: the log writer and the layout of
// a stub stream.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TEST_LIB_STUBCUDA_STUBCOMMON_H
#define DS_TEST_LIB_STUBCUDA_STUBCOMMON_H

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace stubcuda {

/// What a CUstream of the stub points to.
struct Stream {
  uint32_t magic;
  int id;
  /// Set by the driver stub: runs `work` and logs `line`, or, while the
  /// stream is being captured into a graph, records both for the graph's
  /// launches. The cuBLASLt stub enqueues its GEMMs through it.
  void (*enqueue)(Stream *stream, const char *line,
                  std::function<void()> work) = nullptr;
  /// The driver stub's capture in progress, if any: its own, or one the
  /// stream joined by waiting on an event recorded in it (a fork).
  void *capture = nullptr;
  /// Work enqueued on the stream so far (the driver stub counts it, to
  /// tell whether a forked stream joined its capture back after its last
  /// work).
  uint64_t work = 0;
  /// Set by the NCCL stub when a collective "hangs on the device": while
  /// *hang holds, what the stream does later never completes (its events
  /// stay pending, a synchronisation blocks), until ncclCommAbort clears it.
  std::atomic<bool> *hang = nullptr;
};

/// Whether a hang token holds (a stream or an event waits on a hung
/// collective).
inline bool hanging(const std::atomic<bool> *token) {
  return token && token->load();
}
constexpr uint32_t kStreamMagic = 0x5354524d; // "STRM"

/// Appends one formatted line to $DS_STUB_CUDA_LOG (nothing if unset). One
/// write() with O_APPEND per line, so the lines of both stubs interleave
/// in call order.
inline void logLine(const char *fmt, ...) {
  const char *path = std::getenv("DS_STUB_CUDA_LOG");
  if (!path || !*path)
    return;
  char line[1024];
  va_list args;
  va_start(args, fmt);
  int length = std::vsnprintf(line, sizeof(line) - 1, fmt, args);
  va_end(args);
  if (length < 0)
    return;
  if (length > static_cast<int>(sizeof(line)) - 2)
    length = sizeof(line) - 2;
  line[length++] = '\n';
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  ssize_t ignored = write(fd, line, length);
  (void)ignored;
  close(fd);
}

/// "s3" for a stub stream, "null" for the legacy default stream.
inline const char *streamName(const void *stream, char *buf, size_t size) {
  if (!stream)
    return "null";
  auto *s = static_cast<const Stream *>(stream);
  if (s->magic != kStreamMagic)
    return "invalid";
  std::snprintf(buf, size, "s%d", s->id);
  return buf;
}

} // namespace stubcuda

#endif // DS_TEST_LIB_STUBCUDA_STUBCOMMON_H

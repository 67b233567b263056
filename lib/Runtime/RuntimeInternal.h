//===- RuntimeInternal.h - Shared helpers of the ds runtime -----*- C++ -*-===//
//
// What the files of libdsrt share behind the C ABI of ds_runtime.h: the
// status type and error-recording macros (Error.cpp), the thread count and
// the libgomp parallel loop (Threads.cpp), and the counters (Stats.cpp).
// Nothing here is exported: the library is built with hidden visibility and
// only the DSRT_API functions of ds_runtime.h leave it.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_RUNTIMEINTERNAL_H
#define DS_LIB_RUNTIME_RUNTIMEINTERNAL_H

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>

namespace dsrt {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// The outcome of an internal runtime step. A failure has already been
/// recorded in the process-wide error slot, so callers only propagate it.
class [[nodiscard]] Status {
public:
  static Status success() { return Status(true); }
  static Status failure() { return Status(false); }
  bool failed() const { return !ok; }

private:
  explicit Status(bool ok) : ok(ok) {}
  bool ok;
};

/// Records "<message> [<file>:<line>]" in the error slot unless an error is
/// already recorded (the first error wins). Thread-safe; never allocates.
Status recordError(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/// True when an error is recorded and not yet cleared.
bool hasError();

} // namespace dsrt

/// Records a printf-formatted error at this file and line; evaluates to a
/// failed Status, so `return DS_ERROR("...")` reads naturally.
#define DS_ERROR(...) ::dsrt::recordError(__FILE__, __LINE__, __VA_ARGS__)

/// Returns a failed Status from the enclosing function if `expr` failed.
#define DS_RETURN_IF_ERROR(expr)                                               \
  do {                                                                         \
    if ((expr).failed())                                                       \
      return ::dsrt::Status::failure();                                        \
  } while (false)

namespace dsrt {

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

/// The thread count runtime kernels use now (>= 1).
int numThreads();

/// Makes the calling thread's OpenMP thread count (a per-thread setting in
/// OpenMP) equal numThreads(), so that oneDNN, which reads it, uses the
/// count dsrt_set_num_threads chose even when called from another thread.
void applyThreadsToCaller();

/// Calls fn(ctx, begin, end) on contiguous chunks of [0, n) split over up to
/// `threads` threads of libgomp's team, the same team oneDNN uses, so the two
/// never oversubscribe the cores. Runs inline when one thread suffices or
/// when already inside a parallel region.
void parallelForImpl(int64_t n, int threads,
                     void (*fn)(void *ctx, int64_t begin, int64_t end),
                     void *ctx);

/// parallelForImpl for any callable `body(int64_t begin, int64_t end)`.
template <typename Body> void parallelFor(int64_t n, int threads, Body &&body) {
  parallelForImpl(
      n, threads,
      [](void *ctx, int64_t begin, int64_t end) {
        (*static_cast<std::remove_reference_t<Body> *>(ctx))(begin, end);
      },
      &body);
}

//===----------------------------------------------------------------------===//
// Counters
//===----------------------------------------------------------------------===//

/// Adds one successful GEMM call to the counters of dsrt_get_stats.
void recordGemm(double flops, double seconds);
/// Counts one integer GEMM, and whether it did not run as one oneDNN GEMM.
void recordInt8Gemm(bool split);
/// Adds one successful block-sparse call: its useful flops (2*M*active
/// weight elements), what the dense product costs, the wall-clock time, and
/// whether it ran as a dense GEMM on the masked weight.
void recordSparse(double flops, double denseFlops, double seconds,
                  bool fallback);

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};

/// A 64-byte aligned scratch array owned by its holder.
template <typename T> using Buffer = std::unique_ptr<T[], FreeDeleter>;

/// Allocates `count` elements of scratch space, or records an error naming
/// `what` and returns null.
template <typename T>
Buffer<T> allocateBuffer(int64_t count, const char *what) {
  int64_t bytes = 0;
  if (count < 0 ||
      __builtin_mul_overflow(count, static_cast<int64_t>(sizeof(T)), &bytes) ||
      __builtin_add_overflow(bytes, int64_t(63), &bytes)) {
    (void)DS_ERROR("size of %s overflows (%lld elements)", what,
                   static_cast<long long>(count));
    return nullptr;
  }
  // aligned_alloc wants a multiple of the alignment, and never 0 bytes.
  bytes = bytes / 64 * 64;
  void *p = std::aligned_alloc(64, bytes ? bytes : 64);
  if (!p)
    (void)DS_ERROR("out of memory allocating %lld bytes for %s",
                   static_cast<long long>(bytes), what);
  return Buffer<T>(static_cast<T *>(p));
}

} // namespace dsrt

#endif // DS_LIB_RUNTIME_RUNTIMEINTERNAL_H

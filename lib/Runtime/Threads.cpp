//===- Threads.cpp - Thread count and the libgomp parallel loop -----------===//
//
// oneDNN (Debian's libdnnl) is built on GNU OpenMP, so the runtime uses the
// same libgomp team: one pool of threads for oneDNN's GEMMs and for the
// runtime's own loops, and one knob, omp_set_num_threads, that governs both.
// The file is not compiled with -fopenmp (clang's -fopenmp targets LLVM's
// libomp, a second runtime that would fight libgomp for the cores); it calls
// libgomp's entry points directly: the omp_* API and GOMP_parallel, the
// function GCC emits for `#pragma omp parallel`.
//
// OpenMP keeps the thread count per thread, so dsrt_set_num_threads stores
// the count here and every runtime kernel re-applies it to its calling thread
// (applyThreadsToCaller) before calling into oneDNN.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <algorithm>
#include <atomic>

// libgomp's API, declared here rather than through <omp.h>, which clang does
// not ship for libgomp.
extern "C" {
void omp_set_num_threads(int n);
int omp_get_max_threads(void);
int omp_get_num_threads(void);
int omp_get_thread_num(void);
int omp_in_parallel(void);
void GOMP_parallel(void (*fn)(void *), void *data, unsigned numThreads,
                   unsigned flags);
}

using namespace dsrt;

namespace {

/// The process's initial OpenMP thread count, read when the library loads
/// (libgomp, a dependency, is initialized first): OMP_NUM_THREADS if set,
/// else the number of cores.
const int defaultThreads = std::max(1, omp_get_max_threads());

/// What dsrt_set_num_threads asked for; 0 means defaultThreads.
std::atomic<int> requestedThreads{0};

/// What a GOMP_parallel worker needs to find its chunk.
struct ParallelTask {
  int64_t n;
  void (*fn)(void *ctx, int64_t begin, int64_t end);
  void *ctx;
};

void runChunk(void *data) {
  const ParallelTask &task = *static_cast<const ParallelTask *>(data);
  int64_t team = omp_get_num_threads();
  int64_t id = omp_get_thread_num();
  // Even static blocks: the first (n % team) threads get one more item.
  int64_t begin = task.n * id / team;
  int64_t end = task.n * (id + 1) / team;
  if (begin < end)
    task.fn(task.ctx, begin, end);
}

} // namespace

int dsrt::numThreads() {
  int requested = requestedThreads.load(std::memory_order_relaxed);
  return requested > 0 ? requested : defaultThreads;
}

void dsrt::applyThreadsToCaller() {
  int n = numThreads();
  if (omp_get_max_threads() != n)
    omp_set_num_threads(n);
}

void dsrt::parallelForImpl(int64_t n, int threads,
                           void (*fn)(void *ctx, int64_t begin, int64_t end),
                           void *ctx) {
  if (n <= 0)
    return;
  int64_t team = std::min<int64_t>(threads, n);
  if (team <= 1 || omp_in_parallel()) {
    fn(ctx, 0, n);
    return;
  }
  ParallelTask task{n, fn, ctx};
  GOMP_parallel(runChunk, &task, static_cast<unsigned>(team), /*flags=*/0);
}

void dsrt_set_num_threads(int n) {
  if (n < 0) {
    (void)DS_ERROR("dsrt_set_num_threads: thread count must be >= 0, got %d",
                   n);
    return;
  }
  requestedThreads.store(n, std::memory_order_relaxed);
  applyThreadsToCaller();
}

int dsrt_get_num_threads(void) { return numThreads(); }

//===- CommStaging.cpp - Staged starts without a host wait ----------------===//
//
// The staging thread and its pinned buffers (CommStaging.h). One thread
// runs the jobs in the order they were submitted, which is the program
// order of the starts on every rank, so the CPU starts reach MPI in the
// same order everywhere.
//
//===----------------------------------------------------------------------===//

#include "CommStaging.h"

#include "cuda/Context.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace dsrt;
using namespace dsrt::comm;

namespace {

CUdeviceptr devicePointer(const void *p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

/// Far from the CPU collectives' handles (from 1) and NCCL's (from 2^48).
constexpr int64_t kFirstHandle = int64_t(1) << 56;

struct Queued {
  int64_t handle;
  std::shared_ptr<staging::Job> job;
  CUevent ready;
};

struct Finished {
  std::shared_ptr<staging::Job> job;
  int64_t cpuHandle;
};

struct State {
  std::mutex mutex;
  std::condition_variable wake; // the thread: a job queued, or stop
  std::condition_variable done; // finish and drain: a job has run
  std::deque<Queued> queue;
  bool running = false; // a job taken from the queue, not yet finished
  std::set<int64_t> owned;
  std::map<int64_t, Finished> finished;
  std::vector<CUevent> spareEvents;
  /// The staging thread's stream for the copies jobs make themselves
  /// (ParkedBuffer::fetch), beside the step stream; of the session
  /// `generation`.
  CUstream copies = nullptr;
  /// Free pinned buffers by size, of the CUDA session `generation`.
  std::map<size_t, std::vector<void *>> pinned;
  uint64_t generation = 0;
  std::thread thread;
  bool stop = false;
  bool hooked = false;
  int64_t nextHandle = kFirstHandle;
};

/// Never destroyed: the thread may still be parked when the process exits.
State &state() {
  static State *s = new State;
  return *s;
}

void serve() {
  State &s = state();
  bool ready = !cuda::ensureReady().failed(); // the context, on this thread
  std::unique_lock<std::mutex> lock(s.mutex);
  if (ready && !s.copies)
    ready = !DS_CU(cuStreamCreate, &s.copies, CU_STREAM_NON_BLOCKING).failed();
  for (;;) {
    s.wake.wait(lock, [&] { return s.stop || !s.queue.empty(); });
    if (s.queue.empty())
      return; // stopped, with nothing left to run
    Queued q = std::move(s.queue.front());
    s.queue.pop_front();
    s.running = true;
    lock.unlock();
    // The copies to the host were enqueued before the event: once it has
    // happened, the pinned buffers hold the step's values.
    int64_t cpuHandle = 0;
    if (ready && !DS_CU(cuEventSynchronize, q.ready).failed())
      cpuHandle = q.job->run();
    lock.lock();
    s.spareEvents.push_back(q.ready);
    s.finished[q.handle] = {std::move(q.job), cpuHandle};
    s.running = false;
    s.done.notify_all();
  }
}

/// dsrt_cuda_shutdown's hook: the thread ends (nothing is queued once
/// every start has had its wait), then its events and the pinned buffers.
void shutdown() {
  State &s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stop = true;
    s.wake.notify_all();
  }
  if (s.thread.joinable())
    s.thread.join();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stop = false;
  for (CUevent event : s.spareEvents)
    (void)DS_CU(cuEventDestroy, event);
  s.spareEvents.clear();
  if (s.copies)
    (void)DS_CU(cuStreamDestroy, s.copies);
  s.copies = nullptr;
  for (auto &[bytes, buffers] : s.pinned)
    for (void *p : buffers)
      (void)DS_CU(cuMemFreeHost, p);
  s.pinned.clear();
  s.finished.clear();
  s.owned.clear();
  ++s.generation;
}

} // namespace

//===----------------------------------------------------------------------===//
// Pinned buffers
//===----------------------------------------------------------------------===//

bool staging::PinnedBuffer::take(size_t wanted) {
  if (wanted == 0)
    return true;
  State &s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.pinned.find(wanted);
    if (it != s.pinned.end() && !it->second.empty()) {
      ptr = it->second.back();
      it->second.pop_back();
      bytes = wanted;
      session = s.generation;
      return true;
    }
    session = s.generation;
  }
  if (cuda::ensureReady().failed() ||
      DS_CU(cuMemHostAlloc, &ptr, wanted, 0u).failed()) {
    ptr = nullptr;
    return false;
  }
  bytes = wanted;
  return true;
}

staging::PinnedBuffer::~PinnedBuffer() {
  if (!ptr)
    return;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Memory of an ended session went with its context.
  if (session == s.generation)
    s.pinned[bytes].push_back(ptr);
}

//===----------------------------------------------------------------------===//
// Parked buffers
//===----------------------------------------------------------------------===//

bool staging::ParkedBuffer::park(const void *from, size_t wanted) {
  if (wanted == 0)
    return true;
  if (cuda::ensureReady().failed())
    return false;
  CUstream step = cuda::stepStream();
  if (cuda::allocateOnStream(int64_t(wanted), step, false, device).failed()) {
    device = nullptr;
    return false;
  }
  bytes = wanted;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    session = state().generation;
  }
  return !DS_CU(cuMemcpyAsync, devicePointer(device), devicePointer(from),
                wanted, step)
              .failed();
}

bool staging::ParkedBuffer::fetch(size_t prefix) {
  State &s = state();
  if (prefix == 0)
    return true;
  if (!device || prefix > bytes || !s.copies) {
    (void)DS_ERROR("dsrt: fetching %zu bytes of a parked buffer of %zu", prefix,
                   bytes);
    return false;
  }
  if (!pinned.take(prefix) || DS_CU(cuMemcpyDtoHAsync, pinned.data(),
                                    devicePointer(device), prefix, s.copies)
                                  .failed())
    return false;
  cuda::countToHost(prefix);
  return true;
}

bool staging::awaitFetches() {
  CUstream copies = state().copies;
  return copies && !DS_CU(cuStreamSynchronize, copies).failed();
}

void staging::ParkedBuffer::release() {
  if (!device)
    return;
  // On the staging thread, after the step stream's copy: ordered after
  // fetch's copy on the thread's stream.
  (void)cuda::freeOnStream(device, state().copies);
  device = nullptr;
}

staging::ParkedBuffer::~ParkedBuffer() {
  if (!device)
    return;
  // Never fetched (the job did not run): ordered after the step stream's
  // copy instead. Memory of an ended session went with its context.
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  bool live = session == s.generation;
  lock.unlock();
  if (live)
    (void)cuda::freeOnStream(device, cuda::stepStream());
}

//===----------------------------------------------------------------------===//
// The queue
//===----------------------------------------------------------------------===//

int64_t staging::submit(std::shared_ptr<Job> job) {
  if (cuda::ensureReady().failed())
    return 0;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  CUevent ready = nullptr;
  if (!s.spareEvents.empty()) {
    ready = s.spareEvents.back();
    s.spareEvents.pop_back();
  } else if (DS_CU(cuEventCreate, &ready, CU_EVENT_DISABLE_TIMING).failed()) {
    return 0;
  }
  if (DS_CU(cuEventRecord, ready, cuda::stepStream()).failed()) {
    s.spareEvents.push_back(ready);
    return 0;
  }
  if (!s.hooked) {
    cuda::addShutdownHook(shutdown);
    s.hooked = true;
  }
  if (!s.thread.joinable())
    s.thread = std::thread(serve);
  int64_t handle = s.nextHandle++;
  s.queue.push_back({handle, std::move(job), ready});
  s.owned.insert(handle);
  s.wake.notify_one();
  return handle;
}

bool staging::owns(int64_t handle) {
  if (handle < kFirstHandle)
    return false;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.owned.count(handle) != 0;
}

std::shared_ptr<staging::Job> staging::finish(int64_t handle,
                                              int64_t &cpuHandle) {
  // The host waits for the GPU to reach the start, as a copy to the host
  // would, but at the wait, with the rest of the step enqueued.
  cuda::counters().waits.fetch_add(1, std::memory_order_relaxed);
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  s.done.wait(lock, [&] { return s.finished.count(handle) != 0; });
  auto it = s.finished.find(handle);
  Finished f = std::move(it->second);
  s.finished.erase(it);
  s.owned.erase(handle);
  cpuHandle = f.cpuHandle;
  return std::move(f.job);
}

void staging::drain() {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.queue.empty() && !s.running)
    return;
  cuda::counters().waits.fetch_add(1, std::memory_order_relaxed);
  s.done.wait(lock, [&] { return s.queue.empty() && !s.running; });
}

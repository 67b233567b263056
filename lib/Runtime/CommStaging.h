//===- CommStaging.h - Staged starts without a host wait --------*- C++ -*-===//
//
// The started all-reduces that the host serves (compressed buckets,
// deterministic mode, no NCCL) read device buffers. Copied to pageable
// memory and waited for, each start stopped the host until the GPU had
// finished the backward pass up to that bucket, then encoded on the host
// while the GPU idled. Here a start only enqueues its copies into pinned
// memory on the step stream and records an event; a staging thread waits
// for the event and runs the CPU start on the copies (which encodes and
// hands the exchange to the communication thread), while the host goes on
// enqueuing the backward pass. Horovod's background thread waits for its
// tensors' "ready events" the same way.
//
// The staging thread reaches MPI (through the CPU start) after the host
// has gone on, so a collective the host calls itself would overtake the
// queued starts, and the ranks would disagree on the order: every other
// staged or bootstrapping collective drains the queue first.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_COMMSTAGING_H
#define DS_LIB_RUNTIME_COMMSTAGING_H

#include <cstddef>
#include <cstdint>
#include <memory>

namespace dsrt::comm::staging {

/// Pinned host memory for one staged copy, from a pool the runtime keeps
/// across steps (the buckets repeat); back to the pool when destroyed.
class PinnedBuffer {
public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  ~PinnedBuffer();

  /// Holds at least `bytes` (none for 0); false, with the error recorded,
  /// when the driver has no pinned memory to give.
  bool take(size_t bytes);
  void *data() const { return ptr; }

private:
  void *ptr = nullptr;
  size_t bytes = 0;
  uint64_t session = 0; // the CUDA session it was allocated in
};

/// A device buffer copied on the step stream into device memory of the
/// runtime's, so that the staging thread can copy to the host only the
/// part the step's values say is used (top-k's slots: the count is known
/// only once the step has run). The step may free its own buffer as soon
/// as the start returns; a copy on the device costs far less than the
/// unused part's crossing of PCIe, and the copy to the host runs on a
/// stream of the staging thread's, beside the step stream's kernels.
class ParkedBuffer {
public:
  ParkedBuffer() = default;
  ParkedBuffer(const ParkedBuffer &) = delete;
  ParkedBuffer &operator=(const ParkedBuffer &) = delete;
  ~ParkedBuffer();

  /// Copies bytes at `device` on the step stream (none for 0); false, with
  /// the error recorded, when it cannot.
  bool park(const void *device, size_t bytes);
  size_t size() const { return bytes; }
  /// On the staging thread (Job::run), once the step stream has done the
  /// copy: enqueues the copy of the first `prefix` bytes (at most size())
  /// to pinned memory on the thread's stream; false, with the error
  /// recorded, when it cannot. awaitFetches() waits for them.
  bool fetch(size_t prefix);
  /// The fetched bytes, once awaitFetches() has returned true.
  const void *fetched() const { return pinned.data(); }
  /// On the staging thread (Job::run): frees the device copy, ordered
  /// after fetch's copy. The destructor frees what is left on the step
  /// stream (a job that never ran).
  void release();

private:
  void *device = nullptr;
  size_t bytes = 0;
  uint64_t session = 0;
  PinnedBuffer pinned;
};

/// On the staging thread: waits for the fetches enqueued so far; false,
/// with the error recorded, when that fails.
bool awaitFetches();

/// What a staged start does on the staging thread once the step stream has
/// done everything enqueued before it (its copies to the host).
class Job {
public:
  virtual ~Job() = default;
  /// Runs the CPU collective's start on the host copies; its handle.
  virtual int64_t run() = 0;
};

/// Queues `job` behind the step stream's work so far; a handle of this
/// layer's own (never 0), or 0 with the error recorded (the job then never
/// runs).
int64_t submit(std::shared_ptr<Job> job);

/// Whether `handle` is one of submit's, not yet finished.
bool owns(int64_t handle);

/// Waits until the job of `handle` has run and hands it back with the CPU
/// start's handle (0 when it failed, the error recorded). Counts one host
/// wait.
std::shared_ptr<Job> finish(int64_t handle, int64_t &cpuHandle);

/// Waits until every queued job has run: the collectives the caller makes
/// next then reach MPI after them, in program order, as on every rank.
void drain();

} // namespace dsrt::comm::staging

#endif // DS_LIB_RUNTIME_COMMSTAGING_H

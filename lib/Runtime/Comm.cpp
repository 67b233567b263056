//===- Comm.cpp - The communicator and its communication thread -----------===//
//
// Data parallelism overlaps the all-reduce of one gradient bucket with the
// backward pass of the next, so collectives must progress while generated
// code computes. MPI offers that only through its own progress threads,
// whose availability and quality vary; instead one communication thread
// makes every MPI call (MPI_THREAD_FUNNELED: the one thread that called
// MPI_Init_thread) and runs a FIFO queue of collectives in the order the
// process issued them, which is the order MPI requires on every rank. The
// callers block only in waits, on a condition variable with a timeout: a
// dead or stopped peer otherwise hangs a collective forever, and MPI cannot
// cancel one. A timed-out wait therefore fails the communicator for good;
// every later collective returns its local value at once, and the process
// must leave with _exit() since the thread may still be stuck inside MPI.
//
// Outside mpirun the same thread and queue serve a world of one process
// without any MPI call: the exchange primitives below copy locally, so the
// single-process path runs the same code, timeouts included.
//
//===----------------------------------------------------------------------===//

#include "CommInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

using namespace dsrt;
using namespace dsrt::comm;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Communicator;

} // namespace

struct dsrt::comm::Task {
  std::shared_ptr<Communicator> comm;
  uint64_t seq = 0;
  const char *kind = "";
  int64_t bytes = 0;
  /// Run once by the communication thread, then released.
  std::function<Status()> body;
  /// Guarded by the communicator's mutex.
  bool done = false;
  bool ok = false;
};

namespace {

struct Communicator {
  // Set before the thread starts, then read-only.
  bool useMpi = false;
  /// DSRT_COMM_TEST_DELAY_MS: the thread sleeps this long before each
  /// collective, a slow rank for the tests of timeouts.
  int delayMs = 0;
  // Set by the thread before initDone, then read-only.
  /// The data-parallel group (the world without a pipeline): what the
  /// collectives run over. With a pipeline, the ranks of this rank's stage.
  int rank = 0;
  int size = 1;
  MPI_Comm comm = MPI_COMM_NULL;
  /// Pipeline parallelism (set before the thread starts): `stages` stages
  /// per replica; stageComm holds the stages of this rank's replica, ranked
  /// by stage.
  int stages = 1;
  int stage = 0;
  MPI_Comm stageComm = MPI_COMM_NULL;
  /// Non-blocking sends in flight and their buffers (thread only).
  std::vector<MPI_Request> sendRequests;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> sendBuffers;

  std::atomic<bool> failed{false};
  std::atomic<bool> finalized{false};

  std::mutex mutex;
  std::condition_variable workCv; // the thread waits for tasks
  std::condition_variable doneCv; // callers wait for tasks, init and exit
  // Guarded by mutex.
  std::deque<std::shared_ptr<Task>> queue;
  bool stopping = false;
  bool initDone = false;
  bool initOk = false;
  bool exited = false;

  /// The task the thread runs now, for error messages (thread only).
  const Task *running = nullptr;

  /// Fails the communicator and wakes every waiter. Returns whether this
  /// call failed it (the caller then records the cause).
  bool fail() {
    bool first = !failed.exchange(true);
    std::lock_guard<std::mutex> lock(mutex);
    doneCv.notify_all();
    return first;
  }
};

/// The communicator the communication thread serves (its thread only).
thread_local Communicator *self = nullptr;

std::mutex registryMutex;
// Guarded by registryMutex. The communicator stays after finalize so that
// rank, size and failed still answer.
std::shared_ptr<Communicator> current;
dsrt_comm_config activeConfig = {0.0, 0, 0};

std::atomic<uint64_t> nextSeq{1};

std::mutex statsMutex;
dsrt_comm_stats totals = {};

double configuredTimeout() {
  std::lock_guard<std::mutex> lock(registryMutex);
  return activeConfig.timeout_seconds;
}

void addWaitSeconds(double s) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.wait_seconds += s;
}

void addCommSeconds(double s) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.comm_seconds += s;
}

//===----------------------------------------------------------------------===//
// MPI calls (communication thread only)
//===----------------------------------------------------------------------===//

/// Records a failed MPI call with MPI's description of `rc`, naming the
/// running collective.
Status mpiFailure(const char *call, int rc) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof(text), "MPI error code %d", rc);
  const Task *task = self ? self->running : nullptr;
  if (task)
    return DS_ERROR("dsrt: %s #%llu (%lld bytes): %s failed: %s", task->kind,
                    static_cast<unsigned long long>(task->seq),
                    static_cast<long long>(task->bytes), call, text);
  return DS_ERROR("dsrt: %s failed: %s", call, text);
}

/// Runs one MPI call, timing it into comm_seconds.
template <typename Call> Status timedMpi(const char *name, Call &&call) {
  Clock::time_point start = Clock::now();
  int rc = call();
  addCommSeconds(secondsSince(start));
  return rc == MPI_SUCCESS ? Status::success() : mpiFailure(name, rc);
}

Status startMpi(Communicator &c) {
  int provided = 0;
  DS_RETURN_IF_ERROR(timedMpi("MPI_Init_thread", [&] {
    return MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }));
  // Errors of the duplication itself must return too.
  DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_set_errhandler", [&] {
    return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }));
  DS_RETURN_IF_ERROR(timedMpi(
      "MPI_Comm_dup", [&] { return MPI_Comm_dup(MPI_COMM_WORLD, &c.comm); }));
  DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_set_errhandler", [&] {
    return MPI_Comm_set_errhandler(c.comm, MPI_ERRORS_RETURN);
  }));
  DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_rank",
                              [&] { return MPI_Comm_rank(c.comm, &c.rank); }));
  DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_size",
                              [&] { return MPI_Comm_size(c.comm, &c.size); }));
  if (c.stages <= 1)
    return Status::success();
  if (c.size % c.stages != 0)
    return DS_ERROR("dsrt: %d ranks cannot run a pipeline of %d stages: the "
                    "ranks must be stages x replicas",
                    c.size, c.stages);
  // Rank r is stage r % stages of replica r / stages: the stages of a
  // replica are neighbours, as pipeline transfers are the heavier traffic.
  int world = c.rank;
  MPI_Comm dup = c.comm;
  DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_split", [&] {
    return MPI_Comm_split(dup, world / c.stages, world, &c.stageComm);
  }));
  DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_split", [&] {
    return MPI_Comm_split(dup, world % c.stages, world, &c.comm);
  }));
  DS_RETURN_IF_ERROR(
      timedMpi("MPI_Comm_free", [&] { return MPI_Comm_free(&dup); }));
  for (MPI_Comm m : {c.comm, c.stageComm})
    DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_set_errhandler", [&] {
      return MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN);
    }));
  DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_rank",
                              [&] { return MPI_Comm_rank(c.comm, &c.rank); }));
  DS_RETURN_IF_ERROR(timedMpi("MPI_Comm_size",
                              [&] { return MPI_Comm_size(c.comm, &c.size); }));
  return timedMpi("MPI_Comm_rank",
                  [&] { return MPI_Comm_rank(c.stageComm, &c.stage); });
}

/// Frees the buffers of the sends that have completed (thread only).
Status reapSends(Communicator &c, bool all) {
  if (c.sendRequests.empty())
    return Status::success();
  if (all) {
    DS_RETURN_IF_ERROR(timedMpi("MPI_Waitall", [&] {
      return MPI_Waitall(static_cast<int>(c.sendRequests.size()),
                         c.sendRequests.data(), MPI_STATUSES_IGNORE);
    }));
    c.sendRequests.clear();
    c.sendBuffers.clear();
    return Status::success();
  }
  for (size_t i = 0; i < c.sendRequests.size();) {
    int done = 0;
    DS_RETURN_IF_ERROR(timedMpi("MPI_Test", [&] {
      return MPI_Test(&c.sendRequests[i], &done, MPI_STATUS_IGNORE);
    }));
    if (done) {
      c.sendRequests.erase(c.sendRequests.begin() + i);
      c.sendBuffers.erase(c.sendBuffers.begin() + i);
    } else {
      ++i;
    }
  }
  return Status::success();
}

/// The communication thread: initialises MPI, serves the queue until
/// dsrt_comm_finalize, and finalizes MPI unless the communicator failed.
void serve(std::shared_ptr<Communicator> c) {
  self = c.get();
  bool ok = !c->useMpi || !startMpi(*c).failed();
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->initDone = true;
    c->initOk = ok;
    c->doneCv.notify_all();
  }
  while (ok) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(c->mutex);
      auto ready = [&] { return c->stopping || !c->queue.empty(); };
      // MPI progresses a large send only inside MPI calls of the sending
      // process: with sends in flight and nothing queued, poll them (and
      // their rendezvous with the receiver) every 200 microseconds rather
      // than sleep until the next task.
      while (!ready() && !c->sendRequests.empty() && !c->failed) {
        if (c->workCv.wait_for(lock, std::chrono::microseconds(200), ready))
          break;
        lock.unlock();
        c->running = nullptr;
        bool reaped = !reapSends(*c, false).failed();
        lock.lock();
        if (!reaped) {
          lock.unlock();
          c->fail();
          lock.lock();
        }
      }
      c->workCv.wait(lock, ready);
      if (c->queue.empty())
        break;
      task = std::move(c->queue.front());
      c->queue.pop_front();
    }
    bool taskOk = false;
    // A failed communicator runs nothing more: the peers are out of step.
    if (!c->failed) {
      if (c->delayMs > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(c->delayMs));
      c->running = task.get();
      taskOk = !task->body().failed();
      if (taskOk && c->useMpi)
        taskOk = !reapSends(*c, false).failed();
      c->running = nullptr;
      if (!taskOk)
        c->fail();
    }
    task->body = nullptr;
    std::lock_guard<std::mutex> lock(c->mutex);
    task->done = true;
    task->ok = taskOk;
    c->doneCv.notify_all();
  }
  if (c->useMpi && ok && !c->failed) {
    if (reapSends(*c, true).failed() ||
        (c->stageComm != MPI_COMM_NULL &&
         MPI_Comm_free(&c->stageComm) != MPI_SUCCESS) ||
        MPI_Comm_free(&c->comm) != MPI_SUCCESS || MPI_Finalize() != MPI_SUCCESS)
      (void)DS_ERROR("dsrt: MPI_Finalize failed");
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  c->exited = true;
  c->doneCv.notify_all();
}

/// Waits on c.doneCv until `ready`, at most `timeout` seconds (<= 0:
/// forever). Returns false on timeout.
template <typename Ready>
bool waitUntil(Communicator &c, double timeout, Ready &&ready) {
  std::unique_lock<std::mutex> lock(c.mutex);
  if (timeout <= 0) {
    c.doneCv.wait(lock, ready);
    return true;
  }
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout));
  return c.doneCv.wait_until(lock, deadline, ready);
}

int testDelayMs() {
  const char *v = std::getenv("DSRT_COMM_TEST_DELAY_MS");
  return v ? std::max(0, std::atoi(v)) : 0;
}

Status checkConfig(const dsrt_comm_config &config) {
  if (std::isnan(config.timeout_seconds))
    return DS_ERROR("dsrt_comm_init: the timeout is NaN");
  if (config.stages < 0)
    return DS_ERROR("dsrt_comm_init: %d pipeline stages", config.stages);
  return Status::success();
}

/// Starts a communicator, or updates the configuration of the running one.
/// registryMutex must be held.
Status startLocked(const dsrt_comm_config &config) {
  DS_RETURN_IF_ERROR(checkConfig(config));
  if (current && !current->finalized) {
    if (std::max(config.stages, 1) != current->stages)
      return DS_ERROR("dsrt_comm_init: the communicator runs %d pipeline "
                      "stages; it cannot change to %d",
                      current->stages, config.stages);
    activeConfig = config;
    return Status::success();
  }
  activeConfig = config;
  if (current && current->useMpi)
    return DS_ERROR("dsrt_comm_init: MPI cannot be initialised again after "
                    "dsrt_comm_finalize");
  auto c = std::make_shared<Communicator>();
  c->useMpi = dsrt_comm_launched() != 0;
  c->delayMs = testDelayMs();
  c->stages = std::max(config.stages, 1);
  // Detached from the start: a thread stuck in MPI is never joined, and no
  // joinable std::thread may outlive main.
  std::thread(serve, c).detach();
  current = c;
  // MPI_Init_thread connects to every peer: it may take longer than a
  // collective, but not forever.
  double timeout =
      config.timeout_seconds > 0 ? std::max(config.timeout_seconds, 60.0) : 0.0;
  if (!waitUntil(*c, timeout, [&] { return c->initDone; })) {
    c->fail();
    return DS_ERROR("dsrt: MPI_Init_thread did not complete within %g s",
                    timeout);
  }
  if (!c->initOk) {
    c->fail();
    return Status::failure();
  }
  return Status::success();
}

std::shared_ptr<Communicator> currentCommunicator() {
  std::lock_guard<std::mutex> lock(registryMutex);
  return current;
}

MPI_Datatype mpiType(int dtype) {
  switch (dtype) {
  case DSRT_F32:
    return MPI_FLOAT;
  case DSRT_F64:
    return MPI_DOUBLE;
  case DSRT_I64:
    return MPI_INT64_T;
  default:
    return MPI_UINT8_T;
  }
}

MPI_Op mpiOp(int op) {
  switch (op) {
  case DSRT_REDUCE_MAX:
    return MPI_MAX;
  case DSRT_REDUCE_MIN:
    return MPI_MIN;
  default:
    return MPI_SUM;
  }
}

/// out[i] = sum over ranks r in order of gathered[r * count + i].
template <typename T>
void sumInRankOrder(const uint8_t *gathered, int64_t count, int ranks,
                    void *out) {
  const T *g = reinterpret_cast<const T *>(gathered);
  T *o = static_cast<T *>(out);
  for (int64_t i = 0; i < count; ++i) {
    T acc = g[i];
    for (int r = 1; r < ranks; ++r)
      acc += g[static_cast<int64_t>(r) * count + i];
    o[i] = acc;
  }
}

template <typename T> void divide(void *buf, int64_t count, int size) {
  T *b = static_cast<T *>(buf);
  T n = static_cast<T>(size);
  for (int64_t i = 0; i < count; ++i)
    b[i] = b[i] / n;
}

/// Elements of one all-gather of the deterministic sums: bounds the
/// gathered copy to 16 MiB per rank.
constexpr int64_t kGatherChunkBytes = int64_t(16) << 20;

} // namespace

//===----------------------------------------------------------------------===//
// Exchange primitives
//===----------------------------------------------------------------------===//

int64_t dsrt::comm::elementSize(int dtype) {
  switch (dtype) {
  case DSRT_F32:
    return 4;
  case DSRT_F64:
  case DSRT_I64:
    return 8;
  case DSRT_U8:
    return 1;
  default:
    return 0;
  }
}

Status dsrt::comm::allreduce(const void *send, void *recv, int64_t count,
                             int dtype, int op, bool deterministic) {
  Communicator &c = *self;
  int64_t esize = elementSize(dtype);
  bool floating = dtype == DSRT_F32 || dtype == DSRT_F64;
  if (!c.useMpi || c.size == 1) {
    if (send != recv && count > 0)
      std::memmove(recv, send, count * esize);
  } else if (deterministic && floating &&
             (op == DSRT_REDUCE_SUM || op == DSRT_REDUCE_MEAN)) {
    int64_t chunk = std::max<int64_t>(1, kGatherChunkBytes / esize);
    std::vector<uint8_t> gathered(
        static_cast<size_t>(std::min(chunk, count) * esize * c.size));
    for (int64_t at = 0; at < count; at += chunk) {
      int64_t n = std::min(chunk, count - at);
      const uint8_t *s = static_cast<const uint8_t *>(send) + at * esize;
      DS_RETURN_IF_ERROR(timedMpi("MPI_Allgather", [&] {
        return MPI_Allgather(s, static_cast<int>(n * esize), MPI_BYTE,
                             gathered.data(), static_cast<int>(n * esize),
                             MPI_BYTE, c.comm);
      }));
      void *r = static_cast<uint8_t *>(recv) + at * esize;
      if (dtype == DSRT_F32)
        sumInRankOrder<float>(gathered.data(), n, c.size, r);
      else
        sumInRankOrder<double>(gathered.data(), n, c.size, r);
    }
  } else {
    int64_t chunk = INT_MAX / esize;
    for (int64_t at = 0; at < count; at += chunk) {
      int n = static_cast<int>(std::min(chunk, count - at));
      const void *s = send == recv
                          ? MPI_IN_PLACE
                          : static_cast<const uint8_t *>(send) + at * esize;
      void *r = static_cast<uint8_t *>(recv) + at * esize;
      DS_RETURN_IF_ERROR(timedMpi("MPI_Allreduce", [&] {
        return MPI_Allreduce(s, r, n, mpiType(dtype), mpiOp(op), c.comm);
      }));
    }
  }
  if (op == DSRT_REDUCE_MEAN) {
    if (dtype == DSRT_F32)
      divide<float>(recv, count, c.size);
    else
      divide<double>(recv, count, c.size);
  }
  return Status::success();
}

Status dsrt::comm::onStageGroup(const std::function<Status()> &body) {
  Communicator &c = *self;
  if (!c.useMpi || c.stages <= 1) {
    // One stage: the reduction over the stages is this rank's value (never
    // the data-parallel group's).
    int rank = c.rank, size = c.size;
    c.rank = 0;
    c.size = 1;
    Status s = body();
    c.rank = rank;
    c.size = size;
    return s;
  }
  std::swap(c.comm, c.stageComm);
  std::swap(c.rank, c.stage);
  int size = c.size;
  c.size = c.stages;
  Status s = body();
  std::swap(c.comm, c.stageComm);
  std::swap(c.rank, c.stage);
  c.size = size;
  return s;
}

Status dsrt::comm::sendTo(std::shared_ptr<std::vector<uint8_t>> data, int peer,
                          int tag) {
  Communicator &c = *self;
  if (!c.useMpi || c.stages <= 1)
    return DS_ERROR("dsrt: a send to stage %d without a pipeline", peer);
  if (data->size() > static_cast<size_t>(INT_MAX))
    return DS_ERROR("dsrt: a send of %zu bytes is larger than MPI's int "
                    "counts allow",
                    data->size());
  MPI_Request request;
  DS_RETURN_IF_ERROR(timedMpi("MPI_Isend", [&] {
    return MPI_Isend(data->data(), static_cast<int>(data->size()), MPI_BYTE,
                     peer, tag, c.stageComm, &request);
  }));
  c.sendRequests.push_back(request);
  c.sendBuffers.push_back(std::move(data));
  return Status::success();
}

Status dsrt::comm::recvFrom(void *data, int64_t bytes, int peer, int tag) {
  Communicator &c = *self;
  if (!c.useMpi || c.stages <= 1)
    return DS_ERROR("dsrt: a receive from stage %d without a pipeline", peer);
  MPI_Status status;
  DS_RETURN_IF_ERROR(timedMpi("MPI_Recv", [&] {
    return MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, peer, tag,
                    c.stageComm, &status);
  }));
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  if (count != bytes)
    return DS_ERROR("dsrt: channel %d from stage %d carried %d bytes, the "
                    "receiver expected %lld: the stages were compiled from "
                    "different modules",
                    tag, peer, count, static_cast<long long>(bytes));
  return Status::success();
}

Status dsrt::comm::allgather(const void *send, int64_t bytes, void *recv) {
  Communicator &c = *self;
  if (!c.useMpi) {
    if (bytes > 0)
      std::memcpy(recv, send, bytes);
    return Status::success();
  }
  if (bytes > INT_MAX)
    return DS_ERROR("dsrt: an all-gather of %lld bytes per rank is larger "
                    "than MPI's int counts allow",
                    static_cast<long long>(bytes));
  return timedMpi("MPI_Allgather", [&] {
    return MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv,
                         static_cast<int>(bytes), MPI_BYTE, c.comm);
  });
}

Status dsrt::comm::allgatherv(const void *send, const int64_t *sizes,
                              void *recv) {
  Communicator &c = *self;
  if (!c.useMpi) {
    if (sizes[0] > 0)
      std::memcpy(recv, send, sizes[0]);
    return Status::success();
  }
  std::vector<int> counts(c.size), displs(c.size);
  int64_t total = 0;
  for (int r = 0; r < c.size; ++r) {
    if (total + sizes[r] > INT_MAX)
      return DS_ERROR("dsrt: the payloads of one all-gather exceed MPI's int "
                      "displacements (%lld bytes and more)",
                      static_cast<long long>(total + sizes[r]));
    counts[r] = static_cast<int>(sizes[r]);
    displs[r] = static_cast<int>(total);
    total += sizes[r];
  }
  return timedMpi("MPI_Allgatherv", [&] {
    return MPI_Allgatherv(send, counts[c.rank], MPI_BYTE, recv, counts.data(),
                          displs.data(), MPI_BYTE, c.comm);
  });
}

Status dsrt::comm::broadcast(void *buf, int64_t bytes, int root) {
  Communicator &c = *self;
  if (!c.useMpi)
    return Status::success();
  for (int64_t at = 0; at < bytes; at += INT_MAX) {
    int n = static_cast<int>(std::min<int64_t>(INT_MAX, bytes - at));
    DS_RETURN_IF_ERROR(timedMpi("MPI_Bcast", [&] {
      return MPI_Bcast(static_cast<uint8_t *>(buf) + at, n, MPI_BYTE, root,
                       c.comm);
    }));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Tasks
//===----------------------------------------------------------------------===//

Status dsrt::comm::acquire(World &world) {
  std::shared_ptr<Communicator> c;
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    if (!current && startLocked(dsrt_comm_config{0.0, 0, 0}).failed())
      return Status::failure();
    c = current;
    world.deterministic = activeConfig.deterministic != 0;
  }
  world.rank = c->rank;
  world.size = c->size;
  if (c->failed)
    return Status::failure();
  if (c->finalized)
    return DS_ERROR("dsrt: a collective after dsrt_comm_finalize");
  return Status::success();
}

std::shared_ptr<Task> dsrt::comm::issue(const char *kind, int64_t bytes,
                                        std::function<Status()> body) {
  std::shared_ptr<Communicator> c = currentCommunicator();
  if (!c || c->failed)
    return nullptr;
  auto task = std::make_shared<Task>();
  task->comm = c;
  task->seq = nextSeq++;
  task->kind = kind;
  task->bytes = bytes;
  task->body = std::move(body);
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->queue.push_back(task);
    c->workCv.notify_one();
  }
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.collectives += 1;
  return task;
}

bool dsrt::comm::wait(const std::shared_ptr<Task> &task) {
  if (!task)
    return false;
  Communicator &c = *task->comm;
  double timeout = configuredTimeout();
  Clock::time_point start = Clock::now();
  bool inTime = waitUntil(c, timeout, [&] { return task->done || c.failed; });
  addWaitSeconds(secondsSince(start));
  if (!inTime) {
    if (c.fail())
      (void)DS_ERROR("dsrt: %s #%llu (%lld bytes) did not complete within %g "
                     "s: a rank is stopped, dead or slower than the timeout "
                     "(--comm-timeout)",
                     task->kind, static_cast<unsigned long long>(task->seq),
                     static_cast<long long>(task->bytes), timeout);
    return false;
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  return task->done && task->ok;
}

//===----------------------------------------------------------------------===//
// Counters
//===----------------------------------------------------------------------===//

void dsrt::comm::countSent(double bytes) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.bytes_sent += bytes;
}

void dsrt::comm::countBucketSent(double bytes) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.bytes_sent += bytes;
  totals.bytes_sent_buckets += bytes;
}

void dsrt::comm::countDense(double bytes) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.bytes_dense += bytes;
}

void dsrt::comm::countDenseFallback() {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.dense_fallbacks += 1;
}

void dsrt::comm::countNonFinite() {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.nonfinite_buckets += 1;
}

double dsrt::comm::timeoutSeconds() { return configuredTimeout(); }

void dsrt::comm::failCommunicator() {
  if (std::shared_ptr<Communicator> c = currentCommunicator())
    c->fail();
}

void dsrt::comm::countCollective() {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.collectives += 1;
}

namespace {
std::atomic<void (*)()> statsHook{nullptr};
std::atomic<void (*)()> finalizeHook{nullptr};
} // namespace

void dsrt::comm::setStatsHook(void (*hook)()) { statsHook.store(hook); }

void dsrt::comm::setFinalizeHook(void (*hook)()) { finalizeHook.store(hook); }

namespace {
/// dsrt_comm_device_backend's answer: written once a process decides, read
/// after (a fixed buffer, so a reader never sees a freed string).
char deviceBackend[64] = "";
} // namespace

void dsrt::comm::setDeviceBackend(const char *name) {
  std::lock_guard<std::mutex> lock(statsMutex);
  std::snprintf(deviceBackend, sizeof(deviceBackend), "%s", name);
}

const char *dsrt_comm_device_backend(void) {
  std::lock_guard<std::mutex> lock(statsMutex);
  return deviceBackend;
}

void dsrt_get_comm_stats(dsrt_comm_stats *out) {
  if (!out)
    return;
  if (void (*hook)() = statsHook.load())
    hook();
  std::lock_guard<std::mutex> lock(statsMutex);
  *out = totals;
}

void dsrt_reset_comm_stats(void) {
  // What a device backend has pending belongs before the reset.
  if (void (*hook)() = statsHook.load())
    hook();
  std::lock_guard<std::mutex> lock(statsMutex);
  totals = dsrt_comm_stats{};
}

//===----------------------------------------------------------------------===//
// Lifecycle
//===----------------------------------------------------------------------===//

int dsrt_comm_init(const dsrt_comm_config *config) {
  std::lock_guard<std::mutex> lock(registryMutex);
  dsrt_comm_config c = config ? *config : dsrt_comm_config{0.0, 0, 0};
  return startLocked(c).failed() ? -1 : 0;
}

void dsrt_comm_finalize(void) {
  if (void (*hook)() = finalizeHook.load())
    hook();
  std::lock_guard<std::mutex> lock(registryMutex);
  std::shared_ptr<Communicator> c = current;
  if (!c || c->finalized.exchange(true))
    return;
  {
    std::lock_guard<std::mutex> cl(c->mutex);
    c->stopping = true;
    c->workCv.notify_all();
  }
  // A failed communicator's thread may be stuck inside MPI: leave it.
  if (c->failed)
    return;
  double timeout = activeConfig.timeout_seconds;
  if (!waitUntil(*c, timeout, [&] { return c->exited || c->failed; }) &&
      c->fail())
    (void)DS_ERROR("dsrt: dsrt_comm_finalize did not complete within %g s: "
                   "a rank is stopped, dead or slower than the timeout "
                   "(--comm-timeout)",
                   timeout);
}

int dsrt_comm_launched(void) {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK");
}

int dsrt_comm_rank(void) {
  std::shared_ptr<Communicator> c = currentCommunicator();
  return c ? c->rank : 0;
}

int dsrt_comm_size(void) {
  std::shared_ptr<Communicator> c = currentCommunicator();
  return c ? c->size : 1;
}

int dsrt_comm_stage(void) {
  std::shared_ptr<Communicator> c = currentCommunicator();
  return c ? c->stage : 0;
}

int dsrt_comm_stages(void) {
  std::shared_ptr<Communicator> c = currentCommunicator();
  return c ? c->stages : 1;
}

int dsrt_comm_failed(void) {
  std::shared_ptr<Communicator> c = currentCommunicator();
  return c && c->failed;
}

int64_t dsrt_comm_rank_i64(void) { return dsrt_comm_rank(); }

int64_t dsrt_comm_size_i64(void) { return dsrt_comm_size(); }

//===- CommNccl.cpp - The uncompressed collectives on NCCL ----------------===//
//
// NCCL, loaded at run time like the driver (DS_NCCL_LIBRARY, default
// libnccl.so.2), for the collectives of CommCuda.cpp that need no host
// code: the data stays on the device and the host never waits.
//
// Which backend serves the collectives is decided once per process, at the
// first collective, by every rank of the data-parallel group together (a
// collective of the MPI layer, so no rank takes NCCL while another stages):
// DS_CUDA_COLLECTIVES=auto (the default) takes NCCL when it loads and
// initialises on every rank, and the host staging otherwise, saying why on
// stderr; =nccl requires NCCL (an error otherwise), even for a world of
// one; =host never uses it. Auto stages a world of one that is not a
// pipeline's stage (whose transfers NCCL carries), and deterministic mode
// always stages (NCCL's sums are not in rank order). The communicator is
// bootstrapped over MPI: rank 0's unique id is broadcast to the group, which is
// the data-parallel group of the MPI layer (with a pipeline, the ranks of one
// stage).
//
// A started all-reduce (DDP's pattern): the communication stream waits for
// the step stream's work so far and all-reduces the bucket, and the wait
// makes the step stream wait for that; the backward pass's kernels run
// meanwhile. In place when the step keeps the bucket's buffer for the
// wait's output (dsrt_cuda_allreduce_start_in_place_*, which
// convert-ds-to-runtime emits when the wait follows in the block);
// otherwise on a copy made on the step stream (the step may free or reuse
// its bucket as soon as the start returns), which the wait copies out.
//
// --comm-timeout bounds every collective, as in the MPI layer. The
// communicator is nonblocking (NCCL 2.14), so a call that NCCL still works
// on on the host answers ncclInProgress and is polled, at most the timeout;
// and a watchdog thread, as PyTorch's ProcessGroupNCCL's, aborts the
// communicator when a collective has not completed on the device within
// it (a peer dead or stopped) or NCCL reports an asynchronous error: the
// error is recorded, the MPI layer's communicator fails, and the kernels
// waiting for the peer end, so the host's wait returns and the step fails.
//
// A pipeline's transfers (ds.send / ds.recv between stages) run on links:
// each direction between two stages has a communicator of its two ranks
// and a stream of its own, so that a send never queues behind a receive
// of the other direction (a 1F1B schedule would deadlock on one shared
// communicator once a message outgrows NCCL's buffers). Both ends make a
// link at its first transfer (an offer and an answer through the MPI
// layer); it is NCCL's when both ends' collectives are, staged otherwise.
// The sums over a pipeline's stages run on the stage group's communicator,
// made at the first sum by every stage of the replica.
//
// CUDA graphs (--cuda-graphs): every call here can be captured. The
// communication stream joins the capture through the start's event and
// leaves it through the wait's, and NCCL's calls become the graph's nodes.
// A launch runs none of this file's host code, so what a call does on the
// host besides enqueueing is the graph's Replay (a LaunchHook of
// cuda/Graph.cpp), done at every launch: the counts of dsrt_comm_stats,
// the watchdog (which then times the launch's collectives together), and
// the probes, which the graph copies to pinned slots of its own, counted
// before the next launch overwrites them or when the statistics are read.
//
//===----------------------------------------------------------------------===//

#include "CommNccl.h"

#include "CommInternal.h"

// DSRT_WITHOUT_NCCL compiles the fallback even where nccl.h exists: the
// build does so beside the real file (target dsrt-nccl-fallback), so that
// the fallback's signatures cannot drift from CommNccl.h's.
#if __has_include(<nccl.h>) && !defined(DSRT_WITHOUT_NCCL)

#include "cuda/Context.h"

#include "ds/Runtime/ds_runtime.h"
#include "ds/Runtime/ds_runtime_cuda.h"

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

#define DSRT_NCCL_FUNCTIONS(X)                                                 \
  X(ncclGetVersion)                                                            \
  X(ncclGetErrorString)                                                        \
  X(ncclGetUniqueId)                                                           \
  X(ncclCommInitRankConfig)                                                    \
  X(ncclCommGetAsyncError)                                                     \
  X(ncclCommFinalize)                                                          \
  X(ncclCommDestroy)                                                           \
  X(ncclCommAbort)                                                             \
  X(ncclAllReduce)                                                             \
  X(ncclBroadcast)                                                             \
  X(ncclSend)                                                                  \
  X(ncclRecv)                                                                  \
  X(ncclAllGather)

/// The loaded library: one pointer per function, typed by nccl.h's own
/// prototypes (so a signature cannot drift).
struct NcclApi {
#define DSRT_NCCL_DECLARE_ENTRY(fn) decltype(&::fn) fn = nullptr;
  DSRT_NCCL_FUNCTIONS(DSRT_NCCL_DECLARE_ENTRY)
#undef DSRT_NCCL_DECLARE_ENTRY
};

/// Nonblocking communicators (what bounds a call by --comm-timeout) came
/// with NCCL 2.14; ncclAvg with 2.10.
constexpr int kMinVersion = 21400;
/// Started all-reduces' handles: far above the MPI layer's, which count
/// from 1.
constexpr int64_t kFirstHandle = int64_t(1) << 48;
/// Probes copied to the host between two counts: a full ring is counted
/// (one wait for the step stream) before it is reused.
constexpr int kProbeSlots = 4096;
/// How often the watchdog asks NCCL for an asynchronous error (a network
/// failure) when no deadline is nearer.
constexpr std::chrono::milliseconds kAsyncErrorPeriod{500};

using Clock = std::chrono::steady_clock;

/// Pinned probe slots of captured graphs, allocated this many at a time.
constexpr int kGraphProbeChunk = 256;

class Replay;

struct Started {
  CUevent done = nullptr;
  void *owned = nullptr;   // the runtime's copy of the bucket
  void *inPlace = nullptr; // or the step's bucket, reduced where it lies
  int64_t count = 0;
  comm::nccl::Element type = comm::nccl::Element::F32;
  /// A top-k start's (startTopK): its slots per rank and the ranks, whose
  /// slots `owned` holds in rank order (each rank's indices, then its
  /// values); whether the step stream waits for them yet.
  int64_t slots = 0;
  int64_t ranks = 0;
  bool waited = false;
};

/// A probe copied to pinned memory: an f64, or an f32 in its first bytes.
struct ProbeSlot {
  double *at = nullptr;
  bool f32 = false;

  bool nan() const {
    if (!f32)
      return std::isnan(*at);
    float f;
    std::memcpy(&f, at, sizeof(f));
    return std::isnan(f);
  }
};

/// A collective enqueued and not yet seen complete: the watchdog's.
struct InFlight {
  CUevent done = nullptr; // recorded on its stream after it
  Clock::time_point enqueued;
  const char *fn = "";
  int64_t bytes = 0;
  uint64_t seq = 0;
};

enum class Mode { Undecided, Host, Nccl };

/// A pipeline link: this rank's transfers to one stage, or from one: a
/// communicator of the two ranks (the sender rank 0) and a stream of its
/// own, so that a link never waits behind another (see the file comment);
/// both null when the transfers are staged.
struct Link {
  ncclComm_t comm = nullptr;
  CUstream stream = nullptr;
};

/// MPI tags of a link's handshake, above the pipeline's channels.
constexpr int kLinkOfferTag = 32000, kLinkAnswerTag = 32001,
              kLinkReadyTag = 32002;

struct State {
  std::mutex mutex; // the entry points', held for a whole call
  Mode mode = Mode::Undecided;
  void *library = nullptr;
  NcclApi api;
  int version = 0;
  ncclComm_t comm = nullptr;
  CUstream stream = nullptr; // the communication stream
  std::map<int64_t, Started> started;
  int64_t nextHandle = kFirstHandle;
  uint64_t nextSeq = 1;            // the collectives' numbers, for messages
  double *probes = nullptr;        // pinned, kProbeSlots
  bool probeF32[kProbeSlots] = {}; // whether each holds an f32
  int probesUsed = 0;
  /// Recorded on the step stream after each probe's copy.
  CUevent probesCopied = nullptr;
  /// The pipeline links, by (stage, whether this rank sends): made at the
  /// first transfer, only in Mode::Nccl. Changed under callMutex too (the
  /// watchdog asks each link's communicator for errors).
  std::map<std::pair<int64_t, bool>, Link> links;
  /// The stage group's communicator (the stages of this rank's replica),
  /// for the sums over stages: made at the first one (no stream of its
  /// own: the sums are on the step stream). Likewise under callMutex.
  Link stageGroup;
  bool stageGroupDecided = false;
  /// The captured graphs' share of the collectives (alive while their
  /// graphs are), and the pinned probe slots they take and give back.
  std::vector<Replay *> replays;
  std::vector<double *> graphProbeChunks, freeGraphProbes;

  /// Serialises the calls on `comm` between the entry points and the
  /// watchdog, which must be able to abort it while an entry point (with
  /// `mutex`) waits for the device. Held only for one NCCL call.
  std::mutex callMutex;
  /// Set, under callMutex, once `comm` is aborted (a timeout, NCCL's or a
  /// local failure, the error recorded): no NCCL call is made after it.
  std::atomic<bool> aborted{false};

  /// The watchdog: a thread that aborts the communicator when a
  /// collective has not completed within --comm-timeout, as PyTorch's
  /// ProcessGroupNCCL does, so that a dead or stopped peer fails the step
  /// (its error recorded) rather than hanging it in a kernel.
  std::thread watchdog;
  std::mutex watchMutex;
  std::condition_variable watchCv;
  std::deque<InFlight> inFlight; // guarded by watchMutex, oldest first
  /// Events of completed collectives, for the next ones (an event a
  /// collective saves a create and a destroy). Guarded by watchMutex.
  std::vector<CUevent> spareEvents;
  bool stopWatching = false; // guarded by watchMutex
};

/// Never destroyed: the shutdown hook runs at exit, after static
/// destructors.
State &state() {
  static auto *s = new State;
  return *s;
}

/// A captured graph's collectives: what their calls did on the host
/// besides enqueueing, done again at each launch of the graph (see the
/// file's comment). Entry points and hooks hold the state's mutex.
class Replay final : public cuda::LaunchHook {
public:
  int collectives = 0;
  double sent = 0, bucketSent = 0, dense = 0;
  int64_t bytes = 0;
  /// Where the graph copies its probes (the state's slots).
  std::vector<ProbeSlot> probes;

  static std::unique_ptr<cuda::LaunchHook> make() {
    return std::make_unique<Replay>();
  }
  /// Events recorded on the links' streams after the captured sends,
  /// which nothing in the step waits for: the capture joins them back.
  std::vector<CUevent> unjoined;

  ~Replay() override;
  void beforeEnd() override;
  void beforeLaunch() override;
  void afterLaunch() override;

  /// Counts the last launch's probes: with `block`, after waiting for it;
  /// otherwise only if it has run.
  void countProbes(bool block);
  /// What the session owned goes (State's release; mutex held).
  void release();

private:
  CUevent launched = nullptr; // recorded after each launch with probes
  bool uncounted = false;     // the last launch's probes not yet counted
};

/// Calls `f(link)` on every communicator besides the data-parallel
/// group's: the pipeline's links and its stage group's.
template <typename F> void forEachOther(State &s, F f) {
  for (auto &[key, link] : s.links)
    f(link);
  f(s.stageGroup);
}

const char *ncclText(const State &s, ncclResult_t result) {
  return s.api.ncclGetErrorString ? s.api.ncclGetErrorString(result)
                                  : "(no error string)";
}

/// Aborts the communicator once (the kernels that wait for a peer end),
/// recording `why` unless null (the cause is recorded already, or there
/// is none); with `failJob`, fails the MPI layer's communicator too: the
/// step fails and later collectives return at once. From either thread.
void abortCommunicator(State &s, const char *why, bool failJob = true) {
  std::lock_guard<std::mutex> lock(s.callMutex);
  if (s.aborted.exchange(true) || !s.comm)
    return;
  if (why)
    (void)DS_ERROR("%s", why);
  if (failJob)
    comm::failCommunicator();
  (void)s.api.ncclCommAbort(s.comm);
  forEachOther(s, [&](Link &link) {
    if (link.comm)
      (void)s.api.ncclCommAbort(link.comm);
  });
}

/// "dsrt: <fn> #<seq> (<bytes> bytes) did not complete within <t> s ...".
std::string timeoutMessage(const char *fn, uint64_t seq, int64_t bytes,
                           double timeout) {
  char text[320];
  std::snprintf(text, sizeof(text),
                "dsrt: %s #%llu (%lld bytes) did not complete within %g s: a "
                "rank is stopped, dead or slower than the timeout "
                "(--comm-timeout); the NCCL communicator is aborted",
                fn, static_cast<unsigned long long>(seq),
                static_cast<long long>(bytes), timeout);
  return text;
}

/// Waits until NCCL has taken the call that answered `result` (a
/// nonblocking communicator answers ncclInProgress while it works on the
/// host: connecting, initialising), at most --comm-timeout. "" when it
/// has; otherwise why not, the communicator left as it is.
std::string settle(State &s, ncclResult_t result, const char *fn, uint64_t seq,
                   int64_t bytes, ncclComm_t on = nullptr) {
  double timeout = comm::timeoutSeconds();
  Clock::time_point start = Clock::now();
  auto pause = std::chrono::microseconds(2);
  while (result == ncclInProgress) {
    if (timeout > 0 &&
        Clock::now() - start > std::chrono::duration<double>(timeout))
      return timeoutMessage(fn, seq, bytes, timeout);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
    std::lock_guard<std::mutex> lock(s.callMutex);
    if (s.aborted)
      return "the communicator was aborted";
    if (ncclResult_t r = s.api.ncclCommGetAsyncError(on ? on : s.comm, &result))
      result = r;
  }
  if (result == ncclSuccess)
    return "";
  return std::string(fn) + " failed: " + ncclText(s, result);
}

/// Pops the collectives seen complete (watchMutex held).
void reapCompleted(State &s) {
  while (!s.inFlight.empty()) {
    CUresult r = driver().cuEventQuery(s.inFlight.front().done);
    if (r == CUDA_ERROR_NOT_READY)
      return;
    // Complete, or an error the stream's next synchronisation reports.
    s.spareEvents.push_back(s.inFlight.front().done);
    s.inFlight.pop_front();
  }
}

/// The watchdog's loop: wakes at the oldest collective's deadline (and
/// every kAsyncErrorPeriod to ask NCCL for an asynchronous error) and
/// aborts the communicator on a timeout or an error.
void watch(State &s, double timeout) {
  if (ensureReady().failed()) // the context, current on this thread
    return;
  std::unique_lock<std::mutex> lock(s.watchMutex);
  while (!s.stopWatching) {
    reapCompleted(s);
    Clock::time_point wake = Clock::now() + kAsyncErrorPeriod;
    if (timeout > 0 && !s.inFlight.empty())
      wake = std::min(wake, s.inFlight.front().enqueued +
                                std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout)));
    s.watchCv.wait_until(lock, wake, [&] { return s.stopWatching; });
    if (s.stopWatching)
      return;
    reapCompleted(s);
    std::string why;
    if (timeout > 0 && !s.inFlight.empty() &&
        Clock::now() - s.inFlight.front().enqueued >=
            std::chrono::duration<double>(timeout)) {
      const InFlight &late = s.inFlight.front();
      why = timeoutMessage(late.fn, late.seq, late.bytes, timeout);
    }
    // Never wait for callMutex with watchMutex held: an entry point takes
    // them the other way round.
    lock.unlock();
    if (why.empty()) {
      std::lock_guard<std::mutex> call(s.callMutex);
      auto failed = [&](ncclComm_t comm) {
        ncclResult_t async = ncclSuccess;
        if (comm && s.api.ncclCommGetAsyncError(comm, &async) == ncclSuccess &&
            async != ncclSuccess && async != ncclInProgress)
          why = std::string("dsrt: NCCL reports an asynchronous error: ") +
                ncclText(s, async) + "; the NCCL communicator is aborted";
        return !why.empty();
      };
      if (!s.aborted && !failed(s.comm))
        forEachOther(s, [&](Link &link) { failed(link.comm); });
    }
    if (!why.empty()) {
      abortCommunicator(s, why.c_str());
      return;
    }
    lock.lock();
  }
}

/// Hands the collective just enqueued on `stream` to the watchdog.
void watchCollective(State &s, CUstream stream, const char *fn, uint64_t seq,
                     int64_t bytes) {
  std::lock_guard<std::mutex> lock(s.watchMutex);
  reapCompleted(s);
  CUevent done = nullptr;
  if (!s.spareEvents.empty()) {
    done = s.spareEvents.back();
    s.spareEvents.pop_back();
  } else if (DS_CU(cuEventCreate, &done, CU_EVENT_DISABLE_TIMING).failed()) {
    return;
  }
  if (DS_CU(cuEventRecord, done, stream).failed()) {
    (void)DS_CU(cuEventDestroy, done);
    return;
  }
  s.inFlight.push_back({done, Clock::now(), fn, bytes, seq});
}

/// Stops the watchdog and drops what it watched (entry point, `mutex`
/// held; never with callMutex, which the watchdog may be taking).
void stopWatchdog(State &s) {
  if (s.watchdog.joinable()) {
    {
      std::lock_guard<std::mutex> lock(s.watchMutex);
      s.stopWatching = true;
      s.watchCv.notify_all();
    }
    s.watchdog.join();
  }
  std::lock_guard<std::mutex> lock(s.watchMutex);
  for (const InFlight &f : s.inFlight)
    (void)DS_CU(cuEventDestroy, f.done);
  for (CUevent e : s.spareEvents)
    (void)DS_CU(cuEventDestroy, e);
  s.inFlight.clear();
  s.spareEvents.clear();
  s.stopWatching = false;
}

/// Makes one NCCL call on the communicator (`call(comm)`) and settles it;
/// false, with the communicator aborted and the error recorded, when it
/// failed or did not settle in time, or when the communicator was
/// aborted before (nothing called then).
template <typename Call>
bool callNccl(State &s, const char *fn, uint64_t seq, int64_t bytes, Call call,
              ncclComm_t on = nullptr) {
  ncclComm_t comm = on ? on : s.comm;
  ncclResult_t result;
  {
    std::lock_guard<std::mutex> lock(s.callMutex);
    if (s.aborted)
      return false;
    result = call(comm);
  }
  std::string why = settle(s, result, fn, seq, bytes, comm);
  if (why.empty())
    return true;
  abortCommunicator(s, why.c_str());
  return false;
}

/// Loads the library and resolves every entry; "" or why not.
std::string load(State &s) {
  if (s.library)
    return "";
  const char *path = std::getenv("DS_NCCL_LIBRARY");
  if (!path || !*path)
    path = "libnccl.so.2";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    return std::string("cannot load ") + path + ": " + (why ? why : "?");
  }
  NcclApi api;
#define DSRT_NCCL_RESOLVE(fn)                                                  \
  api.fn = reinterpret_cast<decltype(api.fn)>(dlsym(lib, #fn));                \
  if (!api.fn) {                                                               \
    dlclose(lib);                                                              \
    return std::string(path) + " has no " #fn;                                 \
  }
  DSRT_NCCL_FUNCTIONS(DSRT_NCCL_RESOLVE)
#undef DSRT_NCCL_RESOLVE
  int version = 0;
  if (api.ncclGetVersion(&version) != ncclSuccess || version < kMinVersion) {
    dlclose(lib);
    return std::string(path) + " is NCCL " + std::to_string(version) +
           ", older than 2.14 (no nonblocking communicators, which "
           "--comm-timeout needs)";
  }
  s.library = lib;
  s.api = api;
  s.version = version;
  return "";
}

/// Counts the probes copied so far: with `block`, after waiting for the
/// step stream; otherwise only if their copies have all happened (the
/// statistics are read every step, which must not wait for the device).
void countProbes(State &s, bool block) {
  if (s.probesUsed == 0)
    return;
  if (block) {
    counters().waits.fetch_add(1, std::memory_order_relaxed);
    if (DS_CU(cuStreamSynchronize, stepStream()).failed())
      return;
  } else if (driver().cuEventQuery(s.probesCopied) != CUDA_SUCCESS) {
    return; // not yet (or failed: the stream's next wait says so)
  }
  for (int i = 0; i < s.probesUsed; ++i)
    if (ProbeSlot{&s.probes[i], s.probeF32[i]}.nan())
      comm::countNonFinite();
  s.probesUsed = 0;
}

/// Counts the probes of the direct steps and of the graphs' launches:
/// with `block`, every one; otherwise those whose copies have happened.
void countAllProbes(State &s, bool block) {
  countProbes(s, block);
  for (Replay *replay : s.replays)
    replay->countProbes(block);
}

/// dsrt_get_comm_stats: the probes whose copies have happened.
void countProbesForStats() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.mode == Mode::Nccl && !ensureReady().failed())
    countAllProbes(s, /*block=*/false);
}

/// Frees what the communicator holds on the device; with `endComm`, the
/// communicator too: finalised (its work flushed, at most the timeout)
/// and destroyed, or aborted when a started all-reduce was never waited
/// for (its peers may never match it). An aborted one is gone already.
void release(State &s, bool endComm) {
  stopWatchdog(s);
  // The pipeline's communicators first: their transfers and sums are all
  // enqueued, and each of their ranks releases them here.
  forEachOther(s, [&](Link &link) {
    if (endComm && link.comm && !s.aborted &&
        callNccl(
            s, "ncclCommFinalize", s.nextSeq++, 0,
            [&](ncclComm_t c) { return s.api.ncclCommFinalize(c); },
            link.comm)) {
      std::lock_guard<std::mutex> lock(s.callMutex);
      if (ncclResult_t r = s.api.ncclCommDestroy(link.comm))
        (void)DS_ERROR("ncclCommDestroy failed: %s", ncclText(s, r));
    }
    if (link.stream && (endComm || !link.comm))
      (void)DS_CU(cuStreamSynchronize, link.stream);
    if (link.stream)
      (void)DS_CU(cuStreamDestroy, link.stream);
  });
  {
    std::lock_guard<std::mutex> lock(s.callMutex);
    s.links.clear();
    s.stageGroup = Link();
    s.stageGroupDecided = false;
  }
  if (endComm && s.comm && !s.aborted) {
    if (!s.started.empty())
      abortCommunicator(s, nullptr, /*failJob=*/false);
    else if (callNccl(s, "ncclCommFinalize", s.nextSeq++, 0, [&](ncclComm_t c) {
               return s.api.ncclCommFinalize(c);
             })) {
      std::lock_guard<std::mutex> lock(s.callMutex);
      if (ncclResult_t r = s.api.ncclCommDestroy(s.comm))
        (void)DS_ERROR("ncclCommDestroy failed: %s", ncclText(s, r));
    }
  }
  // What the communication stream still does must end before its buffers
  // go; at exit without the communicator's end (endComm false) it may
  // never end, and the buffers go with the process.
  bool idle = s.started.empty() || endComm;
  if (idle && s.stream)
    (void)DS_CU(cuStreamSynchronize, s.stream);
  for (auto &[handle, started] : s.started) {
    (void)DS_CU(cuEventDestroy, started.done);
    if (started.owned && idle)
      (void)freeOnStream(started.owned, stepStream());
  }
  s.started.clear();
  if (s.stream)
    (void)DS_CU(cuStreamDestroy, s.stream);
  if (s.probesCopied)
    (void)DS_CU(cuEventDestroy, s.probesCopied);
  if (s.probes)
    (void)DS_CU(cuMemFreeHost, s.probes);
  for (Replay *replay : s.replays)
    replay->release();
  for (double *chunk : s.graphProbeChunks)
    (void)DS_CU(cuMemFreeHost, chunk);
  s.graphProbeChunks.clear();
  s.freeGraphProbes.clear();
  s.comm = nullptr;
  s.stream = nullptr;
  s.probesCopied = nullptr;
  s.probes = nullptr;
  s.probesUsed = 0;
}

/// dsrt_comm_finalize, at the same point on every rank: the communicator
/// ends while NCCL is whole (at exit its own teardown may come first).
void finalize() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.mode != Mode::Nccl || ensureReady().failed())
    return;
  countAllProbes(s, /*block=*/true);
  release(s, /*endComm=*/true);
  s.mode = Mode::Host; // no collective comes after the finalisation
}

/// dsrt_cuda_shutdown (the context current, the step stream idle): what
/// is left goes with the session, without calling NCCL (at exit it may be
/// gone); the next collective decides afresh.
void shutdown() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.mode == Mode::Nccl) {
    countAllProbes(s, /*block=*/true);
    release(s, /*endComm=*/false);
  }
  s.mode = Mode::Undecided;
  s.aborted = false;
}

/// Creates the communicator of the group `w` (nonblocking, so that its
/// initialisation and every call are bounded by the timeout) and what goes
/// with it; on a failure, what failed, with nothing left.
std::string initialise(State &s, const comm::World &w, const ncclUniqueId &id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r =
      s.api.ncclCommInitRankConfig(&comm, w.size, id, w.rank, &config);
  s.comm = comm;
  s.aborted = false;
  std::string why =
      comm || r != ncclSuccess
          ? settle(s, r, "ncclCommInitRankConfig", 0, 0)
          : std::string("ncclCommInitRankConfig made no communicator");
  if (!why.empty()) {
    // Freed locally: the vote that follows tells the others.
    if (s.comm)
      (void)s.api.ncclCommAbort(s.comm);
    s.comm = nullptr;
    return why;
  }
  void *probes = nullptr;
  if (DS_CU(cuStreamCreate, &s.stream, CU_STREAM_NON_BLOCKING).failed() ||
      DS_CU(cuEventCreate, &s.probesCopied, CU_EVENT_DISABLE_TIMING).failed() ||
      DS_CU(cuMemHostAlloc, &probes, kProbeSlots * sizeof(double), 0u)
          .failed()) {
    release(s, /*endComm=*/true);
    return "the communication stream, an event or pinned memory";
  }
  s.probes = static_cast<double *>(probes);
  s.probesUsed = 0;
  return "";
}

/// Drops a communicator the group did not agree on: aborted locally, with
/// nothing recorded (the backend falls back to the host).
void discard(State &s) {
  abortCommunicator(s, nullptr, /*failJob=*/false);
  release(s, /*endComm=*/false);
  s.aborted = false;
}

/// A vote of every rank of the data-parallel group, or with `stageGroup`
/// of this rank's replica's stages: true when all `can`, and then, with
/// `withId`, the group's first rank's `id` is everyone's. False when the
/// vote itself failed (its error recorded).
bool vote(bool can, bool withId, ncclUniqueId &id, bool stageGroup) {
  auto flag = std::make_shared<int64_t>(can ? 1 : 0);
  auto shared = std::make_shared<ncclUniqueId>(id);
  auto body = [flag, shared, withId]() -> Status {
    DS_RETURN_IF_ERROR(comm::allreduce(flag.get(), flag.get(), 1, DSRT_I64,
                                       DSRT_REDUCE_MIN, false));
    if (*flag && withId)
      return comm::broadcast(shared.get(), sizeof(ncclUniqueId), 0);
    return Status::success();
  };
  bool ok = comm::run(stageGroup ? "NCCL stage bootstrap" : "NCCL bootstrap",
                      sizeof(ncclUniqueId), [=]() {
                        return stageGroup ? comm::onStageGroup(body) : body();
                      });
  // Read only when the task completed: a timed-out one may still write.
  if (!ok)
    return false;
  id = *shared;
  return *flag != 0;
}

/// Decides the backend with the other ranks (once); true for NCCL. Every
/// rank of the group votes, whatever it can and was told, so that the
/// votes' collectives pair up.
bool decide(State &s, const comm::World &w) {
  if (s.mode != Mode::Undecided)
    return s.mode == Mode::Nccl;
  s.mode = Mode::Host;
  comm::setDeviceBackend("host");
  const char *choice = std::getenv("DS_CUDA_COLLECTIVES");
  std::string mode = choice && *choice ? choice : "auto";
  // One rank has nothing to exchange, unless it is a pipeline's stage,
  // whose transfers NCCL carries (the links below): NCCL only when asked
  // for (which runs its path on one GPU).
  if (w.size == 1 && mode != "nccl" && dsrt_comm_stages() <= 1)
    return false;
  std::string why;
  if (mode != "auto" && mode != "nccl" && mode != "host") {
    (void)DS_ERROR("DS_CUDA_COLLECTIVES='%s': expected auto, nccl or host",
                   mode.c_str());
    why = "DS_CUDA_COLLECTIVES";
  } else if (mode == "host") {
    why = "DS_CUDA_COLLECTIVES=host";
  } else if (ensureReady().failed()) {
    why = "no CUDA device";
  } else {
    why = load(s);
  }

  // Rank 0 makes the id; the group agrees (MIN of the votes) and the id
  // goes to everyone only when all can.
  ncclUniqueId id{};
  if (why.empty() && w.rank == 0)
    if (ncclResult_t r = s.api.ncclGetUniqueId(&id))
      why = std::string("ncclGetUniqueId failed: ") + ncclText(s, r);
  auto agree = [&](bool can, bool withId) {
    return vote(can, withId, id, /*stageGroup=*/false);
  };
  bool all = agree(why.empty(), true);
  if (all) {
    why = initialise(s, w, id);
    // A rank whose initialisation failed leaves the others' communicator
    // useless: all stage, or none.
    if (!agree(why.empty(), false)) {
      if (s.comm)
        discard(s);
      all = false;
    }
  }
  if (!all) {
    std::string reason = why.empty() ? "another rank cannot use it" : why;
    if (mode == "nccl")
      (void)DS_ERROR("DS_CUDA_COLLECTIVES=nccl: NCCL is not usable (%s)",
                     reason.c_str());
    else if (mode == "auto" && (w.rank == 0 || !why.empty()))
      std::fprintf(stderr,
                   "dsrt: rank %d: NCCL not used (%s); the collectives are "
                   "staged through the host (DS_CUDA_COLLECTIVES=host says "
                   "so without trying)\n",
                   w.rank, reason.c_str());
    return false;
  }
  static std::once_flag hooks;
  std::call_once(hooks, [] {
    addShutdownHook(shutdown);
    comm::setStatsHook(countProbesForStats);
    comm::setFinalizeHook(finalize);
  });
  s.mode = Mode::Nccl;
  double timeout = comm::timeoutSeconds();
  s.watchdog = std::thread([&s, timeout] { watch(s, timeout); });
  char name[32];
  std::snprintf(name, sizeof(name), "nccl %d.%d.%d", s.version / 10000,
                s.version / 100 % 100, s.version % 100);
  comm::setDeviceBackend(name);
  return true;
}

/// Whether NCCL takes a call now: the group, NCCL chosen, not
/// deterministic mode (staged; the backend is "host" then). Initialises
/// the device and decides the backend on first use.
bool serves(State &s, comm::World &w) {
  if (comm::acquire(w).failed())
    return false;
  if (w.deterministic) {
    if (s.mode == Mode::Undecided)
      comm::setDeviceBackend("host");
    return false;
  }
  return decide(s, w) && !ensureReady().failed();
}

ncclDataType_t dataType(bool f64) { return f64 ? ncclFloat64 : ncclFloat32; }

int64_t elementBytes(bool f64) { return f64 ? 8 : 4; }

ncclDataType_t dataType(comm::nccl::Element t) {
  switch (t) {
  case comm::nccl::Element::F64:
    return ncclFloat64;
  case comm::nccl::Element::F16:
    return ncclFloat16;
  case comm::nccl::Element::BF16:
    return ncclBfloat16;
  default:
    return ncclFloat32;
  }
}

int64_t elementBytes(comm::nccl::Element t) {
  return t == comm::nccl::Element::F64   ? 8
         : t == comm::nccl::Element::F32 ? 4
                                         : 2;
}

const char *elementName(comm::nccl::Element t) {
  switch (t) {
  case comm::nccl::Element::F64:
    return "f64";
  case comm::nccl::Element::F16:
    return "f16";
  case comm::nccl::Element::BF16:
    return "bf16";
  default:
    return "f32";
  }
}

ncclRedOp_t reduction(int64_t op) {
  switch (op) {
  case DSRT_REDUCE_MEAN:
    return ncclAvg;
  case DSRT_REDUCE_MAX:
    return ncclMax;
  case DSRT_REDUCE_MIN:
    return ncclMin;
  default:
    return ncclSum;
  }
}

CUdeviceptr ptr(const void *p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

/// The capture in progress's Replay, or null when the step stream is not
/// being captured.
Replay *capturedBy(State &s) {
  auto *replay = static_cast<Replay *>(cuda::captureHook(&s, &Replay::make));
  if (replay &&
      std::find(s.replays.begin(), s.replays.end(), replay) == s.replays.end())
    s.replays.push_back(replay);
  return replay;
}

/// A pinned slot for a captured probe, or null (the error recorded).
double *graphProbeSlot(State &s) {
  if (s.freeGraphProbes.empty()) {
    void *chunk = nullptr;
    if (DS_CU(cuMemHostAlloc, &chunk, kGraphProbeChunk * sizeof(double), 0u)
            .failed())
      return nullptr;
    s.graphProbeChunks.push_back(static_cast<double *>(chunk));
    for (int i = kGraphProbeChunk - 1; i >= 0; --i)
      s.freeGraphProbes.push_back(static_cast<double *>(chunk) + i);
  }
  double *slot = s.freeGraphProbes.back();
  s.freeGraphProbes.pop_back();
  return slot;
}

/// Copies a started collective's probe (one f64, or one f32 with `f32`, on
/// the device) to pinned memory on the step stream, where countProbes
/// finds it: a slot of the ring, or while capturing one of the graph's,
/// which every launch fills.
void copyProbe(State &s, Replay *replay, const void *probe, bool f32) {
  CUstream step = stepStream();
  size_t bytes = f32 ? sizeof(float) : sizeof(double);
  if (replay) {
    double *slot = graphProbeSlot(s);
    if (slot &&
        !DS_CU(cuMemcpyDtoHAsync, slot, ptr(probe), bytes, step).failed()) {
      replay->probes.push_back({slot, f32});
      countToHost(bytes); // in the graph's tally: every launch
    } else if (slot)
      s.freeGraphProbes.push_back(slot);
    return;
  }
  if (s.probesUsed == kProbeSlots)
    countProbes(s, /*block=*/true);
  if (s.probesUsed < kProbeSlots &&
      !DS_CU(cuMemcpyDtoHAsync, &s.probes[s.probesUsed], ptr(probe), bytes,
             step)
           .failed()) {
    s.probeF32[s.probesUsed++] = f32;
    countToHost(bytes);
    (void)DS_CU(cuEventRecord, s.probesCopied, step);
  }
}

/// Counts a collective enqueued now, or, while capturing, adds it to the
/// graph's Replay, which counts it at each launch.
void countEnqueued(Replay *replay, double sent, double dense, int64_t bytes) {
  // A gradient bucket's all-reduce is the one with a dense size.
  if (!replay) {
    comm::countCollective();
    if (dense > 0) {
      comm::countBucketSent(sent);
      comm::countDense(dense);
    } else {
      comm::countSent(sent);
    }
    return;
  }
  ++replay->collectives;
  (dense > 0 ? replay->bucketSent : replay->sent) += sent;
  replay->dense += dense;
  replay->bytes += bytes;
}

Replay::~Replay() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // A capture abandoned before its end (the session still up).
  for (CUevent sent : unjoined)
    (void)DS_CU(cuEventDestroy, sent);
  s.replays.erase(std::remove(s.replays.begin(), s.replays.end(), this),
                  s.replays.end());
  // Released with the session otherwise (the driver may be gone now).
  for (const ProbeSlot &probe : probes)
    s.freeGraphProbes.push_back(probe.at);
  if (launched)
    (void)DS_CU(cuEventDestroy, launched);
}

void Replay::beforeEnd() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (CUevent sent : unjoined) {
    (void)DS_CU(cuStreamWaitEvent, stepStream(), sent, 0u);
    (void)DS_CU(cuEventDestroy, sent);
  }
  unjoined.clear();
}

void Replay::release() {
  countProbes(/*block=*/true);
  if (launched)
    (void)DS_CU(cuEventDestroy, launched);
  launched = nullptr;
  probes.clear();
}

void Replay::countProbes(bool block) {
  if (!uncounted)
    return;
  if (driver().cuEventQuery(launched) != CUDA_SUCCESS) {
    if (!block)
      return; // not yet (or failed: the stream's next wait says so)
    counters().waits.fetch_add(1, std::memory_order_relaxed);
    if (DS_CU(cuEventSynchronize, launched).failed())
      return;
  }
  for (const ProbeSlot &probe : probes)
    if (probe.nan())
      comm::countNonFinite();
  uncounted = false;
}

void Replay::beforeLaunch() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // This launch overwrites the last one's probes: count them first. The
  // host waits only if it is a whole launch of this graph ahead.
  countProbes(/*block=*/true);
}

void Replay::afterLaunch() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.mode != Mode::Nccl || s.aborted)
    return;
  for (int i = 0; i < collectives; ++i)
    comm::countCollective();
  comm::countSent(sent);
  comm::countBucketSent(bucketSent);
  if (dense > 0)
    comm::countDense(dense);
  CUstream step = stepStream();
  if (!probes.empty() &&
      (launched ||
       !DS_CU(cuEventCreate, &launched, CU_EVENT_DISABLE_TIMING).failed()) &&
      !DS_CU(cuEventRecord, launched, step).failed())
    uncounted = true;
  // The launch's collectives end with it, on the step stream.
  if (collectives > 0)
    watchCollective(s, step, "the NCCL collectives of a CUDA graph launch",
                    s.nextSeq++, bytes);
}

/// A blocking collective, in order on the step stream: `enqueue(s, comm)`
/// (the NCCL call) when NCCL serves it, counted as sending `sent(w)`
/// bytes. After an abort it does nothing (the step has failed).
template <typename Sent, typename Enqueue>
bool blocking(const char *fn, int64_t bytes, Sent sent, Enqueue enqueue) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  comm::World w;
  if (!serves(s, w))
    return false;
  if (s.aborted)
    return true;
  Replay *replay = capturedBy(s);
  countEnqueued(replay, sent(w), 0, bytes);
  uint64_t seq = s.nextSeq++;
  if (callNccl(s, fn, seq, bytes,
               [&](ncclComm_t comm) { return enqueue(s, comm); }) &&
      !replay)
    watchCollective(s, stepStream(), fn, seq, bytes);
  return true;
}

} // namespace

bool dsrt::comm::nccl::allreduce(const void *in, void *out, int64_t count,
                                 bool f64, int64_t op) {
  int64_t bytes = count * elementBytes(f64);
  return blocking(
      "ncclAllReduce", bytes, [&](const World &) { return double(bytes); },
      [&](State &s, ncclComm_t comm) {
        return s.api.ncclAllReduce(in, out, count, dataType(f64), reduction(op),
                                   comm, stepStream());
      });
}

bool dsrt::comm::nccl::broadcast(const void *in, void *out, int64_t count,
                                 bool f64) {
  int64_t bytes = count * elementBytes(f64);
  return blocking(
      "ncclBroadcast", bytes,
      [&](const World &w) { return w.rank == 0 ? double(bytes) : 0.0; },
      [&](State &s, ncclComm_t comm) {
        return s.api.ncclBroadcast(in, out, count, dataType(f64), 0, comm,
                                   stepStream());
      });
}

namespace {

/// The link of this rank's transfers to stage `peer` (`sends`) or from it,
/// made at the first transfer by both of its ends: the MPI layer carries
/// the sender's offer (whether it can, and the communicator's unique id)
/// and the receiver's answer; both on NCCL (`nccl`: this rank's
/// collectives are) make a communicator of the two ranks and say whether
/// they did. Null when the transfers are staged. The sender's first
/// transfer waits for the receiver's first, which a schedule whose
/// receives come in the order of the sends reaches without it.
Link *linkOf(State &s, int64_t peer, bool sends, bool nccl) {
  auto key = std::make_pair(peer, sends);
  if (auto it = s.links.find(key); it != s.links.end())
    return it->second.comm ? &it->second : nullptr;
  {
    std::lock_guard<std::mutex> lock(s.callMutex);
    s.links[key] = Link();
  }
  int stage = static_cast<int>(peer);
  struct Offer {
    int64_t can;
    ncclUniqueId id;
  };
  // One round: this end's flag out, the other end's in (the sender's
  // carrying the id).
  auto exchange = [&](int64_t mine, int outTag, int inTag, Offer &theirs,
                      const ncclUniqueId &id) {
    auto out = std::make_shared<std::vector<uint8_t>>(sizeof(Offer));
    Offer offer{mine, id};
    std::memcpy(out->data(), &offer, sizeof(Offer));
    (void)comm::issue("NCCL link", sizeof(Offer),
                      [=] { return comm::sendTo(out, stage, outTag); });
    auto in = std::make_shared<Offer>();
    bool ok = comm::run("NCCL link", sizeof(Offer), [=] {
      return comm::recvFrom(in.get(), sizeof(Offer), stage, inTag);
    });
    theirs = ok ? *in : Offer{0, {}};
    return ok;
  };
  ncclUniqueId id{};
  bool can = nccl && !(sends && s.api.ncclGetUniqueId(&id) != ncclSuccess);
  Offer theirs{};
  if (!exchange(can, sends ? kLinkOfferTag : kLinkAnswerTag,
                sends ? kLinkAnswerTag : kLinkOfferTag, theirs, id) ||
      !can || !theirs.can)
    return nullptr;
  if (!sends)
    id = theirs.id;
  Link link;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r =
      s.api.ncclCommInitRankConfig(&link.comm, 2, id, sends ? 0 : 1, &config);
  std::string why =
      link.comm || r != ncclSuccess
          ? settle(s, r, "ncclCommInitRankConfig", 0, 0, link.comm)
          : std::string("ncclCommInitRankConfig made no communicator");
  if (why.empty() &&
      DS_CU(cuStreamCreate, &link.stream, CU_STREAM_NON_BLOCKING).failed())
    why = "the link's stream";
  // Both ends made it, or neither uses it.
  bool both = exchange(why.empty(), kLinkReadyTag, kLinkReadyTag, theirs, id) &&
              why.empty() && theirs.can;
  if (!both) {
    if (link.comm)
      (void)s.api.ncclCommAbort(link.comm);
    if (link.stream)
      (void)DS_CU(cuStreamDestroy, link.stream);
    std::fprintf(stderr,
                 "dsrt: stage %d: NCCL not used for the transfers %s stage "
                 "%d (%s); they are staged through the host\n",
                 dsrt_comm_stage(), sends ? "to" : "from", stage,
                 why.empty() ? "the other stage could not" : why.c_str());
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(s.callMutex);
  return &(s.links[key] = link);
}

/// The stage group's communicator, for the sums over stages: made at the
/// first sum, which every stage of the replica reaches at the same point
/// of its update, when every stage's collectives are NCCL's (`nccl`; a
/// vote over the group, stage 0's unique id broadcast, then a vote on the
/// result, as the data-parallel group's). Null when the sums are staged.
ncclComm_t stageGroupOf(State &s, bool nccl) {
  if (s.stageGroupDecided)
    return s.stageGroup.comm;
  s.stageGroupDecided = true;
  int stage = dsrt_comm_stage();
  ncclUniqueId id{};
  bool can = nccl && !(stage == 0 && s.api.ncclGetUniqueId(&id) != ncclSuccess);
  if (!vote(can, /*withId=*/true, id, /*stageGroup=*/true))
    return nullptr;
  ncclComm_t group = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = s.api.ncclCommInitRankConfig(&group, dsrt_comm_stages(), id,
                                                stage, &config);
  std::string why =
      group || r != ncclSuccess
          ? settle(s, r, "ncclCommInitRankConfig", 0, 0, group)
          : std::string("ncclCommInitRankConfig made no communicator");
  if (!vote(why.empty(), /*withId=*/false, id, /*stageGroup=*/true)) {
    if (group)
      (void)s.api.ncclCommAbort(group);
    std::fprintf(stderr,
                 "dsrt: stage %d: NCCL not used for the sums over stages "
                 "(%s); they are staged through the host\n",
                 stage, why.empty() ? "another stage could not" : why.c_str());
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(s.callMutex);
  s.stageGroup.comm = group;
  return group;
}

/// For a pipeline's transfers and sums over stages: false when they are
/// staged without asking the other stages (no pipeline; deterministic
/// mode, which sums in rank order and is the job's setting, so every rank
/// agrees; a failed communicator); otherwise true, with `nccl` whether
/// this rank's collectives are NCCL's (decided on first use).
bool pipelineCollective(State &s, bool &nccl) {
  comm::World w;
  if (comm::acquire(w).failed() || w.deterministic || dsrt_comm_stages() <= 1)
    return false;
  nccl = decide(s, w) && !ensureReady().failed();
  return true;
}

/// A transfer of a pipeline's stages on NCCL: `enqueue(link)` on the
/// link's stream after the step stream's work so far (the sender's copy of
/// its data, or the receiver's buffer ready), counted as a collective of
/// `sent` bytes. False (nothing done) when the transfers are staged.
template <typename Enqueue>
bool transfer(const char *fn, int64_t peer, bool sends, int64_t bytes,
              Enqueue enqueue) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  bool nccl = false;
  if (!pipelineCollective(s, nccl))
    return false;
  Link *link = linkOf(s, peer, sends, nccl);
  if (!link)
    return false;
  if (s.aborted)
    return true;
  if (bytes < 0) {
    (void)DS_ERROR("%s to stage %lld: the %s is not a contiguous vector "
                   "(NCCL's transfers take one)",
                   fn, static_cast<long long>(peer),
                   sends ? "input" : "output");
    return true;
  }
  Replay *replay = capturedBy(s);
  countEnqueued(replay, sends ? double(bytes) : 0.0, 0, bytes);
  uint64_t seq = s.nextSeq++;
  CUevent ready = nullptr;
  bool ok = !DS_CU(cuEventCreate, &ready, CU_EVENT_DISABLE_TIMING).failed() &&
            enqueue(s, *link, ready, seq);
  if (ready)
    (void)DS_CU(cuEventDestroy, ready); // released once it has happened
  if (!ok) {
    abortCommunicator(s, nullptr);
  } else if (!replay) {
    watchCollective(s, link->stream, fn, seq, bytes);
  } else if (sends) {
    // Nothing in the step waits for a send: the capture must join the
    // link's stream back before it ends.
    CUevent sent = nullptr;
    if (!DS_CU(cuEventCreate, &sent, CU_EVENT_DISABLE_TIMING).failed() &&
        !DS_CU(cuEventRecord, sent, link->stream).failed())
      replay->unjoined.push_back(sent);
  }
  return true;
}

} // namespace

bool dsrt::comm::nccl::send(const void *in, int64_t count, bool f64,
                            int64_t peer) {
  int64_t bytes = count < 0 ? -1 : count * elementBytes(f64);
  return transfer(
      "ncclSend", peer, /*sends=*/true, bytes,
      [&](State &s, Link &link, CUevent ready, uint64_t seq) {
        // A copy, sent and freed on the link's stream: the step may reuse
        // its buffer as soon as this returns, as the CPU's send lets it.
        CUstream step = stepStream();
        void *copy = nullptr;
        if (bytes > 0 &&
            (allocateOnStream(bytes, step, false, copy).failed() ||
             DS_CU(cuMemcpyAsync, ptr(copy), ptr(in), size_t(bytes), step)
                 .failed()))
          return false;
        bool ok = !DS_CU(cuEventRecord, ready, step).failed() &&
                  !DS_CU(cuStreamWaitEvent, link.stream, ready, 0u).failed() &&
                  callNccl(
                      s, "ncclSend", seq, bytes,
                      [&](ncclComm_t comm) {
                        return s.api.ncclSend(copy, count, dataType(f64), 1,
                                              comm, link.stream);
                      },
                      link.comm);
        if (copy)
          (void)freeOnStream(copy, ok ? link.stream : step);
        return ok;
      });
}

bool dsrt::comm::nccl::recv(void *out, int64_t count, bool f64, int64_t peer) {
  int64_t bytes = count < 0 ? -1 : count * elementBytes(f64);
  return transfer(
      "ncclRecv", peer, /*sends=*/false, bytes,
      [&](State &s, Link &link, CUevent ready, uint64_t seq) {
        CUstream step = stepStream();
        CUevent done = nullptr;
        bool ok =
            !DS_CU(cuEventCreate, &done, CU_EVENT_DISABLE_TIMING).failed() &&
            !DS_CU(cuEventRecord, ready, step).failed() &&
            !DS_CU(cuStreamWaitEvent, link.stream, ready, 0u).failed() &&
            callNccl(
                s, "ncclRecv", seq, bytes,
                [&](ncclComm_t comm) {
                  return s.api.ncclRecv(out, count, dataType(f64), 0, comm,
                                        link.stream);
                },
                link.comm) &&
            !DS_CU(cuEventRecord, done, link.stream).failed() &&
            !DS_CU(cuStreamWaitEvent, step, done, 0u).failed();
        if (done)
          (void)DS_CU(cuEventDestroy, done);
        return ok;
      });
}

bool dsrt::comm::nccl::stageAllreduce(const void *in, void *out, int64_t count,
                                      bool f64, int64_t op) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  bool nccl = false;
  if (!pipelineCollective(s, nccl))
    return false;
  ncclComm_t group = stageGroupOf(s, nccl);
  if (!group)
    return false;
  if (s.aborted)
    return true;
  if (count < 0 || op < DSRT_REDUCE_SUM || op > DSRT_REDUCE_MIN) {
    (void)DS_ERROR("dsrt_cuda_stage_allreduce: the input and output are not "
                   "contiguous vectors of one size, or op %lld is unknown",
                   static_cast<long long>(op));
    return true;
  }
  int64_t bytes = count * elementBytes(f64);
  Replay *replay = capturedBy(s);
  countEnqueued(replay, double(bytes), 0, bytes);
  uint64_t seq = s.nextSeq++;
  if (callNccl(
          s, "ncclAllReduce", seq, bytes,
          [&](ncclComm_t comm) {
            return s.api.ncclAllReduce(in, out, count, dataType(f64),
                                       reduction(op), comm, stepStream());
          },
          group) &&
      !replay)
    watchCollective(s, stepStream(), "ncclAllReduce", seq, bytes);
  return true;
}

namespace {

/// The rest of a started collective, once `started` is `prepared` (its
/// buffer made on the step stream): the communication stream waits for the
/// step stream's work so far, `enqueue(comm)` (NCCL's `fn`) runs on it and
/// `started.done` is recorded after it; the probe (one f32 with
/// `probeF32`, else one f64, on the device) is copied for countProbes.
/// Returns the new handle under which the wait finds `started`, or 0 after
/// a failure (the error recorded; the communicator aborted, as the peers
/// enqueued theirs; what `started` held released).
template <typename Enqueue>
int64_t enqueueStarted(State &s, Replay *replay, const char *fn, int64_t bytes,
                       bool prepared, Started &started, const void *probe,
                       bool probeF32, Enqueue enqueue) {
  CUstream step = stepStream();
  uint64_t seq = s.nextSeq++;
  CUevent ready = nullptr;
  bool enqueued = false;
  bool ok =
      prepared &&
      !DS_CU(cuEventCreate, &ready, CU_EVENT_DISABLE_TIMING).failed() &&
      !DS_CU(cuEventCreate, &started.done, CU_EVENT_DISABLE_TIMING).failed() &&
      !DS_CU(cuEventRecord, ready, step).failed() &&
      !DS_CU(cuStreamWaitEvent, s.stream, ready, 0u).failed() &&
      (enqueued = callNccl(s, fn, seq, bytes, enqueue)) &&
      !DS_CU(cuEventRecord, started.done, s.stream).failed();
  if (ready)
    (void)DS_CU(cuEventDestroy, ready); // released once it has happened
  if (!ok) {
    abortCommunicator(s, nullptr);
    if (enqueued)
      (void)DS_CU(cuStreamSynchronize, s.stream);
    if (started.done)
      (void)DS_CU(cuEventDestroy, started.done);
    if (started.owned)
      (void)freeOnStream(started.owned, step);
    return 0;
  }
  if (!replay)
    watchCollective(s, s.stream, fn, seq, bytes);
  if (probe)
    copyProbe(s, replay, probe, probeF32);
  int64_t handle = s.nextHandle++;
  s.started.emplace(handle, started);
  return handle;
}

} // namespace

bool dsrt::comm::nccl::start(const void *bucket, int64_t count, Element type,
                             const double *probe, bool inPlace,
                             int64_t &handle) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  World w;
  if (!serves(s, w))
    return false;
  handle = 0;
  if (s.aborted)
    return true;
  int64_t bytes = count * elementBytes(type);
  bool halves = type == Element::F16 || type == Element::BF16;
  Replay *replay = capturedBy(s);
  countEnqueued(replay, double(bytes), double(halves ? count * 4 : bytes),
                bytes);
  CUstream step = stepStream();
  Started started;
  started.count = count;
  started.type = type;
  // In place, or on a copy: the step may free or reuse its bucket as soon
  // as this returns, and a free on the step stream would not wait for the
  // communication stream.
  bool copied = true;
  if (inPlace)
    started.inPlace = const_cast<void *>(bucket);
  else if (bytes > 0)
    copied = !allocateOnStream(bytes, step, false, started.owned).failed() &&
             !DS_CU(cuMemcpyAsync, ptr(started.owned), ptr(bucket),
                    size_t(bytes), step)
                  .failed();
  void *data = inPlace ? started.inPlace : started.owned;
  handle = enqueueStarted(
      s, replay, "ncclAllReduce", bytes, copied, started, probe,
      /*probeF32=*/false, [&](ncclComm_t comm) {
        return s.api.ncclAllReduce(data, data, count, dataType(type),
                                   halves ? ncclSum : ncclAvg, comm, s.stream);
      });
  return true;
}

bool dsrt::comm::nccl::decided() {
  State &s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.mode != Mode::Undecided)
      return true;
  }
  World w;
  return comm::acquire(w).failed() || w.deterministic;
}

bool dsrt::comm::nccl::transfersDecided(int64_t peer, bool sends) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.mode == Mode::Undecided)
    return false;
  return peer < 0 ? s.stageGroupDecided
                  : s.links.count(std::make_pair(peer, sends)) != 0;
}

bool dsrt::comm::nccl::owns(int64_t handle) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.started.count(handle) != 0;
}

void dsrt::comm::nccl::wait(int64_t handle, void *out, int64_t count,
                            Element type, const char *what) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.started.find(handle);
  if (it == s.started.end() || ensureReady().failed())
    return;
  Started started = it->second;
  s.started.erase(it);
  CUstream step = stepStream();
  // The buffer is freed on the step stream after this: it must wait for
  // the all-reduce whatever else fails.
  bool waited = !DS_CU(cuStreamWaitEvent, step, started.done, 0u).failed();
  if (!waited)
    (void)DS_CU(cuStreamSynchronize, s.stream);
  if (started.slots > 0) {
    (void)DS_ERROR("%s: handle %lld is a started top-k all-gather (its wait "
                   "is dsrt_cuda_allreduce_wait_topk_f32)",
                   what, static_cast<long long>(handle));
    if (out && count > 0 && elementBytes(type) == 2)
      (void)DS_CU(cuMemsetD16Async, ptr(out), 0u, size_t(count), step);
    else if (out && count > 0)
      (void)DS_CU(cuMemsetD32Async, ptr(out), 0u,
                  size_t(count * elementBytes(type) / 4), step);
  } else if (started.type != type) {
    (void)DS_ERROR("%s: handle %lld is a started %s all-reduce", what,
                   static_cast<long long>(handle), elementName(started.type));
    // Finite values all the same, as the CPU's wait writes.
    if (out && count > 0 && elementBytes(type) == 2)
      (void)DS_CU(cuMemsetD16Async, ptr(out), 0u, size_t(count), step);
    else if (out && count > 0)
      (void)DS_CU(cuMemsetD32Async, ptr(out), 0u,
                  size_t(count * elementBytes(type) / 4), step);
  } else if (started.count != count)
    (void)DS_ERROR("%s: the bucket has %lld elements, the output %lld", what,
                   static_cast<long long>(started.count),
                   static_cast<long long>(count));
  else if (waited && count > 0 && out != started.inPlace)
    (void)DS_CU(cuMemcpyAsync, ptr(out),
                ptr(started.owned ? started.owned : started.inPlace),
                size_t(count * elementBytes(type)), step);
  (void)DS_CU(cuEventDestroy, started.done);
  if (started.owned)
    (void)freeOnStream(started.owned, step);
}

namespace {

/// DS_CUDA_TOPK_EXCHANGE, read once: auto (the default), nccl or host.
enum class TopKExchange { Auto, Nccl, Host, Bad };
TopKExchange topKExchange() {
  static const TopKExchange choice = [] {
    const char *v = std::getenv("DS_CUDA_TOPK_EXCHANGE");
    if (!v || !*v || !std::strcmp(v, "auto"))
      return TopKExchange::Auto;
    if (!std::strcmp(v, "nccl"))
      return TopKExchange::Nccl;
    return std::strcmp(v, "host") ? TopKExchange::Bad : TopKExchange::Host;
  }();
  return choice;
}

/// The started top-k all-gather `handle`, or null with an error naming
/// `what` (mutex held).
Started *topKStart(State &s, int64_t handle, const char *what) {
  auto it = s.started.find(handle);
  if (it != s.started.end() && it->second.slots > 0)
    return &it->second;
  (void)DS_ERROR("%s: handle %lld is not a started top-k all-gather on NCCL",
                 what, static_cast<long long>(handle));
  return nullptr;
}

} // namespace

bool dsrt::comm::nccl::startTopK(const uint32_t *indices, const float *values,
                                 int64_t slots, int64_t n, bool fixedFraction,
                                 const float *probe, int64_t &handle) {
  TopKExchange choice = topKExchange();
  if (choice == TopKExchange::Host)
    return false;
  handle = 0;
  if (choice == TopKExchange::Bad) {
    (void)DS_ERROR("DS_CUDA_TOPK_EXCHANGE='%s': expected auto, nccl or host",
                   std::getenv("DS_CUDA_TOPK_EXCHANGE"));
    return true;
  }
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  World w;
  // Auto: slots sized for the step's one fraction, whose fixed-size
  // all-gather (each rank receives the others' slots, 8 bytes each) sends
  // no more than a ring all-reduce of the bucket (each rank sends and
  // receives 2 (N - 1) / N of its 4 n bytes).
  if (!serves(s, w) || slots < 1 ||
      (choice == TopKExchange::Auto && (!fixedFraction || slots * w.size > n)))
    return false;
  if (s.aborted)
    return true;
  int64_t part = slots * 8, bytes = part * w.size;
  Replay *replay = capturedBy(s);
  countEnqueued(replay, double(part), double(n * 4), part);
  CUstream step = stepStream();
  Started started;
  started.count = n;
  started.slots = slots;
  started.ranks = w.size;
  // This rank's part of the buffer, filled on the step stream (the step
  // may free its slots once this returns): gathered in place.
  bool copied =
      !allocateOnStream(bytes, step, false, started.owned).failed() &&
      !DS_CU(cuMemcpyAsync, ptr(started.owned) + w.rank * part, ptr(indices),
             size_t(slots * 4), step)
           .failed() &&
      !DS_CU(cuMemcpyAsync, ptr(started.owned) + w.rank * part + slots * 4,
             ptr(values), size_t(slots * 4), step)
           .failed();
  char *mine = static_cast<char *>(started.owned) + w.rank * part;
  handle = enqueueStarted(s, replay, "ncclAllGather", bytes, copied, started,
                          probe, /*probeF32=*/true, [&](ncclComm_t comm) {
                            return s.api.ncclAllGather(
                                mine, started.owned, size_t(slots * 2),
                                ncclUint32, comm, s.stream);
                          });
  return true;
}

int64_t dsrt::comm::nccl::topKRanks(int64_t handle) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.started.find(handle);
  return it != s.started.end() ? it->second.ranks : 0;
}

void dsrt::comm::nccl::waitTopK(int64_t handle, const char *what) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Started *started = topKStart(s, handle, what);
  if (!started || started->waited || ensureReady().failed())
    return;
  started->waited = true;
  if (DS_CU(cuStreamWaitEvent, stepStream(), started->done, 0u).failed())
    (void)DS_CU(cuStreamSynchronize, s.stream);
}

void dsrt::comm::nccl::copyTopKSlots(int64_t handle, int64_t rank,
                                     uint32_t *indices, float *values,
                                     int64_t slots, const char *what) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Started *started = topKStart(s, handle, what);
  if (!started || ensureReady().failed())
    return;
  if (!started->waited || rank < 0 || rank >= started->ranks ||
      slots != started->slots || !indices || !values) {
    (void)DS_ERROR(
        "%s: rank %lld's %lld slots of handle %lld, which "
        "gathered %lld slots of %lld ranks%s",
        what, static_cast<long long>(rank), static_cast<long long>(slots),
        static_cast<long long>(handle), static_cast<long long>(started->slots),
        static_cast<long long>(started->ranks),
        started->waited ? "" : " and is not waited for yet");
    return;
  }
  CUstream step = stepStream();
  CUdeviceptr from = ptr(started->owned) + rank * slots * 8;
  (void)(!DS_CU(cuMemcpyAsync, ptr(indices), from, size_t(slots * 4), step)
              .failed() &&
         !DS_CU(cuMemcpyAsync, ptr(values), from + slots * 4, size_t(slots * 4),
                step)
              .failed());
}

void dsrt::comm::nccl::endTopK(int64_t handle) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.started.find(handle);
  if (it == s.started.end() || it->second.slots == 0 || ensureReady().failed())
    return;
  Started started = it->second;
  s.started.erase(it);
  CUstream step = stepStream();
  // The free must come after the all-gather, waited for or not.
  if (!started.waited &&
      DS_CU(cuStreamWaitEvent, step, started.done, 0u).failed())
    (void)DS_CU(cuStreamSynchronize, s.stream);
  (void)DS_CU(cuEventDestroy, started.done);
  (void)freeOnStream(started.owned, step);
}

#else // no nccl.h: every collective is staged through the host.

bool dsrt::comm::nccl::allreduce(const void *, void *, int64_t, bool, int64_t) {
  return false;
}
bool dsrt::comm::nccl::broadcast(const void *, void *, int64_t, bool) {
  return false;
}
bool dsrt::comm::nccl::send(const void *, int64_t, bool, int64_t) {
  return false;
}
bool dsrt::comm::nccl::recv(void *, int64_t, bool, int64_t) { return false; }
bool dsrt::comm::nccl::stageAllreduce(const void *, void *, int64_t, bool,
                                      int64_t) {
  return false;
}
bool dsrt::comm::nccl::start(const void *, int64_t, Element, const double *,
                             bool, int64_t &) {
  return false;
}
bool dsrt::comm::nccl::decided() { return true; }
bool dsrt::comm::nccl::transfersDecided(int64_t, bool) { return true; }
bool dsrt::comm::nccl::owns(int64_t) { return false; }
void dsrt::comm::nccl::wait(int64_t, void *, int64_t, Element, const char *) {}
bool dsrt::comm::nccl::startTopK(const uint32_t *, const float *, int64_t,
                                 int64_t, bool, const float *, int64_t &) {
  return false;
}
int64_t dsrt::comm::nccl::topKRanks(int64_t) { return 0; }
void dsrt::comm::nccl::waitTopK(int64_t, const char *) {}
void dsrt::comm::nccl::copyTopKSlots(int64_t, int64_t, uint32_t *, float *,
                                     int64_t, const char *) {}
void dsrt::comm::nccl::endTopK(int64_t) {}

#endif

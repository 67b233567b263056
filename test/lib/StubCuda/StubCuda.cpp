//===- StubCuda.cpp - A stub CUDA driver for tests without a GPU ----------===//
//
// libcuda.so.1 for tests: exports every driver function the runtime
// resolves (lib/Runtime/cuda/Driver.h), defined with cuda.h's own
// prototypes so that a signature cannot drift, under the versioned names
// cuda.h maps them to. Nothing runs on a device:
//   - memory is host memory (device, managed, pinned alike), so copies,
//     memsets and the cuBLASLt stub's GEMMs produce real values;
//   - kernels do nothing; a module accepts any image, and a function
//     handle remembers its name for the log;
//   - every call appends one line to $DS_STUB_CUDA_LOG, e.g.
//     "cuMemAllocAsync bytes=64 ptr=0x... stream=s1" (a copy to pinned
//     host memory ends in " pinned"), and at exit
//     "stub-exit live-allocations=0 live-bytes=0 ..." for leak checks;
//   - stream capture records the work of a stream (copies, memsets,
//     launches, stream-ordered allocations and frees, the cuBLASLt stub's
//     GEMMs) as "capture gN: <call>" lines, and a launch of the
//     instantiated graph replays it: the copies, memsets and GEMMs run
//     again at the captured addresses, and a captured allocation keeps its
//     address for the graph's life, as the driver's graph memory does;
//     another stream joins the capture by waiting on an event recorded in
//     it (a fork: its work is recorded in call order among the capture's)
//     and must join back (the capturing stream waits on an event recorded
//     on it after its last work) before the capture ends, as on the driver
//     (CUDA_ERROR_STREAM_CAPTURE_UNJOINED otherwise); querying or waiting
//     for an event last recorded in a capture fails
//     (CUDA_ERROR_CAPTURED_EVENT), and so does a capturing stream's wait
//     on an event recorded outside it (CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
//   - a stream the NCCL stub hung (DS_STUB_NCCL_HANG, StubNccl.cpp) keeps
//     the events recorded on it pending and blocks its synchronisations,
//     and a stream that waits on such an event hangs too, until
//     ncclCommAbort releases them.
// Environment: DS_STUB_CUDA_DEVICES (default 1) devices, DS_STUB_CUDA_CC
// (default 90) their compute capability, DS_STUB_CUDA_FAIL a comma-separated
// list of functions (unversioned names) that fail, DS_STUB_CUDA_MISALIGN
// (default 0, below 256) bytes past a 256-byte boundary at which every
// device allocation starts (where the driver's start at 0): the kernels'
// paths for buffers that are not 16-byte aligned (a view into a buffer a
// user passes), run on every buffer. Unless DS_STUB_CUDA_LAZY_PINNED=0, a
// copy to pinned host memory (cuMemHostAlloc) on a stream lands only when
// the host synchronises with it (that stream, or an event recorded on it
// after the copy, or after the graph launch that replays it, synchronised
// or queried complete), as the driver's
// asynchronous copies do; until then the host reads what the memory held
// (poison with DS_STUB_CUDA_POISON, or the previous copy's values). Copies
// to pageable memory land at once: the driver returns from those when they
// are done.
//
//===----------------------------------------------------------------------===//

#include "StubCommon.h"

// The library is built with hidden visibility; only the functions the
// header declares are exported (a declaration fixes a symbol's visibility).
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace stubcuda;

namespace {

struct GraphData;

struct Event {
  int id;
  /// Whether it was last recorded in a capture (a captured event), which
  /// one (not kept alive by it), the stream and that stream's work count
  /// then.
  bool captured = false;
  std::weak_ptr<GraphData> capturedIn;
  Stream *recordedOn = nullptr;
  uint64_t workThen = 0;
  /// When it was last recorded, in the stub's clock: one tick per record.
  uint64_t recordedAt = 0;
  /// The hang token of the stream it was last recorded on, if that stream
  /// waited on a hung collective (StubNccl.cpp): pending while it holds.
  std::atomic<bool> *hang = nullptr;
};
struct Module {
  int id;
};
struct Function {
  std::string name;
  Module *module;
};

/// A captured graph: its work in stream order, and the memory its
/// allocation nodes hold (freed with the last graph or exec using it).
struct GraphData {
  int id = 0;
  std::vector<std::pair<std::string, std::function<void()>>> nodes;
  std::vector<void *> memory;
  /// A synchronisation during the capture invalidates it, as the driver's.
  bool invalidated = false;
  bool ended = false;
  /// The streams that joined the capture (forks), each with the work count
  /// it had when the capture last waited on it (a join back), if it did.
  std::vector<Stream *> forks;
  std::map<Stream *, uint64_t> joinedBackAt;
  ~GraphData();
};
/// CUgraph and CUgraphExec point to these.
struct Graph {
  std::shared_ptr<GraphData> data;
};
struct GraphExec {
  int id;
  std::shared_ptr<GraphData> data;
};

struct State {
  std::mutex mutex;
  int nextId = 1;
  /// Device and managed allocations: address -> bytes.
  std::map<uintptr_t, size_t> device;
  std::map<void *, size_t> host;
  std::set<void *> registered;
  std::set<Stream *> streams;
  std::set<Event *> events;
  std::set<Module *> modules;
  std::set<Function *> functions;
  std::set<Graph *> graphs;
  std::set<GraphExec *> execs;
  int retainedContexts = 0;
  /// DS_STUB_CUDA_LAZY_PINNED's copies to pinned memory not landed yet:
  /// the stream, its work count at the copy, where to and what.
  struct LateCopy {
    Stream *stream;
    uint64_t work;
    char *dst;
    std::vector<char> bytes;
  };
  std::vector<LateCopy> lateCopies;
};

State &state() {
  static State *s = new State(); // Outlives the exit report below.
  return *s;
}

size_t deviceMisalignment();
void release(void *p, size_t shift);

GraphData::~GraphData() {
  std::lock_guard<std::mutex> lock(state().mutex);
  for (void *p : memory) {
    state().device.erase(reinterpret_cast<uintptr_t>(p));
    release(p, deviceMisalignment());
  }
}

int envInt(const char *name, int fallback) {
  const char *value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

/// True when DS_STUB_CUDA_FAIL lists `fn`.
bool failing(const char *fn) {
  const char *list = std::getenv("DS_STUB_CUDA_FAIL");
  if (!list)
    return false;
  size_t length = std::strlen(fn);
  for (const char *p = list; *p;) {
    const char *end = std::strchr(p, ',');
    size_t itemLength = end ? size_t(end - p) : std::strlen(p);
    if (itemLength == length && std::strncmp(p, fn, length) == 0)
      return true;
    if (!end)
      break;
    p = end + 1;
  }
  return false;
}

/// Logs and reports an injected failure.
CUresult injected(const char *fn, CUresult result) {
  logLine("%s injected-failure", fn);
  return result;
}

#define STREAM(s) streamName(s, streamBuf, sizeof(streamBuf))

/// The stub stream behind `stream`, or null (the legacy default stream, or
/// something that is not a stub stream).
Stream *stubStream(const void *stream) {
  auto *s = static_cast<Stream *>(const_cast<void *>(stream));
  return s && s->magic == kStreamMagic ? s : nullptr;
}

/// The stream whose graph launch is replaying its nodes on this thread.
thread_local Stream *replayStream = nullptr;

/// Whether copies to pinned memory land late (DS_STUB_CUDA_LAZY_PINNED,
/// on unless it is 0).
bool lazyPinned() {
  static const bool on = [] {
    const char *v = std::getenv("DS_STUB_CUDA_LAZY_PINNED");
    return !v || std::strcmp(v, "0") != 0;
  }();
  return on;
}

/// Whether [p, p + n) lies in one pinned allocation (lock held).
bool inPinnedLocked(const void *p, size_t n) {
  auto &host = state().host;
  auto it = host.upper_bound(const_cast<void *>(p));
  if (it == host.begin())
    return false;
  --it;
  auto *first = static_cast<const char *>(it->first);
  auto *at = static_cast<const char *>(p);
  return at >= first && at + n <= first + it->second;
}

/// The host synchronised with `stream` (every stream for null) up to its
/// work count `upTo`: the late copies up to there land, in order.
void landCopies(const Stream *stream, uint64_t upTo) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto &late = state().lateCopies;
  auto landed = std::remove_if(late.begin(), late.end(), [&](auto &c) {
    if (stream && (c.stream != stream || c.work > upTo))
      return false;
    std::memcpy(c.dst, c.bytes.data(), c.bytes.size());
    return true;
  });
  late.erase(landed, late.end());
}

/// Blocks while `token` holds: a synchronisation with work that waits on
/// a hung collective, which only ncclCommAbort (another thread) ends.
void blockWhileHanging(const std::atomic<bool> *token) {
  while (hanging(token))
    usleep(1000);
}

/// The capture in progress on `stream`, if any.
std::shared_ptr<GraphData> *captureOf(const void *stream) {
  Stream *s = stubStream(stream);
  return s ? static_cast<std::shared_ptr<GraphData> *>(s->capture) : nullptr;
}

/// Runs `work` and logs `line`, or records both in the capture in progress.
void enqueueOn(Stream *stream, const char *line, std::function<void()> work) {
  if (stream)
    ++stream->work;
  if (auto *capture = captureOf(stream)) {
    logLine("capture g%d: %s", (*capture)->id, line);
    (*capture)->nodes.emplace_back(line, std::move(work));
    return;
  }
  work();
  logLine("%s", line);
}

/// enqueueOn for a CUstream, refusing one whose capture was invalidated.
CUresult enqueue(const void *stream, const char *line,
                 std::function<void()> work) {
  if (auto *capture = captureOf(stream); capture && (*capture)->invalidated) {
    logLine("capture g%d: %s capture-invalidated", (*capture)->id, line);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  enqueueOn(stubStream(stream), line, std::move(work));
  return CUDA_SUCCESS;
}

/// DS_STUB_CUDA_MISALIGN, read once.
size_t deviceMisalignment() {
  static const size_t shift = static_cast<size_t>(
      std::clamp(envInt("DS_STUB_CUDA_MISALIGN", 0), 0, 255));
  return shift;
}

/// Frees what allocate(bytes, shift) returned.
void release(void *p, size_t shift) {
  std::free(static_cast<char *>(p) - shift);
}

void *allocate(size_t bytes, size_t shift = 0) {
  // 256-byte aligned, as the driver's allocations are. Zeroed, so that
  // what the do-nothing kernels leave behind is deterministic (a loss of
  // 0, not whatever the heap held: the runners stop on a non-finite loss).
  // With DS_STUB_CUDA_POISON set, all ones instead (NaN as a float, -1 as
  // an integer): emulated kernels that read memory nothing wrote, which a
  // GPU leaves undefined, then show it rather than reading zeros.
  size_t rounded = (bytes + shift + 255) / 256 * 256;
  void *p = std::aligned_alloc(256, rounded);
  if (!p)
    return nullptr;
  std::memset(p, std::getenv("DS_STUB_CUDA_POISON") ? 0xff : 0, rounded);
  return static_cast<char *>(p) + shift;
}

CUresult allocateDevice(const char *fn, CUdeviceptr *ptr, size_t bytes,
                        const void *stream) {
  char streamBuf[32];
  if (failing(fn))
    return injected(fn, CUDA_ERROR_OUT_OF_MEMORY);
  if (!ptr || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  auto *capture = captureOf(stream);
  if (capture && (*capture)->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  void *p = allocate(bytes, deviceMisalignment());
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().device[reinterpret_cast<uintptr_t>(p)] = bytes;
  }
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  if (std::strcmp(fn, "cuMemAllocAsync") != 0) {
    logLine("%s bytes=%zu ptr=%p", fn, bytes, p);
    return CUDA_SUCCESS;
  }
  char line[160];
  std::snprintf(line, sizeof(line), "%s bytes=%zu ptr=%p stream=%s", fn, bytes,
                p, STREAM(stream));
  if (!capture) {
    logLine("%s", line);
    return CUDA_SUCCESS;
  }
  // The graph owns the memory; each launch "allocates" it anew, so with
  // DS_STUB_CUDA_POISON it is poisoned again, as fresh memory would be.
  (*capture)->memory.push_back(p);
  size_t rounded = (bytes + 255) / 256 * 256;
  enqueueOn(stubStream(stream), line, [p, rounded] {
    if (std::getenv("DS_STUB_CUDA_POISON"))
      std::memset(p, 0xff, rounded);
  });
  return CUDA_SUCCESS;
}

CUresult freeDevice(const char *fn, CUdeviceptr ptr, const void *stream) {
  char streamBuf[32];
  if (failing(fn))
    return injected(fn, CUDA_ERROR_INVALID_VALUE);
  if (auto *capture = captureOf(stream)) {
    // Only the capture's own allocations: their memory stays with the
    // graph, and the node does nothing when it runs.
    GraphData &g = **capture;
    bool own = false;
    for (void *p : g.memory)
      own |= reinterpret_cast<CUdeviceptr>(p) == ptr;
    char line[160];
    std::snprintf(line, sizeof(line), "%s ptr=%p stream=%s%s", fn,
                  reinterpret_cast<void *>(ptr), STREAM(stream),
                  own ? "" : " not-allocated-in-this-capture");
    if (!own) {
      logLine("capture g%d: %s", g.id, line);
      return CUDA_ERROR_INVALID_VALUE;
    }
    return enqueue(stream, line, [] {});
  }
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto it = state().device.find(ptr);
    if (it == state().device.end()) {
      logLine("%s ptr=%p unknown-pointer", fn, reinterpret_cast<void *>(ptr));
      return CUDA_ERROR_INVALID_VALUE;
    }
    bytes = it->second;
    state().device.erase(it);
  }
  release(reinterpret_cast<void *>(ptr), deviceMisalignment());
  if (std::strcmp(fn, "cuMemFreeAsync") == 0)
    logLine("%s ptr=%p bytes=%zu stream=%s", fn, reinterpret_cast<void *>(ptr),
            bytes, STREAM(stream));
  else
    logLine("%s ptr=%p bytes=%zu", fn, reinterpret_cast<void *>(ptr), bytes);
  return CUDA_SUCCESS;
}

/// The size of a GPU image, for the log: an ELF (cubin) ends with its
/// section header table, a fatbin header states its size, PTX is text.
size_t imageBytes(const void *image, const char *&kind) {
  auto *bytes = static_cast<const unsigned char *>(image);
  if (std::memcmp(bytes,
                  "\x7f"
                  "ELF",
                  4) == 0 &&
      bytes[4] == 2) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    std::memcpy(&shoff, bytes + 0x28, 8);
    std::memcpy(&shentsize, bytes + 0x3a, 2);
    std::memcpy(&shnum, bytes + 0x3c, 2);
    kind = "elf";
    return shoff + size_t(shentsize) * shnum;
  }
  uint32_t magic;
  std::memcpy(&magic, bytes, 4);
  if (magic == 0xba55ed50) {
    uint16_t headerSize;
    uint64_t fatSize;
    std::memcpy(&headerSize, bytes + 6, 2);
    std::memcpy(&fatSize, bytes + 8, 8);
    kind = "fatbin";
    return headerSize + fatSize;
  }
  kind = "ptx";
  return std::strlen(static_cast<const char *>(image)) + 1;
}

/// Writes the exit report for leak checks.
__attribute__((destructor)) void reportAtExit() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  size_t bytes = 0;
  for (const auto &entry : s.device)
    bytes += entry.second;
  logLine("stub-exit live-allocations=%zu live-bytes=%zu "
          "live-host-allocations=%zu live-streams=%zu live-events=%zu "
          "live-modules=%zu registered-host-ranges=%zu retained-contexts=%d "
          "live-graphs=%zu live-graph-execs=%zu",
          s.device.size(), bytes, s.host.size(), s.streams.size(),
          s.events.size(), s.modules.size(), s.registered.size(),
          s.retainedContexts, s.graphs.size(), s.execs.size());
}

/// The one context of the stub device.
int contextStorage;
CUcontext theContext = reinterpret_cast<CUcontext>(&contextStorage);
int poolStorage;

} // namespace

//===----------------------------------------------------------------------===//
// Errors, initialisation, devices, contexts
//===----------------------------------------------------------------------===//

CUresult cuGetErrorName(CUresult error, const char **pStr) {
  switch (error) {
  case CUDA_SUCCESS:
    *pStr = "CUDA_SUCCESS";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_VALUE:
    *pStr = "CUDA_ERROR_INVALID_VALUE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *pStr = "CUDA_ERROR_OUT_OF_MEMORY";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NO_DEVICE:
    *pStr = "CUDA_ERROR_NO_DEVICE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_DEVICE:
    *pStr = "CUDA_ERROR_INVALID_DEVICE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_PTX:
    *pStr = "CUDA_ERROR_INVALID_PTX";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_FOUND:
    *pStr = "CUDA_ERROR_NOT_FOUND";
    return CUDA_SUCCESS;
  case CUDA_ERROR_LAUNCH_FAILED:
    *pStr = "CUDA_ERROR_LAUNCH_FAILED";
    return CUDA_SUCCESS;
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    *pStr = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    return CUDA_SUCCESS;
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    *pStr = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    return CUDA_SUCCESS;
  case CUDA_ERROR_ILLEGAL_STATE:
    *pStr = "CUDA_ERROR_ILLEGAL_STATE";
    return CUDA_SUCCESS;
  default:
    *pStr = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult error, const char **pStr) {
  const char *name = nullptr;
  if (cuGetErrorName(error, &name) != CUDA_SUCCESS)
    return CUDA_ERROR_INVALID_VALUE;
  *pStr = "stub error text";
  return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags) {
  logLine("cuInit flags=%u", flags);
  if (failing("cuInit"))
    return injected("cuInit", CUDA_ERROR_NO_DEVICE);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  *count = envInt("DS_STUB_CUDA_DEVICES", 1);
  logLine("cuDeviceGetCount count=%d", *count);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  logLine("cuDeviceGet ordinal=%d", ordinal);
  if (ordinal < 0 || ordinal >= envInt("DS_STUB_CUDA_DEVICES", 1))
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  std::snprintf(name, len, "Stub CUDA device %d (sm_%d)", dev,
                envInt("DS_STUB_CUDA_CC", 90));
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
                              CUdevice dev) {
  (void)dev;
  int cc = envInt("DS_STUB_CUDA_CC", 90);
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *pi = cc / 10;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *pi = cc % 10;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *pi = 227 * 1024; // Hopper's.
    return CUDA_SUCCESS;
  default:
    logLine("cuDeviceGetAttribute unsupported-attribute=%d",
            static_cast<int>(attrib));
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().retainedContexts;
  *pctx = theContext;
  logLine("cuDevicePrimaryCtxRetain device=%d", dev);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  std::lock_guard<std::mutex> lock(state().mutex);
  --state().retainedContexts;
  logLine("cuDevicePrimaryCtxRelease device=%d", dev);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  logLine("cuCtxSetCurrent ctx=%s", ctx == theContext ? "primary" : "other");
  return ctx == theContext || !ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags) {
  auto *s = new Stream{kStreamMagic, 0};
  s->enqueue = enqueueOn;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    s->id = state().nextId++;
    state().streams.insert(s);
  }
  *phStream = reinterpret_cast<CUstream>(s);
  logLine("cuStreamCreate stream=s%d flags=%u", s->id, flags);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream) {
  char streamBuf[32];
  logLine("cuStreamDestroy stream=%s", STREAM(hStream));
  auto *s = reinterpret_cast<Stream *>(hStream);
  std::lock_guard<std::mutex> lock(state().mutex);
  if (s && s->capture) {
    logLine("cuStreamDestroy capture-in-progress");
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  if (!state().streams.erase(s))
    return CUDA_ERROR_INVALID_VALUE;
  delete s;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream) {
  char streamBuf[32];
  logLine("cuStreamSynchronize stream=%s", STREAM(hStream));
  if (auto *capture = captureOf(hStream)) {
    // As the driver: the capture is invalidated, and ending it fails.
    (*capture)->invalidated = true;
    logLine("capture g%d: invalidated by cuStreamSynchronize", (*capture)->id);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (failing("cuStreamSynchronize"))
    return injected("cuStreamSynchronize", CUDA_ERROR_LAUNCH_FAILED);
  Stream *s = stubStream(hStream);
  if (s)
    blockWhileHanging(s->hang);
  landCopies(s, UINT64_MAX);
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                           unsigned int flags) {
  char streamBuf[32];
  auto *e = reinterpret_cast<Event *>(hEvent);
  logLine("cuStreamWaitEvent stream=%s event=e%d flags=%u", STREAM(hStream),
          e->id, flags);
  Stream *s = stubStream(hStream);
  auto *capture = captureOf(hStream);
  std::shared_ptr<GraphData> from = e->capturedIn.lock();
  if (e->captured && from && !from->ended) {
    if (!capture) {
      // A fork: the stream joins the event's capture.
      if (!s)
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      s->capture = new std::shared_ptr<GraphData>(from);
      from->forks.push_back(s);
      logLine("capture g%d: stream %s joins", from->id, STREAM(hStream));
    } else if (capture->get() != from.get()) {
      logLine("capture g%d: waits on an event of capture g%d", (*capture)->id,
              from->id);
      return CUDA_ERROR_STREAM_CAPTURE_MERGE;
    } else if (e->recordedOn && e->recordedOn != s) {
      // A join: what the event's stream did up to it is waited for.
      uint64_t &at = from->joinedBackAt[e->recordedOn];
      at = std::max(at, e->workThen);
    }
  } else if (capture) {
    logLine("capture g%d: waits on event e%d, recorded outside the capture",
            (*capture)->id, e->id);
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  // Waiting on a hung collective hangs the stream too.
  if (s && hanging(e->hang))
    s->hang = e->hang;
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int flags) {
  auto *e = new Event();
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    e->id = state().nextId++;
    state().events.insert(e);
  }
  *phEvent = reinterpret_cast<CUevent>(e);
  logLine("cuEventCreate event=e%d flags=%u", e->id, flags);
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent) {
  auto *e = reinterpret_cast<Event *>(hEvent);
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().events.erase(e)) {
    logLine("cuEventDestroy unknown-event");
    return CUDA_ERROR_INVALID_VALUE;
  }
  logLine("cuEventDestroy event=e%d", e->id);
  delete e;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  char streamBuf[32];
  static std::atomic<uint64_t> clock{0};
  auto *e = reinterpret_cast<Event *>(hEvent);
  e->recordedAt = ++clock;
  Stream *s = stubStream(hStream);
  auto *capture = captureOf(hStream);
  e->captured = capture != nullptr;
  e->capturedIn = capture ? *capture : nullptr;
  e->recordedOn = s;
  e->workThen = s ? s->work : 0;
  e->hang = s && hanging(s->hang) ? s->hang : nullptr;
  logLine("cuEventRecord event=e%d stream=%s",
          reinterpret_cast<Event *>(hEvent)->id, STREAM(hStream));
  return CUDA_SUCCESS;
}

/// The stub's clock: a microsecond per record between the two events.
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart,
                            CUevent hEnd) {
  auto *start = reinterpret_cast<Event *>(hStart);
  auto *end = reinterpret_cast<Event *>(hEnd);
  if (!pMilliseconds || !start || !end || !start->recordedAt ||
      !end->recordedAt)
    return CUDA_ERROR_INVALID_HANDLE;
  *pMilliseconds = 1e-3f * float(end->recordedAt - start->recordedAt);
  logLine("cuEventElapsedTime start=e%d end=e%d", start->id, end->id);
  return CUDA_SUCCESS;
}

/// Work runs as it is enqueued: every recorded event has happened, but
/// for one recorded after a hung collective.
CUresult cuEventQuery(CUevent hEvent) {
  auto *e = reinterpret_cast<Event *>(hEvent);
  if (e->captured) {
    logLine("cuEventQuery event=e%d captured-event", e->id);
    return CUDA_ERROR_CAPTURED_EVENT;
  }
  bool pending = hanging(e->hang);
  logLine("cuEventQuery event=e%d%s", e->id, pending ? " not-ready" : "");
  if (pending)
    return CUDA_ERROR_NOT_READY;
  if (e->recordedOn)
    landCopies(e->recordedOn, e->workThen);
  return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent hEvent) {
  auto *e = reinterpret_cast<Event *>(hEvent);
  if (e->captured) {
    logLine("cuEventSynchronize event=e%d captured-event", e->id);
    return CUDA_ERROR_CAPTURED_EVENT;
  }
  logLine("cuEventSynchronize event=e%d", e->id);
  blockWhileHanging(e->hang);
  if (e->recordedOn)
    landCopies(e->recordedOn, e->workThen);
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  return allocateDevice("cuMemAlloc", dptr, bytesize, nullptr);
}

CUresult cuMemFree(CUdeviceptr dptr) {
  return freeDevice("cuMemFree", dptr, nullptr);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return allocateDevice("cuMemAllocAsync", dptr, bytesize, hStream);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return freeDevice("cuMemFreeAsync", dptr, hStream);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                           unsigned int flags) {
  (void)flags;
  return allocateDevice("cuMemAllocManaged", dptr, bytesize, nullptr);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  if (failing("cuMemHostAlloc"))
    return injected("cuMemHostAlloc", CUDA_ERROR_OUT_OF_MEMORY);
  void *p = allocate(bytesize);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().host[p] = bytesize;
  }
  *pp = p;
  logLine("cuMemHostAlloc bytes=%zu ptr=%p flags=%u", bytesize, p, Flags);
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p) {
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto it = state().host.find(p);
    if (it == state().host.end()) {
      logLine("cuMemFreeHost ptr=%p unknown-pointer", p);
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Copies into it that never landed go with it.
    char *first = static_cast<char *>(p), *end = first + it->second;
    auto &late = state().lateCopies;
    late.erase(
        std::remove_if(late.begin(), late.end(),
                       [&](auto &c) { return c.dst >= first && c.dst < end; }),
        late.end());
    state().host.erase(it);
  }
  std::free(p);
  logLine("cuMemFreeHost ptr=%p", p);
  return CUDA_SUCCESS;
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().registered.insert(p).second)
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  logLine("cuMemHostRegister ptr=%p bytes=%zu flags=%u", p, bytesize, Flags);
  return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *p) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().registered.erase(p))
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  logLine("cuMemHostUnregister ptr=%p", p);
  return CUDA_SUCCESS;
}

/// The stub's device memory is host memory, and it says so (unless
/// DS_STUB_CUDA_DEVICE_MEMORY=device, which plays a real GPU): a step whose
/// kernels are emulated on the host (ds-gpu-pipeline{emulate-kernels})
/// checks this before it runs.
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                               CUdeviceptr ptr) {
  if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE || !data)
    return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().device.count(ptr))
      return CUDA_ERROR_INVALID_VALUE;
  }
  const char *kind = std::getenv("DS_STUB_CUDA_DEVICE_MEMORY");
  *static_cast<unsigned int *>(data) = kind && std::strcmp(kind, "device") == 0
                                           ? CU_MEMORYTYPE_DEVICE
                                           : CU_MEMORYTYPE_HOST;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                       CUstream hStream) {
  char streamBuf[32], line[128];
  std::snprintf(line, sizeof(line), "cuMemcpyAsync bytes=%zu stream=%s",
                ByteCount, STREAM(hStream));
  return enqueue(hStream, line, [=] {
    std::memcpy(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src),
                ByteCount);
  });
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost,
                           size_t ByteCount, CUstream hStream) {
  char streamBuf[32], line[128];
  std::snprintf(line, sizeof(line), "cuMemcpyHtoDAsync bytes=%zu stream=%s",
                ByteCount, STREAM(hStream));
  return enqueue(hStream, line, [=] {
    std::memcpy(reinterpret_cast<void *>(dstDevice), srcHost, ByteCount);
  });
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice,
                           size_t ByteCount, CUstream hStream) {
  char streamBuf[32], line[128];
  bool pinned;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    pinned = inPinnedLocked(dstHost, ByteCount);
  }
  std::snprintf(line, sizeof(line), "cuMemcpyDtoHAsync bytes=%zu stream=%s%s",
                ByteCount, STREAM(hStream), pinned ? " pinned" : "");
  Stream *s = stubStream(hStream);
  if (lazyPinned() && pinned)
    return enqueue(hStream, line, [=] {
      // The values as the stream has them now; the host sees them later.
      // Replayed by a graph's launch, the launching stream's copy.
      Stream *on = replayStream ? replayStream : s;
      auto *from = reinterpret_cast<const char *>(srcDevice);
      if (!on) {
        std::memcpy(dstHost, from, ByteCount);
        return;
      }
      std::lock_guard<std::mutex> lock(state().mutex);
      state().lateCopies.push_back({on, on->work, static_cast<char *>(dstHost),
                                    std::vector<char>(from, from + ByteCount)});
    });
  return enqueue(hStream, line, [=] {
    std::memcpy(dstHost, reinterpret_cast<void *>(srcDevice), ByteCount);
  });
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                          CUstream hStream) {
  char streamBuf[32], line[128];
  std::snprintf(line, sizeof(line),
                "cuMemsetD16Async count=%zu value=%u stream=%s", N,
                unsigned(us), STREAM(hStream));
  return enqueue(hStream, line, [=] {
    auto *p = reinterpret_cast<unsigned short *>(dstDevice);
    for (size_t i = 0; i < N; ++i)
      p[i] = us;
  });
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                          CUstream hStream) {
  char streamBuf[32], line[128];
  std::snprintf(line, sizeof(line),
                "cuMemsetD32Async count=%zu value=%u stream=%s", N, ui,
                STREAM(hStream));
  return enqueue(hStream, line, [=] {
    auto *p = reinterpret_cast<unsigned int *>(dstDevice);
    for (size_t i = 0; i < N; ++i)
      p[i] = ui;
  });
}

CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch,
                            unsigned short us, size_t Width, size_t Height,
                            CUstream hStream) {
  char streamBuf[32], line[160];
  std::snprintf(line, sizeof(line),
                "cuMemsetD2D16Async pitch=%zu width=%zu height=%zu value=%u "
                "stream=%s",
                dstPitch, Width, Height, unsigned(us), STREAM(hStream));
  return enqueue(hStream, line, [=] {
    for (size_t row = 0; row < Height; ++row) {
      auto *p = reinterpret_cast<unsigned short *>(dstDevice + row * dstPitch);
      for (size_t i = 0; i < Width; ++i)
        p[i] = us;
    }
  });
}

CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch,
                            unsigned int ui, size_t Width, size_t Height,
                            CUstream hStream) {
  char streamBuf[32], line[160];
  std::snprintf(line, sizeof(line),
                "cuMemsetD2D32Async pitch=%zu width=%zu height=%zu value=%u "
                "stream=%s",
                dstPitch, Width, Height, ui, STREAM(hStream));
  return enqueue(hStream, line, [=] {
    for (size_t row = 0; row < Height; ++row) {
      auto *p = reinterpret_cast<unsigned int *>(dstDevice + row * dstPitch);
      for (size_t i = 0; i < Width; ++i)
        p[i] = ui;
    }
  });
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
  *pool_out = reinterpret_cast<CUmemoryPool>(&poolStorage);
  logLine("cuDeviceGetDefaultMemPool device=%d", dev);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                               void *value) {
  (void)pool;
  if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
    logLine("cuMemPoolSetAttribute release-threshold=%llu",
            static_cast<unsigned long long>(*static_cast<cuuint64_t *>(value)));
  else
    logLine("cuMemPoolSetAttribute attribute=%d", static_cast<int>(attr));
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                            unsigned int numOptions, CUjit_option *options,
                            void **optionValues) {
  char *logBuffer = nullptr;
  size_t logSize = 0;
  int optLevel = -1;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
      logBuffer = static_cast<char *>(optionValues[i]);
    else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      logSize = reinterpret_cast<uintptr_t>(optionValues[i]);
    else if (options[i] == CU_JIT_OPTIMIZATION_LEVEL)
      optLevel = static_cast<int>(reinterpret_cast<uintptr_t>(optionValues[i]));
  }
  if (!image)
    return CUDA_ERROR_INVALID_VALUE;
  const char *kind = "";
  size_t bytes = imageBytes(image, kind);
  if (failing("cuModuleLoadDataEx")) {
    if (logBuffer && logSize)
      std::snprintf(logBuffer, logSize, "stub ptxas: line 1: bad image");
    return injected("cuModuleLoadDataEx", CUDA_ERROR_INVALID_PTX);
  }
  auto *m = new Module{0};
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    m->id = state().nextId++;
    state().modules.insert(m);
  }
  *module = reinterpret_cast<CUmodule>(m);
  logLine("cuModuleLoadData image=%s bytes=%zu opt-level=%d module=m%d", kind,
          bytes, optLevel, m->id);
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod) {
  auto *m = reinterpret_cast<Module *>(hmod);
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().modules.erase(m))
    return CUDA_ERROR_INVALID_VALUE;
  for (auto it = state().functions.begin(); it != state().functions.end();) {
    if ((*it)->module == m) {
      delete *it;
      it = state().functions.erase(it);
    } else {
      ++it;
    }
  }
  logLine("cuModuleUnload module=m%d", m->id);
  delete m;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod,
                             const char *name) {
  auto *m = reinterpret_cast<Module *>(hmod);
  if (failing("cuModuleGetFunction"))
    return injected("cuModuleGetFunction", CUDA_ERROR_NOT_FOUND);
  auto *f = new Function{name, m};
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().functions.insert(f);
  }
  *hfunc = reinterpret_cast<CUfunction>(f);
  logLine("cuModuleGetFunction module=m%d name=%s", m->id, name);
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib,
                            int value) {
  logLine("cuFuncSetAttribute fn=%s attribute=%d value=%d",
          reinterpret_cast<Function *>(hfunc)->name.c_str(),
          static_cast<int>(attrib), value);
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX,
                        unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                        CUstream hStream, void **kernelParams, void **extra) {
  char streamBuf[32];
  (void)kernelParams;
  (void)extra;
  if (failing("cuLaunchKernel"))
    return injected("cuLaunchKernel", CUDA_ERROR_LAUNCH_FAILED);
  char line[512];
  std::snprintf(line, sizeof(line),
                "cuLaunchKernel fn=%s grid=%u,%u,%u block=%u,%u,%u smem=%u "
                "stream=%s",
                reinterpret_cast<Function *>(f)->name.c_str(), gridDimX,
                gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                sharedMemBytes, STREAM(hStream));
  return enqueue(hStream, line, [] {});
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                          void **kernelParams, void **extra) {
  char streamBuf[32];
  (void)kernelParams;
  (void)extra;
  unsigned cluster[3] = {1, 1, 1};
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster[0] = config->attrs[i].value.clusterDim.x;
      cluster[1] = config->attrs[i].value.clusterDim.y;
      cluster[2] = config->attrs[i].value.clusterDim.z;
    }
  char line[512];
  std::snprintf(line, sizeof(line),
                "cuLaunchKernelEx fn=%s cluster=%u,%u,%u grid=%u,%u,%u "
                "block=%u,%u,%u smem=%u stream=%s",
                reinterpret_cast<Function *>(f)->name.c_str(), cluster[0],
                cluster[1], cluster[2], config->gridDimX, config->gridDimY,
                config->gridDimZ, config->blockDimX, config->blockDimY,
                config->blockDimZ, config->sharedMemBytes,
                STREAM(config->hStream));
  return enqueue(config->hStream, line, [] {});
}

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

CUresult cuStreamBeginCapture(CUstream hStream, CUstreamCaptureMode mode) {
  char streamBuf[32];
  Stream *s = stubStream(hStream);
  if (failing("cuStreamBeginCapture"))
    return injected("cuStreamBeginCapture", CUDA_ERROR_ILLEGAL_STATE);
  // The legacy default stream cannot be captured; nor can a stream twice.
  if (!s || s->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  auto data = std::make_shared<GraphData>();
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    data->id = state().nextId++;
  }
  s->capture = new std::shared_ptr<GraphData>(std::move(data));
  logLine("cuStreamBeginCapture stream=%s mode=%s graph=g%d", STREAM(hStream),
          mode == CU_STREAM_CAPTURE_MODE_RELAXED  ? "relaxed"
          : mode == CU_STREAM_CAPTURE_MODE_GLOBAL ? "global"
                                                  : "thread-local",
          (*captureOf(hStream))->id);
  return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  char streamBuf[32];
  auto *capture = captureOf(hStream);
  if (!capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  // Only the stream that began the capture ends it.
  if (std::find((*capture)->forks.begin(), (*capture)->forks.end(),
                stubStream(hStream)) != (*capture)->forks.end())
    return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  std::shared_ptr<GraphData> data = std::move(*capture);
  delete capture;
  stubStream(hStream)->capture = nullptr;
  *phGraph = nullptr;
  data->ended = true;
  bool unjoined = false;
  for (Stream *fork : data->forks) {
    delete static_cast<std::shared_ptr<GraphData> *>(fork->capture);
    fork->capture = nullptr;
    auto back = data->joinedBackAt.find(fork);
    if (back == data->joinedBackAt.end() || back->second < fork->work) {
      logLine("capture g%d: stream s%d not joined back", data->id, fork->id);
      unjoined = true;
    }
  }
  logLine("cuStreamEndCapture stream=%s graph=g%d nodes=%zu%s", STREAM(hStream),
          data->id, data->nodes.size(),
          data->invalidated ? " invalidated" : "");
  if (data->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (unjoined)
    return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  auto *graph = new Graph{std::move(data)};
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    state().graphs.insert(graph);
  }
  *phGraph = reinterpret_cast<CUgraph>(graph);
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags) {
  auto *graph = reinterpret_cast<Graph *>(hGraph);
  if (failing("cuGraphInstantiate"))
    return injected("cuGraphInstantiate", CUDA_ERROR_INVALID_VALUE);
  auto *exec = new GraphExec{0, graph->data};
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().graphs.count(graph)) {
      delete exec;
      return CUDA_ERROR_INVALID_VALUE;
    }
    exec->id = state().nextId++;
    state().execs.insert(exec);
  }
  *phGraphExec = reinterpret_cast<CUgraphExec>(exec);
  logLine("cuGraphInstantiate graph=g%d exec=x%d nodes=%zu flags=%llu",
          graph->data->id, exec->id, graph->data->nodes.size(), flags);
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  char streamBuf[32];
  auto *exec = reinterpret_cast<GraphExec *>(hGraphExec);
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().execs.count(exec))
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (failing("cuGraphLaunch"))
    return injected("cuGraphLaunch", CUDA_ERROR_LAUNCH_FAILED);
  if (captureOf(hStream))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // not nested here
  // The launch is one piece of the stream's work: an event recorded after
  // it covers the copies it replays.
  Stream *launching = stubStream(hStream);
  if (launching)
    ++launching->work;
  replayStream = launching;
  for (auto &node : exec->data->nodes)
    node.second();
  replayStream = nullptr;
  // A collective hung on a forked stream (StubNccl.cpp) hangs the launch:
  // what the launching stream does after it waits for the whole graph.
  if (Stream *launch = launching)
    for (Stream *fork : exec->data->forks)
      if (hanging(fork->hang))
        launch->hang = fork->hang;
  logLine("cuGraphLaunch exec=x%d graph=g%d nodes=%zu stream=%s", exec->id,
          exec->data->id, exec->data->nodes.size(), STREAM(hStream));
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  auto *exec = reinterpret_cast<GraphExec *>(hGraphExec);
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().execs.erase(exec))
      return CUDA_ERROR_INVALID_VALUE;
  }
  logLine("cuGraphExecDestroy exec=x%d", exec->id);
  delete exec; // outside the lock: the graph's memory may go with it
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  auto *graph = reinterpret_cast<Graph *>(hGraph);
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().graphs.erase(graph))
      return CUDA_ERROR_INVALID_VALUE;
  }
  logLine("cuGraphDestroy graph=g%d", graph->data->id);
  delete graph;
  return CUDA_SUCCESS;
}

//===- Context.cpp - Initialisation, the step stream and events -----------===//
//
// The session of the CUDA backend: the device picked once per process, its
// primary context (shared with cuBLASLt and any CUDA runtime library in the
// process, which all use the primary context) and the step stream every
// operation is enqueued on. Readers take the session without a lock: it is
// published once initialisation is complete and only dsrt_cuda_shutdown,
// which must not race with other calls, takes it down.
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "ds/Runtime/ds_runtime_cuda.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

/// A retained primary context, released on destruction.
class PrimaryContext {
public:
  PrimaryContext() = default;
  PrimaryContext(const PrimaryContext &) = delete;
  PrimaryContext &operator=(const PrimaryContext &) = delete;
  ~PrimaryContext() {
    if (context)
      (void)DS_CU(cuDevicePrimaryCtxRelease, device);
  }

  Status retain(CUdevice dev) {
    DS_RETURN_IF_ERROR(DS_CU(cuDevicePrimaryCtxRetain, &context, dev));
    device = dev;
    return Status::success();
  }
  CUcontext get() const { return context; }

private:
  CUdevice device = 0;
  CUcontext context = nullptr;
};

/// Everything dsrt_cuda_init sets up. Members are destroyed in reverse
/// order: the stream before the context it belongs to.
struct Session {
  int ordinal = 0;
  CUdevice device = 0;
  int computeCapability = 0;
  int maxSharedOptin = 0;
  char name[256] = {0};
  /// Distinguishes sessions, for the per-thread "context is current" flag.
  uint64_t generation = 0;
  PrimaryContext context;
  StreamHandle stream;
};

std::mutex initMutex;
/// Not a smart pointer on purpose: a session left at exit must not be torn
/// down by a static destructor, which could run after the driver's own
/// teardown. dsrt_cuda_shutdown deletes it.
std::atomic<Session *> session{nullptr};
uint64_t nextGeneration = 1;
/// The device mgpuSetDefaultDevice asked for before initialisation, or -1.
std::atomic<int> requestedDevice{-1};
/// The generation whose context is current on this thread.
thread_local uint64_t currentGeneration = 0;

/// This process's rank among the processes of its machine, as MPI
/// launchers (Open MPI, MPICH, Slurm) and torchrun publish it, or -1.
int localRank() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char *env = std::getenv(name); env && *env) {
      char *end = nullptr;
      errno = 0;
      long value = std::strtol(env, &end, 10);
      if (!errno && !*end && value >= 0 && value <= INT32_MAX)
        return static_cast<int>(value);
    }
  return -1;
}

/// The device ordinal to use: mgpuSetDefaultDevice's, else DS_CUDA_DEVICE,
/// else the local rank modulo the devices (one GPU per rank of a data- or
/// pipeline-parallel job, as DDP's LOCAL_RANK convention), else 0.
Status pickOrdinal(int count, int &ordinal) {
  int requested = requestedDevice.load();
  const char *origin = "mgpuSetDefaultDevice";
  if (requested < 0) {
    origin = "DS_CUDA_DEVICE";
    requested = 0;
    const char *env = std::getenv("DS_CUDA_DEVICE");
    if ((!env || !*env) && localRank() >= 0)
      requested = localRank() % count;
    if (env && *env) {
      char *end = nullptr;
      errno = 0;
      long value = std::strtol(env, &end, 10);
      if (errno || *end || value < 0 || value > INT32_MAX)
        return DS_ERROR("no CUDA device: DS_CUDA_DEVICE='%s' is not a device "
                        "number",
                        env);
      requested = static_cast<int>(value);
    }
  }
  if (requested >= count)
    return DS_ERROR("no CUDA device: device %d requested (%s) but the machine "
                    "has %d CUDA device%s",
                    requested, origin, count, count == 1 ? "" : "s");
  ordinal = requested;
  return Status::success();
}

/// Steps 2-8 of dsrt_cuda_init, into a fresh session.
Status startSession(Session &s) {
  const DriverApi &api = driver();
  if (CUresult result = api.cuInit(0); result != CUDA_SUCCESS) {
    char text[256];
    formatResult(result, text, sizeof(text));
    return DS_ERROR("no CUDA device: cuInit failed: %s", text);
  }
  int count = 0;
  if (CUresult result = api.cuDeviceGetCount(&count); result != CUDA_SUCCESS) {
    char text[256];
    formatResult(result, text, sizeof(text));
    return DS_ERROR("no CUDA device: cuDeviceGetCount failed: %s", text);
  }
  if (count <= 0)
    return DS_ERROR("no CUDA device: the machine has 0 CUDA devices");
  DS_RETURN_IF_ERROR(pickOrdinal(count, s.ordinal));

  DS_RETURN_IF_ERROR(DS_CU(cuDeviceGet, &s.device, s.ordinal));
  DS_RETURN_IF_ERROR(
      DS_CU(cuDeviceGetName, s.name, sizeof(s.name) - 1, s.device));
  int major = 0, minor = 0;
  DS_RETURN_IF_ERROR(DS_CU(cuDeviceGetAttribute, &major,
                           CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                           s.device));
  DS_RETURN_IF_ERROR(DS_CU(cuDeviceGetAttribute, &minor,
                           CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                           s.device));
  s.computeCapability = 10 * major + minor;
  DS_RETURN_IF_ERROR(
      DS_CU(cuDeviceGetAttribute, &s.maxSharedOptin,
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, s.device));

  DS_RETURN_IF_ERROR(s.context.retain(s.device));
  DS_RETURN_IF_ERROR(DS_CU(cuCtxSetCurrent, s.context.get()));
  // Non-blocking: the step stream never waits for the legacy default stream
  // that other code in the process may use for synchronous calls.
  CUstream stream = nullptr;
  DS_RETURN_IF_ERROR(DS_CU(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING));
  s.stream.reset(stream);

  // cuMemAllocAsync draws from the device's default pool, which by default
  // returns freed memory to the driver at every synchronisation; a step that
  // allocates its temporaries and synchronises once would then pay for
  // fresh allocations every step. Keep it all for reuse.
  CUmemoryPool pool = nullptr;
  DS_RETURN_IF_ERROR(DS_CU(cuDeviceGetDefaultMemPool, &pool, s.device));
  cuuint64_t keepAll = UINT64_MAX;
  DS_RETURN_IF_ERROR(DS_CU(cuMemPoolSetAttribute, pool,
                           CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keepAll));
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Internal interface (Context.h)
//===----------------------------------------------------------------------===//

Status dsrt::cuda::ensureReady() {
  Session *s = session.load(std::memory_order_acquire);
  if (!s) {
    if (dsrt_cuda_init() != 0)
      return Status::failure();
    s = session.load(std::memory_order_acquire);
  }
  if (currentGeneration != s->generation) {
    DS_RETURN_IF_ERROR(DS_CU(cuCtxSetCurrent, s->context.get()));
    currentGeneration = s->generation;
  }
  return Status::success();
}

CUstream dsrt::cuda::stepStream() {
  return session.load(std::memory_order_acquire)->stream.get();
}

int dsrt::cuda::computeCapability() {
  return session.load(std::memory_order_acquire)->computeCapability;
}

int dsrt::cuda::maxSharedMemoryOptin() {
  return session.load(std::memory_order_acquire)->maxSharedOptin;
}

Status dsrt::cuda::selectDevice(int device) {
  if (device < 0)
    return DS_ERROR("mgpuSetDefaultDevice(%d): not a device number", device);
  std::lock_guard<std::mutex> lock(initMutex);
  Session *s = session.load(std::memory_order_acquire);
  if (!s) {
    requestedDevice.store(device);
    return Status::success();
  }
  if (s->ordinal != device)
    return DS_ERROR("mgpuSetDefaultDevice(%d): the runtime already drives "
                    "device %d and uses one device per process",
                    device, s->ordinal);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// C ABI
//===----------------------------------------------------------------------===//

int dsrt_cuda_init(void) {
  if (session.load(std::memory_order_acquire))
    return 0;
  std::lock_guard<std::mutex> lock(initMutex);
  if (session.load(std::memory_order_relaxed))
    return 0;
  if (loadDriver().failed())
    return -1;
  auto *s = new Session();
  if (startSession(*s).failed()) {
    delete s; // Releases whatever was set up, stream before context.
    return -1;
  }
  s->generation = nextGeneration++;
  currentGeneration = s->generation;
  session.store(s, std::memory_order_release);
  return 0;
}

/// addShutdownHook's hooks (their own mutex: a hook is added while its
/// layer holds its lock, and runs under initMutex). Never destroyed:
/// dsrt_cuda_shutdown also runs at exit, after static destructors.
static std::mutex hooksMutex;
static std::vector<void (*)()> &shutdownHooks() {
  static auto *hooks = new std::vector<void (*)()>;
  return *hooks;
}

void dsrt::cuda::addShutdownHook(void (*hook)()) {
  std::lock_guard<std::mutex> lock(hooksMutex);
  shutdownHooks().push_back(hook);
}

void dsrt_cuda_shutdown(void) {
  std::lock_guard<std::mutex> lock(initMutex);
  Session *s = session.load(std::memory_order_acquire);
  if (!s)
    return;
  // The context must be current for the frees below, whichever thread
  // calls; then nothing may still run when the memory goes.
  if (DS_CU(cuCtxSetCurrent, s->context.get()).failed() ||
      DS_CU(cuStreamSynchronize, s->stream.get()).failed()) {
    // Tear down anyway: the caller is leaving, and the error is recorded.
  }
  abandonCapture();
  std::vector<void (*)()> hooks;
  {
    std::lock_guard<std::mutex> hooksLock(hooksMutex);
    hooks = shutdownHooks();
  }
  for (void (*hook)() : hooks)
    hook();
  shutdownCublasLt();
  forgetKernelFunctions();
  session.store(nullptr, std::memory_order_release);
  delete s;
  currentGeneration = 0;
  requestedDevice.store(-1);
}

int dsrt_cuda_compute_capability(void) {
  Session *s = session.load(std::memory_order_acquire);
  return s ? s->computeCapability : 0;
}

const char *dsrt_cuda_device_name(void) {
  Session *s = session.load(std::memory_order_acquire);
  return s ? s->name : "";
}

int dsrt_cuda_device_memory_is_host(void) {
  if (ensureReady().failed())
    return -1;
  CUdeviceptr probe = 0;
  if (DS_CU(cuMemAlloc, &probe, 256).failed())
    return -1;
  unsigned int type = 0;
  CUresult r = driver().cuPointerGetAttribute(
      &type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, probe);
  if (DS_CU(cuMemFree, probe).failed())
    return -1;
  return r == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST ? 1 : 0;
}

void *dsrt_cuda_stream(void) {
  Session *s = session.load(std::memory_order_acquire);
  return s ? s->stream.get() : nullptr;
}

Counters &dsrt::cuda::processCounters() {
  static Counters c;
  return c;
}

void dsrt_cuda_get_stats(dsrt_cuda_stats *out) {
  if (!out)
    return;
  Counters &c = processCounters();
  out->kernel_launches = c.kernelLaunches.load(std::memory_order_relaxed);
  out->gemms = c.gemms.load(std::memory_order_relaxed);
  out->gemm_flops = double(c.gemmFlops.load(std::memory_order_relaxed));
  out->stream_allocations = c.streamAllocations.load(std::memory_order_relaxed);
  out->waits = c.waits.load(std::memory_order_relaxed);
  out->graph_launches = c.graphLaunches.load(std::memory_order_relaxed);
  out->graph_kernels = c.graphKernels.load(std::memory_order_relaxed);
  out->bytes_to_host = double(c.bytesToHost.load(std::memory_order_relaxed));
  out->bytes_to_device =
      double(c.bytesToDevice.load(std::memory_order_relaxed));
}

void dsrt_cuda_reset_stats(void) {
  Counters &c = processCounters();
  c.kernelLaunches = 0;
  c.gemms = 0;
  c.gemmFlops = 0;
  c.streamAllocations = 0;
  c.waits = 0;
  c.graphLaunches = 0;
  c.graphKernels = 0;
  c.bytesToHost = 0;
  c.bytesToDevice = 0;
}

int dsrt_cuda_synchronize(void) {
  counters().waits.fetch_add(1, std::memory_order_relaxed);
  if (refuseWhileCapturing(
          "dsrt_cuda_synchronize",
          "wait for the stream (the graph has only recorded its work)")
          .failed())
    return -1;
  if (ensureReady().failed() ||
      DS_CU(cuStreamSynchronize, stepStream()).failed())
    return -1;
  return 0;
}

void *dsrt_cuda_event_record(void) {
  if (ensureReady().failed())
    return nullptr;
  CUevent raw = nullptr;
  if (DS_CU(cuEventCreate, &raw, CU_EVENT_DISABLE_TIMING).failed())
    return nullptr;
  EventHandle event(raw);
  if (DS_CU(cuEventRecord, event.get(), stepStream()).failed())
    return nullptr;
  return event.release();
}

int dsrt_cuda_event_wait(void *event) {
  if (!event) {
    (void)DS_ERROR("dsrt_cuda_event_wait: the event is null");
    return -1;
  }
  if (ensureReady().failed())
    return -1;
  EventHandle owned(static_cast<CUevent>(event));
  if (refuseWhileCapturing(
          "dsrt_cuda_event_wait",
          "wait for an event (the graph has only recorded its work)")
          .failed())
    return -1;
  return DS_CU(cuEventSynchronize, owned.get()).failed() ? -1 : 0;
}

//===- CommCuda.cpp - The collectives on device buffers -------------------===//
//
// The _mlir_ciface_dsrt_cuda_* collectives that ds-gpu-pipeline's steps
// call (convert-ds-to-runtime{target=cuda}): the same arguments as the CPU
// collectives of CommCollectives.cpp, in device memory. The uncompressed
// all-reduces and the broadcasts go to NCCL when it serves the process
// (CommNccl.cpp), on the device and without a host wait. The others, and
// all of them without NCCL, are staged: each copies its inputs to host
// memory on the step stream (which waits for the kernels that wrote them),
// runs the CPU collective on the host copies and copies its outputs back
// on the step stream, where the kernels after it find them in order. This
// is how MPI without CUDA support moves device data (Horovod's host
// staging).
//
// What staging keeps of the CPU path: a started all-reduce's exchange still
// runs on the communication thread while the host enqueues the rest of the
// backward pass, so the GPU computes while the network works. What it
// costs: every call waits for the step stream once (the copy to the host),
// so a step with B buckets has B + 2 or so host waits, and graph capture
// cannot contain them: staging while the step stream is captured is an
// error that says so (a step on NCCL alone can run as a graph).
//
//===----------------------------------------------------------------------===//

#include "CommInternal.h"
#include "CommNccl.h"
#include "CommStaging.h"
#include "cuda/Context.h"

#include "ds/Runtime/ds_runtime.h"
#include "ds/Runtime/ds_runtime_cuda.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

using namespace dsrt;

namespace {

template <typename T> struct Memref1 {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
};

/// The elements a rank-1 view spans from its first one, or -1 for a view
/// the CPU collectives would refuse anyway (they then record the error).
template <typename T> int64_t spanElements(const Memref1<T> *m) {
  if (!m || m->sizes[0] < 0 || m->offset < 0 || m->strides[0] < 0)
    return -1;
  if (m->sizes[0] == 0)
    return 0;
  return (m->sizes[0] - 1) * m->strides[0] + 1;
}

/// NCCL's element type of a start or wait on T.
template <typename T> comm::nccl::Element ncclElement() {
  return std::is_same_v<T, double> ? comm::nccl::Element::F64
                                   : comm::nccl::Element::F32;
}

/// A C descriptor of ds_runtime.h (dsrt_memref1_f32/f64) as this file's.
template <typename T, typename D> Memref1<T> *view(D *m) {
  return reinterpret_cast<Memref1<T> *>(m);
}

/// The first element of a view NCCL can take as it is (contiguous, offset
/// and size valid), or null.
template <typename T> T *contiguous(const Memref1<T> *m) {
  if (!m || m->sizes[0] < 0 || m->offset < 0 ||
      (m->strides[0] != 1 && m->sizes[0] > 1) ||
      (!m->aligned && m->sizes[0] > 0))
    return nullptr;
  return m->aligned + m->offset;
}

/// True, with the error recorded, while the step stream is captured: the
/// host cannot take part in a CUDA graph's launches.
bool refusedInCapture() {
  if (!cuda::capturing())
    return false;
  (void)DS_ERROR(
      "dsrt: a collective staged through the host (its buffers copied "
      "to the host for MPI, which waits for the stream) cannot be "
      "captured into a CUDA graph; only NCCL's collectives can (with "
      "NCCL serving the process, outside deterministic mode: the "
      "uncompressed, fp16 and bf16 all-reduces, top-k slots encoded on "
      "the device for a fixed fraction that do not outweigh their bucket "
      "(slots x ranks <= elements), the broadcasts, a pipeline's transfers "
      "and sums over stages); this step cannot run as a graph");
  return true;
}

/// Before a call that may reach MPI from this thread: the staged starts
/// queued before it reach MPI first (CommStaging.h).
void inProgramOrder() { comm::staging::drain(); }

/// A host copy of a device view (contiguous, offset 0) and its descriptor,
/// which the CPU collectives read or write in its place.
template <typename T> struct Staged {
  std::vector<T> host;
  Memref1<T> desc{};
  /// The device view, copied: generated code's descriptors live in its
  /// stack frame, which a PowerSGD start returns from before its wait.
  Memref1<T> device{};
  bool onDevice = false;

  /// Host memory for `device`'s elements; with `read`, their values.
  bool stage(const Memref1<T> *view, bool read) {
    if (refusedInCapture())
      return false;
    int64_t span = spanElements(view);
    if (span < 0) {
      // Hand the bad descriptor on: the CPU collective names what is wrong.
      if (view)
        desc = *view;
      return true;
    }
    device = *view;
    onDevice = true;
    int64_t n = view->sizes[0];
    host.assign(n, T());
    desc = {host.data(), host.data(), 0, {n}, {1}};
    if (!read || n == 0)
      return true;
    const T *first = view->aligned + view->offset;
    if (view->strides[0] == 1)
      return dsrt_cuda_copy_to_host(host.data(), first, n * sizeof(T)) == 0;
    std::vector<T> whole(span);
    if (dsrt_cuda_copy_to_host(whole.data(), first, span * sizeof(T)) != 0)
      return false;
    for (int64_t i = 0; i < n; ++i)
      host[i] = whole[i * view->strides[0]];
    return true;
  }

  /// Copies the host values back into the device view, on the step stream.
  void writeBack() {
    if (!onDevice || host.empty())
      return;
    T *first = device.aligned + device.offset;
    int64_t n = device.sizes[0];
    if (device.strides[0] == 1) {
      dsrt_cuda_copy_to_device(first, host.data(), n * sizeof(T));
      return;
    }
    // A strided output: its span is read, updated and written back whole.
    std::vector<T> whole(spanElements(&device));
    if (dsrt_cuda_copy_to_host(whole.data(), first, whole.size() * sizeof(T)))
      return;
    for (int64_t i = 0; i < n; ++i)
      whole[i * device.strides[0]] = host[i];
    dsrt_cuda_copy_to_device(first, whole.data(), whole.size() * sizeof(T));
  }

  Memref1<T> *get() { return &desc; }
};

/// A device view copied to pinned host memory on the step stream, without
/// a wait: the staging thread reads it once the stream has got there.
template <typename T> struct Copied {
  comm::staging::PinnedBuffer pinned;
  Memref1<T> device{};
  bool onDevice = false;
  Staged<T> host; // what the CPU collective reads, once gathered

  bool copy(const Memref1<T> *view) {
    if (refusedInCapture() || cuda::ensureReady().failed())
      return false;
    int64_t span = spanElements(view);
    if (span < 0) {
      // Hand the bad descriptor on: the CPU collective names what is wrong.
      if (view)
        host.desc = *view;
      return true;
    }
    device = *view;
    onDevice = true;
    size_t bytes = static_cast<size_t>(span) * sizeof(T);
    if (bytes == 0)
      return true;
    if (!pinned.take(bytes) ||
        DS_CU(cuMemcpyDtoHAsync, pinned.data(),
              static_cast<CUdeviceptr>(
                  reinterpret_cast<uintptr_t>(view->aligned + view->offset)),
              bytes, cuda::stepStream())
            .failed())
      return false;
    cuda::countToHost(bytes);
    return true;
  }

  /// On the staging thread, once the copy has happened: the view's
  /// elements in a host vector (or the bad descriptor, handed on).
  Memref1<T> *gather() {
    if (!onDevice)
      return host.get();
    int64_t n = device.sizes[0];
    host.host.resize(n);
    host.desc = {host.host.data(), host.host.data(), 0, {n}, {1}};
    const T *from = static_cast<const T *>(pinned.data());
    for (int64_t i = 0; i < n; ++i)
      host.host[i] = from[i * device.strides[0]];
    return host.get();
  }
};

/// The first `n` values of a start's copied parameters, 0 past the end of
/// the buffer (or for a bad one).
void paramsOf(Copied<double> &params, double *values, int n) {
  params.gather();
  const std::vector<double> &host = params.host.host;
  for (int i = 0; i < n; ++i)
    values[i] = i < int64_t(host.size()) ? host[i] : 0.0;
}

/// A staged start, from its submission to its wait.
struct StagedStart : comm::staging::Job {
  /// At the wait, on the step stream: what the start wrote into host
  /// memory (a residual; PowerSGD's state, which its CPU wait completes,
  /// when the wait's type `f64` is the start's).
  virtual void writeBack(bool f64) = 0;
  /// The bucket's elements when this is an f32 top-k start, whose mean
  /// may come back sparse (dsrt_cuda_allreduce_wait_topk_f32); else -1.
  virtual int64_t topKElements() const { return -1; }
};

/// A bucket's start: the bucket, the residual and the parameters as the
/// step had them, the new residual written on the host by the CPU start
/// and copied to the device at the wait (the lowering reads it after the
/// wait; convert-ds-to-runtime).
template <typename T, typename Start> struct StartJob final : StagedStart {
  Copied<T> grad, residualIn;
  Copied<double> params;
  Staged<T> residualOut;
  int64_t scheme;
  Start cpu;

  StartJob(int64_t scheme, Start cpu) : scheme(scheme), cpu(cpu) {}

  int64_t run() override {
    double p[3];
    paramsOf(params, p, 3);
    if (scheme == DSRT_COMPRESS_NONE) {
      // The step zeroed a non-finite bucket; its probe (NaN then) says so.
      if (std::isnan(p[0]))
        comm::countNonFinite();
      p[0] = 0;
    }
    return cpu(grad.gather(), residualIn.gather(), residualOut.get(), scheme,
               p[0], p[1], p[2]);
  }
  void writeBack(bool) override { residualOut.writeBack(); }
  int64_t topKElements() const override {
    return std::is_same_v<T, float> && scheme == DSRT_COMPRESS_TOPK &&
                   grad.onDevice
               ? grad.device.sizes[0]
               : -1;
  }
};

template <typename T, typename Start> struct PowerSgdJob final : StagedStart {
  Copied<T> grad, stateIn;
  Copied<int64_t> shapes;
  Copied<double> params;
  Staged<T> stateOut; // lives until the wait, whose CPU call writes it
  Start cpu;

  explicit PowerSgdJob(Start cpu) : cpu(cpu) {}

  int64_t run() override {
    // [rank, active], converted as the CPU lowering does (arith.fptosi).
    double p[2];
    paramsOf(params, p, 2);
    return cpu(grad.gather(), stateIn.gather(), stateOut.get(),
               reinterpret_cast<dsrt_memref1_i64 *>(shapes.gather()),
               static_cast<int64_t>(p[0]), static_cast<int64_t>(p[1]));
  }
  // A handle waited with the other type's wait is consumed without its
  // state written, as on the CPU.
  void writeBack(bool f64) override {
    if (f64 == std::is_same_v<T, double>)
      stateOut.writeBack();
  }
};

/// A three-tier start the step encoded on the device (DeviceEncoders.h in
/// the compiler): its codes and scalars, and nothing to write back (the
/// step computed the residual).
struct ThreeTierCodesJob final : StagedStart {
  Copied<uint16_t> codes;
  Copied<float> scalars;

  int64_t run() override {
    Memref1<uint16_t> *c = codes.gather();
    Memref1<float> *s = scalars.gather();
    if (!codes.onDevice || !scalars.onDevice || s->sizes[0] != 3) {
      (void)DS_ERROR("dsrt_cuda_allreduce_start_three_tier_f32: needs device "
                     "vectors of codes and of 3 scalars");
      return 0;
    }
    const float *v = s->aligned;
    const uint16_t *code = c->aligned;
    int64_t n = c->sizes[0];
    // The probe is NaN exactly when the bucket was not finite.
    return comm::startDeviceEncoded(
        n, DSRT_COMPRESS_THREE_TIER, !std::isnan(v[2]),
        [&](float *decoded, std::vector<uint8_t> &payload) {
          return comm::encodeThreeTierCodes(code, n, v[0], v[1], decoded,
                                            payload);
        });
  }
  void writeBack(bool) override {}
};

/// A top-k start the step encoded and compacted on the device: its slots
/// parked on the device, the count of those used and the probe copied to
/// the host, the bucket's size, and nothing to write back. Only the used
/// slots cross PCIe: with a fraction chosen by the iteration (DGC's
/// warm-up) the slots are those of the largest, 25 %, and a bucket past
/// the warm-up uses fewer than 1 % of them.
struct TopKSlotsJob final : StagedStart {
  comm::staging::ParkedBuffer indices, values;
  Copied<uint32_t> count;
  Copied<float> scalars;
  int64_t slots = 0, n = 0;

  static constexpr const char *kName = "dsrt_cuda_allreduce_start_topk_f32";

  bool park(Memref1<uint32_t> *i, Memref1<float> *v) {
    uint32_t *firstIndex = contiguous(i);
    float *firstValue = contiguous(v);
    if (!firstIndex || !firstValue || i->sizes[0] != v->sizes[0] ||
        i->sizes[0] < 1) {
      (void)DS_ERROR("%s: needs contiguous device vectors of indices and "
                     "values of one length (at least 1)",
                     kName);
      return false;
    }
    slots = i->sizes[0];
    return !refusedInCapture() &&
           indices.park(firstIndex, size_t(slots) * sizeof(uint32_t)) &&
           values.park(firstValue, size_t(slots) * sizeof(float));
  }

  int64_t run() override {
    int64_t handle = encode();
    indices.release();
    values.release();
    return handle;
  }

  int64_t encode() {
    Memref1<uint32_t> *c = count.gather();
    Memref1<float> *s = scalars.gather();
    if (!count.onDevice || !scalars.onDevice || c->sizes[0] != 1 ||
        s->sizes[0] != 1 || n < 1 || n > std::numeric_limits<int32_t>::max()) {
      (void)DS_ERROR("%s: needs device vectors of 1 count and of 1 scalar, "
                     "and a bucket of 1 to 2^31 - 1 elements (%lld)",
                     kName, static_cast<long long>(n));
      return 0;
    }
    // The probe is NaN exactly when the bucket was not finite: zeros are
    // sent, and the slots are not read.
    bool finite = !std::isnan(s->aligned[0]);
    int64_t used = finite ? int64_t(c->aligned[0]) : 0;
    if (used > slots) {
      (void)DS_ERROR("dsrt: the device's top-k count (%lld) exceeds its %lld "
                     "slots",
                     static_cast<long long>(used),
                     static_cast<long long>(slots));
      return 0;
    }
    // The slot after the used ones, when there is one, comes too: it must
    // be empty, which checks the count against the slots.
    int64_t fetched = finite ? std::min(used + 1, slots) : 0;
    if (fetched > 0) {
      bool enqueued = indices.fetch(size_t(fetched) * sizeof(uint32_t)) &&
                      values.fetch(size_t(fetched) * sizeof(float));
      // Waited for even after a failure: the pinned buffers go back to
      // their pool with the job.
      if (!comm::staging::awaitFetches() || !enqueued)
        return 0;
    }
    auto *i = static_cast<const uint32_t *>(indices.fetched());
    auto *v = static_cast<const float *>(values.fetched());
    if (used > 0 && i[used - 1] == DSRT_TOPK_SLOT_EMPTY) {
      (void)DS_ERROR("dsrt: the device's top-k count (%lld) does not match "
                     "its slots: slot %lld is empty",
                     static_cast<long long>(used),
                     static_cast<long long>(used - 1));
      return 0;
    }
    if (used < fetched && i[used] != DSRT_TOPK_SLOT_EMPTY) {
      (void)DS_ERROR("dsrt: the device's top-k count (%lld) does not match "
                     "its slots: slot %lld holds index %u",
                     static_cast<long long>(used), static_cast<long long>(used),
                     i[used]);
      return 0;
    }
    return comm::startDeviceEncoded(
        n, DSRT_COMPRESS_TOPK, finite,
        [&](float *decoded, std::vector<uint8_t> &payload) {
          return comm::encodeTopKSlots(i, v, used, n, decoded, payload);
        });
  }
  void writeBack(bool) override {}
  int64_t topKElements() const override { return n; }
};

/// A staged start's job once its CPU start has run, `handle` replaced by
/// that start's; null (handle kept) for a handle not staged here.
std::shared_ptr<StagedStart> finishStaged(int64_t &handle) {
  if (!comm::staging::owns(handle))
    return nullptr;
  return std::static_pointer_cast<StagedStart>(
      comm::staging::finish(handle, handle));
}

/// in -> out through a CPU collective on host copies.
template <typename T, typename Fn, typename... Extra>
void staged(Memref1<T> *in, Memref1<T> *out, Fn cpu, Extra... extra) {
  inProgramOrder();
  Staged<T> hostIn, hostOut;
  if (!hostIn.stage(in, /*read=*/true) || !hostOut.stage(out, false))
    return;
  cpu(hostIn.get(), hostOut.get(), extra...);
  hostOut.writeBack();
}

/// A start. An uncompressed bucket comes masked by the step (zeros when it
/// was not finite), its probe (NaN then) as the one parameter: NCCL takes
/// it on the device, or the staging thread counts the probe and runs the
/// CPU start on host copies made without a host wait (CommStaging.h).
template <typename T, typename Start>
int64_t start(Memref1<T> *grad, Memref1<T> *residualIn, Memref1<T> *residualOut,
              int64_t scheme, dsrt_memref1_f64 *params, Start cpu,
              bool inPlace = false) {
  bool dense = scheme == DSRT_COMPRESS_NONE;
  T *bucket = contiguous(grad);
  auto *params64 = view<double>(params);
  const double *probe =
      params64 && params64->sizes[0] >= 1 ? contiguous(params64) : nullptr;
  int64_t handle = 0;
  if (dense && bucket && residualIn && residualIn->sizes[0] == 0 &&
      residualOut && residualOut->sizes[0] == 0) {
    if (!comm::nccl::decided())
      inProgramOrder(); // NCCL's first call votes through MPI
    if (comm::nccl::start(bucket, grad->sizes[0], ncclElement<T>(), probe,
                          inPlace, handle))
      return handle;
  }
  auto job = std::make_shared<StartJob<T, Start>>(scheme, cpu);
  if (!job->params.copy(params64) || !job->grad.copy(grad) ||
      !job->residualIn.copy(residualIn) ||
      !job->residualOut.stage(residualOut, /*read=*/false))
    return 0;
  return comm::staging::submit(std::move(job));
}

/// An uncompressed start whose bucket's buffer lives, untouched, until its
/// wait, which gets it as its output: NCCL all-reduces it in place.
template <typename T, typename Start>
int64_t startInPlace(Memref1<T> *bucket, dsrt_memref1_f64 *params, Start cpu) {
  static T none;
  Memref1<T> empty{&none, &none, 0, {0}, {1}};
  return start<T>(bucket, &empty, &empty, DSRT_COMPRESS_NONE, params, cpu,
                  /*inPlace=*/true);
}

template <typename T, typename Start>
int64_t startPowerSgd(Memref1<T> *grad, Memref1<T> *stateIn,
                      Memref1<T> *stateOut, dsrt_memref1_i64 *shapes,
                      dsrt_memref1_f64 *params, Start cpu) {
  auto job = std::make_shared<PowerSgdJob<T, Start>>(cpu);
  if (!job->params.copy(view<double>(params)) || !job->grad.copy(grad) ||
      !job->stateIn.copy(stateIn) ||
      !job->shapes.copy(reinterpret_cast<Memref1<int64_t> *>(shapes)) ||
      !job->stateOut.stage(stateOut, /*read=*/false))
    return 0;
  return comm::staging::submit(std::move(job));
}

template <typename T, typename Wait>
void wait(int64_t handle, Memref1<T> *out, Wait cpu, const char *what) {
  if (comm::nccl::owns(handle)) {
    T *first = contiguous(out);
    if (!first)
      (void)DS_ERROR("%s: the output is not a contiguous vector", what);
    comm::nccl::wait(handle, first, first ? out->sizes[0] : -1,
                     ncclElement<T>(), what);
    return;
  }
  std::shared_ptr<StagedStart> job = finishStaged(handle);
  Staged<T> hostOut;
  if (!hostOut.stage(out, false))
    return;
  cpu(handle, hostOut.get());
  hostOut.writeBack();
  if (job)
    job->writeBack(std::is_same_v<T, double>);
}

// The CPU entry points, on this file's descriptor type.
template <typename T> struct Cpu;
#define DS_CPU_COLLECTIVES(T, SUFFIX, D)                                       \
  template <> struct Cpu<T> {                                                  \
    static D *d(Memref1<T> *m) { return reinterpret_cast<D *>(m); }            \
    static void allreduce(Memref1<T> *i, Memref1<T> *o, int64_t op) {          \
      _mlir_ciface_dsrt_allreduce_##SUFFIX(d(i), d(o), op);                    \
    }                                                                          \
    static void stageAllreduce(Memref1<T> *i, Memref1<T> *o, int64_t op) {     \
      _mlir_ciface_dsrt_stage_allreduce_##SUFFIX(d(i), d(o), op);              \
    }                                                                          \
    static void broadcast(Memref1<T> *i, Memref1<T> *o) {                      \
      _mlir_ciface_dsrt_broadcast_##SUFFIX(d(i), d(o));                        \
    }                                                                          \
    static int64_t start(Memref1<T> *g, Memref1<T> *ri, Memref1<T> *ro,        \
                         int64_t s, double p0, double p1, double p2) {         \
      return _mlir_ciface_dsrt_allreduce_start_##SUFFIX(d(g), d(ri), d(ro), s, \
                                                        p0, p1, p2);           \
    }                                                                          \
    static int64_t startPowerSgd(Memref1<T> *g, Memref1<T> *si,                \
                                 Memref1<T> *so, dsrt_memref1_i64 *shapes,     \
                                 int64_t rank, int64_t active) {               \
      return _mlir_ciface_dsrt_allreduce_start_powersgd_##SUFFIX(              \
          d(g), d(si), d(so), shapes, rank, active);                           \
    }                                                                          \
    static void wait(int64_t h, Memref1<T> *o) {                               \
      _mlir_ciface_dsrt_allreduce_wait_##SUFFIX(h, d(o));                      \
    }                                                                          \
    static void send(Memref1<T> *i, int64_t peer, int64_t tag) {               \
      _mlir_ciface_dsrt_send_##SUFFIX(d(i), peer, tag);                        \
    }                                                                          \
    static void recv(Memref1<T> *o, int64_t peer, int64_t tag) {               \
      _mlir_ciface_dsrt_recv_##SUFFIX(d(o), peer, tag);                        \
    }                                                                          \
  };
DS_CPU_COLLECTIVES(float, f32, dsrt_memref1_f32)
DS_CPU_COLLECTIVES(double, f64, dsrt_memref1_f64)
#undef DS_CPU_COLLECTIVES

/// DDP's fp16/bf16 hooks with the encoding on the device: the step wrote
/// `encoded` = round16(bucket / N), zeros when its probe (params[0]) found
/// a non-finite value, and keeps it, untouched, for the wait. NCCL sums it
/// in place. Staged, the CPU's compressed start takes the f32 bucket
/// itself, which it divides, rounds and checks the same way.
int64_t startHalf(Memref1<float> *bucket, Memref1<uint16_t> *encoded,
                  dsrt_memref1_f64 *params, bool bf16) {
  uint16_t *data = contiguous(encoded);
  auto *params64 = view<double>(params);
  const double *probe =
      params64 && params64->sizes[0] >= 1 ? contiguous(params64) : nullptr;
  int64_t handle = 0;
  if (data && bucket && encoded->sizes[0] == bucket->sizes[0]) {
    if (!comm::nccl::decided())
      inProgramOrder(); // NCCL's first call votes through MPI
    if (comm::nccl::start(data, encoded->sizes[0],
                          bf16 ? comm::nccl::Element::BF16
                               : comm::nccl::Element::F16,
                          probe, /*inPlace=*/true, handle))
      return handle;
  }
  static float none;
  Memref1<float> empty{&none, &none, 0, {0}, {1}};
  return start<float>(bucket, &empty, &empty,
                      bf16 ? DSRT_COMPRESS_BF16 : DSRT_COMPRESS_FP16,
                      /*params=*/nullptr, Cpu<float>::start);
}

/// Its wait: `encoded` holds the sum of the ranks' values, rounded to 16
/// bits (staged: the CPU wait's f32 values, which are such sums widened,
/// narrowed back exactly).
void waitHalf(int64_t handle, Memref1<uint16_t> *encoded, bool bf16,
              const char *what) {
  if (comm::nccl::owns(handle)) {
    uint16_t *first = contiguous(encoded);
    if (!first)
      (void)DS_ERROR("%s: the output is not a contiguous vector", what);
    comm::nccl::wait(
        handle, first, first ? encoded->sizes[0] : -1,
        bf16 ? comm::nccl::Element::BF16 : comm::nccl::Element::F16, what);
    return;
  }
  // Staged: no residual to write back.
  (void)finishStaged(handle);
  Staged<uint16_t> hostOut;
  if (!hostOut.stage(encoded, false))
    return;
  if (!hostOut.onDevice) {
    (void)DS_ERROR("%s: the output is not a vector", what);
    return;
  }
  std::vector<float> sums(hostOut.host.size());
  Memref1<float> desc{sums.data(), sums.data(), 0, {int64_t(sums.size())}, {1}};
  Cpu<float>::wait(handle, &desc);
  for (size_t i = 0; i < sums.size(); ++i)
    hostOut.host[i] = bf16 ? comm::toBFloat16(sums[i]) : comm::toHalf(sums[i]);
  hostOut.writeBack();
}

/// A pipeline's transfer: on NCCL's link to the stage when both ends'
/// collectives are NCCL's (a view that is not contiguous is then an
/// error), staged otherwise.
template <typename T> void send(Memref1<T> *in, int64_t peer, int64_t tag) {
  // Both ends of a link decide together, whatever their views: a view NCCL
  // cannot take is an error there (nullptr), not a staged transfer.
  // A link is made through MPI at its first transfer; a staged transfer
  // goes through the communication thread's queue.
  if (!comm::nccl::transfersDecided(peer, /*sends=*/true))
    inProgramOrder();
  const T *first = contiguous(in);
  if (comm::nccl::send(first, first ? in->sizes[0] : -1,
                       std::is_same_v<T, double>, peer))
    return;
  inProgramOrder();
  Staged<T> hostIn;
  if (hostIn.stage(in, true))
    Cpu<T>::send(hostIn.get(), peer, tag); // the send copies its data
}

template <typename T> void recv(Memref1<T> *out, int64_t peer, int64_t tag) {
  if (!comm::nccl::transfersDecided(peer, /*sends=*/false))
    inProgramOrder();
  T *first = contiguous(out);
  if (comm::nccl::recv(first, first ? out->sizes[0] : -1,
                       std::is_same_v<T, double>, peer))
    return;
  inProgramOrder();
  Staged<T> hostOut;
  if (!hostOut.stage(out, false))
    return;
  Cpu<T>::recv(hostOut.get(), peer, tag);
  hostOut.writeBack();
}

/// A blocking all-reduce: on NCCL when it serves the call and the views
/// allow, staged otherwise (where the CPU collective checks the views).
template <typename T, typename Cpu>
void allreduce(Memref1<T> *in, Memref1<T> *out, int64_t op, Cpu cpu) {
  T *from = contiguous(in), *to = contiguous(out);
  if (!comm::nccl::decided())
    inProgramOrder();
  if (from && to && in->sizes[0] == out->sizes[0] && op >= DSRT_REDUCE_SUM &&
      op <= DSRT_REDUCE_MIN &&
      comm::nccl::allreduce(from, to, in->sizes[0], std::is_same_v<T, double>,
                            op))
    return;
  staged<T>(in, out, cpu, op);
}

/// A sum over a pipeline's stages: on the stage group's NCCL communicator
/// when every stage's collectives are NCCL's, staged otherwise. Every stage
/// takes part in that decision, whatever its views.
template <typename T, typename Cpu>
void stageAllreduce(Memref1<T> *in, Memref1<T> *out, int64_t op, Cpu cpu) {
  // The stage group is made through MPI at its first sum.
  if (!comm::nccl::transfersDecided(-1, false))
    inProgramOrder();
  T *from = contiguous(in), *to = contiguous(out);
  bool fits = from && to && in->sizes[0] == out->sizes[0];
  if (comm::nccl::stageAllreduce(from, to, fits ? in->sizes[0] : -1,
                                 std::is_same_v<T, double>, op))
    return;
  staged<T>(in, out, cpu, op);
}

/// The means of top-k waits (waitTopK) until their take: the elements that
/// are not +0, in index order, or the whole mean when those are more than
/// half of it (8 bytes an element sparse, 4 dense).
struct SparseMean {
  std::vector<uint32_t> indices;
  std::vector<float> values;
  std::vector<float> dense;
};
std::mutex sparseMeansMutex;
std::map<int64_t, SparseMean> sparseMeans;

/// dsrt_cuda_allreduce_wait_topk_f32: the CPU wait into host memory, the
/// mean kept under `handle`: sparse, and its number of elements returned,
/// or dense (-1).
int64_t waitTopK(int64_t handle) {
  const char *what = "dsrt_cuda_allreduce_wait_topk_f32";
  if (comm::nccl::topKRanks(handle) > 0) {
    // Gathered on NCCL: the step decodes the slots; nothing to take.
    comm::nccl::waitTopK(handle, what);
    std::lock_guard<std::mutex> lock(sparseMeansMutex);
    sparseMeans[handle] = SparseMean{};
    return 0;
  }
  int64_t key = handle;
  std::shared_ptr<StagedStart> job = finishStaged(handle);
  int64_t n = job ? job->topKElements() : -1;
  if (n < 0) {
    (void)DS_ERROR("%s: handle %lld is not a started f32 top-k all-reduce",
                   what, static_cast<long long>(key));
    return 0;
  }
  // The CPU wait writes the mean (zeros after a failure), every element
  // +0 but the sent ones' sums; a host-encoded start's residual goes back
  // to the device as at the dense wait.
  std::vector<float> mean(n);
  Memref1<float> out{mean.data(), mean.data(), 0, {n}, {1}};
  Cpu<float>::wait(handle, &out);
  job->writeBack(/*f64=*/false);
  SparseMean sparse;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &mean[i], sizeof(bits));
    if (bits != 0) {
      sparse.indices.push_back(static_cast<uint32_t>(i));
      sparse.values.push_back(mean[i]);
    }
  }
  auto count = static_cast<int64_t>(sparse.indices.size());
  if (2 * count > n) {
    sparse = SparseMean{};
    sparse.dense = std::move(mean);
    count = -1;
  }
  std::lock_guard<std::mutex> lock(sparseMeansMutex);
  sparseMeans[key] = std::move(sparse);
  return count;
}

/// dsrt_cuda_allreduce_take_topk_f32: the mean of `handle` on the step
/// stream: sparse into device vectors of its length, or dense into `out`.
void takeTopK(int64_t handle, Memref1<uint32_t> *indices,
              Memref1<float> *values, Memref1<float> *out) {
  const char *what = "dsrt_cuda_allreduce_take_topk_f32";
  // A start gathered on NCCL ends here: its buffer is freed on the step
  // stream, after the step's copies of its slots.
  comm::nccl::endTopK(handle);
  SparseMean mean;
  {
    std::lock_guard<std::mutex> lock(sparseMeansMutex);
    auto it = sparseMeans.find(handle);
    if (it == sparseMeans.end()) {
      (void)DS_ERROR("%s: handle %lld has no top-k mean waiting (its "
                     "dsrt_cuda_allreduce_wait_topk_f32 comes first, once)",
                     what, static_cast<long long>(handle));
      return;
    }
    mean = std::move(it->second);
    sparseMeans.erase(it);
  }
  bool dense = !mean.dense.empty();
  auto count = static_cast<int64_t>(dense ? 0 : mean.indices.size());
  // Empty vectors may have no memory at all.
  uint32_t *i = count ? contiguous(indices) : nullptr;
  float *v = count ? contiguous(values) : nullptr;
  float *o = dense ? contiguous(out) : nullptr;
  if (!indices || !values || indices->sizes[0] != count ||
      values->sizes[0] != count || (count && (!i || !v)) ||
      (dense && (!o || out->sizes[0] != int64_t(mean.dense.size())))) {
    (void)DS_ERROR("%s: needs contiguous device vectors of %lld indices and "
                   "values%s",
                   what, static_cast<long long>(count),
                   dense ? " and of the bucket's mean" : "");
    return;
  }
  if (dense) {
    dsrt_cuda_copy_to_device(o, mean.dense.data(),
                             int64_t(mean.dense.size() * sizeof(float)));
    return;
  }
  if (count == 0)
    return;
  dsrt_cuda_copy_to_device(i, mean.indices.data(), count * sizeof(uint32_t));
  dsrt_cuda_copy_to_device(v, mean.values.data(), count * sizeof(float));
}

/// A top-k start on NCCL (comm::nccl::startTopK): its handle, -1 after a
/// failure there (the error recorded), or 0 when NCCL does not take it.
int64_t startTopKOnNccl(Memref1<uint32_t> *indices, Memref1<float> *values,
                        Memref1<float> *scalars, int64_t n,
                        bool fixedFraction) {
  uint32_t *firstIndex = contiguous(indices);
  float *firstValue = contiguous(values);
  float *probe = contiguous(scalars);
  if (!firstIndex || !firstValue || !probe || scalars->sizes[0] != 1 ||
      indices->sizes[0] != values->sizes[0] || indices->sizes[0] < 1 || n < 1 ||
      n > std::numeric_limits<int32_t>::max())
    return 0; // the staged start names what is wrong
  if (!comm::nccl::decided())
    inProgramOrder(); // NCCL's first call votes through MPI
  int64_t handle = 0;
  if (!comm::nccl::startTopK(firstIndex, firstValue, indices->sizes[0], n,
                             fixedFraction, probe, handle))
    return 0;
  return handle ? handle : -1;
}

/// A broadcast from rank 0, likewise.
template <typename T, typename Cpu>
void broadcast(Memref1<T> *in, Memref1<T> *out, Cpu cpu) {
  T *from = contiguous(in), *to = contiguous(out);
  if (!comm::nccl::decided())
    inProgramOrder();
  if (from && to && in->sizes[0] == out->sizes[0] &&
      comm::nccl::broadcast(from, to, in->sizes[0], std::is_same_v<T, double>))
    return;
  staged<T>(in, out, cpu);
}

} // namespace

#define DS_CUDA_COLLECTIVES(T, SUFFIX, D)                                      \
  DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_##SUFFIX(D *in, D *out,       \
                                                          int64_t op) {        \
    allreduce<T>(view<T>(in), view<T>(out), op, Cpu<T>::allreduce);            \
  }                                                                            \
  DSRT_API void _mlir_ciface_dsrt_cuda_stage_allreduce_##SUFFIX(D *in, D *out, \
                                                                int64_t op) {  \
    stageAllreduce<T>(view<T>(in), view<T>(out), op, Cpu<T>::stageAllreduce);  \
  }                                                                            \
  DSRT_API void _mlir_ciface_dsrt_cuda_broadcast_##SUFFIX(D *in, D *out) {     \
    broadcast<T>(view<T>(in), view<T>(out), Cpu<T>::broadcast);                \
  }                                                                            \
  DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_##SUFFIX(            \
      D *grad, D *residualIn, D *residualOut, int64_t scheme,                  \
      dsrt_memref1_f64 *params) {                                              \
    return start<T>(view<T>(grad), view<T>(residualIn), view<T>(residualOut),  \
                    scheme, params, Cpu<T>::start);                            \
  }                                                                            \
  DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_in_place_##SUFFIX(   \
      D *bucket, dsrt_memref1_f64 *params) {                                   \
    return startInPlace<T>(view<T>(bucket), params, Cpu<T>::start);            \
  }                                                                            \
  DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_powersgd_##SUFFIX(   \
      D *grad, D *stateIn, D *stateOut, dsrt_memref1_i64 *shapes,              \
      dsrt_memref1_f64 *params) {                                              \
    return startPowerSgd<T>(view<T>(grad), view<T>(stateIn),                   \
                            view<T>(stateOut), shapes, params,                 \
                            Cpu<T>::startPowerSgd);                            \
  }                                                                            \
  DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_wait_##SUFFIX(int64_t handle, \
                                                               D *out) {       \
    wait<T>(handle, view<T>(out), Cpu<T>::wait,                                \
            "dsrt_cuda_allreduce_wait_" #SUFFIX);                              \
  }                                                                            \
  DSRT_API void _mlir_ciface_dsrt_cuda_send_##SUFFIX(D *in, int64_t peer,      \
                                                     int64_t tag) {            \
    send<T>(view<T>(in), peer, tag);                                           \
  }                                                                            \
  DSRT_API void _mlir_ciface_dsrt_cuda_recv_##SUFFIX(D *out, int64_t peer,     \
                                                     int64_t tag) {            \
    recv<T>(view<T>(out), peer, tag);                                          \
  }

DS_CUDA_COLLECTIVES(float, f32, dsrt_memref1_f32)
DS_CUDA_COLLECTIVES(double, f64, dsrt_memref1_f64)

DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_three_tier_f32(
    dsrt_memref1_raw *codes, dsrt_memref1_f32 *scalars) {
  auto job = std::make_shared<ThreeTierCodesJob>();
  if (!job->codes.copy(view<uint16_t>(codes)) ||
      !job->scalars.copy(view<float>(scalars)))
    return 0;
  return comm::staging::submit(std::move(job));
}

DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_topk_f32(
    dsrt_memref1_raw *indices, dsrt_memref1_f32 *values,
    dsrt_memref1_raw *count, dsrt_memref1_f32 *scalars, int64_t n,
    int64_t fixedFraction) {
  if (int64_t handle =
          startTopKOnNccl(view<uint32_t>(indices), view<float>(values),
                          view<float>(scalars), n, fixedFraction != 0))
    return handle > 0 ? handle : 0;
  auto job = std::make_shared<TopKSlotsJob>();
  job->n = n;
  if (cuda::ensureReady().failed() ||
      !job->park(view<uint32_t>(indices), view<float>(values)) ||
      !job->count.copy(view<uint32_t>(count)) ||
      !job->scalars.copy(view<float>(scalars)))
    return 0;
  return comm::staging::submit(std::move(job));
}

DSRT_API int64_t dsrt_cuda_allreduce_ranks_topk_f32(int64_t handle) {
  return comm::nccl::topKRanks(handle);
}

DSRT_API int64_t dsrt_cuda_allreduce_wait_topk_f32(int64_t handle) {
  return waitTopK(handle);
}

DSRT_API void
_mlir_ciface_dsrt_cuda_allreduce_slots_topk_f32(int64_t handle, int64_t rank,
                                                dsrt_memref1_raw *indices,
                                                dsrt_memref1_f32 *values) {
  auto *i = view<uint32_t>(indices);
  auto *v = view<float>(values);
  uint32_t *firstIndex = contiguous(i);
  float *firstValue = contiguous(v);
  bool fits = firstIndex && firstValue && i->sizes[0] == v->sizes[0];
  comm::nccl::copyTopKSlots(
      handle, rank, fits ? firstIndex : nullptr, fits ? firstValue : nullptr,
      fits ? i->sizes[0] : -1, "dsrt_cuda_allreduce_slots_topk_f32");
}

DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(
    int64_t handle, dsrt_memref1_raw *indices, dsrt_memref1_f32 *values,
    dsrt_memref1_f32 *out) {
  takeTopK(handle, view<uint32_t>(indices), view<float>(values),
           view<float>(out));
}

#define DS_CUDA_HALF_ALLREDUCE(SUFFIX, BF16)                                   \
  DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_half_##SUFFIX(       \
      dsrt_memref1_f32 *bucket, dsrt_memref1_raw *encoded,                     \
      dsrt_memref1_f64 *params) {                                              \
    return startHalf(view<float>(bucket), view<uint16_t>(encoded), params,     \
                     BF16);                                                    \
  }                                                                            \
  DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_wait_half_##SUFFIX(           \
      int64_t handle, dsrt_memref1_raw *encoded) {                             \
    waitHalf(handle, view<uint16_t>(encoded), BF16,                            \
             "dsrt_cuda_allreduce_wait_half_" #SUFFIX);                        \
  }
DS_CUDA_HALF_ALLREDUCE(f16, false)
DS_CUDA_HALF_ALLREDUCE(bf16, true)
#undef DS_CUDA_HALF_ALLREDUCE

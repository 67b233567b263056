//===- CommCollectives.cpp - The collectives generated code calls ---------===//
//
// The _mlir_ciface_dsrt_* collectives of a data-parallel training step: the
// started gradient all-reduces (a MEAN, possibly compressed) that overlap
// with the backward pass, and the small blocking reductions and broadcasts
// inside a step. A start call does everything local at once (it reads the
// bucket, adds the residual, encodes, and writes the new residual), so that
// generated code may reuse its buffers as soon as it returns; the
// communication thread then only exchanges and decodes. PowerSGD is the
// exception: its new state depends on the exchange, so its start only
// copies its inputs and the wait writes the state (CommPowerSgd.cpp does
// the rest). Each start keeps its local value, the reduction of one rank,
// which the wait returns when the communicator has failed: the step then
// finishes on finite values and the runner stops on the recorded error.
//
//===----------------------------------------------------------------------===//

#include "CommInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

using namespace dsrt;
using namespace dsrt::comm;

namespace {

template <typename T> struct TypeOf;
template <> struct TypeOf<float> { static constexpr int dtype = DSRT_F32; };
template <> struct TypeOf<double> { static constexpr int dtype = DSRT_F64; };

/// Checks a rank-1 descriptor; an output may not repeat an element.
template <typename Memref>
Status checkVector(const Memref *m, const char *what, const char *name,
                   bool output) {
  if (!m)
    return DS_ERROR("%s: null %s descriptor", what, name);
  int64_t n = m->sizes[0];
  if (n < 0 || (n > 0 && (!m->aligned || m->offset < 0)) ||
      (output && n > 1 && m->strides[0] == 0))
    return DS_ERROR("%s: bad %s descriptor (%lld elements, offset %lld, "
                    "stride %lld)",
                    what, name, static_cast<long long>(n),
                    static_cast<long long>(m->offset),
                    static_cast<long long>(m->strides[0]));
  return Status::success();
}

template <typename T, typename Memref>
std::vector<T> readVector(const Memref *m) {
  int64_t n = m->sizes[0];
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = m->aligned[m->offset + i * m->strides[0]];
  return v;
}

template <typename T, typename Memref>
void writeVector(Memref *m, const std::vector<T> &v) {
  for (int64_t i = 0; i < m->sizes[0]; ++i)
    m->aligned[m->offset + i * m->strides[0]] = v[i];
}

//===----------------------------------------------------------------------===//
// Gradient all-reduce
//===----------------------------------------------------------------------===//

/// One started all-reduce: what this rank sends and what the exchange
/// produces. Shared by the pending table and the task body.
template <typename T> struct Bucket {
  int64_t n = 0;
  /// This rank's value as a world of one would reduce it: the fallback
  /// after a failure, and the dense vector of the uncompressed all-reduce
  /// and of SparCML's switch.
  std::vector<T> local;
  std::vector<uint8_t> payload; // three-tier, top-k
  std::vector<uint16_t> half;   // fp16, bf16
  std::vector<T> result;
  /// PowerSGD: its work, whether it was active, and state_out's buffer as
  /// the start saw it, which the wait writes.
  std::shared_ptr<PowerSgdWork<T>> powerSgd;
  bool active = false;
  T *stateOut = nullptr;
  int64_t stateOffset = 0, stateStride = 1;
};

struct Pending {
  std::shared_ptr<Task> task;
  std::shared_ptr<Bucket<float>> f32;
  std::shared_ptr<Bucket<double>> f64;
};

std::mutex pendingMutex;
std::map<int64_t, Pending> pending;
int64_t nextHandle = 1;

template <typename T> std::shared_ptr<Bucket<T>> &bucketOf(Pending &p);
template <> std::shared_ptr<Bucket<float>> &bucketOf<float>(Pending &p) {
  return p.f32;
}
template <> std::shared_ptr<Bucket<double>> &bucketOf<double>(Pending &p) {
  return p.f64;
}

/// Elements of one all-gather of 16-bit vectors (16 MiB per rank).
constexpr int64_t kHalfChunk = int64_t(8) << 20;

/// The exchange of DDP's fp16/bf16 hooks: all-gather the rounded vectors,
/// sum them in f32 in rank order, round the sum once more, widen.
template <typename T>
Status exchangeHalf(Bucket<T> &b, const World &w, bool bf16) {
  auto widen = [&](uint16_t h) { return bf16 ? fromBFloat16(h) : fromHalf(h); };
  auto narrow = [&](float f) { return bf16 ? toBFloat16(f) : toHalf(f); };
  int64_t chunk = std::min(kHalfChunk, b.n);
  std::vector<uint16_t> all(static_cast<size_t>(chunk) * w.size);
  for (int64_t at = 0; at < b.n; at += chunk) {
    int64_t len = std::min(chunk, b.n - at);
    countBucketSent(double(len) * 2);
    DS_RETURN_IF_ERROR(allgather(b.half.data() + at, len * 2, all.data()));
    for (int64_t i = 0; i < len; ++i) {
      float acc = widen(all[i]);
      for (int r = 1; r < w.size; ++r)
        acc += widen(all[static_cast<size_t>(r) * len + i]);
      b.result[at + i] = static_cast<T>(widen(narrow(acc)));
    }
  }
  return Status::success();
}

/// The exchange of sparse payloads: all-gather their sizes, then either the
/// payloads (each rank decoding all of them in rank order) or, when they
/// outweigh what a ring all-reduce of the dense vector sends, the decoded
/// dense vectors.
template <typename T> Status exchangeSparse(Bucket<T> &b, const World &w) {
  int64_t mine = static_cast<int64_t>(b.payload.size());
  std::vector<int64_t> sizes(w.size);
  DS_RETURN_IF_ERROR(allgather(&mine, sizeof(mine), sizes.data()));
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  double ring = 2.0 * (w.size - 1) / w.size * double(b.n) * 4;
  if (w.size > 1 && double(total) > ring) {
    countDenseFallback();
    countBucketSent(double(b.n) * sizeof(T));
    return allreduce(b.local.data(), b.result.data(), b.n, TypeOf<T>::dtype,
                     DSRT_REDUCE_MEAN, w.deterministic);
  }
  countBucketSent(double(mine));
  std::vector<uint8_t> all(static_cast<size_t>(total));
  DS_RETURN_IF_ERROR(allgatherv(b.payload.data(), sizes.data(), all.data()));
  std::fill(b.result.begin(), b.result.end(), T(0));
  int64_t at = 0;
  for (int r = 0; r < w.size; ++r) {
    DS_RETURN_IF_ERROR(
        decodeAdd(all.data() + at, sizes[r], b.n, b.result.data()));
    at += sizes[r];
  }
  T size = static_cast<T>(w.size);
  for (T &x : b.result)
    x = x / size;
  return Status::success();
}

/// A started all-reduce's handle, under which its wait finds it.
template <typename T>
int64_t pendingStart(std::shared_ptr<Bucket<T>> b, std::shared_ptr<Task> task) {
  std::lock_guard<std::mutex> lock(pendingMutex);
  int64_t handle = nextHandle++;
  Pending &p = pending[handle];
  p.task = std::move(task);
  bucketOf<T>(p) = std::move(b);
  return handle;
}

/// The exchange of a sparse payload, on the communication thread.
template <typename T>
std::shared_ptr<Task> issueSparse(std::shared_ptr<Bucket<T>> b,
                                  const World &w) {
  return issue("all-reduce", b->n * static_cast<int64_t>(sizeof(T)),
               [b, w]() -> Status { return exchangeSparse(*b, w); });
}

template <typename T, typename Memref>
int64_t startAllreduce(Memref *grad, Memref *residualIn, Memref *residualOut,
                       int64_t scheme, double p0, double p1, double p2,
                       const char *what) {
  if (checkVector(grad, what, "gradient", false).failed() ||
      checkVector(residualIn, what, "residual_in", false).failed() ||
      checkVector(residualOut, what, "residual_out", true).failed() ||
      checkScheme(scheme, p0, p1, p2, what).failed())
    return 0;
  int64_t n = grad->sizes[0];
  bool sparse =
      scheme == DSRT_COMPRESS_THREE_TIER || scheme == DSRT_COMPRESS_TOPK;
  bool half = scheme == DSRT_COMPRESS_FP16 || scheme == DSRT_COMPRESS_BF16;
  int64_t nIn = residualIn->sizes[0], nOut = residualOut->sizes[0];
  if (sparse && ((nIn != 0 && nIn != n) || (nOut != 0 && nOut != n))) {
    (void)DS_ERROR("%s: a bucket of %lld elements with residuals of %lld and "
                   "%lld",
                   what, static_cast<long long>(n), static_cast<long long>(nIn),
                   static_cast<long long>(nOut));
    return 0;
  }
  World w;
  bool live = !acquire(w).failed();

  auto b = std::make_shared<Bucket<T>>();
  b->n = n;
  b->result.resize(n);
  std::vector<T> v = readVector<T>(grad);
  std::vector<T> residual =
      sparse && nIn == n ? readVector<T>(residualIn) : std::vector<T>(n, 0);
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    if (sparse)
      v[i] += residual[i];
    // What is sent is f32 (but for the uncompressed f64 all-reduce).
    finite = finite && std::isfinite(v[i]) &&
             (scheme == DSRT_COMPRESS_NONE ||
              std::isfinite(static_cast<float>(v[i])));
  }
  if (half && finite) {
    b->half.resize(n);
    float size = static_cast<float>(w.size);
    for (int64_t i = 0; i < n; ++i) {
      float x = static_cast<float>(v[i]) / size;
      b->half[i] = scheme == DSRT_COMPRESS_BF16 ? toBFloat16(x) : toHalf(x);
      // A value that overflows the 16-bit type is non-finite too.
      float back = scheme == DSRT_COMPRESS_BF16 ? fromBFloat16(b->half[i])
                                                : fromHalf(b->half[i]);
      finite = finite && std::isfinite(back);
    }
  }
  if (!finite) {
    countNonFinite();
    v.assign(n, T(0));
    b->half.assign(half ? n : 0, 0);
    if (sparse)
      encodeZeros(n, scheme, b->payload);
    if (nOut == n)
      writeVector(residualOut, residual);
  } else if (sparse) {
    std::vector<float> v32(v.begin(), v.end()), decoded(n);
    if (encodeSparse(v32.data(), n, scheme, p0, p1, p2, decoded.data(),
                     b->payload)
            .failed())
      return 0;
    for (int64_t i = 0; i < n; ++i) {
      residual[i] = v[i] - static_cast<T>(decoded[i]);
      // +0 for -0: the dense switch then sums exactly as the decoders do.
      v[i] = decoded[i] == 0 ? T(0) : static_cast<T>(decoded[i]);
    }
    if (nOut == n)
      writeVector(residualOut, residual);
  }
  b->local = std::move(v);
  countDense(double(n) * sizeof(T));

  std::shared_ptr<Task> task;
  if (live)
    task = issue("all-reduce", n * static_cast<int64_t>(sizeof(T)),
                 [b, w, scheme, sparse, half]() -> Status {
                   if (sparse)
                     return exchangeSparse(*b, w);
                   if (half)
                     return exchangeHalf(*b, w, scheme == DSRT_COMPRESS_BF16);
                   countBucketSent(double(b->n) * sizeof(T));
                   return allreduce(b->local.data(), b->result.data(), b->n,
                                    TypeOf<T>::dtype, DSRT_REDUCE_MEAN,
                                    w.deterministic);
                 });
  return pendingStart(std::move(b), std::move(task));
}

//===----------------------------------------------------------------------===//
// PowerSGD
//===----------------------------------------------------------------------===//

template <typename T, typename Memref>
int64_t startPowerSgd(Memref *grad, Memref *stateIn, Memref *stateOut,
                      dsrt_memref1_i64 *shapes, int64_t rank, int64_t active,
                      const char *what) {
  if (checkVector(grad, what, "gradient", false).failed() ||
      checkVector(stateIn, what, "state_in", false).failed() ||
      checkVector(stateOut, what, "state_out", true).failed() ||
      checkVector(shapes, what, "shapes", false).failed())
    return 0;
  auto work = std::make_shared<PowerSgdWork<T>>();
  std::vector<int64_t> dims = readVector<int64_t>(shapes);
  if (planPowerSgd(dims.data(), static_cast<int64_t>(dims.size()), rank,
                   work->plan, what)
          .failed())
    return 0;
  int64_t n = grad->sizes[0];
  const PowerSgdPlan &plan = work->plan;
  if (n != plan.elements || stateIn->sizes[0] != plan.stateSize ||
      stateOut->sizes[0] != plan.stateSize) {
    (void)DS_ERROR("%s: the shapes make a bucket of %lld elements and a state "
                   "of %lld, not %lld and %lld (in) and %lld (out)",
                   what, static_cast<long long>(plan.elements),
                   static_cast<long long>(plan.stateSize),
                   static_cast<long long>(n),
                   static_cast<long long>(stateIn->sizes[0]),
                   static_cast<long long>(stateOut->sizes[0]));
    return 0;
  }
  World w;
  bool live = !acquire(w).failed();

  auto b = std::make_shared<Bucket<T>>();
  b->n = n;
  b->active = active != 0;
  b->stateOut = stateOut->aligned;
  b->stateOffset = stateOut->offset;
  b->stateStride = stateOut->strides[0];
  std::vector<T> v = readVector<T>(grad);
  work->stateIn = readVector<T>(stateIn);
  bool finite = true;
  if (b->active) {
    preparePowerSgd(*work, v, w.size);
    finite = work->finite;
  } else {
    for (int64_t i = 0; i < n && finite; ++i)
      finite = std::isfinite(v[i]);
  }
  if (!finite) {
    countNonFinite();
    v.assign(n, T(0));
  }
  b->local = std::move(v);
  b->powerSgd = work;
  countDense(double(n) * sizeof(T));

  std::shared_ptr<Task> task;
  if (live)
    task = issue("PowerSGD all-reduce", n * static_cast<int64_t>(sizeof(T)),
                 [b, w]() -> Status {
                   // Allocated here: the start stays short.
                   b->result.resize(b->n);
                   if (b->active)
                     return exchangePowerSgd(*b->powerSgd, w, b->result);
                   countBucketSent(double(b->n) * sizeof(T));
                   return allreduce(b->local.data(), b->result.data(), b->n,
                                    TypeOf<T>::dtype, DSRT_REDUCE_MEAN,
                                    w.deterministic);
                 });
  return pendingStart(std::move(b), std::move(task));
}

/// The wait's part of PowerSGD: state_out = the new state once the
/// exchange has completed, state_in otherwise (or when inactive).
template <typename T> void writePowerSgdState(const Bucket<T> &b, bool ok) {
  const PowerSgdWork<T> &work = *b.powerSgd;
  const std::vector<T> &state = ok && b.active ? work.stateOut : work.stateIn;
  for (size_t i = 0; i < state.size(); ++i)
    b.stateOut[b.stateOffset + static_cast<int64_t>(i) * b.stateStride] =
        state[i];
}

//===----------------------------------------------------------------------===//
// Waits
//===----------------------------------------------------------------------===//

template <typename T, typename Memref>
void waitAllreduce(int64_t handle, Memref *out, const char *what) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(pendingMutex);
    auto it = pending.find(handle);
    if (it != pending.end()) {
      p = std::move(it->second);
      pending.erase(it);
    }
  }
  std::shared_ptr<Bucket<T>> b = bucketOf<T>(p);
  bool outOk = !checkVector(out, what, "output", true).failed();
  if (!b) {
    (void)DS_ERROR("%s: handle %lld is not a started %s all-reduce (never "
                   "started, of the other type, or waited before)",
                   what, static_cast<long long>(handle),
                   sizeof(T) == 4 ? "f32" : "f64");
    // Finite values all the same.
    if (outOk)
      writeVector(out, std::vector<T>(out->sizes[0], T(0)));
    return;
  }
  bool ok = wait(p.task);
  if (b->powerSgd)
    writePowerSgdState(*b, ok);
  if (!outOk)
    return;
  if (out->sizes[0] != b->n) {
    (void)DS_ERROR("%s: the bucket has %lld elements, the output %lld", what,
                   static_cast<long long>(b->n),
                   static_cast<long long>(out->sizes[0]));
    return;
  }
  writeVector(out, ok ? b->result : b->local);
}

//===----------------------------------------------------------------------===//
// Blocking reductions and broadcasts
//===----------------------------------------------------------------------===//

template <typename T, typename Memref>
void reduceSmall(Memref *in, Memref *out, int64_t op, const char *what,
                 bool acrossStages = false) {
  if (checkVector(in, what, "input", false).failed() ||
      checkVector(out, what, "output", true).failed())
    return;
  int64_t n = in->sizes[0];
  if (out->sizes[0] != n || op < DSRT_REDUCE_SUM || op > DSRT_REDUCE_MIN) {
    (void)DS_ERROR(
        "%s: %lld elements into %lld, op %lld", what, static_cast<long long>(n),
        static_cast<long long>(out->sizes[0]), static_cast<long long>(op));
    return;
  }
  auto local = std::make_shared<std::vector<T>>(readVector<T>(in));
  auto result = std::make_shared<std::vector<T>>(n);
  World w;
  bool ok = !acquire(w).failed() &&
            run(acrossStages ? "stage all-reduce" : "all-reduce",
                n * static_cast<int64_t>(sizeof(T)), [=]() -> Status {
                  countSent(double(n) * sizeof(T));
                  auto reduce = [&] {
                    return allreduce(local->data(), result->data(), n,
                                     TypeOf<T>::dtype, static_cast<int>(op),
                                     w.deterministic);
                  };
                  return acrossStages ? onStageGroup(reduce) : reduce();
                });
  writeVector(out, ok ? *result : *local);
}

/// ds.send: copies the vector and queues a non-blocking send.
template <typename T, typename Memref>
void sendVector(Memref *in, int64_t peer, int64_t tag, const char *what) {
  if (checkVector(in, what, "input", false).failed())
    return;
  std::vector<T> v = readVector<T>(in);
  auto bytes = std::make_shared<std::vector<uint8_t>>(v.size() * sizeof(T));
  if (!v.empty())
    std::memcpy(bytes->data(), v.data(), bytes->size());
  World w;
  if (acquire(w).failed())
    return;
  // Not waited for: the task only posts the send, and a failure fails the
  // communicator, which the next receive or collective reports.
  (void)issue("send", static_cast<int64_t>(bytes->size()), [=]() -> Status {
    countSent(double(bytes->size()));
    return sendTo(bytes, static_cast<int>(peer), static_cast<int>(tag));
  });
}

/// ds.recv: blocks until the vector from `peer` on channel `tag` arrived.
template <typename T, typename Memref>
void recvVector(Memref *out, int64_t peer, int64_t tag, const char *what) {
  if (checkVector(out, what, "output", true).failed())
    return;
  int64_t n = out->sizes[0];
  auto result = std::make_shared<std::vector<T>>(n);
  World w;
  bool ok = !acquire(w).failed() &&
            run("receive", n * static_cast<int64_t>(sizeof(T)), [=]() {
              return recvFrom(result->data(), n * sizeof(T),
                              static_cast<int>(peer), static_cast<int>(tag));
            });
  if (!ok)
    std::fill(result->begin(), result->end(), T(0));
  writeVector(out, *result);
}

template <typename T, typename Memref>
void broadcastSmall(Memref *in, Memref *out, const char *what) {
  if (checkVector(in, what, "input", false).failed() ||
      checkVector(out, what, "output", true).failed())
    return;
  int64_t n = in->sizes[0];
  if (out->sizes[0] != n) {
    (void)DS_ERROR("%s: %lld elements into %lld", what,
                   static_cast<long long>(n),
                   static_cast<long long>(out->sizes[0]));
    return;
  }
  auto local = std::make_shared<std::vector<T>>(readVector<T>(in));
  auto result = std::make_shared<std::vector<T>>(*local);
  World w;
  int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  bool ok = !acquire(w).failed() && run("broadcast", bytes, [=]() -> Status {
    countSent(w.rank == 0 ? double(bytes) : 0.0);
    return broadcast(result->data(), bytes, 0);
  });
  writeVector(out, ok ? *result : *local);
}

} // namespace

int64_t dsrt::comm::startDeviceEncoded(
    int64_t n, int64_t scheme, bool finite,
    const std::function<Status(float *, std::vector<uint8_t> &)> &encode) {
  World w;
  bool live = !acquire(w).failed();
  auto b = std::make_shared<Bucket<float>>();
  b->n = n;
  b->result.resize(n);
  std::vector<float> v(n, 0.0f);
  if (!finite) {
    countNonFinite();
    encodeZeros(n, scheme, b->payload);
  } else {
    if (encode(v.data(), b->payload).failed())
      return 0;
    for (float &x : v)
      x = x == 0 ? 0.0f : x; // +0 for -0, as startAllreduce
  }
  b->local = std::move(v);
  countDense(double(n) * sizeof(float));
  std::shared_ptr<Task> task = live ? issueSparse(b, w) : nullptr;
  return pendingStart(std::move(b), std::move(task));
}

int64_t _mlir_ciface_dsrt_allreduce_start_f32(dsrt_memref1_f32 *grad,
                                              dsrt_memref1_f32 *residual_in,
                                              dsrt_memref1_f32 *residual_out,
                                              int64_t scheme, double p0,
                                              double p1, double p2) {
  return startAllreduce<float>(grad, residual_in, residual_out, scheme, p0, p1,
                               p2, "dsrt_allreduce_start_f32");
}

int64_t _mlir_ciface_dsrt_allreduce_start_f64(dsrt_memref1_f64 *grad,
                                              dsrt_memref1_f64 *residual_in,
                                              dsrt_memref1_f64 *residual_out,
                                              int64_t scheme, double p0,
                                              double p1, double p2) {
  return startAllreduce<double>(grad, residual_in, residual_out, scheme, p0, p1,
                                p2, "dsrt_allreduce_start_f64");
}

int64_t _mlir_ciface_dsrt_allreduce_start_powersgd_f32(
    dsrt_memref1_f32 *grad, dsrt_memref1_f32 *state_in,
    dsrt_memref1_f32 *state_out, dsrt_memref1_i64 *shapes, int64_t rank,
    int64_t active) {
  return startPowerSgd<float>(grad, state_in, state_out, shapes, rank, active,
                              "dsrt_allreduce_start_powersgd_f32");
}

int64_t _mlir_ciface_dsrt_allreduce_start_powersgd_f64(
    dsrt_memref1_f64 *grad, dsrt_memref1_f64 *state_in,
    dsrt_memref1_f64 *state_out, dsrt_memref1_i64 *shapes, int64_t rank,
    int64_t active) {
  return startPowerSgd<double>(grad, state_in, state_out, shapes, rank, active,
                               "dsrt_allreduce_start_powersgd_f64");
}

void _mlir_ciface_dsrt_allreduce_wait_f32(int64_t handle,
                                          dsrt_memref1_f32 *out) {
  waitAllreduce<float>(handle, out, "dsrt_allreduce_wait_f32");
}

void _mlir_ciface_dsrt_allreduce_wait_f64(int64_t handle,
                                          dsrt_memref1_f64 *out) {
  waitAllreduce<double>(handle, out, "dsrt_allreduce_wait_f64");
}

void _mlir_ciface_dsrt_allreduce_f32(dsrt_memref1_f32 *in,
                                     dsrt_memref1_f32 *out, int64_t op) {
  reduceSmall<float>(in, out, op, "dsrt_allreduce_f32");
}

void _mlir_ciface_dsrt_allreduce_f64(dsrt_memref1_f64 *in,
                                     dsrt_memref1_f64 *out, int64_t op) {
  reduceSmall<double>(in, out, op, "dsrt_allreduce_f64");
}

void _mlir_ciface_dsrt_broadcast_f32(dsrt_memref1_f32 *in,
                                     dsrt_memref1_f32 *out) {
  broadcastSmall<float>(in, out, "dsrt_broadcast_f32");
}

void _mlir_ciface_dsrt_broadcast_f64(dsrt_memref1_f64 *in,
                                     dsrt_memref1_f64 *out) {
  broadcastSmall<double>(in, out, "dsrt_broadcast_f64");
}

void _mlir_ciface_dsrt_send_f32(dsrt_memref1_f32 *in, int64_t peer,
                                int64_t tag) {
  sendVector<float>(in, peer, tag, "dsrt_send_f32");
}

void _mlir_ciface_dsrt_send_f64(dsrt_memref1_f64 *in, int64_t peer,
                                int64_t tag) {
  sendVector<double>(in, peer, tag, "dsrt_send_f64");
}

void _mlir_ciface_dsrt_recv_f32(dsrt_memref1_f32 *out, int64_t peer,
                                int64_t tag) {
  recvVector<float>(out, peer, tag, "dsrt_recv_f32");
}

void _mlir_ciface_dsrt_recv_f64(dsrt_memref1_f64 *out, int64_t peer,
                                int64_t tag) {
  recvVector<double>(out, peer, tag, "dsrt_recv_f64");
}

void _mlir_ciface_dsrt_stage_allreduce_f32(dsrt_memref1_f32 *in,
                                           dsrt_memref1_f32 *out, int64_t op) {
  reduceSmall<float>(in, out, op, "dsrt_stage_allreduce_f32", true);
}

void _mlir_ciface_dsrt_stage_allreduce_f64(dsrt_memref1_f64 *in,
                                           dsrt_memref1_f64 *out, int64_t op) {
  reduceSmall<double>(in, out, op, "dsrt_stage_allreduce_f64", true);
}

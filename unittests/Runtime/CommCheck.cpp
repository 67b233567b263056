//===- CommCheck.cpp - The collectives across MPI ranks -------------------===//
//
// ds-runtime-comm-check: run under `mpirun -np N` (2 or 3), it checks what
// one process cannot: the mean all-reduce against its exact value, that
// deterministic mode gives bit-identical results for any bucketing, that a
// compressed all-reduce equals the mean of every rank's decoded payload
// (each rank's input all-gathered and encoded locally with
// dsrt_compress_encode_f32), the dense switch, PowerSGD against the replay
// of PowerSgdReference.h over every rank's all-gathered gradient and state,
// the host collectives, and, with --hang-rank R, that a stopped rank makes
// the others fail with the timeout error in time (they then leave with
// _exit(1), as a runner must).
// Every rank prints "PASS: ..." or "FAIL: ..." lines and exits non-zero on
// a failure.
//
//===----------------------------------------------------------------------===//

#include "PowerSgdReference.h"

#include "ds/Runtime/ds_runtime.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

int rank = 0, size = 1;
int failures = 0, passes = 0;

void report(bool ok, const std::string &name, const std::string &detail = "") {
  if (ok) {
    ++passes;
    std::printf("[rank %d] PASS: %s\n", rank, name.c_str());
  } else {
    ++failures;
    std::printf("[rank %d] FAIL: %s%s%s\n", rank, name.c_str(),
                detail.empty() ? "" : ": ", detail.c_str());
  }
  std::fflush(stdout);
}

std::string lastError() {
  const char *e = dsrt_last_error();
  return e ? e : "(no error)";
}

bool noError(const std::string &name) {
  if (!dsrt_last_error())
    return true;
  report(false, name, lastError());
  dsrt_clear_error();
  return false;
}

dsrt_memref1_f32 view(std::vector<float> &v, int64_t at = 0, int64_t n = -1) {
  return {v.data(), v.data(), at, {n < 0 ? int64_t(v.size()) - at : n}, {1}};
}

dsrt_memref1_f64 view(std::vector<double> &v) {
  return {v.data(), v.data(), 0, {int64_t(v.size())}, {1}};
}

dsrt_memref1_i64 view(std::vector<int64_t> &v) {
  return {v.data(), v.data(), 0, {int64_t(v.size())}, {1}};
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Every rank's vector, rank after rank.
std::vector<float> gatherAll(const std::vector<float> &mine) {
  std::vector<float> all(mine.size() * size);
  if (dsrt_allgather(mine.data(), mine.size() * sizeof(float), all.data()))
    report(false, "all-gather of the inputs", lastError());
  return all;
}

/// Whether every rank holds the same bits.
bool agreeAcrossRanks(const std::vector<float> &v) {
  std::vector<float> all = gatherAll(v);
  for (int r = 1; r < size; ++r)
    if (std::memcmp(all.data(), all.data() + r * v.size(),
                    v.size() * sizeof(float)))
      return false;
  return true;
}

std::vector<float> randomVector(int64_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Start + wait over the given bucket boundaries: all buckets are started,
/// then waited in reverse order.
std::vector<float> allreduceBuckets(std::vector<float> grad,
                                    const std::vector<int64_t> &bounds,
                                    int64_t scheme, double p0, double p1,
                                    double p2, std::vector<float> *residual) {
  std::vector<float> out(grad.size(), NAN), none;
  std::vector<float> resIn(residual ? grad.size() : 0, 0.0f);
  std::vector<float> resOut(resIn.size());
  std::vector<int64_t> handles;
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    int64_t at = bounds[b], n = bounds[b + 1] - bounds[b];
    dsrt_memref1_f32 g = view(grad, at, n);
    dsrt_memref1_f32 ri = residual ? view(resIn, at, n) : view(none);
    dsrt_memref1_f32 ro = residual ? view(resOut, at, n) : view(none);
    handles.push_back(_mlir_ciface_dsrt_allreduce_start_f32(
        &g, &ri, &ro, scheme, p0, p1, p2));
  }
  for (size_t b = handles.size(); b-- > 0;) {
    dsrt_memref1_f32 o = view(out, bounds[b], bounds[b + 1] - bounds[b]);
    _mlir_ciface_dsrt_allreduce_wait_f32(handles[b], &o);
  }
  if (residual)
    *residual = resOut;
  return out;
}

std::vector<float> allreduce(const std::vector<float> &grad, int64_t scheme,
                             double p0 = 0, double p1 = 0, double p2 = 0,
                             std::vector<float> *residual = nullptr) {
  return allreduceBuckets(grad, {0, int64_t(grad.size())}, scheme, p0, p1, p2,
                          residual);
}

void configure(bool deterministic, double timeout) {
  dsrt_comm_config config = {timeout, deterministic ? 1 : 0, 0};
  if (dsrt_comm_init(&config))
    report(false, "dsrt_comm_init", lastError());
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

void checkMean(bool deterministic) {
  std::string mode = deterministic ? " (deterministic)" : "";
  // Small multiples of 1/4: every sum is exact in any order.
  int64_t n = 1000;
  std::vector<float> grad(n), expected(n);
  std::vector<double> grad64(n), expected64(n);
  for (int64_t i = 0; i < n; ++i) {
    grad[i] = float((rank + 1) * (i % 97 - 40)) * 0.25f;
    grad64[i] = grad[i];
    double sum = 0;
    for (int r = 0; r < size; ++r)
      sum += double((r + 1) * (i % 97 - 40)) * 0.25;
    expected[i] = float(sum) / float(size);
    expected64[i] = sum / size;
  }
  std::vector<float> out = allreduce(grad, DSRT_COMPRESS_NONE);
  report(noError("mean all-reduce f32" + mode) && sameBits(out, expected),
         "mean all-reduce f32" + mode);

  std::vector<double> out64(n), none;
  dsrt_memref1_f64 g = view(grad64), e = view(none), o = view(out64);
  int64_t h = _mlir_ciface_dsrt_allreduce_start_f64(
      &g, &e, &e, DSRT_COMPRESS_NONE, 0, 0, 0);
  _mlir_ciface_dsrt_allreduce_wait_f64(h, &o);
  report(noError("mean all-reduce f64" + mode) && out64 == expected64,
         "mean all-reduce f64" + mode);

  // In-step reductions.
  std::vector<float> loss = {float(rank + 1)}, reduced(1);
  dsrt_memref1_f32 li = view(loss), lo = view(reduced);
  _mlir_ciface_dsrt_allreduce_f32(&li, &lo, DSRT_REDUCE_MAX);
  bool ok = reduced[0] == float(size);
  _mlir_ciface_dsrt_allreduce_f32(&li, &lo, DSRT_REDUCE_SUM);
  ok = ok && reduced[0] == float(size * (size + 1) / 2);
  _mlir_ciface_dsrt_allreduce_f32(&li, &lo, DSRT_REDUCE_MEAN);
  ok = ok && reduced[0] == float(size * (size + 1) / 2) / float(size);
  report(noError("in-step reductions" + mode) && ok,
         "in-step reductions" + mode);
}

void checkDeterministicBucketing() {
  configure(true, 60);
  int64_t n = 10007;
  std::vector<float> grad = randomVector(n, 1234 + rank, 1.0f);
  std::vector<float> one = allreduce(grad, DSRT_COMPRESS_NONE);
  std::vector<float> many =
      allreduceBuckets(grad, {0, 1000, 1003, 6003, 9000, n}, DSRT_COMPRESS_NONE,
                       0, 0, 0, nullptr);
  // The reference: the inputs summed in rank order, divided by N.
  std::vector<float> all = gatherAll(grad), expected(n);
  for (int64_t i = 0; i < n; ++i) {
    float acc = all[i];
    for (int r = 1; r < size; ++r)
      acc += all[r * n + i];
    expected[i] = acc / float(size);
  }
  bool ok = noError("deterministic bucketing");
  report(ok && sameBits(one, many),
         "deterministic mode: two bucketings bit-identical");
  report(ok && sameBits(one, expected),
         "deterministic mode: the rank-order sum / N");
  report(agreeAcrossRanks(one), "deterministic mode: every rank agrees");
}

void checkCompressed(const char *name, int64_t scheme, double p0, double p1,
                     double p2, bool expectDense) {
  configure(true, 60);
  int64_t n = 4099;
  std::vector<float> grad = randomVector(n, 99 + 7 * rank, 0.01f);
  std::vector<float> residualIn = randomVector(n, 5 + rank, 0.001f);
  // Residual in via the bucket's residual_in: start from the same one.
  std::vector<float> residual = residualIn;
  dsrt_comm_stats before, after;
  dsrt_get_comm_stats(&before);
  std::vector<float> out(n, NAN), resOut(n);
  dsrt_memref1_f32 g = view(grad), ri = view(residual), ro = view(resOut),
                   o = view(out);
  int64_t h =
      _mlir_ciface_dsrt_allreduce_start_f32(&g, &ri, &ro, scheme, p0, p1, p2);
  _mlir_ciface_dsrt_allreduce_wait_f32(h, &o);
  dsrt_get_comm_stats(&after);
  if (!noError(name))
    return;

  // The reference: every rank's payload decoded in rank order into zeros.
  std::vector<float> allGrad = gatherAll(grad), allRes = gatherAll(residualIn);
  std::vector<float> acc(n, 0.0f), decoded(n), myDecoded;
  int64_t payloadTotal = 0;
  for (int r = 0; r < size; ++r) {
    int64_t bytes = 0;
    if (dsrt_compress_encode_f32(allGrad.data() + r * n, allRes.data() + r * n,
                                 n, scheme, p0, p1, p2, decoded.data(), nullptr,
                                 &bytes)) {
      report(false, name, lastError());
      return;
    }
    payloadTotal += bytes;
    for (int64_t i = 0; i < n; ++i)
      acc[i] += decoded[i];
    if (r == rank)
      myDecoded = decoded;
  }
  std::vector<float> expected(n), expectedResidual(n);
  for (int64_t i = 0; i < n; ++i) {
    expected[i] = acc[i] / float(size);
    expectedResidual[i] = (grad[i] + residualIn[i]) - myDecoded[i];
  }
  bool dense = after.dense_fallbacks > before.dense_fallbacks;
  char detail[160];
  std::snprintf(detail, sizeof(detail),
                "payloads %lld bytes, dense %d, bytes_sent %.0f, "
                "bytes_dense %.0f",
                static_cast<long long>(payloadTotal), int(dense),
                after.bytes_sent - before.bytes_sent,
                after.bytes_dense - before.bytes_dense);
  report(sameBits(out, expected),
         std::string(name) + ": the mean of the decoded payloads", detail);
  report(sameBits(resOut, expectedResidual),
         std::string(name) + ": residual_out = v - decoded");
  report(dense == expectDense,
         std::string(name) + ": " +
             (expectDense ? "dense switch taken" : "payloads exchanged"),
         detail);
  report(agreeAcrossRanks(out), std::string(name) + ": every rank agrees");
}

/// Every rank's vector, one per rank.
template <typename T>
std::vector<std::vector<T>> gatherRanks(const std::vector<T> &mine) {
  std::vector<T> all(mine.size() * size);
  if (dsrt_allgather(mine.data(), mine.size() * sizeof(T), all.data()))
    report(false, "all-gather of the inputs", lastError());
  std::vector<std::vector<T>> parts(size);
  for (int r = 0; r < size; ++r)
    parts[r].assign(all.begin() + r * mine.size(),
                    all.begin() + (r + 1) * mine.size());
  return parts;
}

/// Whether a equals b: bit for bit when `exact`, else within `tolerance`
/// times the largest magnitude of b. Describes the worst element.
template <typename T>
bool close(const std::vector<T> &a, const std::vector<T> &b, bool exact,
           double tolerance, std::string &detail) {
  if (a.size() != b.size()) {
    detail = "sizes differ";
    return false;
  }
  double scale = 0, worst = -1;
  size_t at = 0;
  for (size_t i = 0; i < b.size(); ++i)
    scale = std::max(scale, std::fabs(double(b[i])));
  bool ok = true;
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = std::memcmp(&a[i], &b[i], sizeof(T)) == 0;
    double d = same ? 0.0 : std::fabs(double(a[i]) - double(b[i]));
    if (std::isnan(d))
      d = INFINITY;
    if (d > worst) {
      worst = d;
      at = i;
    }
    ok = ok && (exact ? same : d <= tolerance * scale);
  }
  char text[160];
  std::snprintf(text, sizeof(text), "worst element %zu: %.9g vs %.9g", at,
                a.empty() ? 0.0 : double(a[at]),
                b.empty() ? 0.0 : double(b[at]));
  detail = text;
  return ok;
}

int64_t startPowerSgd(dsrt_memref1_f32 *g, dsrt_memref1_f32 *si,
                      dsrt_memref1_f32 *so, dsrt_memref1_i64 *shapes,
                      int64_t rank, int64_t active) {
  return _mlir_ciface_dsrt_allreduce_start_powersgd_f32(g, si, so, shapes, rank,
                                                        active);
}

int64_t startPowerSgd(dsrt_memref1_f64 *g, dsrt_memref1_f64 *si,
                      dsrt_memref1_f64 *so, dsrt_memref1_i64 *shapes,
                      int64_t rank, int64_t active) {
  return _mlir_ciface_dsrt_allreduce_start_powersgd_f64(g, si, so, shapes, rank,
                                                        active);
}

void waitAllreduce(int64_t handle, dsrt_memref1_f32 *out) {
  _mlir_ciface_dsrt_allreduce_wait_f32(handle, out);
}

void waitAllreduce(int64_t handle, dsrt_memref1_f64 *out) {
  _mlir_ciface_dsrt_allreduce_wait_f64(handle, out);
}

/// PowerSGD over a few steps against the replay of every rank's inputs: a
/// vector, compressible matrices, an incompressible one with a state that
/// must stay as it is, and a row; at step 2 the last rank (of 2 or more)
/// holds a NaN and sends zeros. Bit-identical to the replay in
/// deterministic mode (and with 2 ranks, whose sums are commutative),
/// within rounding otherwise; every rank's result and Q agree.
template <typename T> void checkPowerSgd(bool deterministic, int64_t lowRank) {
  configure(deterministic, 60);
  std::string name =
      std::string("PowerSGD ") + (sizeof(T) == 4 ? "f32" : "f64") + ", rank " +
      std::to_string(lowRank) + (deterministic ? " (deterministic)" : "");
  std::vector<int64_t> shapes = {7, 1, 24, 20, 4, 3, 16, 40, 1, 5};
  int64_t n = 7 + 480 + 12 + 640 + 5;
  int64_t stateSize =
      dsrt_powersgd_state_size(shapes.data(), shapes.size(), lowRank);
  // The 4 x 3 matrix's state follows the 24 x 20 one's.
  int64_t smallAt = 480 + 20 * lowRank, smallSize = 12 + 3 * lowRank;
  std::vector<T> state(stateSize, T(0));
  for (int64_t i = 0; i < smallSize; ++i)
    state[smallAt + i] = T(lowRank + 0.5 * i);
  bool exact = deterministic || size <= 2;
  double tolerance = sizeof(T) == 4 ? 1e-4 : 1e-10;
  for (int step = 0; step < 4; ++step) {
    std::string stepName = name + ", step " + std::to_string(step);
    bool nonFinite = step == 2 && size > 1 && rank == size - 1;
    std::vector<float> noise = randomVector(n, 300 + 17 * rank + step, 1.0f);
    std::vector<T> grad(noise.begin(), noise.end());
    if (nonFinite)
      grad[30] = std::numeric_limits<T>::quiet_NaN();
    std::vector<T> out(n, T(-7)), stateOut(stateSize, T(-99));
    dsrt_comm_stats before, after;
    dsrt_get_comm_stats(&before);
    auto g = view(grad), si = view(state), so = view(stateOut), o = view(out);
    dsrt_memref1_i64 sh = view(shapes);
    int64_t handle = startPowerSgd(&g, &si, &so, &sh, lowRank, 1);
    waitAllreduce(handle, &o);
    dsrt_get_comm_stats(&after);
    if (!noError(stepName))
      return;

    dsrt_test::PowerSgdOutcome<T> ref = dsrt_test::powerSgdReference<T>(
        gatherRanks(grad), gatherRanks(state), shapes, lowRank);
    std::string detail;
    report(close(out, ref.result, exact, tolerance, detail),
           stepName + ": the result", detail);
    report(close(stateOut, ref.states[rank], exact, tolerance, detail),
           stepName + ": the state (E' = M - P Q^T, Q' = Q)", detail);
    report(ref.finite[rank] == !nonFinite &&
               after.nonfinite_buckets - before.nonfinite_buckets ==
                   (nonFinite ? 1u : 0u),
           stepName + ": non-finite buckets counted");
    double sent = after.bytes_sent - before.bytes_sent;
    report(sent == double(ref.sentElements) * sizeof(T) &&
               after.bytes_sent_buckets - before.bytes_sent_buckets == sent &&
               after.bytes_dense - before.bytes_dense == double(n) * sizeof(T),
           stepName + ": bytes_sent and bytes_dense",
           std::to_string(sent) + " bytes sent");
    std::vector<float> asFloat(out.begin(), out.end());
    bool agree = agreeAcrossRanks(asFloat);
    // Q of the 24 x 20 matrix: identical on every rank, the NaN rank's too.
    std::vector<float> q(stateOut.begin() + 480,
                         stateOut.begin() + 480 + 20 * lowRank);
    report(agree && agreeAcrossRanks(q),
           stepName + ": every rank agrees on the result and Q");
    std::vector<T> small(stateOut.begin() + smallAt,
                         stateOut.begin() + smallAt + smallSize);
    report(std::equal(small.begin(), small.end(), state.begin() + smallAt),
           stepName + ": the incompressible matrix's state is unchanged");
    state = stateOut;
  }

  // Inactive: the mean of quarter multiples (exact in any order), and
  // state_out = state_in.
  std::vector<T> grad(n), expected(n), out(n), stateOut(stateSize, T(-99));
  for (int64_t i = 0; i < n; ++i) {
    grad[i] = T((rank + 1) * (i % 89 - 40)) * T(0.25);
    T sum = 0;
    for (int r = 0; r < size; ++r)
      sum += T((r + 1) * (i % 89 - 40)) * T(0.25);
    expected[i] = sum / T(size);
  }
  auto g = view(grad), si = view(state), so = view(stateOut), o = view(out);
  dsrt_memref1_i64 sh = view(shapes);
  waitAllreduce(startPowerSgd(&g, &si, &so, &sh, lowRank, 0), &o);
  report(noError(name + ", inactive") && out == expected && stateOut == state,
         name + ", inactive: the mean, state_out = state_in");
}

/// An invariant the replay cannot see (it shares the runtime's reading of
/// PowerSGD): every rank holds the same rank-1 gradient u v^T, so PowerSGD
/// of rank 1 recovers the mean exactly and leaves no error behind, on
/// every rank and every step (PyTorch's E = M - mean approximation = 0).
void checkPowerSgdExact() {
  configure(true, 60);
  int64_t m = 12, n = 10;
  std::vector<int64_t> shapes = {m, n};
  int64_t stateSize = dsrt_powersgd_state_size(shapes.data(), 2, 1);
  std::vector<double> grad(m * n), state(stateSize, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      grad[i * n + j] = (1.0 + 0.25 * i) * (0.5 - 0.125 * j);
  bool ok = true;
  double worstResult = 0, worstError = 0;
  for (int step = 0; step < 3; ++step) {
    std::vector<double> out(m * n), stateOut(stateSize);
    auto g = view(grad), si = view(state), so = view(stateOut), o = view(out);
    dsrt_memref1_i64 sh = view(shapes);
    waitAllreduce(startPowerSgd(&g, &si, &so, &sh, 1, 1), &o);
    ok = ok && noError("PowerSGD exact rank 1");
    for (int64_t i = 0; i < m * n; ++i) {
      worstResult = std::max(worstResult, std::fabs(out[i] - grad[i]));
      worstError = std::max(worstError, std::fabs(stateOut[i]));
    }
    state = stateOut;
  }
  report(ok && worstResult < 1e-12 && worstError < 1e-12,
         "PowerSGD of identical rank-1 gradients: the mean, no error left",
         "result off by " + std::to_string(worstResult) + ", error " +
             std::to_string(worstError));
}

void checkHalf() {
  configure(false, 60);
  // Multiples of N / 16: grad / N and every sum are exact in f16 and bf16.
  int64_t n = 300;
  std::vector<float> grad(n), expected(n);
  for (int64_t i = 0; i < n; ++i) {
    grad[i] = float((rank + 1) * (i % 11 - 5) * size) / 16.0f;
    float sum = 0;
    for (int r = 0; r < size; ++r)
      sum += float((r + 1) * (i % 11 - 5)) / 16.0f;
    expected[i] = sum;
  }
  for (int64_t scheme : {DSRT_COMPRESS_FP16, DSRT_COMPRESS_BF16}) {
    const char *name = scheme == DSRT_COMPRESS_FP16 ? "fp16" : "bf16";
    std::vector<float> out = allreduce(grad, scheme);
    report(noError(name) && sameBits(out, expected),
           std::string(name) + " all-reduce: exact values");
    // Random values: within the 16-bit types' rounding of the exact mean.
    std::vector<float> r = randomVector(n, 77 + rank, 1.0f);
    std::vector<float> all = gatherAll(r);
    out = allreduce(r, scheme);
    double tolerance = scheme == DSRT_COMPRESS_FP16 ? 0x1p-9 : 0x1p-6;
    bool close = noError(name);
    for (int64_t i = 0; i < n && close; ++i) {
      double mean = 0, magnitude = 0;
      for (int k = 0; k < size; ++k) {
        mean += all[k * n + i] / double(size);
        magnitude += std::fabs(all[k * n + i]) / size;
      }
      close = std::fabs(out[i] - mean) <= tolerance * (magnitude + 1e-6);
    }
    report(close && agreeAcrossRanks(out),
           std::string(name) + " all-reduce: within rounding, ranks agree");
  }
}

void checkHost() {
  configure(false, 60);
  // Broadcast from the last rank.
  int64_t words[3] = {rank, rank * 10, 7};
  bool ok = dsrt_broadcast(words, sizeof(words), size - 1) == 0 &&
            words[0] == size - 1 && words[1] == 10 * (size - 1);
  report(noError("host broadcast") && ok, "host broadcast");
  // In-step broadcast from rank 0.
  std::vector<float> in = {float(rank) + 0.5f, -1}, out(2);
  dsrt_memref1_f32 i = view(in), o = view(out);
  _mlir_ciface_dsrt_broadcast_f32(&i, &o);
  report(noError("in-step broadcast") && out[0] == 0.5f && out[1] == -1,
         "in-step broadcast");
  // All-gather.
  char mine[8] = {0};
  std::snprintf(mine, sizeof(mine), "rank%d", rank);
  std::vector<char> all(8 * size);
  ok = dsrt_allgather(mine, 8, all.data()) == 0;
  for (int r = 0; r < size; ++r)
    ok = ok && std::string(&all[8 * r]) == "rank" + std::to_string(r);
  report(noError("host all-gather") && ok, "host all-gather");
  // Integer reductions.
  int64_t v[3] = {rank, -rank, rank + 1};
  ok = dsrt_allreduce(v, 3, DSRT_I64, DSRT_REDUCE_SUM) == 0 &&
       v[0] == size * (size - 1) / 2 && v[1] == -v[0];
  int64_t m[2] = {rank, rank};
  ok = ok && dsrt_allreduce(m, 1, DSRT_I64, DSRT_REDUCE_MAX) == 0 &&
       m[0] == size - 1 &&
       dsrt_allreduce(m + 1, 1, DSRT_I64, DSRT_REDUCE_MIN) == 0 && m[1] == 0;
  uint8_t u = uint8_t(rank * 5);
  ok = ok && dsrt_allreduce(&u, 1, DSRT_U8, DSRT_REDUCE_MAX) == 0 &&
       u == uint8_t((size - 1) * 5);
  double mean = rank;
  ok = ok && dsrt_allreduce(&mean, 1, DSRT_F64, DSRT_REDUCE_MEAN) == 0 &&
       mean == double(size * (size - 1) / 2) / size;
  report(noError("host all-reduce") && ok, "host all-reduce");
}

/// --hang-rank: `hang` sleeps 30 s before its collective; the others must
/// fail with the timeout error within the timeout + 2 s.
[[noreturn]] void checkHang(int hang, double timeout) {
  configure(false, timeout);
  if (rank == hang) {
    std::printf("[rank %d] sleeping 30 s before the collective\n", rank);
    std::fflush(stdout);
    sleep(30);
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<float> grad(1024, float(rank));
  std::vector<float> out = allreduce(grad, DSRT_COMPRESS_NONE);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (rank == hang) {
    // Only reached if nobody stopped this process.
    std::printf("[rank %d] woke up: %s\n", rank, lastError().c_str());
    std::fflush(stdout);
    _exit(1);
  }
  std::string error = lastError();
  bool timedOut = dsrt_comm_failed() &&
                  error.find("did not complete within") != std::string::npos;
  char detail[64];
  std::snprintf(detail, sizeof(detail), "after %.2f s", seconds);
  report(timedOut && seconds <= timeout + 2.0,
         "timeout: " + error + " (" + detail + ")");
  report(out == grad, "timeout: the output is the local value");
  auto finalizeStart = std::chrono::steady_clock::now();
  dsrt_comm_finalize();
  double finalizeSeconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - finalizeStart)
                               .count();
  report(finalizeSeconds < 1.0, "timeout: dsrt_comm_finalize returns at once");
  std::printf("[rank %d] %d passed, %d failed; leaving with _exit(1)\n", rank,
              passes, failures);
  std::fflush(stdout);
  _exit(failures ? 2 : 1);
}

} // namespace

int main(int argc, char **argv) {
  int hang = -1;
  double timeout = 5.0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--hang-rank" && i + 1 < argc) {
      hang = std::atoi(argv[++i]);
    } else if (arg == "--timeout" && i + 1 < argc) {
      timeout = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: mpirun -np N %s [--hang-rank R] [--timeout S]\n",
                   argv[0]);
      return 2;
    }
  }
  configure(false, 60);
  rank = dsrt_comm_rank();
  size = dsrt_comm_size();
  std::printf("[rank %d] world of %d (launched by mpirun: %d)\n", rank, size,
              dsrt_comm_launched());
  std::fflush(stdout);
  if (hang >= 0)
    checkHang(hang, timeout);

  checkMean(false);
  configure(true, 60);
  checkMean(true);
  checkDeterministicBucketing();
  checkCompressed("three-tier, quantiles", DSRT_COMPRESS_THREE_TIER, 0, 0.5,
                  0.95, false);
  checkCompressed("three-tier, fixed thresholds", DSRT_COMPRESS_THREE_TIER, 1,
                  0.02, 0.03, false);
  checkCompressed("three-tier, dense switch", DSRT_COMPRESS_THREE_TIER, 0, 0,
                  0.5, size > 1);
  checkCompressed("top-k", DSRT_COMPRESS_TOPK, 0.01, 0, 0, false);
  checkPowerSgd<float>(true, 2);
  checkPowerSgd<float>(false, 1);
  checkPowerSgd<float>(false, 4);
  checkPowerSgd<double>(true, 3);
  checkPowerSgdExact();
  checkHalf();
  checkHost();

  dsrt_comm_finalize();
  report(noError("dsrt_comm_finalize") && !dsrt_comm_failed(),
         "dsrt_comm_finalize");
  std::printf("[rank %d] %d passed, %d failed\n", rank, passes, failures);
  return failures ? 1 : 0;
}

//===- CommInternal.h - Shared helpers of the collectives -------*- C++ -*-===//
//
// What the files of the collectives layer share: the communicator's task
// queue and exchange primitives (Comm.cpp, the only file that includes
// <mpi.h>, so that MPI's types never leak into the rest of the runtime), the
// gradient compressors (CommCompress.cpp), PowerSGD (CommPowerSgd.cpp) and
// the generated-code entry points (CommCollectives.cpp). Nothing here is
// exported.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_COMMINTERNAL_H
#define DS_LIB_RUNTIME_COMMINTERNAL_H

#include "RuntimeInternal.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace dsrt {
namespace comm {

//===----------------------------------------------------------------------===//
// Communicator (Comm.cpp)
//===----------------------------------------------------------------------===//

/// One collective queued for the communication thread.
struct Task;

/// What a caller needs to issue collectives: the world, and the
/// deterministic flag of the configuration at the time of the issue.
struct World {
  int rank = 0;
  int size = 1;
  bool deterministic = false;
};

/// Makes sure a communicator runs (a collective before dsrt_comm_init starts
/// one with the default configuration) and describes it. Fails, with an
/// error recorded unless the communicator has failed before (then nothing
/// new is recorded), when no collective may be issued: the caller then uses
/// its local value. `world` holds the rank and size either way.
Status acquire(World &world);

/// Queues `body` for the communication thread, which runs the tasks in issue
/// order. `kind` and `bytes` name the collective in error messages. Returns
/// null, recording nothing, when the communicator has failed meanwhile.
std::shared_ptr<Task> issue(const char *kind, int64_t bytes,
                            std::function<Status()> body);

/// Blocks until `task` is done, at most the configured timeout; adds the
/// time blocked to the counters. True when the task completed; false when it
/// failed or timed out (an error is then recorded and the communicator is
/// failed) or when the communicator had failed before.
bool wait(const std::shared_ptr<Task> &task);

/// issue, then wait: a blocking collective. Its buffers must be owned by
/// `body`, which may outlive the call when the wait times out.
inline bool run(const char *kind, int64_t bytes, std::function<Status()> body) {
  return wait(issue(kind, bytes, std::move(body)));
}

/// Exchange primitives: called only from a task body, on the communication
/// thread. Without MPI (a world of one) they copy locally. A failure records
/// an error naming the running task and the MPI call. None of them counts
/// bytes: callers do (countSent).
/// recv = the elementwise SUM, MAX or MIN over ranks of send (count elements
/// of a DSRT_* type); send may equal recv. With `deterministic`, floating
/// point sums are computed in rank order on every rank (all-gathers of
/// chunks, then a local loop). MEAN divides the sum by the world size.
Status allreduce(const void *send, void *recv, int64_t count, int dtype, int op,
                 bool deterministic);
/// recv[r * bytes ...] = rank r's `bytes` bytes of send.
Status allgather(const void *send, int64_t bytes, void *recv);
/// recv = the ranks' blocks one after another, rank r's being sizes[r]
/// bytes (sizes as all-gathered before).
Status allgatherv(const void *send, const int64_t *sizes, void *recv);
/// buf = root's `bytes` bytes.
Status broadcast(void *buf, int64_t bytes, int root);

/// Runs `body` with the stage group (the stages of this rank's replica) as
/// the group the primitives above reduce over: the pipeline's cross-stage
/// reductions. Without a pipeline the group is this rank alone.
Status onStageGroup(const std::function<Status()> &body);
/// Posts a non-blocking send of `data` to stage `peer` on channel `tag`;
/// the buffer is kept until the send completes.
Status sendTo(std::shared_ptr<std::vector<uint8_t>> data, int peer, int tag);
/// Receives exactly `bytes` bytes from stage `peer` on channel `tag`.
Status recvFrom(void *data, int64_t bytes, int peer, int tag);

/// Size in bytes of an element of a DSRT_* type, 0 for an unknown type.
int64_t elementSize(int dtype);

/// Counters of dsrt_comm_stats. countBucketSent counts a gradient
/// bucket's exchange (what bytes_dense compares), in bytes_sent too.
void countSent(double bytes);
void countBucketSent(double bytes);
void countDense(double bytes);
void countDenseFallback();
void countNonFinite();
/// A collective that did not go through issue() (NCCL's).
void countCollective();
/// The configured --comm-timeout in seconds (0: wait forever), which a
/// device backend's watchdog applies to its own collectives.
double timeoutSeconds();
/// Fails the communicator (a device backend's collective timed out, its
/// error recorded): later collectives return at once, dsrt_comm_failed()
/// says so, and dsrt_comm_finalize does not wait for the peers.
void failCommunicator();
/// Runs `hook` at the start of every dsrt_get_comm_stats: counters a
/// backend keeps on the device are folded in then (CommNccl.cpp).
void setStatsHook(void (*hook)());
/// Runs `hook` at the start of dsrt_comm_finalize, at the same point on
/// every rank: a device backend's communicator goes then (CommNccl.cpp).
void setFinalizeHook(void (*hook)());
/// What dsrt_comm_device_backend says from now on (copied).
void setDeviceBackend(const char *name);

//===----------------------------------------------------------------------===//
// Compression (CommCompress.cpp)
//===----------------------------------------------------------------------===//

/// Checks a scheme and its parameters; records an error naming `what`.
Status checkScheme(int64_t scheme, double p0, double p1, double p2,
                   const char *what);

/// Encodes the finite vector v[n] with a sparse scheme (three-tier or
/// top-k) into `payload` and writes the decoded values into decoded[n].
Status encodeSparse(const float *v, int64_t n, int64_t scheme, double p0,
                    double p1, double p2, float *decoded,
                    std::vector<uint8_t> &payload);

/// The three-tier payload of the codes the device's encoder wrote
/// (DSRT_THREE_TIER_CODE_*, ds_runtime_cuda.h) with its scales s8 and t16,
/// and the decoded values into decoded[n]: encodeSparse's, for the same v.
Status encodeThreeTierCodes(const uint16_t *codes, int64_t n, float s8,
                            float t16, float *decoded,
                            std::vector<uint8_t> &payload);

/// The top-k payload of a bucket of n elements from the device encoder's
/// slots (indices ascending, then DSRT_TOPK_SLOT_EMPTY; ds_runtime.h), and
/// the decoded values into decoded[n]: encodeSparse's, for the same v.
Status encodeTopKSlots(const uint32_t *indices, const float *values,
                       int64_t slots, int64_t n, float *decoded,
                       std::vector<uint8_t> &payload);

/// A start whose payload the device's encoder prepared (CommCollectives.cpp):
/// `encode` writes it and the decoded values (n), the payload is exchanged
/// as dsrt_allreduce_start_f32's and waited by dsrt_allreduce_wait_f32; a
/// bucket that was not `finite` is counted and sends zeros. 0 with the
/// error recorded when `encode` fails (a malformed code or slot).
int64_t startDeviceEncoded(
    int64_t n, int64_t scheme, bool finite,
    const std::function<Status(float *decoded, std::vector<uint8_t> &)>
        &encode);

/// The payload of a sparse scheme that sends nothing (all zeros).
void encodeZeros(int64_t n, int64_t scheme, std::vector<uint8_t> &payload);

/// Adds the decoded payload to acc[n], after checking all of it (acc is
/// untouched when the payload is malformed).
template <typename Acc>
Status decodeAdd(const uint8_t *payload, int64_t bytes, int64_t n, Acc *acc);

/// IEEE binary16 and bfloat16 conversions, rounding to nearest even.
uint16_t toHalf(float value);
float fromHalf(uint16_t bits);
uint16_t toBFloat16(float value);
float fromBFloat16(uint16_t bits);

//===----------------------------------------------------------------------===//
// PowerSGD (CommPowerSgd.cpp)
//===----------------------------------------------------------------------===//

/// Where tensor k of a PowerSGD bucket lies and how it is reduced.
struct PowerSgdTensor {
  int64_t index = 0; ///< k, the generator's seed
  int64_t at = 0;    ///< its first element in the bucket
  int64_t m = 0, n = 0;
  int64_t rank = 0;     ///< r = min(rank, m, n); 0 for a vector
  int64_t stateAt = -1; ///< E_k in the state, Q_k after it; -1: a vector
  bool compressed = false;
};

/// The layout of a bucket and of its state.
struct PowerSgdPlan {
  std::vector<PowerSgdTensor> tensors;
  int64_t elements = 0;     ///< of the bucket
  int64_t stateSize = 0;    ///< of the state
  int64_t uncompressed = 0; ///< elements all-reduced as they are
  int64_t pSize = 0;        ///< elements of all P's
  int64_t qSize = 0;        ///< elements of all Q's
};

/// Lays out `count` shape entries (m_0, n_0, m_1, ...) for `rank`; records
/// an error naming `what` for an odd count, a negative entry, rank < 1 or
/// an overflow.
Status planPowerSgd(const int64_t *shapes, int64_t count, int64_t rank,
                    PowerSgdPlan &plan, const char *what);

/// What one PowerSGD all-reduce works on: set by the start, then read by
/// the exchange (stateIn also by the wait after a failure).
template <typename T> struct PowerSgdWork {
  PowerSgdPlan plan;
  /// The bucket as this rank sends it: g for the uncompressed tensors,
  /// M = g + E for the compressed ones; zeros once non-finite.
  std::vector<T> input;
  std::vector<T> stateIn;
  /// Written by the exchange; the new state once it has completed.
  std::vector<T> stateOut;
  /// False once this rank sends zeros.
  bool finite = true;
};

/// The local part of the start: input = grad / size (+ E), and whether it
/// is finite (zeros if not); counts nothing.
template <typename T>
void preparePowerSgd(PowerSgdWork<T> &work, const std::vector<T> &grad,
                     int size);

/// The task body: P's, Q's and their two all-reduces; writes the bucket's
/// result into result[plan.elements] and the new state into stateOut.
template <typename T>
Status exchangePowerSgd(PowerSgdWork<T> &work, const World &world,
                        std::vector<T> &result);

} // namespace comm
} // namespace dsrt

#endif // DS_LIB_RUNTIME_COMMINTERNAL_H

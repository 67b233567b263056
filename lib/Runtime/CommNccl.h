//===- CommNccl.h - The uncompressed collectives on NCCL --------*- C++ -*-===//
//
// What CommCuda.cpp asks of NCCL (CommNccl.cpp): the collectives whose
// result is a plain reduction or a copy (the uncompressed gradient
// all-reduce, the loss's and metrics' all-reduces, the broadcasts) run on
// device buffers, enqueued on the CUDA streams, with no host wait. Each
// entry point returns false, having done nothing, when NCCL does not serve
// the call (another backend chosen, deterministic mode, a world of one);
// the caller then stages the call through the host.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_COMMNCCL_H
#define DS_LIB_RUNTIME_COMMNCCL_H

#include <cstdint>

namespace dsrt::comm::nccl {

/// out[count] = the DSRT_REDUCE_* `op` over the data-parallel group of
/// in[count] (contiguous device buffers of f32, or f64 with `f64`), in
/// order on the step stream.
bool allreduce(const void *in, void *out, int64_t count, bool f64, int64_t op);

/// out[count] = rank 0's in[count], in order on the step stream.
bool broadcast(const void *in, void *out, int64_t count, bool f64);

/// A pipeline's transfer on NCCL: sends in[count] (f32, or f64 with `f64`)
/// to stage `peer` of this rank's replica, in order on the step stream;
/// the step may reuse `in` once this returns. Each direction between two
/// stages is a link of its own (a communicator of the two ranks and a
/// stream), made at the first transfer by both ends, which must therefore
/// call this whatever their views: `count` -1 for a view that is not a
/// contiguous vector (an error on a link, staged otherwise).
bool send(const void *in, int64_t count, bool f64, int64_t peer);

/// Receives out[count] from stage `peer`; the step stream waits for it.
bool recv(void *out, int64_t count, bool f64, int64_t peer);

/// out[count] = the DSRT_REDUCE_* `op` over the stages of this rank's
/// replica of in[count] (a pipeline's sums over stages), in order on the
/// step stream, on the stage group's communicator (made at the first sum
/// by every stage). Every stage calls it at the same point: `count` -1 for
/// views that are not contiguous vectors of one size (an error there).
bool stageAllreduce(const void *in, void *out, int64_t count, bool f64,
                    int64_t op);

/// The element types of a started all-reduce. F16 and BF16 carry DDP's
/// fp16/bf16 hooks (ds-compress-allreduce{scheme=fp16|bf16}): each rank's
/// values were divided by the group's size before they were rounded, so
/// they are summed, not averaged, and count as f32 gradients in the dense
/// bytes (the compression ratio 2).
enum class Element { F32, F64, F16, BF16 };

/// Starts the mean (F32, F64) or the sum (F16, BF16) of bucket[count] over
/// the group, on the communication stream, which the step stream does not wait
/// for until the wait: in place with `inPlace` (the step keeps the buffer,
/// untouched, for the wait's output), otherwise on a copy in a buffer of the
/// runtime's made on the step stream. `probe` (one f64 on the device, NaN when
/// the step found the bucket non-finite and zeroed it) is counted in
/// nonfinite_buckets. Sets `handle` (never 0) when it started the all-reduce.
bool start(const void *bucket, int64_t count, Element type, const double *probe,
           bool inPlace, int64_t &handle);

/// Whether this process's choice between NCCL and the host is made (or
/// needs no MPI: deterministic mode, no NCCL built in). Until then, the
/// entry points above may talk to the other ranks through MPI.
bool decided();

/// Whether the link for transfers to (`sends`) or from stage `peer`, or
/// the stage group (`peer` -1), is made or known to be staged, on NCCL's
/// side: send, recv and stageAllreduce then make no MPI call of their own.
bool transfersDecided(int64_t peer, bool sends);

/// Whether `handle` is one of start's, not yet waited for.
bool owns(int64_t handle);

/// Makes the step stream wait for the started all-reduce `handle` and
/// copies its result into out[count] (nothing to copy when `out` is the
/// bucket it ran on in place); records an error naming `what` for a
/// count or type other than the start's. Call only when owns(handle).
void wait(int64_t handle, void *out, int64_t count, Element type,
          const char *what);

/// DGC's top-k on NCCL: this rank's slots (`slots` indices, ascending then
/// DSRT_TOPK_SLOT_EMPTY, and their values; all empty when the step found
/// the bucket non-finite) copied on the step stream into a buffer of the
/// runtime's, and all-gathered there in rank order on the communication
/// stream, for the step to decode. Served when NCCL serves the process, the
/// slots are those of a `fixedFraction` (not of DGC's warm-up, whose 25 %
/// would outweigh the later steps' fraction hundreds of times) and the
/// all-gather sends at most what a ring all-reduce of the bucket of n would
/// (slots x ranks <= n); always with DS_CUDA_TOPK_EXCHANGE=nccl; never
/// with =host. `probe` (one f32 on the device, NaN for a non-finite
/// bucket) is counted in nonfinite_buckets. Sets `handle` as start does.
bool startTopK(const uint32_t *indices, const float *values, int64_t slots,
               int64_t n, bool fixedFraction, const float *probe,
               int64_t &handle);

/// The ranks whose slots startTopK gathered under `handle`; 0 for a handle
/// that is not a top-k start of this file's.
int64_t topKRanks(int64_t handle);

/// Makes the step stream wait for the all-gather of `handle` (a top-k
/// start); the gathered slots are then the step's to copy, until endTopK.
void waitTopK(int64_t handle, const char *what);

/// Copies rank `rank`'s gathered slots into indices[slots] and
/// values[slots] (contiguous device buffers) on the step stream; records
/// an error naming `what` for a rank, a size or an order (before waitTopK)
/// the start does not allow.
void copyTopKSlots(int64_t handle, int64_t rank, uint32_t *indices,
                   float *values, int64_t slots, const char *what);

/// Ends the top-k start `handle`: its buffer freed on the step stream.
void endTopK(int64_t handle);

} // namespace dsrt::comm::nccl

#endif // DS_LIB_RUNTIME_COMMNCCL_H

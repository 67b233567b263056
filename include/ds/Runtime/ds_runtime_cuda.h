/*===- ds_runtime_cuda.h - C ABI of the ds runtime's CUDA backend -*- C -*-===*\
|*                                                                            *|
|* What code compiled by ds-gpu-pipeline and the ds-run runner call on a      *|
|* CUDA device: the mgpu* functions MLIR's GPU lowering emits calls to, the   *|
|* runner's device API (dsrt_cuda_*) and the GEMMs on cuBLASLt. Built into    *|
|* libdsrt when CMake finds the CUDA toolkit (DSRT_HAVE_CUDA=1), or alone as  *|
|* libdsrt_cuda.so from lib/Runtime/cuda. Nothing here links CUDA: the        *|
|* driver (libcuda.so.1) and cuBLASLt are loaded with dlopen at run time, so  *|
|* the library loads on a machine without a GPU and every call then records   *|
|* "no CUDA device: <why>" in the error slot of ds_runtime.h.                 *|
|*                                                                            *|
|* Errors: as everywhere in the runtime, a failing call records a message     *|
|* (dsrt_last_error(); the first error wins) and returns: a driver or cuBLAS  *|
|* failure names the function and the status (cuGetErrorName's text). No     *|
|* call aborts or exits.                                                      *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef DS_RUNTIME_DS_RUNTIME_CUDA_H
#define DS_RUNTIME_DS_RUNTIME_CUDA_H

#include "ds/Runtime/ds_runtime.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===------------------------------------------------------------------------===
 * The step stream
 *===------------------------------------------------------------------------===*/

/* The runtime owns ONE in-order, non-blocking stream per process: the step
   stream. Everything the runtime enqueues goes there (kernels, copies,
   stream-ordered allocations, GEMMs), and mgpuStreamCreate returns it, so
   that the host code of ds-gpu-pipeline, which chains a whole step on one
   async token starting with `gpu.wait async`, runs in program order with no
   synchronisation between steps: the host only waits where it reads a
   result (mgpuStreamSynchronize, dsrt_cuda_copy_to_host, an event of the
   report ring). A null stream passed to any function below means the step
   stream.

   The device is chosen once per process, by dsrt_cuda_init (or by the first
   mgpu* call, which initialises the runtime on demand): its primary context
   is retained and made current on every thread that calls in. */

/* Initialises the backend; idempotent and thread-safe. Loads the driver with
   dlopen (path from the environment variable DS_CUDA_DRIVER, default
   "libcuda.so.1"), calls cuInit, picks device DS_CUDA_DEVICE (the device
   of an earlier mgpuSetDefaultDevice, else, unset, the process's local rank
   modulo the devices when an MPI launcher or torchrun set one
   (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK),
   else 0), retains its primary
   context, makes it current and creates the step stream. Returns 0, or -1
   with an error starting with "no CUDA device: " recorded, e.g.
   "no CUDA device: cannot load the CUDA driver libcuda.so.1 (<dlerror>)",
   "no CUDA device: cuInit failed: CUDA_ERROR_NO_DEVICE (<text>)" or
   "no CUDA device: the machine has 0 CUDA devices". After a failure a later
   call tries again. The driver stays loaded for the life of the process. */
DSRT_API int dsrt_cuda_init(void);

/* Releases what the runtime owns, in order: waits for the step stream, then
   frees the cuBLASLt workspace and handle, destroys the step stream and
   releases the primary context. Modules loaded by compiled code must be
   unloaded before (the JIT's global destructors do it). Without this call
   the runtime leaves its objects to the driver at process exit, as its
   destructors would otherwise run after the driver's own teardown. A later
   dsrt_cuda_init starts afresh. */
DSRT_API void dsrt_cuda_shutdown(void);

/* 10 * major + minor of the device (90 for sm_90), or 0 before init. */
DSRT_API int dsrt_cuda_compute_capability(void);

/* The device's name ("NVIDIA H100 80GB HBM3"), or "" before init. */
DSRT_API const char *dsrt_cuda_device_name(void);

/* 1 when the host can address device memory at its device address (the
   driver reports a fresh allocation as host memory: the test stub libcuda
   does), 0 when it cannot (every real GPU), -1 with an error. A step
   compiled with ds-gpu-pipeline{emulate-kernels} runs its kernels on the
   host and needs 1. */
DSRT_API int dsrt_cuda_device_memory_is_host(void);

/* The step stream (a CUstream), or NULL before init. */
DSRT_API void *dsrt_cuda_stream(void);

/* Block until everything enqueued on the step stream has run. Returns 0, or
   -1 with an error (an asynchronous failure of earlier work shows here). */
DSRT_API int dsrt_cuda_synchronize(void);

/* What the runtime has enqueued since the process started (or the last
   reset): for "kernel launches and host time per step". Counted on the
   host when the work is enqueued, so they need no device. Work captured
   into a CUDA graph (below) is not counted when it is captured but each
   time the graph is launched, so the first four count the same work
   whether a step runs directly or as a graph. */
typedef struct dsrt_cuda_stats {
  uint64_t kernel_launches;    /* mgpuLaunchKernel, mgpuLaunchClusterKernel */
  uint64_t gemms;              /* cublasLtMatmul calls (a batched one: 1) */
  double gemm_flops;           /* 2 M N K per batch, summed */
  uint64_t stream_allocations; /* mgpuMemAlloc: the steps' temporaries */
  uint64_t waits;              /* dsrt_cuda_synchronize, mgpuStreamSynchronize,
                                  dsrt_cuda_copy_to_host (so the collectives' staging) */
  uint64_t graph_launches;     /* dsrt_cuda_graph_launch */
  uint64_t graph_kernels;      /* of kernel_launches, those graphs ran; the host
                                  launched kernel_launches - graph_kernels
                                  kernels and graph_launches graphs itself */
  double bytes_to_host;        /* what the runtime copied from device to host
                                  memory (PCIe): dsrt_cuda_copy_to_host, the
                                  staged collectives' copies, the top-k slots
                                  fetched, NCCL's probes; not the compiled
                                  step's own copies (gpu.memcpy) */
  double bytes_to_device;      /* likewise back: dsrt_cuda_copy_to_device (the
                                  runner's inputs, the staged collectives'
                                  results and residuals, top-k means) */
} dsrt_cuda_stats;
DSRT_API void dsrt_cuda_get_stats(dsrt_cuda_stats *out);
DSRT_API void dsrt_cuda_reset_stats(void);

/*===------------------------------------------------------------------------===
 * Device time per kernel
 *===------------------------------------------------------------------------===*/

/* Where a step's device time goes. Between dsrt_cuda_profile_begin and
   dsrt_cuda_profile_end every kernel launch and cuBLASLt GEMM on the step
   stream is bracketed by two events, and the device time between them is
   summed per name: a kernel's symbol, a GEMM's "cublasLt A x B -> C MxNxK"
   (xBATCHES when batched). The events cost some device time themselves
   (a few microseconds a kernel), so the shares matter, not the sum.
   Profiling cannot be combined with a CUDA graph capture.

   dsrt_cuda_profile_begin: 0, or -1 with an error (no device, capturing).
   dsrt_cuda_profile_end waits for the profiled work and returns the number
   of entries, sorted by time, longest first, in *entries (valid until the
   next begin); -1 with an error (no profile begun, the device failed). */
typedef struct dsrt_cuda_profile_entry {
  const char *name;
  uint64_t calls;
  double ms; /* device time in all calls together */
} dsrt_cuda_profile_entry;
DSRT_API int dsrt_cuda_profile_begin(void);
DSRT_API int64_t dsrt_cuda_profile_end(const dsrt_cuda_profile_entry **entries);

/*===------------------------------------------------------------------------===
 * CUDA graphs of a step
 *===------------------------------------------------------------------------===*/

/* A step's host code enqueues hundreds of small kernels; a CUDA graph
   records them once and replays them with one launch, which removes the
   host's per-kernel cost (a few microseconds each). A replay does exactly
   what the capture recorded, at the same addresses: the same kernels with
   the same arguments, the same GEMMs, copies and memsets, and stream-
   ordered allocations at the same device addresses each time. So a step
   may be replayed only with the buffers it was captured with (StepGraphs.h
   keys its graphs by them), and its host code must not depend on anything
   else that changes between steps (the code ds-gpu-pipeline emits does
   not: it reads no device data and keeps no state).

   dsrt_cuda_graph_begin starts capturing the step stream (in the driver's
   relaxed mode, so that what the host does on the side, e.g. a first
   cuBLASLt plan, is allowed): until dsrt_cuda_graph_end, what is enqueued
   on it is recorded, not run, and counted in the graph's tally, not the
   process's (dsrt_cuda_stats). Calls that would wait for the stream
   (dsrt_cuda_synchronize, dsrt_cuda_copy_to_host, dsrt_cuda_free,
   mgpuStreamSynchronize, ...) record an error instead, and so do managed
   allocations (gpu.alloc host_shared), which a graph cannot hold. Returns
   0, or -1 with an error (already capturing, no device).

   dsrt_cuda_graph_end ends the capture and instantiates the graph. It
   returns the graph, or NULL when an error is recorded (dsrt_last_error:
   clear it before the capture; a refused call above leaves one) or the
   driver refused the capture; the recorded work is then dropped, never
   run.

   dsrt_cuda_graph_launch enqueues one replay on the step stream: 0, or -1
   with an error. dsrt_cuda_graph_destroy waits for the stream, then
   destroys the graph (NULL does nothing). */
DSRT_API int dsrt_cuda_graph_begin(void);
DSRT_API void *dsrt_cuda_graph_end(void);
DSRT_API int dsrt_cuda_graph_launch(void *graph);
DSRT_API void dsrt_cuda_graph_destroy(void *graph);

/*===------------------------------------------------------------------------===
 * Memory and events for the runner
 *===------------------------------------------------------------------------===*/

/* Device memory for state that outlives steps (parameters, optimizer state).
   Not stream-ordered: the memory is usable on any stream once the call
   returns, and dsrt_cuda_free waits for the step stream before it frees.
   0 bytes returns NULL with no error; a failure returns NULL with an error.
   Initialises the runtime on demand. */
DSRT_API void *dsrt_cuda_alloc(int64_t bytes);
DSRT_API void dsrt_cuda_free(void *ptr);

/* Copies enqueued on the step stream. copy_to_device returns once the copy
   is enqueued: `src` may be reused at once if it is pageable memory (the
   driver stages it before returning) but must stay unchanged until the
   stream reaches the copy if it is pinned (dsrt_cuda_host_alloc).
   copy_to_host waits for the copy, and so for all earlier work on the
   stream. Return 0, or -1 with an error. */
DSRT_API int dsrt_cuda_copy_to_device(void *dst, const void *src,
                                      int64_t bytes);
DSRT_API int dsrt_cuda_copy_to_host(void *dst, const void *src, int64_t bytes);

/* Pinned (page-locked) host memory, for copies that overlap computation.
   dsrt_cuda_host_free waits for the step stream before it frees. */
DSRT_API void *dsrt_cuda_host_alloc(int64_t bytes);
DSRT_API void dsrt_cuda_host_free(void *ptr);

/* A report ring without stalls: dsrt_cuda_event_record returns a new event
   recorded on the step stream now (NULL with an error on failure);
   dsrt_cuda_event_wait blocks until the stream has reached it, destroys it
   and returns 0, or -1 with an error (the event is destroyed either way). */
DSRT_API void *dsrt_cuda_event_record(void);
DSRT_API int dsrt_cuda_event_wait(void *event);

/*===------------------------------------------------------------------------===
 * Collectives on device buffers
 *===------------------------------------------------------------------------===*/

/* What ds-gpu-pipeline's steps call for the collectives of data and
   pipeline parallelism (convert-ds-to-runtime{target=cuda}): each takes
   the arguments of the CPU function of ds_runtime.h without `cuda_` in its
   name (_mlir_ciface_dsrt_allreduce_f32 for
   _mlir_ciface_dsrt_cuda_allreduce_f32), with every memref in device
   memory, and has its semantics. The inputs are copied to the host on the
   step stream (so the call waits for the work before it), the CPU
   collective runs on the copies, and the outputs are copied back on the
   step stream. The starts' scalar parameters are device data too (a
   three-tier step computes its thresholds), so they come as the op's
   `params` buffer: p0, p1, p2 for a start (missing entries are 0), rank
   and active (converted to integers) for a PowerSGD start; an
   uncompressed start's one parameter is the bucket's probe (NaN when the
   step found it non-finite and zeroed it). A started
   all-reduce still exchanges on the communication
   thread while the host enqueues the next kernels; a PowerSGD start keeps
   the host copy of its state until its wait, which copies it back. When
   NCCL serves the process (dsrt_comm_device_backend; DS_CUDA_COLLECTIVES),
   the uncompressed all-reduces (starts, waits and blocking ones) and the
   broadcasts of contiguous vectors run on it instead, on the device, with
   no host wait. Built into libdsrt only (they need its MPI layer), not
   libdsrt_cuda.so. Like every call that waits for the stream, the staged
   ones record an error during a graph capture. */
DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_f32(dsrt_memref1_f32 *in,
                                                   dsrt_memref1_f32 *out,
                                                   int64_t op);
DSRT_API void _mlir_ciface_dsrt_cuda_stage_allreduce_f32(dsrt_memref1_f32 *in,
                                                         dsrt_memref1_f32 *out,
                                                         int64_t op);
DSRT_API void _mlir_ciface_dsrt_cuda_broadcast_f32(dsrt_memref1_f32 *in,
                                                   dsrt_memref1_f32 *out);
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_f32(
    dsrt_memref1_f32 *grad, dsrt_memref1_f32 *residual_in,
    dsrt_memref1_f32 *residual_out, int64_t scheme, dsrt_memref1_f64 *params);
/* An uncompressed start (a masked bucket, params = [probe]) whose bucket's
   buffer the step keeps, untouched, for its wait's output: NCCL all-reduces
   it in place (no copy in or out); staged, it is the start above. */
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_in_place_f32(
    dsrt_memref1_f32 *bucket, dsrt_memref1_f64 *params);
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_powersgd_f32(
    dsrt_memref1_f32 *grad, dsrt_memref1_f32 *state_in,
    dsrt_memref1_f32 *state_out, dsrt_memref1_i64 *shapes,
    dsrt_memref1_f64 *params);
DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_wait_f32(int64_t handle,
                                                        dsrt_memref1_f32 *out);
DSRT_API void _mlir_ciface_dsrt_cuda_send_f32(dsrt_memref1_f32 *in,
                                              int64_t peer, int64_t tag);
DSRT_API void _mlir_ciface_dsrt_cuda_recv_f32(dsrt_memref1_f32 *out,
                                              int64_t peer, int64_t tag);
DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_f64(dsrt_memref1_f64 *in,
                                                   dsrt_memref1_f64 *out,
                                                   int64_t op);
DSRT_API void _mlir_ciface_dsrt_cuda_stage_allreduce_f64(dsrt_memref1_f64 *in,
                                                         dsrt_memref1_f64 *out,
                                                         int64_t op);
DSRT_API void _mlir_ciface_dsrt_cuda_broadcast_f64(dsrt_memref1_f64 *in,
                                                   dsrt_memref1_f64 *out);
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_f64(
    dsrt_memref1_f64 *grad, dsrt_memref1_f64 *residual_in,
    dsrt_memref1_f64 *residual_out, int64_t scheme, dsrt_memref1_f64 *params);
/* An uncompressed start (a masked bucket, params = [probe]) whose bucket's
   buffer the step keeps, untouched, for its wait's output: NCCL all-reduces
   it in place (no copy in or out); staged, it is the start above. */
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_in_place_f64(
    dsrt_memref1_f64 *bucket, dsrt_memref1_f64 *params);
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_powersgd_f64(
    dsrt_memref1_f64 *grad, dsrt_memref1_f64 *state_in,
    dsrt_memref1_f64 *state_out, dsrt_memref1_i64 *shapes,
    dsrt_memref1_f64 *params);
DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_wait_f64(int64_t handle,
                                                        dsrt_memref1_f64 *out);
DSRT_API void _mlir_ciface_dsrt_cuda_send_f64(dsrt_memref1_f64 *in,
                                              int64_t peer, int64_t tag);
DSRT_API void _mlir_ciface_dsrt_cuda_recv_f64(dsrt_memref1_f64 *out,
                                              int64_t peer, int64_t tag);
struct dsrt_memref1_raw;
/* DDP's fp16/bf16 hooks (ds-compress-allreduce{scheme=fp16|bf16}) encoded
   on the device: the step computes encoded = round(bucket / N) in the
   16-bit type (f16 or bf16, a dsrt_memref1_raw of 2-byte elements), zeros
   when its probe (params = [probe], NaN for a non-finite value, counted)
   found one, and keeps `encoded` untouched until the wait, which leaves
   there the ranks' sum rounded to 16 bits. NCCL sums it in place
   (ncclFloat16 / ncclBfloat16, ncclSum: per hop of its ring, rounded to 16
   bits each time); staged, the CPU's compressed start takes the f32
   `bucket` (the sum in f32, in rank order, rounded once). */
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_half_f16(
    dsrt_memref1_f32 *bucket, struct dsrt_memref1_raw *encoded,
    dsrt_memref1_f64 *params);
DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_wait_half_f16(
    int64_t handle, struct dsrt_memref1_raw *encoded);
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_half_bf16(
    dsrt_memref1_f32 *bucket, struct dsrt_memref1_raw *encoded,
    dsrt_memref1_f64 *params);
DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_wait_half_bf16(
    int64_t handle, struct dsrt_memref1_raw *encoded);

/* The three-tier encoder on the device (DSRT_COMPRESS_THREE_TIER with
   thresholds the step fixes, convert-ds-to-runtime's device-encoders):
   the step computes v = grad + residual, the thresholds, each element's
   tier and value and the new residual itself, and hands the host one
   16-bit code per element (DSRT_THREE_TIER_CODE_*, ds_runtime.h) and
   scalars = [s8, t16, probe] (f32; probe NaN: the bucket was not
   finite, every code NONE, counted). The host writes the payload of
   DSRT_COMPRESS_THREE_TIER from them and exchanges it as the CPU's start
   does; dsrt_cuda_allreduce_wait_f32 completes it. Staged without a host
   wait (the codes copied to pinned memory): the residual stays on the
   device. */
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_three_tier_f32(
    struct dsrt_memref1_raw *codes, dsrt_memref1_f32 *scalars);

/* The top-k encoder on the device (DSRT_COMPRESS_TOPK with a fraction the
   step fixes or chooses among constants, DGC's warm-up;
   convert-ds-to-runtime's device-encoders): the step computes
   v = grad + residual, DGC's sampled threshold, the exact re-selection
   and the new residual itself, and compacts the sent elements into slots:
   `indices` (u32, a dsrt_memref1_raw of 4-byte elements) ascending, then
   DSRT_TOPK_SLOT_EMPTY (ds_runtime.h), `values` (f32) beside them (the
   compiler makes max(1, min(n, 2 ceil(p0 n))) slots for the largest p0
   the step can choose, enough for any selection; the runtime takes any
   number, contiguous); `count` = [the slots used] (u32, 4-byte
   elements); scalars = [probe] (NaN: the bucket of `n` elements was not
   finite, counted, zeros sent). The slots are copied on the device into
   the runtime's memory on the step stream; once the step stream has got
   there, the staging thread copies the count, and then only the used
   slots and the one after them (which must be empty) to the host, on a
   stream of its own (8 bytes a used slot cross PCIe, not the bucket nor
   the unused slots), writes the payload of DSRT_COMPRESS_TOPK and
   exchanges it as the CPU's start does; dsrt_cuda_allreduce_wait_f32,
   or dsrt_cuda_allreduce_wait_topk_f32 and _take_topk_f32 (below),
   complete it. Staged without a host wait; the residual stays on the
   device. A count above the slots, or one the slots contradict, is an
   error. `fixed_fraction` (0 or 1) says whether the step's fraction is
   one constant, so that the slots are sized for it (see "Gathered on
   NCCL" below). */
DSRT_API int64_t _mlir_ciface_dsrt_cuda_allreduce_start_topk_f32(
    struct dsrt_memref1_raw *indices, dsrt_memref1_f32 *values,
    struct dsrt_memref1_raw *count, dsrt_memref1_f32 *scalars, int64_t n,
    int64_t fixed_fraction);

/* The wait of such a start, or of an f32 top-k start the host encodes
   (dsrt_cuda_allreduce_start_f32 with DSRT_COMPRESS_TOPK, whose residual
   it writes back as the dense wait does), in two calls, so that the mean
   crosses PCIe as sparse as it is (at most the ranks' selections of its
   n elements are not zero). wait_topk waits for the exchange as
   dsrt_cuda_allreduce_wait_f32 does, keeps the mean on the host and
   returns how many of its elements are not +0 (U; every other one is
   +0), or -1 when U > n / 2 (8 U bytes sparse would outweigh the 4 n of
   the whole mean). take_topk then copies, on the step stream, their
   indices (u32, ascending) and values into `indices` and `values`, of U
   elements, or (after -1) the whole mean into `out` (n elements, the
   other two empty). The step zero-fills `out` before the take and
   scatters the U elements after it (convert-ds-to-runtime). The mean is
   the one dsrt_cuda_allreduce_wait_f32 would write, bit for bit. Each
   handle's take follows its wait once; a handle that is not such a
   start's (the wait then returns 0), a take without its wait, or vectors
   of other lengths are errors.

   Gathered on NCCL: a device-encoded start (start_topk_f32) is not staged
   when NCCL serves the process, its fraction is fixed (with DGC's
   warm-up the slots are those of 25 %, hundreds of times what the later
   steps send) and its S slots, all-gathered, send no more than a ring
   all-reduce of its n elements would (S x ranks <= n);
   DS_CUDA_TOPK_EXCHANGE=nccl gathers whatever the slots, =host never. The start
   copies the slots on the device into a buffer of the runtime's and
   all-gathers it in rank order on the communication stream (no host
   wait, no PCIe but the probe; a CUDA graph may capture it). ranks_topk
   then returns the number of ranks whose slots were gathered (0 for a
   staged start: the calls above complete it), wait_topk makes the step
   stream wait for the all-gather and returns 0, slots_topk copies rank
   `rank`'s S slots (its indices, ascending then DSRT_TOPK_SLOT_EMPTY, all
   empty for a non-finite bucket, and its values) into the step's device
   vectors on the step stream, for each rank in order, and take_topk
   (with empty vectors) frees the buffer. The step zero-fills the output,
   adds each rank's slots into it in rank order and divides by the ranks
   (convert-ds-to-runtime): the host decoder's sum, bit for bit. Slots
   before the wait, of a rank past the group or of another S, and the
   dense wait of such a start, are errors. */
DSRT_API int64_t dsrt_cuda_allreduce_ranks_topk_f32(int64_t handle);
DSRT_API int64_t dsrt_cuda_allreduce_wait_topk_f32(int64_t handle);
DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_slots_topk_f32(
    int64_t handle, int64_t rank, struct dsrt_memref1_raw *indices,
    dsrt_memref1_f32 *values);
DSRT_API void _mlir_ciface_dsrt_cuda_allreduce_take_topk_f32(
    int64_t handle, struct dsrt_memref1_raw *indices, dsrt_memref1_f32 *values,
    dsrt_memref1_f32 *out);

/*===------------------------------------------------------------------------===
 * GEMMs on cuBLASLt
 *===------------------------------------------------------------------------===*/

/* cuBLASLt is loaded with dlopen at the first GEMM: the path in
   DS_CUBLASLT_LIBRARY, else "libcublasLt.so.13", else "libcublasLt.so"; a
   failure records an error naming what was tried. Every GEMM is enqueued on
   the step stream with one 32 MiB workspace per process (cuBLASLt's
   recommendation for Hopper) and returns before it runs. The descriptors
   and the algorithm cuBLASLt's heuristic picks are cached per shape,
   layout, type and pointer alignment.

   The semantics are those of _mlir_ciface_dsrt_matmul_f32 in ds_runtime.h,
   on device memory: for every batch b, C[b] = op(A[b]) * op(B[b]) (alpha 1,
   beta 0: C is overwritten, never read), A [Ba, M, K] or [Ba, K, M] with
   transA, B [Bb, K, N] or [Bb, N, K] with transB, C [Bc, M, N], Ba == Bc,
   Bb == Bc or 1, any batch stride (0 shares one matrix). cuBLASLt takes
   strided matrices with a unit stride in one dimension, so each of A, B
   and C must have a stride of 1 in one of its two inner dimensions (a
   dimension of size 1 counts as either); other layouts, shape mismatches,
   negative sizes, offsets or strides, and an aliasing C record an error
   before anything is enqueued. K == 0 sets C to 0. Products accumulate in
   FP32; C is f32, except in the *_to_bf16 and *_to_f16 entries, where the
   FP32 result is rounded once (to nearest even) into a bf16 or f16 C, as
   a linalg contraction into f32 followed by arith.truncf would. */

/* A rank-3 memref of any element type (bf16, f16 and the FP8 formats have
   no C type): laid out as dsrt_memref3_f32, offsets and strides counted in
   elements. */
typedef struct dsrt_memref3_raw {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
} dsrt_memref3_raw;

/* f32 x f32 -> f32 with CUBLAS_COMPUTE_32F: true FP32 products, never TF32
   (that would be CUBLAS_COMPUTE_32F_FAST_TF32), so results match the CPU
   GEMM to rounding. */
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_f32(dsrt_memref3_f32 *a,
                                                dsrt_memref3_f32 *b,
                                                dsrt_memref3_f32 *c,
                                                int64_t transA, int64_t transB);

/* bf16 (f16) x bf16 (f16) -> f32 C, CUBLAS_COMPUTE_32F. */
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_bf16(dsrt_memref3_raw *a,
                                                 dsrt_memref3_raw *b,
                                                 dsrt_memref3_f32 *c,
                                                 int64_t transA,
                                                 int64_t transB);
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_f16(dsrt_memref3_raw *a,
                                                dsrt_memref3_raw *b,
                                                dsrt_memref3_f32 *c,
                                                int64_t transA, int64_t transB);

/* bf16 x bf16 -> bf16 C and f16 x f16 -> f16 C: FP32 accumulation, one
   rounding at the end (cuBLASLt's D type). Half the output traffic of the
   f32 C above; convert-linalg-to-ds-runtime calls them where every reader
   of the f32 product would round it to that type anyway. */
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_bf16_to_bf16(dsrt_memref3_raw *a,
                                                         dsrt_memref3_raw *b,
                                                         dsrt_memref3_raw *c,
                                                         int64_t transA,
                                                         int64_t transB);
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_f16_to_f16(dsrt_memref3_raw *a,
                                                       dsrt_memref3_raw *b,
                                                       dsrt_memref3_raw *c,
                                                       int64_t transA,
                                                       int64_t transB);

/* FP8 operand formats of dsrt_cuda_matmul_f8 (aType, bType). */
enum { DSRT_FP8_E4M3 = 0, DSRT_FP8_E5M2 = 1 };

/* FP8 x FP8 -> f32 C: C = (aScale * op(A)) * (bScale * op(B)), FP32
   accumulation (cuBLASLt's fast accumulation stays off). aScale and bScale
   are DEVICE pointers to one f32 each, the dequantisation scales
   (cuBLASLt's A/B_SCALE_POINTER); NULL means 1. Refused with a specific
   error: E5M2 x E5M2 (cuBLASLt has no such kernel), a device older than
   sm_89 ("FP8 GEMMs need sm_89 or newer; this device is sm_80"), M, N or K
   not a multiple of 16, and operands not contiguous along K. The last rule
   is cuBLASLt's: its FP8 kernels take only the "TN" layout, A transposed
   and B not in its column-major terms, which in row-major terms means
   op(A) and op(B) both stored with unit stride along K: A [M, K] with
   transA = 0 and B [N, K] with transB = 1, i.e. X * W^T with W stored
   [out, in] as a linear layer keeps it (lib/Runtime/cuda/Matmul.cpp shows
   the mapping). Transpose the other layouts first. */
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_f8(dsrt_memref3_raw *a,
                                               dsrt_memref3_raw *b,
                                               dsrt_memref3_f32 *c,
                                               int64_t transA, int64_t transB,
                                               int64_t aType, int64_t bType,
                                               float *aScale, float *bScale);

/* dsrt_cuda_matmul_f8 with the operand formats in the name, for compiled
   code, whose declarations type each operand (convert-linalg-to-ds-runtime
   calls them for the backward's E5M2 gradient x E4M3 operand GEMMs). */
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_e5m2_e4m3(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_f32 *c,
    int64_t transA, int64_t transB, float *aScale, float *bScale);
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_e4m3_e5m2(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_f32 *c,
    int64_t transA, int64_t transB, float *aScale, float *bScale);

/* The FP8 GEMMs above with a bf16 C: D = bf16(aScale * bScale * op(A) *
   op(B)), the scales applied to the FP32 sum before the one rounding.
   convert-linalg-to-ds-runtime calls them where every reader of the f32
   product would multiply it by one dequantisation scale and round it to
   bf16 (the scale then computed into a device f32 for aScale). */
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_f8_to_bf16(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, int64_t aType, int64_t bType, float *aScale,
    float *bScale);
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_e5m2_e4m3_to_bf16(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, float *aScale, float *bScale);
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_e4m3_e5m2_to_bf16(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, float *aScale, float *bScale);

/* A rank-1 memref of any element type, laid out as dsrt_memref1_f32. */
typedef struct dsrt_memref1_raw {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
} dsrt_memref1_raw;

/* The narrow-C GEMMs above with a bias added before the one rounding, in
   cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS): C[b, i, j] = round(sum +
   bias[j]), the bias a vector of C's type (bf16 or f16) with N elements,
   unit-strided, the same for every batch; the sum as above (FP8: the
   scales applied first). A linear layer's output as torch.autocast's
   F.linear and Transformer Engine's Linear round it: once, after the
   bias. convert-linalg-to-ds-runtime calls them where every reader of the
   f32 product would add such a vector and round. C must be unit-strided
   along N (cuBLASLt adds the bias along the rows of its column-major D,
   which are C's columns only then); a bias of another length, a strided
   one, and a column-major C record an error before anything is enqueued. */
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_bf16_to_bf16_bias(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, dsrt_memref1_raw *bias);
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_f16_to_f16_bias(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, dsrt_memref1_raw *bias);
DSRT_API void _mlir_ciface_dsrt_cuda_matmul_f8_to_bf16_bias(
    dsrt_memref3_raw *a, dsrt_memref3_raw *b, dsrt_memref3_raw *c,
    int64_t transA, int64_t transB, int64_t aType, int64_t bType, float *aScale,
    float *bScale, dsrt_memref1_raw *bias);

/* Data types of dsrt_cuda_gemm. */
enum {
  DSRT_GEMM_F32 = 0,
  DSRT_GEMM_BF16 = 1,
  DSRT_GEMM_F16 = 2,
  DSRT_GEMM_E4M3 = 3,
  /* Or'ed into a type: C is bf16 (BF16 and E4M3 operands only). */
  DSRT_GEMM_C_BF16 = 16
};

/* One GEMM on row-major contiguous device matrices, for benchmarks:
   C [m, n] (f32, or bf16 with DSRT_GEMM_C_BF16) = op(A) * op(B), A [m, k] or
   [k, m] with transA, B [k, n] or [n, k] with transB, of type `dtype` (a
   DSRT_GEMM_*; both operands E4M3 for DSRT_GEMM_E4M3, with the scales as above;
   the scales are ignored otherwise). Enqueued on the step stream like the
   others. Returns 0, or -1 with an error. */
DSRT_API int dsrt_cuda_gemm(int dtype, int64_t m, int64_t n, int64_t k,
                            const void *a, const void *b, void *c, int transA,
                            int transB, const float *aScale,
                            const float *bScale);

/*===------------------------------------------------------------------------===
 * MLIR's GPU runtime ABI
 *===------------------------------------------------------------------------===*/

/* The functions MLIR 22's gpu-to-llvm lowering and gpu.binary's offloading
   translation emit calls to, with the LLVM types they declare (ptr ->
   pointer, i64 -> int64_t, i32 -> int32_t, i16 -> int16_t, i8 -> int8_t);
   test/Runtime/cuda/mgpu-signatures.test checks both against mlir-opt's
   output. Not provided: the cuSPARSE and cuSPARSELt entry points gpu-to-llvm
   declares for the gpu sparse ops (mgpuCreateCsr, mgpuSpMM, ...), and
   mgpuTensorMapEncodeTiledMemref of nvgpu's TMA lowering; a module that uses
   them fails to link.

   Semantics, beyond upstream's CudaRuntimeWrappers.cpp:
   - mgpuStreamCreate returns the step stream and mgpuStreamDestroy of it
     does nothing; mgpuStreamSynchronize does synchronise.
   - mgpuMemAlloc/mgpuMemFree are stream-ordered (cuMemAllocAsync and
     cuMemFreeAsync on the given stream, from the device's default pool,
     which keeps freed memory for reuse instead of returning it to the
     driver at every synchronisation); isHostShared != 0 allocates managed
     memory (cuMemAllocManaged), which mgpuMemFree frees after waiting for
     the stream. 0 bytes gives NULL, and freeing NULL does nothing.
   - mgpuModuleLoad runs from a global constructor of the compiled code, so
     it never aborts: on failure (no device, a bad image) it records the
     error and returns NULL. mgpuModuleGetFunction on a NULL module and
     mgpuLaunchKernel of a NULL function record an error (the first error,
     usually the load's, wins) and return.
   - A kernel asking for more than 48 KiB of dynamic shared memory gets the
     opt-in attribute set first; beyond the device's limit, an error.
   - mgpuSetDefaultDevice before initialisation picks the device; after it,
     a different device records an error (one device per process).
   - mgpuMemHostRegisterMemRef takes only densely packed memrefs (others
     record an error). */

DSRT_API void *mgpuModuleLoad(void *data, int64_t size);
/* `ptx` is NUL-terminated PTX, compiled by the driver at `optLevel` (0-4). */
DSRT_API void *mgpuModuleLoadJIT(void *ptx, int32_t optLevel);
DSRT_API void mgpuModuleUnload(void *module);
DSRT_API void *mgpuModuleGetFunction(void *module, const char *name);

DSRT_API void mgpuLaunchKernel(void *function, int64_t gridX, int64_t gridY,
                               int64_t gridZ, int64_t blockX, int64_t blockY,
                               int64_t blockZ, int32_t smem, void *stream,
                               void **params, void **extra,
                               int64_t paramsCount);
DSRT_API void mgpuLaunchClusterKernel(
    void *function, int64_t clusterX, int64_t clusterY, int64_t clusterZ,
    int64_t gridX, int64_t gridY, int64_t gridZ, int64_t blockX, int64_t blockY,
    int64_t blockZ, int32_t smem, void *stream, void **params, void **extra);

DSRT_API void *mgpuStreamCreate(void);
DSRT_API void mgpuStreamDestroy(void *stream);
DSRT_API void mgpuStreamSynchronize(void *stream);
DSRT_API void mgpuStreamWaitEvent(void *stream, void *event);

DSRT_API void *mgpuEventCreate(void);
DSRT_API void mgpuEventDestroy(void *event);
DSRT_API void mgpuEventSynchronize(void *event);
DSRT_API void mgpuEventRecord(void *event, void *stream);

DSRT_API void *mgpuMemAlloc(int64_t bytes, void *stream, int8_t isHostShared);
DSRT_API void mgpuMemFree(void *ptr, void *stream);
DSRT_API void mgpuMemcpy(void *dst, void *src, int64_t bytes, void *stream);
DSRT_API void mgpuMemset16(void *dst, int16_t value, int64_t count,
                           void *stream);
DSRT_API void mgpuMemset32(void *dst, int32_t value, int64_t count,
                           void *stream);

/* Page-locks host memory for the device. `descriptor` points to a ranked
   memref descriptor of rank `rank` (gpu.host_register passes unranked
   memrefs as rank and descriptor). The plain forms are upstream's helpers;
   MLIR 22 emits only the MemRef ones. */
DSRT_API void mgpuMemHostRegister(void *ptr, int64_t bytes);
DSRT_API void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                                        int64_t elementBytes);
DSRT_API void mgpuMemHostUnregister(void *ptr);
DSRT_API void mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                                          int64_t elementBytes);

DSRT_API void mgpuSetDefaultDevice(int32_t device);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DS_RUNTIME_DS_RUNTIME_CUDA_H */

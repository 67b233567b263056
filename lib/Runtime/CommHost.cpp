//===- CommHost.cpp - The runner's blocking collectives -------------------===//
//
// dsrt_allreduce, dsrt_broadcast and dsrt_allgather: what the runner needs
// between steps (evaluation losses, hashes that check the ranks agree,
// checkpoint gathers). They go through the same queue as the collectives of
// generated code, so they keep their place in the issue order that MPI
// requires, and they are bounded by the same timeout. Each works on a copy
// owned by its task: after a timeout the caller's buffer may be gone while
// the communication thread is still inside MPI.
//
//===----------------------------------------------------------------------===//

#include "CommInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <cstring>

using namespace dsrt;
using namespace dsrt::comm;

int dsrt_allreduce(void *buf, int64_t count, int dtype, int op) {
  int64_t esize = elementSize(dtype);
  bool floating = dtype == DSRT_F32 || dtype == DSRT_F64;
  if (count < 0 || (count > 0 && !buf) || esize == 0 || op < DSRT_REDUCE_SUM ||
      op > DSRT_REDUCE_MIN || (op == DSRT_REDUCE_MEAN && !floating)) {
    (void)DS_ERROR("dsrt_allreduce: bad arguments (%lld elements, type %d, "
                   "op %d; MEAN needs a floating-point type)",
                   static_cast<long long>(count), dtype, op);
    return -1;
  }
  World w;
  if (acquire(w).failed())
    return -1;
  int64_t bytes = count * esize;
  auto copy = std::make_shared<std::vector<uint8_t>>(
      static_cast<const uint8_t *>(buf),
      static_cast<const uint8_t *>(buf) + bytes);
  if (!run("all-reduce", bytes, [=]() -> Status {
        countSent(double(bytes));
        return allreduce(copy->data(), copy->data(), count, dtype, op,
                         w.deterministic);
      }))
    return -1;
  if (bytes > 0)
    std::memcpy(buf, copy->data(), bytes);
  return 0;
}

int dsrt_broadcast(void *buf, int64_t bytes, int root) {
  if (bytes < 0 || (bytes > 0 && !buf)) {
    (void)DS_ERROR("dsrt_broadcast: bad arguments (%lld bytes)",
                   static_cast<long long>(bytes));
    return -1;
  }
  World w;
  if (acquire(w).failed())
    return -1;
  if (root < 0 || root >= w.size) {
    (void)DS_ERROR("dsrt_broadcast: root %d outside a world of %d", root,
                   w.size);
    return -1;
  }
  auto copy = std::make_shared<std::vector<uint8_t>>(
      static_cast<const uint8_t *>(buf),
      static_cast<const uint8_t *>(buf) + bytes);
  if (!run("broadcast", bytes, [=]() -> Status {
        countSent(w.rank == root ? double(bytes) : 0.0);
        return broadcast(copy->data(), bytes, root);
      }))
    return -1;
  if (bytes > 0)
    std::memcpy(buf, copy->data(), bytes);
  return 0;
}

int dsrt_allgather(const void *send, int64_t bytes, void *recv) {
  if (bytes < 0 || (bytes > 0 && (!send || !recv))) {
    (void)DS_ERROR("dsrt_allgather: bad arguments (%lld bytes)",
                   static_cast<long long>(bytes));
    return -1;
  }
  World w;
  bool live = !acquire(w).failed();
  auto mine = std::make_shared<std::vector<uint8_t>>(
      static_cast<const uint8_t *>(send),
      static_cast<const uint8_t *>(send) + bytes);
  auto all = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(bytes) *
                                                    w.size);
  bool ok = live && run("all-gather", bytes, [=]() -> Status {
              countSent(double(bytes));
              return allgather(mine->data(), bytes, all->data());
            });
  if (bytes == 0)
    return ok ? 0 : -1;
  if (!ok) {
    // The local value: this rank's block in place, zeros elsewhere.
    std::memset(recv, 0, static_cast<size_t>(bytes) * w.size);
    std::memcpy(static_cast<uint8_t *>(recv) + bytes * w.rank, send, bytes);
    return -1;
  }
  std::memcpy(recv, all->data(), all->size());
  return 0;
}

//===- StubNccl.cpp - A stub NCCL for tests without GPUs ------------------===//
//
// libnccl.so.2 for tests (DS_NCCL_LIBRARY points at it): the functions the
// runtime resolves (lib/Runtime/CommNccl.cpp), with nccl.h's prototypes.
// The stub driver's device memory is host memory and its streams run work
// as it is enqueued, so a collective here runs at once, on the host: each
// rank writes its buffer to a file in a directory the unique id names,
// waits for the other ranks' files of the same collective, and reduces
// them in rank order (the mean is the sum divided by the number of ranks,
// as the CPU's MPI layer computes it). On a nonblocking communicator
// (ncclConfig_t::blocking = 0) the initialisation and each collective run
// on a thread of the communicator's and answer ncclInProgress, as NCCL does
// while it works on the host; ncclCommGetAsyncError says when they are
// done, and ncclCommAbort stops one that waits. Every call appends a line
// to $DS_STUB_CUDA_LOG, e.g.
// "ncclAllReduce count=8 type=f32 op=avg stream=s2".
// Environment: DS_STUB_NCCL_DIR, where the directories go (default $TMPDIR
// or /tmp; the same on every rank, the id holding only a name in it);
// DS_STUB_NCCL_FAIL, a comma-separated list of functions that fail
// (ncclSystemError); DS_STUB_NCCL_TIMEOUT, seconds a rank waits for the others
// (default 60) before ncclSystemError; DS_STUB_NCCL_HANG=N, the N-th
// collective of each communicator (from 1) "hangs on the device": it
// returns, but its stream never gets past it (the driver stub's events
// recorded after it stay pending and its synchronisations block) until
// ncclCommAbort, as a kernel waiting for a dead peer;
// DS_STUB_NCCL_ASYNC_ERROR=S, ncclCommGetAsyncError answers ncclRemoteError
// once a communicator has had no call for S seconds (a peer lost while
// nothing ran).
// A collective enqueued on a stream the driver stub is capturing into a
// graph is recorded as the graph's node ("capture gN: ncclAllReduce ...")
// and runs, exchanging with the other ranks, at each launch of the graph;
// a failure there is what ncclCommGetAsyncError answers next, and
// DS_STUB_NCCL_HANG counts its runs, not its capture.
// ncclAllGather writes the ranks' parts in rank order (in place when the
// send buffer is this rank's part of the receive buffer, as NCCL allows).
// ncclSend and ncclRecv: a send publishes its data in a file of the
// communicator's directory and returns (eager, as NCCL's for small
// messages; the runtime never relies on more); a receive waits for the
// matching send's file (its n-th from that peer), at most the timeout.
//
//===----------------------------------------------------------------------===//

#include "StubCommon.h"

#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#include <sys/stat.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

using namespace stubcuda;

namespace {

struct Comm {
  std::string dir;
  int nranks = 0;
  int rank = 0;
  long seq = 0;
  bool blocking = true;
  /// Nonblocking: the call in progress, and what it answered when done.
  std::thread worker;
  std::atomic<ncclResult_t> state{ncclSuccess};
  /// Set by ncclCommAbort: an exchange waiting for the others gives up.
  std::atomic<bool> aborted{false};
  /// The collectives so far, for DS_STUB_NCCL_HANG.
  long collectives = 0;
  /// Point-to-point transfers so far, to and from each peer (matched in
  /// order, as NCCL matches them).
  std::map<int, long> sent, received;
  /// When the last call came, for DS_STUB_NCCL_ASYNC_ERROR.
  std::atomic<std::chrono::steady_clock::rep> lastCall{
      std::chrono::steady_clock::now().time_since_epoch().count()};
  /// What a hung collective's stream waits on (never freed: the driver
  /// stub's streams and events may point to it after the communicator).
  std::atomic<bool> *hang = new std::atomic<bool>(false);
};

/// Where the rendezvous directories go, the same on every rank.
std::string baseDir() {
  for (const char *var : {"DS_STUB_NCCL_DIR", "TMPDIR"})
    if (const char *dir = std::getenv(var); dir && *dir)
      return dir;
  return "/tmp";
}

bool fails(const char *fn) {
  const char *list = std::getenv("DS_STUB_NCCL_FAIL");
  if (!list)
    return false;
  std::string all = std::string(",") + list + ",";
  return all.find(std::string(",") + fn + ",") != std::string::npos;
}

std::string fileOf(const Comm &c, long seq, int rank) {
  return c.dir + "/c" + std::to_string(seq) + ".r" + std::to_string(rank);
}

bool writeFile(const std::string &path, const void *data, size_t bytes) {
  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return false;
  bool ok = bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes;
  ok = std::fclose(f) == 0 && ok;
  return ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

/// Publishes this rank's `bytes` and returns every rank's, or false after
/// the timeout. The file of this rank's previous collective is removed:
/// every rank has published this one, so has read that one.
bool exchange(Comm &c, const void *data, size_t bytes,
              std::vector<std::vector<char>> &all) {
  long seq = c.seq++;
  if (!writeFile(fileOf(c, seq, c.rank), data, bytes))
    return false;
  const char *limit = std::getenv("DS_STUB_NCCL_TIMEOUT");
  double timeout = limit ? std::atof(limit) : 60.0;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  all.assign(c.nranks, {});
  for (int r = 0; r < c.nranks; ++r) {
    std::string path = fileOf(c, seq, r);
    struct stat st;
    while (stat(path.c_str(), &st) != 0) {
      if (std::chrono::steady_clock::now() > deadline || c.aborted)
        return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f)
      return false;
    all[r].resize(st.st_size);
    size_t got = st.st_size ? std::fread(all[r].data(), 1, st.st_size, f) : 0;
    std::fclose(f);
    if (got != static_cast<size_t>(st.st_size))
      return false;
  }
  if (seq > 0)
    std::remove(fileOf(c, seq - 1, c.rank).c_str());
  return true;
}

const char *typeName(ncclDataType_t t) {
  switch (t) {
  case ncclFloat32:
    return "f32";
  case ncclFloat64:
    return "f64";
  case ncclInt64:
    return "i64";
  case ncclFloat16:
    return "f16";
  case ncclBfloat16:
    return "bf16";
  case ncclUint32:
    return "u32";
  default:
    return "other";
  }
}

const char *opName(ncclRedOp_t op) {
  switch (op) {
  case ncclSum:
    return "sum";
  case ncclProd:
    return "prod";
  case ncclMax:
    return "max";
  case ncclMin:
    return "min";
  case ncclAvg:
    return "avg";
  default:
    return "other";
  }
}

template <typename T>
void reduce(const std::vector<std::vector<char>> &all, size_t count,
            ncclRedOp_t op, T *out) {
  std::vector<T> acc(count);
  std::memcpy(acc.data(), all[0].data(), count * sizeof(T));
  for (size_t r = 1; r < all.size(); ++r) {
    const T *x = reinterpret_cast<const T *>(all[r].data());
    for (size_t i = 0; i < count; ++i) {
      switch (op) {
      case ncclMax:
        acc[i] = x[i] > acc[i] || x[i] != x[i] ? x[i] : acc[i];
        break;
      case ncclMin:
        acc[i] = x[i] < acc[i] || x[i] != x[i] ? x[i] : acc[i];
        break;
      case ncclProd:
        acc[i] *= x[i];
        break;
      default:
        acc[i] += x[i];
      }
    }
  }
  if (op == ncclAvg)
    for (T &v : acc)
      v /= static_cast<T>(all.size());
  std::memcpy(out, acc.data(), count * sizeof(T));
}

size_t elementSize(ncclDataType_t t) {
  return t == ncclFloat64 || t == ncclInt64      ? 8
         : t == ncclFloat32 || t == ncclUint32   ? 4
         : t == ncclFloat16 || t == ncclBfloat16 ? 2
                                                 : 0;
}

/// 16-bit values, summed (or reduced) in f32 in rank order and rounded to
/// the type once, to nearest even: NCCL's result for 2 ranks (with more,
/// NCCL's ring rounds every partial sum).
void reduceHalves(const std::vector<std::vector<char>> &all, size_t count,
                  ncclRedOp_t op, bool bf16, uint16_t *out) {
  auto widen = [bf16](uint16_t h) -> float {
    if (bf16) {
      uint32_t bits = uint32_t(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    _Float16 x;
    std::memcpy(&x, &h, 2);
    return float(x);
  };
  auto narrow = [bf16](float f) -> uint16_t {
    if (bf16) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      if (f != f)
        return uint16_t((bits >> 16) | 0x40);
      bits += 0x7fff + ((bits >> 16) & 1);
      return uint16_t(bits >> 16);
    }
    _Float16 x = static_cast<_Float16>(f);
    uint16_t h;
    std::memcpy(&h, &x, 2);
    return h;
  };
  std::vector<std::vector<char>> wide(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    wide[r].resize(count * sizeof(float));
    const auto *h = reinterpret_cast<const uint16_t *>(all[r].data());
    auto *f = reinterpret_cast<float *>(wide[r].data());
    for (size_t i = 0; i < count; ++i)
      f[i] = widen(h[i]);
  }
  std::vector<float> sums(count);
  reduce(wide, count, op, sums.data());
  for (size_t i = 0; i < count; ++i)
    out[i] = narrow(sums[i]);
}

/// Runs `work` now on a blocking communicator; on a nonblocking one, on
/// the communicator's thread, answering ncclInProgress (a call while the
/// previous one is in progress is misuse, as in NCCL).
ncclResult_t run(Comm &c, std::function<ncclResult_t()> work) {
  c.lastCall = std::chrono::steady_clock::now().time_since_epoch().count();
  if (c.blocking)
    return work();
  if (c.state == ncclInProgress)
    return ncclInvalidUsage;
  if (c.worker.joinable())
    c.worker.join();
  c.state = ncclInProgress;
  c.worker = std::thread([&c, work] { c.state = work(); });
  return ncclInProgress;
}

/// DS_STUB_NCCL_HANG: whether this collective of `c` hangs; if so, its
/// stream does from now on.
bool hangs(Comm &c, cudaStream_t stream) {
  const char *n = std::getenv("DS_STUB_NCCL_HANG");
  if (++c.collectives != (n ? std::atol(n) : 0))
    return false;
  auto *s = static_cast<Stream *>(static_cast<void *>(stream));
  if (!s || s->magic != kStreamMagic)
    return false;
  c.hang->store(true);
  s->hang = c.hang;
  logLine("stub-nccl: collective %ld hangs on its stream", c.collectives);
  return true;
}

/// While `stream` is being captured into a graph by the driver stub:
/// records `work` (logged as `line`) as the graph's node, run at each
/// launch of the graph (where DS_STUB_NCCL_HANG counts it), and returns
/// true.
bool captured(Comm &c, cudaStream_t stream, const char *line,
              std::function<ncclResult_t()> work) {
  auto *s = static_cast<Stream *>(static_cast<void *>(stream));
  if (!s || s->magic != kStreamMagic || !s->capture || !s->enqueue)
    return false;
  Comm *comm = &c;
  s->enqueue(s, line, [comm, stream, work] {
    comm->lastCall =
        std::chrono::steady_clock::now().time_since_epoch().count();
    if (hangs(*comm, stream))
      return;
    if (ncclResult_t r = work(); r != ncclSuccess) {
      logLine("stub-nccl: a collective of a graph's launch failed");
      comm->state = r;
    }
  });
  return true;
}

/// Ends a communicator: its call in progress first.
void end(Comm *c) {
  if (c->worker.joinable())
    c->worker.join();
  delete c;
}

/// What ncclSend and ncclRecv share: the log line (also in `line`) and
/// the checks. The communicator, or null with `result` what the call
/// answers.
Comm *pointToPoint(const char *fn, size_t count, ncclDataType_t datatype,
                   int peer, ncclComm_t comm, cudaStream_t stream,
                   char (&line)[160], ncclResult_t &result) {
  char name[32];
  std::snprintf(line, sizeof(line), "%s count=%zu type=%s peer=%d stream=%s",
                fn, count, typeName(datatype), peer,
                streamName(stream, name, 32));
  logLine("%s", line);
  result = ncclInvalidArgument;
  if (fails(fn)) {
    result = ncclSystemError;
    return nullptr;
  }
  auto *c = reinterpret_cast<Comm *>(comm);
  if (!c || elementSize(datatype) == 0 || peer < 0 || peer >= c->nranks ||
      peer == c->rank)
    return nullptr;
  return c;
}

/// The file of the n-th transfer from rank `from` to rank `to`.
std::string transferFile(const Comm &c, int from, int to, long n) {
  return c.dir + "/p" + std::to_string(from) + "to" + std::to_string(to) + "." +
         std::to_string(n);
}

} // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  return result == ncclSuccess       ? "no error (stub)"
         : result == ncclRemoteError ? "remote process exited or there was a "
                                       "network error (stub)"
                                     : "stub failure";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (fails("ncclGetUniqueId"))
    return ncclSystemError;
  std::string templ = baseDir() + "/ds-stub-nccl-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    return ncclSystemError;
  // The id holds the directory's name; every rank finds it in baseDir().
  std::string name = std::strrchr(buf.data(), '/') + 1;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, name.c_str(), name.size());
  logLine("ncclGetUniqueId");
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  int blocking = config && config->blocking != NCCL_CONFIG_UNDEF_INT
                     ? config->blocking
                     : 1;
  logLine("ncclCommInitRankConfig nranks=%d rank=%d blocking=%d", nranks, rank,
          blocking);
  if (fails("ncclCommInitRankConfig"))
    return ncclSystemError;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  auto *c = new Comm;
  c->dir = baseDir() + "/" +
           std::string(id.internal, strnlen(id.internal, sizeof(id.internal)));
  c->nranks = nranks;
  c->rank = rank;
  c->blocking = blocking != 0;
  *comm = reinterpret_cast<ncclComm_t>(c);
  // As NCCL's: every rank is there before any is initialised.
  return run(*c, [c] {
    std::vector<std::vector<char>> all;
    return exchange(*c, nullptr, 0, all) ? ncclSuccess : ncclSystemError;
  });
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (!comm || !asyncError)
    return ncclInvalidArgument;
  auto &c = *reinterpret_cast<Comm *>(comm);
  *asyncError = c.state.load();
  if (const char *idle = std::getenv("DS_STUB_NCCL_ASYNC_ERROR");
      idle && *asyncError != ncclInProgress) {
    auto since = std::chrono::steady_clock::now() -
                 std::chrono::steady_clock::time_point(
                     std::chrono::steady_clock::duration(c.lastCall.load()));
    if (since > std::chrono::duration<double>(std::atof(idle)))
      *asyncError = ncclRemoteError;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  logLine("ncclCommFinalize");
  if (!comm)
    return ncclInvalidArgument;
  return run(*reinterpret_cast<Comm *>(comm), [] { return ncclSuccess; });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  logLine("ncclCommDestroy");
  end(reinterpret_cast<Comm *>(comm));
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  logLine("ncclCommAbort");
  auto *c = reinterpret_cast<Comm *>(comm);
  if (!c)
    return ncclSuccess;
  // What waits for the others gives up, and the hung streams go on.
  c->aborted = true;
  c->hang->store(false);
  end(c);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  char name[32], line[160];
  std::snprintf(line, sizeof(line),
                "ncclAllReduce count=%zu type=%s op=%s stream=%s", count,
                typeName(datatype), opName(op), streamName(stream, name, 32));
  logLine("%s", line);
  if (fails("ncclAllReduce"))
    return ncclSystemError;
  size_t size = elementSize(datatype);
  if (!comm || size == 0)
    return ncclInvalidArgument;
  auto &c = *reinterpret_cast<Comm *>(comm);
  auto work = [&c, sendbuff, recvbuff, count, size, datatype, op] {
    std::vector<std::vector<char>> all;
    if (!exchange(c, sendbuff, count * size, all))
      return ncclSystemError;
    for (const auto &part : all)
      if (part.size() != count * size)
        return ncclInvalidUsage;
    if (datatype == ncclFloat32)
      reduce(all, count, op, static_cast<float *>(recvbuff));
    else if (datatype == ncclFloat64)
      reduce(all, count, op, static_cast<double *>(recvbuff));
    else if (datatype == ncclFloat16 || datatype == ncclBfloat16)
      reduceHalves(all, count, op, datatype == ncclBfloat16,
                   static_cast<uint16_t *>(recvbuff));
    else
      reduce(all, count, op, static_cast<int64_t *>(recvbuff));
    return ncclSuccess;
  };
  if (captured(c, stream, line, work) || hangs(c, stream))
    return ncclSuccess;
  return run(c, work);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count,
                      ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  ncclResult_t result;
  char line[160];
  Comm *c = pointToPoint("ncclSend", count, datatype, peer, comm, stream, line,
                         result);
  if (!c)
    return result;
  size_t bytes = count * elementSize(datatype);
  // The transfer's number is taken when it runs (a graph's at each launch).
  auto work = [c, peer, sendbuff, bytes] {
    std::string path = transferFile(*c, c->rank, peer, c->sent[peer]++);
    return writeFile(path, sendbuff, bytes) ? ncclSuccess : ncclSystemError;
  };
  if (captured(*c, stream, line, work) || hangs(*c, stream))
    return ncclSuccess;
  return run(*c, work);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t result;
  char line[160];
  Comm *c = pointToPoint("ncclRecv", count, datatype, peer, comm, stream, line,
                         result);
  if (!c)
    return result;
  size_t bytes = count * elementSize(datatype);
  auto work = [c, peer, recvbuff, bytes] {
    std::string path = transferFile(*c, peer, c->rank, c->received[peer]++);
    const char *limit = std::getenv("DS_STUB_NCCL_TIMEOUT");
    auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::duration<double>(limit ? std::atof(limit) : 60.0);
    struct stat st;
    while (stat(path.c_str(), &st) != 0) {
      if (std::chrono::steady_clock::now() > deadline || c->aborted)
        return ncclSystemError;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // A size other than the receive's is NCCL's undefined behaviour; the
    // stub says so.
    if (size_t(st.st_size) != bytes) {
      logLine("stub-nccl: ncclRecv of %zu bytes matched a send of %lld", bytes,
              static_cast<long long>(st.st_size));
      return ncclInvalidUsage;
    }
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f)
      return ncclSystemError;
    size_t got = bytes ? std::fread(recvbuff, 1, bytes, f) : 0;
    std::fclose(f);
    std::remove(path.c_str());
    return got == bytes ? ncclSuccess : ncclSystemError;
  };
  if (captured(*c, stream, line, work) || hangs(*c, stream))
    return ncclSuccess;
  return run(*c, work);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  char name[32], line[160];
  std::snprintf(line, sizeof(line),
                "ncclBroadcast count=%zu type=%s root=%d stream=%s", count,
                typeName(datatype), root, streamName(stream, name, 32));
  logLine("%s", line);
  if (fails("ncclBroadcast"))
    return ncclSystemError;
  size_t size = elementSize(datatype);
  if (!comm || size == 0)
    return ncclInvalidArgument;
  auto &c = *reinterpret_cast<Comm *>(comm);
  if (root < 0 || root >= c.nranks)
    return ncclInvalidArgument;
  auto work = [&c, sendbuff, recvbuff, count, size, root] {
    std::vector<std::vector<char>> all;
    // Every rank publishes (the others nothing), so that each collective
    // has every rank's file.
    if (!exchange(c, sendbuff, c.rank == root ? count * size : 0, all))
      return ncclSystemError;
    if (all[root].size() != count * size)
      return ncclInvalidUsage;
    if (count)
      std::memcpy(recvbuff, all[root].data(), count * size);
    return ncclSuccess;
  };
  if (captured(c, stream, line, work) || hangs(c, stream))
    return ncclSuccess;
  return run(c, work);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  char name[32], line[160];
  std::snprintf(line, sizeof(line), "ncclAllGather count=%zu type=%s stream=%s",
                sendcount, typeName(datatype), streamName(stream, name, 32));
  logLine("%s", line);
  if (fails("ncclAllGather"))
    return ncclSystemError;
  size_t size = elementSize(datatype);
  if (!comm || size == 0)
    return ncclInvalidArgument;
  auto &c = *reinterpret_cast<Comm *>(comm);
  auto work = [&c, sendbuff, recvbuff, sendcount, size] {
    std::vector<std::vector<char>> all;
    if (!exchange(c, sendbuff, sendcount * size, all))
      return ncclSystemError;
    // In rank order; in place when sendbuff is this rank's part of
    // recvbuff (`all` holds copies).
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].size() != sendcount * size)
        return ncclInvalidUsage;
      if (sendcount)
        std::memmove(static_cast<char *>(recvbuff) + r * sendcount * size,
                     all[r].data(), sendcount * size);
    }
    return ncclSuccess;
  };
  if (captured(c, stream, line, work) || hangs(c, stream))
    return ncclSuccess;
  return run(c, work);
}

} // extern "C"

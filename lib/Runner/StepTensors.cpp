//===- StepTensors.cpp - Where the Trainer's step tensors live ------------===//

#include "StepTensors.h"

#include "ds/Runtime/ds_runtime.h"
#ifdef DSRT_HAVE_CUDA
#include "ds/Runtime/DeviceTensors.h"
#include "ds/Runtime/StepGraphs.h"
#endif

#include <cstring>
#include <optional>

using namespace ds::runner;
using llvm::Error;
using mlir::ds::ResultRole;

static Error runtimeError(const llvm::Twine &what) {
  const char *e = dsrt_last_error();
  return llvm::createStringError(
      (what + ": " + (e ? e : "unknown runtime error")).str());
}

#ifdef DSRT_HAVE_CUDA
/// The runtime's counters, in the order workPerStep reports them.
static std::vector<double> deviceCounts() {
  dsrt_cuda_stats s;
  dsrt_cuda_get_stats(&s);
  return {double(s.kernel_launches),
          double(s.gemms),
          s.gemm_flops * 1e-9,
          double(s.stream_allocations),
          double(s.waits),
          double(s.graph_launches),
          double(s.kernel_launches - s.graph_kernels),
          s.bytes_to_host,
          s.bytes_to_device};
}
#endif

StepTensors::StepTensors(StepProgram &program, std::vector<HostTensor> &args,
                         std::vector<HostTensor> &results)
    : program(program), args(args), results(results),
      written(args.size(), true), argStale(args.size(), false) {}

StepTensors::~StepTensors() = default;

llvm::Expected<std::unique_ptr<StepTensors>>
StepTensors::create(StepProgram &program, std::vector<HostTensor> &args,
                    std::vector<HostTensor> &results, bool cudaGraphs) {
  std::unique_ptr<StepTensors> t(new StepTensors(program, args, results));
  if (!program.runsOnGPU())
    return t;
#ifdef DSRT_HAVE_CUDA
  t->device = std::make_unique<ds::runtime::DeviceTensors>();
  std::vector<size_t> argBytes, resultBytes;
  for (const HostTensor &a : args)
    argBytes.push_back(a.sizeInBytes());
  for (const HostTensor &r : results)
    resultBytes.push_back(r.sizeInBytes());
  dsrt_clear_error();
  if (!t->device->allocate(argBytes, resultBytes))
    return runtimeError("cannot allocate the step's device buffers");
  if (cudaGraphs)
    t->graphs = std::make_unique<ds::runtime::StepGraphs>();
  t->startCounts = deviceCounts();
  return t;
#else
  return llvm::createStringError("this ds-run has no CUDA backend");
#endif
}

void StepTensors::hostWrote(unsigned i) {
  written[i] = true;
  argStale[i] = false;
}

Error StepTensors::run(unsigned variant) {
  if (!device) {
    std::vector<HostTensor *> ptrs;
    for (HostTensor &t : args)
      ptrs.push_back(&t);
    return program.run(ptrs, results, variant);
  }
#ifdef DSRT_HAVE_CUDA
  if (Error e = uploadWritten())
    return e;
  std::vector<void *> data;
  for (unsigned i = 0; i < args.size(); ++i)
    data.push_back(device->arg(i));
  for (unsigned r = 0; r < results.size(); ++r)
    data.push_back(device->result(r));
  resultsStale = true;
  if (!graphs)
    return program.runAt(data, variant);
  // The key: the variant, then the buffers (which swap every step).
  ds::runtime::StepGraphs::Key key = {
      reinterpret_cast<const void *>(uintptr_t(variant))};
  key.insert(key.end(), data.begin(), data.end());
  std::optional<Error> failure; // the step's own error, when it ran
  (void)graphs->run(key, [&] {
    Error e = program.runAt(data, variant);
    bool ok = !e;
    failure.emplace(std::move(e));
    return ok;
  });
  if (failure && *failure)
    return std::move(*failure);
  if (const char *err = dsrt_last_error())
    return llvm::createStringError(std::string("runtime error: ") + err);
  return Error::success();
#else
  (void)variant;
  return Error::success();
#endif
}

Error StepTensors::uploadWritten() {
#ifdef DSRT_HAVE_CUDA
  if (!device)
    return Error::success();
  dsrt_clear_error();
  for (unsigned i = 0; i < args.size(); ++i) {
    if (!written[i])
      continue;
    if (args[i].sizeInBytes() > 0 &&
        !device->upload(i, args[i].bytes.data(), args[i].sizeInBytes()))
      return runtimeError("cannot upload '" + program.contract().args[i].name +
                          "'");
    written[i] = false;
  }
#endif
  return Error::success();
}

llvm::Expected<double>
StepTensors::deviceEvalLoss(std::optional<EvalKind> kind) {
#ifdef DSRT_HAVE_CUDA
  if (!device)
    return llvm::createStringError("internal error: no device tensors");
  if (Error e = uploadWritten())
    return std::move(e);
  const mlir::ds::TrainingContract &c =
      kind ? *program.evalContract(*kind) : program.contract();
  ds::runtime::DeviceTensors *out = device.get();
  if (kind) {
    if (!evalDevice) {
      std::vector<size_t> resultBytes;
      for (const auto &res : c.results) {
        llvm::Expected<HostTensor> t = makeTensor(res.type);
        if (!t)
          return t.takeError();
        resultBytes.push_back(t->sizeInBytes());
      }
      evalDevice = std::make_unique<ds::runtime::DeviceTensors>();
      if (!evalDevice->allocate({}, resultBytes))
        return runtimeError("cannot allocate the evaluation's buffers");
    }
    out = evalDevice.get();
  }
  std::vector<void *> data;
  for (unsigned i = 0; i < c.args.size(); ++i)
    data.push_back(device->arg(i));
  for (unsigned r = 0; r < c.results.size(); ++r)
    data.push_back(out->result(r));
  if (Error e = kind ? program.runEvalAt(*kind, data) : program.runAt(data))
    return std::move(e);
  if (!kind)
    resultsStale = true;
  unsigned lossIndex = c.getLossIndex();
  llvm::Expected<HostTensor> loss = makeTensor(c.results[lossIndex].type);
  if (!loss)
    return loss.takeError();
  if (!out->downloadResult(lossIndex, loss->bytes.data()))
    return runtimeError("cannot read the held-out loss");
  return loss->numElements() > 0 ? loss->getDouble(0) : 0.0;
#else
  (void)kind;
  return llvm::createStringError("this ds-run has no CUDA backend");
#endif
}

uint8_t *StepTensors::ring(size_t bytes) {
#ifdef DSRT_HAVE_CUDA
  if (device)
    return static_cast<uint8_t *>(device->ring(bytes));
#endif
  hostRing.assign(bytes, 0);
  return hostRing.data();
}

void StepTensors::read(unsigned r, uint8_t *dst) {
#ifdef DSRT_HAVE_CUDA
  if (device) {
    device->enqueueRead(r, dst, results[r].sizeInBytes());
    return;
  }
#endif
  std::memcpy(dst, results[r].bytes.data(), results[r].sizeInBytes());
}

Error StepTensors::wait() {
#ifdef DSRT_HAVE_CUDA
  if (device && !device->wait())
    return runtimeError("runtime error");
#endif
  return Error::success();
}

void StepTensors::adoptUpdates() {
  for (auto [r, res] : llvm::enumerate(program.contract().results)) {
    if (res.role != ResultRole::Update)
      continue;
#ifdef DSRT_HAVE_CUDA
    if (device) {
      device->adopt(r, res.argIndex);
      argStale[res.argIndex] = true;
      continue;
    }
#endif
    std::swap(args[res.argIndex], results[r]);
  }
}

Error StepTensors::toHost(bool withResults) {
#ifdef DSRT_HAVE_CUDA
  if (!device)
    return Error::success();
  if (!device->wait())
    return runtimeError("runtime error");
  for (unsigned i = 0; i < args.size(); ++i) {
    if (!argStale[i])
      continue;
    if (!device->download(i, args[i].bytes.data()))
      return runtimeError("cannot copy '" + program.contract().args[i].name +
                          "' to the host");
    argStale[i] = false;
  }
  if (withResults && resultsStale) {
    for (unsigned r = 0; r < results.size(); ++r)
      if (!device->downloadResult(r, results[r].bytes.data()))
        return runtimeError("cannot copy result " + llvm::Twine(r) +
                            " to the host");
    resultsStale = false;
  }
#else
  (void)withResults;
#endif
  return Error::success();
}

llvm::json::Object StepTensors::workPerStep(int64_t steps) const {
  llvm::json::Object work;
#ifdef DSRT_HAVE_CUDA
  if (!device || steps <= 0)
    return work;
  std::vector<double> now = deviceCounts();
  const char *names[] = {
      "kernel_launches",      "gemms",         "gemm_gflop",
      "stream_allocations",   "waits",         "graph_launches",
      "host_kernel_launches", "bytes_to_host", "bytes_to_device"};
  for (size_t i = 0; i < now.size(); ++i)
    work[names[i]] = (now[i] - startCounts[i]) / double(steps);
#else
  (void)steps;
#endif
  return work;
}

size_t StepTensors::graphsCaptured() const {
#ifdef DSRT_HAVE_CUDA
  return graphs ? graphs->captures() : 0;
#else
  return 0;
#endif
}

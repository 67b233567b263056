//===- StepTensors.h - Where the Trainer's step tensors live ----*- C++ -*-===//
//
// The Trainer holds every argument and result of the step as a HostTensor.
// On the CPU those are the step's own buffers. On a CUDA device the step
// reads and writes device buffers (ds::runtime::DeviceTensors) and the host
// tensors are copies: an argument the host wrote (a batch, the fault
// injection flag, the initial or restored state) goes up before the next
// step; an update result becomes its argument on the device (a pointer
// swap); the scalars the Trainer reports come back through a pinned ring;
// and the host copies of the state are refreshed only when the Trainer
// needs them (a checkpoint, an evaluation, the report).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNNER_STEPTENSORS_H
#define DS_LIB_RUNNER_STEPTENSORS_H

#include "ds/Runner/Session.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <optional>
#include <vector>

namespace ds::runtime {
class DeviceTensors;
class StepGraphs;
} // namespace ds::runtime

namespace ds::runner {

class StepTensors {
public:
  /// Tensors for `program`'s step over the Trainer's `args` and `results`
  /// (which must outlive this). On a device, allocates the device buffers;
  /// every argument counts as written by the host; with `cudaGraphs`, the
  /// steps run as CUDA graphs (ds/Runtime/StepGraphs.h).
  static llvm::Expected<std::unique_ptr<StepTensors>>
  create(StepProgram &program, std::vector<HostTensor> &args,
         std::vector<HostTensor> &results, bool cudaGraphs = false);
  ~StepTensors();

  bool onDevice() const { return device != nullptr; }

  /// `args[i]` was written on the host: it goes up before the next step.
  void hostWrote(unsigned i);
  /// Runs variant `variant` of the step. On a device it is only enqueued:
  /// a failure inside it surfaces at wait().
  llvm::Error run(unsigned variant);
  /// Uploads the arguments the host wrote (on a device).
  llvm::Error uploadWritten();
  /// Host memory of `bytes` bytes for the report ring (pinned on a device).
  uint8_t *ring(size_t bytes);
  /// Copies result `r`'s bytes into `dst` (in the ring): at once on the
  /// CPU, on the step stream on a device (landed after wait()).
  void read(unsigned r, uint8_t *dst);
  /// Waits for everything enqueued (nothing to do on the CPU).
  llvm::Error wait();
  /// On a device: the loss of the forward-only copy `kind` or, without
  /// one, of the step itself (its updates discarded) on the resident
  /// arguments, after uploading what the host wrote. The copy's results go
  /// to buffers of its own; only the loss comes back.
  llvm::Expected<double> deviceEvalLoss(std::optional<EvalKind> kind);
  /// Every update result becomes its argument's value.
  void adoptUpdates();
  /// Brings the host copies of the arguments, and with `withResults` of the
  /// results, up to date (waiting for the device).
  llvm::Error toHost(bool withResults = false);

  /// On a device: what the runtime enqueued per step since the tensors were
  /// created, over `steps` steps (kernel launches, cuBLASLt GEMMs and their
  /// GFLOP, stream-ordered allocations, waits, graph launches and the
  /// kernels the host launched itself); empty on the CPU.
  llvm::json::Object workPerStep(int64_t steps) const;
  /// CUDA graphs captured so far (0 without --cuda-graphs).
  size_t graphsCaptured() const;

private:
  StepTensors(StepProgram &program, std::vector<HostTensor> &args,
              std::vector<HostTensor> &results);

  StepProgram &program;
  std::vector<HostTensor> &args, &results;
  /// On a device: the buffers, which arguments the host wrote since the
  /// last step, and which host copies are older than the device's.
  std::unique_ptr<ds::runtime::DeviceTensors> device;
  /// The forward-only copy's results (allocated on first use).
  std::unique_ptr<ds::runtime::DeviceTensors> evalDevice;
  /// With --cuda-graphs; declared after the buffers its graphs use, so
  /// that it goes first.
  std::unique_ptr<ds::runtime::StepGraphs> graphs;
  std::vector<bool> written, argStale;
  bool resultsStale = false;
  std::vector<uint8_t> hostRing;
  /// The runtime's counters when the tensors were created.
  std::vector<double> startCounts;
};

} // namespace ds::runner

#endif // DS_LIB_RUNNER_STEPTENSORS_H

//===- Trainer.h - Run a compiled step for N steps -------------*- C++ -*-===//
//
// The runner's loop: it owns every parameter and state tensor of the step
// (initialised from the contract's `ds.init` attributes, loaded with
// --params, or restored from a checkpoint), feeds batches, calls the step,
// swaps the updated tensors in, and reports. A step that fails leaves the
// state as it was: results are written to separate buffers and swapped in
// only after the call returned successfully.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_TRAINER_H
#define DS_RUNNER_TRAINER_H

#include "ds/Runner/DataFeed.h"
#include "ds/Runner/Report.h"
#include "ds/Runner/Session.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace ds::runner {

struct TrainOptions {
  /// Total number of steps; a resumed run continues up to this step.
  int64_t steps = 100;
  uint64_t seed = 0;
  /// Threads of the runtime (GEMMs); 0 = all cores.
  int threads = 0;
  /// Report the loss on held-out batches every K steps (0 = never), as the
  /// mean over `evalBatches` batches.
  int64_t evalEvery = 0;
  int64_t evalBatches = 8;
  /// Print a progress line every K steps (and at the last step).
  int64_t printEvery = 1;
  /// Read the loss and metrics back every K steps (and after the first,
  /// the last, and before an evaluation, a checkpoint or a replica check);
  /// 0 picks 1 on the CPU and 10 on a device. The losses are checked then:
  /// on a device the steps between are enqueued without waiting for it.
  int64_t reportEvery = 0;
  /// On a CUDA device, replay the step as CUDA graphs
  /// (ds/Runtime/StepGraphs.h).
  bool cudaGraphs = false;
  bool quiet = false;
  /// Go on when the loss turns non-finite on a step loss scaling did not
  /// skip (default: stop with an error, keeping the last good state).
  bool allowNonfiniteLoss = false;
  /// Accept NaN / inf in float data files (default: refused by location).
  bool allowNonfiniteInputs = false;
  std::string paramsDir;
  llvm::StringMap<std::string> dataFiles, evalFiles;
  std::string reportPath;
  std::string checkpointDir;
  int64_t checkpointEvery = 0;
  std::string resumeDir;
  /// After the last step, write every result of it as .npy here.
  std::string saveResultsDir;
  /// After the last step, write the int8 model here (see QuantizedExport.h;
  /// needs the integer inference copy, PrepareOptions::integerEval).
  std::string exportQuantizedDir;
  /// Identifies the module in checkpoints (a hash of its text).
  std::string moduleHash;
  std::string modulePath;
  /// Steps (1-based) on which the `inject_nonfinite` input is set to 1
  /// (fault injection, see ds-insert-loss-scaling); sorted.
  std::vector<int64_t> injectSteps;
  /// Data parallelism (mpirun): this process's rank and the world size.
  /// Rank r trains on rows [r b, (r + 1) b) of global batches of size N b
  /// (b: the step's batch); only rank 0 prints, reports and writes
  /// checkpoints (with every rank's own state).
  int rank = 0;
  int worldSize = 1;
  /// Pipeline parallelism: this process's stage (its rank and world size
  /// above are those of the stage's data-parallel group). Replica 0 of
  /// every stage writes its own parameters with --save-results.
  int pipelineStage = 0;
  /// The pipeline's stages (0: no pipeline); checkpoints record it.
  int pipelineStages = 0;
  /// Compare a hash of every rank's parameters and shared state every K
  /// steps (0: at the start, at checkpoints and at the end only).
  int64_t checkReplicasEvery = 0;
};

class StepTensors;

class Trainer {
public:
  /// Sets up state and data for `program`. Errors name the offending
  /// parameter, file or checkpoint.
  static llvm::Expected<std::unique_ptr<Trainer>>
  create(StepProgram &program, const TrainOptions &options,
         llvm::raw_ostream &out);

  /// Runs the remaining steps, printing progress; writes the report and
  /// checkpoints as configured.
  llvm::Error run();
  ~Trainer();

private:
  Trainer(StepProgram &program, const TrainOptions &options,
          llvm::raw_ostream &out);
  llvm::Error initState();
  /// Checks every output path and checkpoint key before the first step, so
  /// that a finished run is never lost to a bad --report / --checkpoint /
  /// --save-results.
  llvm::Error checkOutputs() const;
  llvm::Error restore(llvm::StringRef dir);
  /// Fails unless every rank holds the same parameters and shared state.
  llvm::Error checkReplicas(llvm::StringRef when);
  /// Whether argument `i` is state each rank keeps for itself (`comm.*`:
  /// the error-feedback residuals, DGC momenta and PowerSGD states of
  /// ds-compress-allreduce).
  bool isPerRankState(unsigned i) const;
  llvm::Error saveCheckpoint(llvm::StringRef dir);
  llvm::Error feed(uint64_t batch, bool heldOut);
  /// Held-out losses of one evaluation: of the step's forward, and with
  /// integer evaluation of its integer and f32 copies, with the seconds
  /// each spent in its forward calls.
  struct EvalLosses {
    double loss = 0, seconds = 0;
    std::optional<double> integer, f32;
    double integerSeconds = 0, f32Seconds = 0, weightSeconds = 0;
  };
  /// Runs the integer copy's weight preparation on the current parameters
  /// and state into `int8Weights` (allocated on first use).
  llvm::Error prepareInt8Weights(llvm::ArrayRef<HostTensor *> leading);
  llvm::Expected<EvalLosses> evaluate();
  llvm::Error writeResults(llvm::StringRef dir);
  llvm::Error exportQuantized(llvm::StringRef dir);
  llvm::Error writeReport();
  /// QAT: per quantized value (`qat.<weight|input>.*@<param>` state), its
  /// granularity and its final range, scale and zero point.
  llvm::json::Array quantSummary() const;
  /// Per block-sparse weight: its final sparsity and what each mask update
  /// changed (from the step metrics); and the work of the runtime's
  /// block-sparse kernels against the dense products. Empty without
  /// sparsity.
  llvm::json::Object sparsitySummary() const;
  /// Ranks, bytes on the wire per step, compression ratio, wait time.
  llvm::json::Object dataParallelSummary() const;
  double scalarOf(const HostTensor &t) const;
  std::string tensorKey(unsigned argIndex) const;

  StepProgram &program;
  /// Replica hash checks done (data parallel).
  int64_t replicaChecks = 0;
  TrainOptions options;
  llvm::raw_ostream &out;
  std::unique_ptr<DataFeed> data;
  std::vector<HostTensor> args, results;
  /// Results of each forward-only copy (by EvalKind).
  std::vector<HostTensor> evalResults[4];
  /// The integer copy's prepared weights: its arguments after those it
  /// shares with the step (qat.weight.int8@<param> state).
  std::vector<HostTensor> int8Weights;
  /// Forward seconds and calls of each copy over the run (weight
  /// preparation: seconds and calls, once per evaluation).
  double evalSeconds[4] = {0, 0, 0, 0};
  int64_t evalCalls = 0, evaluations = 0;

  std::vector<unsigned> inputArgs; ///< argument index of each feed input
  /// The `inject_nonfinite` input and the `loss_scale` state, if any.
  std::optional<unsigned> injectArg, lossScaleArg, iterationArg;
  /// The `found_inf` metric result (loss scaling), if any.
  std::optional<unsigned> foundInfResult;
  /// Steps skipped for non-finite gradients, and anomaly events.
  std::vector<int64_t> skippedSteps, anomalySteps;
  int64_t step = 0;
  /// The time level: the variant the last step ran, and how many steps the
  /// high-precision variant still runs after an anomaly.
  std::optional<unsigned> lastVariant;
  int64_t fallbackLeft = 0;
  std::vector<int64_t> stepsByVariant;
  unsigned chooseVariant(std::string &why) const;

  /// A step that ran (or, on a device, was enqueued) and whose scalars
  /// wait in the report ring.
  struct PendingStep {
    int64_t step = 0; ///< 1-based
    unsigned variant = 0;
    std::string why;
    bool injected = false;
    /// The call's milliseconds (on a device: replaced by the report
    /// window's wall time per step) and its collective waits.
    double ms = 0, waitMs = 0;
  };
  /// Sets up the report ring: which results each step copies into it.
  void setUpReportRing();
  /// Waits for the pending steps and records them in order.
  llvm::Error drain();
  /// Records one step from its slot of the ring: log entry, events,
  /// progress line; the non-finite loss check. `newest`: no later step
  /// has run (the state is the one before it).
  llvm::Error recordStep(const PendingStep &p, const uint8_t *slot,
                         bool newest);
  /// Brings the host copies up to date (a no-op on the CPU).
  llvm::Error syncHost(bool withResults = false);

  std::unique_ptr<StepTensors> tensors;
  int64_t reportEvery = 1;
  /// The results copied into the ring every step and their offsets in a
  /// slot; the ring holds `reportEvery` slots.
  std::vector<unsigned> ringResults;
  std::vector<size_t> ringOffsets;
  size_t slotBytes = 0;
  uint8_t *ringData = nullptr;
  std::vector<PendingStep> pending;
  double windowStart = 0;
  /// The update results of the loss scale and the iteration counter, and
  /// their values after the last recorded step (host-side, so that the
  /// device's copies need not come back).
  std::optional<unsigned> lossScaleUpdate, iterationUpdate;
  double lossScaleNow = 0;
  std::optional<ProgressLine> progress;
  std::optional<int64_t> iterationNow;
  llvm::json::Array stepLog, evalLog;
  std::vector<double> stepMs;
  /// Per step: the milliseconds the step waited on collectives and
  /// receives (the communicator's counter).
  std::vector<double> stepWaitMs;
};

} // namespace ds::runner

#endif // DS_RUNNER_TRAINER_H

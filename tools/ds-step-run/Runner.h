//===- Runner.h - The training loop of ds-step-run -------------*- C++ -*-===//
//
// Runs an exported step for a number of steps. On a CUDA device the
// parameters and state stay on the device: they go up once, each step
// uploads only its batch, an update result's buffer becomes its argument's
// buffer for the next step (a pointer swap, no copy), and the loss and
// scalar metrics are copied into a pinned ring that the host reads every
// `reportEvery` steps, so nothing waits for the device in between.
//
//===----------------------------------------------------------------------===//

#ifndef DS_STEP_RUN_RUNNER_H
#define DS_STEP_RUN_RUNNER_H

#include "StepLibrary.h"

#include <map>
#include <string>
#include <vector>

namespace ds::steprun {

struct RunOptions {
  int64_t steps = 20;
  int64_t reportEvery = 10;
  /// Input name -> data set [S, ...]; batch k is rows k*B .. k*B+B-1 modulo
  /// S, as ds-run --data serves them (with the same file as --eval-data).
  /// A data-parallel step's rank r of N takes rows (k*N + r)*B .. of
  /// global batches of N*B rows, as ds-run's ranks do.
  std::map<std::string, Tensor> data;
  int rank = 0, worldSize = 1;
  bool quiet = false;
  /// Copy the last step's results back (RunResult::lastResults).
  bool keepResults = false;
  /// On a device, replay the step as CUDA graphs (StepGraphs.h).
  bool cudaGraphs = false;
  /// On a device, profile the timed steps (dsrt_cuda_profile_begin):
  /// RunResult::profile.
  bool profile = false;
};

/// One kernel's or GEMM's device time over the profiled steps.
struct ProfileEntry {
  std::string name;
  uint64_t calls = 0;
  double ms = 0;
};

/// One step's scalars, as the host read them.
struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  std::vector<std::pair<std::string, double>> metrics;
};

struct RunResult {
  std::vector<StepRecord> steps;
  /// Wall time per step from step `timedFrom` on (the first loads
  /// libraries and kernels; with graphs, steps 2 to 4 capture them), and
  /// the host's share of it (enqueueing the step).
  double msPerStep = 0, hostMsPerStep = 0;
  int64_t timedFrom = 2;
  /// On a device, per timed step (the runtime's counters): kernel
  /// launches, cuBLASLt GEMMs and their GFLOP, stream-ordered allocations.
  bool hasDeviceCounts = false;
  double launchesPerStep = 0, gemmsPerStep = 0, gemmGflopPerStep = 0,
         allocationsPerStep = 0;
  /// With RunOptions::cudaGraphs: graph launches per timed step,
  /// the kernels the host still launched itself, and graphs captured.
  double graphLaunchesPerStep = 0, hostKernelLaunchesPerStep = 0;
  size_t graphsCaptured = 0;
  /// The runtime's copies between host and device per timed step
  /// (dsrt_cuda_stats' bytes_to_host, bytes_to_device).
  double bytesToHostPerStep = 0, bytesToDevicePerStep = 0;
  /// With RunOptions::profile: the device time of each kernel and GEMM over
  /// the timed steps, longest first.
  std::vector<ProfileEntry> profile;
  /// The parameters and state after the last step.
  std::vector<Tensor> finalArgs;
  /// With RunOptions::keepResults, the last step's results (an update's is
  /// its argument's final value).
  std::vector<Tensor> lastResults;
};

/// Runs `library` from the arguments `args` (parameters and state filled,
/// inputs empty). Fails on a runtime error, a non-finite loss that loss
/// scaling did not skip, or bad data, with a message in `error`.
bool runSteps(const StepManifest &manifest, const StepLibrary &library,
              std::vector<Tensor> args, const RunOptions &options,
              RunResult &result, std::string &error);

} // namespace ds::steprun

#endif // DS_STEP_RUN_RUNNER_H

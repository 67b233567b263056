//===- ds-step-run.cpp - Run an exported training step --------------------===//
//
// The runner without MLIR: loads what `ds-run --emit-step DIR` wrote (a
// compiled step as a shared library, its manifest and initial state) and
// trains it on data from .npy files, on the CPU or on a CUDA device. It
// links libdsrt (or, on a machine with only the CUDA toolkit,
// libdsrt_cuda) and nothing else of ds-mlir. docs/AheadOfTime.md.
//
//===----------------------------------------------------------------------===//

#include "Runner.h"
#include "StepLibrary.h"

#include "ds/Runtime/StepGraphs.h"
#include "ds/Runtime/ds_runtime.h"
#ifdef DSRT_HAVE_CUDA
#include "ds/Runtime/ds_runtime_cuda.h"
#endif

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace ds::steprun;
using nlohmann::json;

namespace {
const char *kUsage =
    "usage: ds-step-run [options] STEP_DIR\n"
    "\n"
    "Trains the step that `ds-run --emit-step STEP_DIR` compiled, on the\n"
    "device it was compiled for (cpu, or cuda for the chip in step.json).\n"
    "\n"
    "  --steps N            steps to run (default 20)\n"
    "  --data NAME=FILE     data set .npy [S, ...] of input NAME; step k\n"
    "                       takes rows kB .. kB+B-1 (mod S), as ds-run --data\n"
    "                       does (every input needs one)\n"
    "  --init DIR           initial state: a ds-run checkpoint (default\n"
    "                       STEP_DIR/init)\n"
    "  --init-random SEED   draw the initial state from the initialisers in\n"
    "                       step.json instead (a generator of its own, not\n"
    "                       ds-run's values): for benchmarks\n"
    "  --report-every K     read the loss back every K steps (default 10);\n"
    "                       on a device, nothing waits in between\n"
    "  --losses FILE.json   write every step's loss and scalar metrics\n"
    "  --expect FILE.json   compare the losses with a ds-run --report (or\n"
    "                       --losses) file; exit 1 if they differ\n"
    "  --rtol R             relative tolerance of --expect (default 1e-4)\n"
    "  --save-state DIR     write the final parameters and state as .npy\n"
    "                       (each rank its own error feedback, KEY@rankR)\n"
    "  --save-results DIR   write the last step's results as .npy (metrics\n"
    "                       by name, loss.npy, update.<arg>.npy)\n"
    "  --cuda-graphs        on a CUDA device, capture the step as CUDA\n"
    "                       graphs (one per set of buffers, from the second\n"
    "                       step on) and replay them: one launch per step\n"
    "                       instead of one per kernel\n"
    "  --profile N          on a CUDA device, time each kernel and GEMM\n"
    "                       of the timed steps with events and print the N\n"
    "                       longest (device ms per step); the events slow\n"
    "                       the step a little (ms/step includes them)\n"
    "  --comm-timeout S     a data-parallel step: seconds a collective may\n"
    "                       wait for the other ranks (0: forever; default\n"
    "                       300)\n"
    "  --deterministic      a data-parallel step: sum the gradients in rank\n"
    "                       order (as ds-run --deterministic)\n"
    "  --quiet              no progress lines\n"
    "  --device-info        print the CUDA device (or why there is none) and\n"
    "                       exit: 0 with a device, 1 without\n"
    "\n"
    "A data-parallel step (ds-run --data-parallel --emit-step) runs under\n"
    "mpirun, one process per rank (or alone: a world of one); rank r of N\n"
    "takes rows (kN + r)B .. of the data at step k, as ds-run's ranks do,\n"
    "and rank 0 prints and writes the outputs.\n";

/// The `top` longest entries of a profile, per timed step, and the rest
/// in one line.
void printProfile(const RunResult &result, int64_t top, int64_t steps) {
  double timed = double(steps - result.timedFrom + 1), all = 0;
  for (const ProfileEntry &e : result.profile)
    all += e.ms;
  std::printf("ds-step-run: profile of steps %lld..%lld: %.3f ms of device "
              "time per step in %zu kernels and GEMMs (%.3f ms/step wall)\n",
              (long long)result.timedFrom, (long long)steps, all / timed,
              result.profile.size(), result.msPerStep);
  double rest = 0;
  int64_t restCount = 0;
  for (size_t i = 0; i < result.profile.size(); ++i) {
    const ProfileEntry &e = result.profile[i];
    if (int64_t(i) >= top) {
      rest += e.ms;
      ++restCount;
      continue;
    }
    std::printf("ds-step-run: profile %9.3f ms %5.1f%% %7.1f calls  %s\n",
                e.ms / timed, 100 * e.ms / all, double(e.calls) / timed,
                e.name.c_str());
  }
  if (restCount)
    std::printf("ds-step-run: profile %9.3f ms %5.1f%%  (%lld others)\n",
                rest / timed, 100 * rest / all, (long long)restCount);
}

/// Creates `dir` and its missing parents (mkdir -p).
bool makeDirs(const std::string &dir, std::string &error) {
  for (size_t at = dir.find('/', 1);; at = dir.find('/', at + 1)) {
    std::string prefix = dir.substr(0, at);
    struct stat st;
    if (!prefix.empty() && stat(prefix.c_str(), &st) != 0 &&
        mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      error =
          "cannot create the directory " + prefix + ": " + std::strerror(errno);
      return false;
    }
    if (at == std::string::npos)
      return true;
  }
}

int fail(const std::string &message) {
#ifdef DSRT_HAVE_COMM
  // Under mpirun a peer may wait in a collective: leave at once, and
  // mpirun ends the job.
  if (dsrt_comm_size() > 1) {
    std::fprintf(stderr, "ds-step-run: error: rank %d: %s\n", dsrt_comm_rank(),
                 message.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(1);
  }
#endif
  std::fprintf(stderr, "ds-step-run: error: %s\n", message.c_str());
  return 1;
}

/// The losses of a ds-run report or a ds-step-run --losses file.
bool readLosses(const std::string &path, std::vector<double> &losses,
                std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  try {
    json j = json::parse(in);
    for (const json &s : j.at("steps"))
      losses.push_back(s.at("loss").is_number() ? s.at("loss").get<double>()
                                                : NAN);
  } catch (const json::exception &e) {
    error = path + ": " + e.what();
    return false;
  }
  return true;
}

std::string escapeKey(const std::string &key) {
  // As ds-run's checkpoints name files (lib/Runner/Checkpoint.cpp).
  std::string out;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '@' || c == '-') {
      out += char(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}
} // namespace

int main(int argc, char **argv) {
  RunOptions options;
  std::string initDir, lossesPath, expectPath, saveDir, resultsDir;
  double rtol = 1e-4, commTimeout = 300;
  bool deterministic = false, commFlags = false;
  int64_t randomSeed = -1;
  int64_t profileTop = 0;
  std::vector<std::string> dataArgs;
  enum {
    Steps = 1,
    Data,
    Init,
    Every,
    Losses,
    Expect,
    Rtol,
    Save,
    SaveResults,
    Quiet,
    Help,
    DeviceInfo,
    InitRandom,
    CudaGraphs,
    Profile,
    CommTimeout,
    Deterministic
  };
  static const option longOptions[] = {
      {"steps", required_argument, nullptr, Steps},
      {"data", required_argument, nullptr, Data},
      {"init", required_argument, nullptr, Init},
      {"report-every", required_argument, nullptr, Every},
      {"losses", required_argument, nullptr, Losses},
      {"expect", required_argument, nullptr, Expect},
      {"rtol", required_argument, nullptr, Rtol},
      {"save-state", required_argument, nullptr, Save},
      {"save-results", required_argument, nullptr, SaveResults},
      {"quiet", no_argument, nullptr, Quiet},
      {"help", no_argument, nullptr, Help},
      {"device-info", no_argument, nullptr, DeviceInfo},
      {"init-random", required_argument, nullptr, InitRandom},
      {"cuda-graphs", no_argument, nullptr, CudaGraphs},
      {"profile", required_argument, nullptr, Profile},
      {"comm-timeout", required_argument, nullptr, CommTimeout},
      {"deterministic", no_argument, nullptr, Deterministic},
      {nullptr, 0, nullptr, 0}};
  auto number = [](const char *text, double &out) {
    char *end = nullptr;
    out = std::strtod(text, &end);
    return end && *end == '\0' && end != text;
  };
  for (int c; (c = getopt_long(argc, argv, "", longOptions, nullptr)) != -1;) {
    double v = 0;
    switch (c) {
    case Steps:
    case Every:
      if (!number(optarg, v) || v < (c == Steps ? 0 : 1) || v != std::floor(v))
        return fail(std::string(c == Steps ? "--steps" : "--report-every") +
                    " expects an integer >= " + (c == Steps ? "0" : "1") +
                    ", got '" + optarg + "'");
      (c == Steps ? options.steps : options.reportEvery) = int64_t(v);
      break;
    case Rtol:
      if (!number(optarg, rtol) || !(rtol >= 0))
        return fail(std::string("--rtol expects a number >= 0, got '") +
                    optarg + "'");
      break;
    case Data:
      dataArgs.push_back(optarg);
      break;
    case Init:
      initDir = optarg;
      break;
    case InitRandom:
      if (!number(optarg, v) || v < 0 || v != std::floor(v))
        return fail(std::string("--init-random expects a seed >= 0, got '") +
                    optarg + "'");
      randomSeed = int64_t(v);
      break;
    case Losses:
      lossesPath = optarg;
      break;
    case Expect:
      expectPath = optarg;
      break;
    case Save:
      saveDir = optarg;
      break;
    case SaveResults:
      resultsDir = optarg;
      options.keepResults = true;
      break;
    case Quiet:
      options.quiet = true;
      break;
    case CudaGraphs:
      options.cudaGraphs = true;
      break;
    case Profile:
      if (!number(optarg, v) || v < 1 || v != std::floor(v))
        return fail(std::string("--profile expects an integer >= 1, got '") +
                    optarg + "'");
      options.profile = true;
      profileTop = int64_t(v);
      break;
    case CommTimeout:
      if (!number(optarg, commTimeout) || !(commTimeout >= 0))
        return fail(std::string("--comm-timeout expects seconds >= 0, got '") +
                    optarg + "'");
      commFlags = true;
      break;
    case Deterministic:
      deterministic = commFlags = true;
      break;
    case Help:
      std::fputs(kUsage, stdout);
      return 0;
    case DeviceInfo:
#ifdef DSRT_HAVE_CUDA
      if (dsrt_cuda_init() != 0)
        return fail(dsrt_last_error() ? dsrt_last_error() : "no CUDA device");
      std::printf("device: %s (sm_%d)\n", dsrt_cuda_device_name(),
                  dsrt_cuda_compute_capability());
      dsrt_cuda_shutdown();
      return 0;
#else
      return fail("built without the CUDA backend");
#endif
    default:
      std::fputs(kUsage, stderr);
      return 1;
    }
  }
  if (optind + 1 != argc) {
    std::fputs(kUsage, stderr);
    return fail(optind == argc ? "no step directory given"
                               : "one step directory expected");
  }

  std::string error;
  StepManifest manifest;
  if (!manifest.load(argv[optind], error))
    return fail(error);
  if (options.cudaGraphs && manifest.device != "cuda")
    return fail("--cuda-graphs needs a step compiled for CUDA; " +
                manifest.dir + " runs on the " + manifest.device);
  if (options.profile && (manifest.device != "cuda" ||
                          manifest.emulatedKernels || options.cudaGraphs))
    return fail(std::string("--profile times kernels on a CUDA device") +
                (options.cudaGraphs ? ", one at a time: not with --cuda-graphs"
                                    : "; this step's kernels run on the host"));
#ifdef DSRT_HAVE_COMM
  bool launched = dsrt_comm_launched();
#else
  bool launched = false;
  if (manifest.dataParallel)
    return fail(manifest.dir +
                " is a data-parallel step, and this "
                "ds-step-run was built without the comm layer (the GPU "
                "check's ds-step-run-nccl has it)");
#endif
  if (!manifest.dataParallel && (launched || commFlags))
    return fail(launched
                    ? "running under mpirun, but " + manifest.dir +
                          " is not a data-parallel step: every rank would "
                          "train alone (export it with ds-run --data-parallel)"
                    : "--comm-timeout and --deterministic go with a "
                      "data-parallel step (ds-run --data-parallel "
                      "--emit-step)");
  // Only NCCL's collectives can be captured (a compressing scheme whose
  // payloads go through the host fails the capture by name, at the third
  // step).
  if (manifest.dataParallel && options.cudaGraphs)
    if (const char *why = ds::runtime::collectivesRefuseGraphs(
            deterministic, launched, /*pipeline=*/false))
      return fail(
          std::string(
              "--cuda-graphs can capture only NCCL's collectives, and ") +
          why);
  if (options.cudaGraphs && manifest.emulatedKernels)
    return fail("--cuda-graphs cannot capture this step: its kernels run on "
                "the host (compiled with --gpu-emulate-kernels), outside "
                "the stream a graph records");
#ifdef DSRT_HAVE_COMM
  // The communicator first, as in ds-run: the rank picks its rows and its
  // own state, and the collectives keep the configuration.
  if (manifest.dataParallel) {
    dsrt_comm_config config{commTimeout, deterministic ? 1 : 0, 1};
    if (dsrt_comm_init(&config) != 0)
      return fail(std::string("cannot start the communicator: ") +
                  dsrt_last_error());
    options.rank = dsrt_comm_rank();
    options.worldSize = dsrt_comm_size();
    if (options.rank != 0) {
      options.quiet = true;
      lossesPath = resultsDir = ""; // --save-state: its own residuals
      options.keepResults = false;
      expectPath = "";
    }
  }
#endif
  for (const std::string &a : dataArgs) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size())
      return fail("--data expects NAME=FILE, got '" + a + "'");
    Tensor t;
    if (!readNpy(a.substr(eq + 1), t, error))
      return fail("--data " + a.substr(0, eq) + ": " + error);
    options.data[a.substr(0, eq)] = std::move(t);
  }
  std::vector<double> expected;
  if (!expectPath.empty() && !readLosses(expectPath, expected, error))
    return fail("--expect: " + error);
  if (!expectPath.empty() && expected.empty())
    return fail("--expect: " + expectPath + " has no steps to compare");
  std::vector<Tensor> args;
  if (randomSeed >= 0 && !initDir.empty())
    return fail("give --init or --init-random, not both");
  if (randomSeed < 0 && initDir.empty() &&
      access((manifest.dir + "/" + manifest.init).c_str(), F_OK) != 0)
    return fail(manifest.dir + " has no " + manifest.init +
                "/ (exported with --emit-init=false): give --init DIR or "
                "--init-random SEED");
  if (randomSeed >= 0
          ? !randomState(manifest, uint64_t(randomSeed), args, error)
          : !readCheckpoint(
                initDir.empty() ? manifest.dir + "/" + manifest.init : initDir,
                manifest, args, error, options.rank, options.worldSize))
    return fail(error);

  // The device before the library: its constructors load the kernels.
  if (manifest.device == "cuda") {
#ifdef DSRT_HAVE_CUDA
    if (dsrt_cuda_init() != 0)
      return fail(dsrt_last_error() ? dsrt_last_error() : "no CUDA device");
    int cc = dsrt_cuda_compute_capability();
    int want = manifest.chip.rfind("sm_", 0) == 0
                   ? std::atoi(manifest.chip.c_str() + 3)
                   : 0;
    // A cubin runs on its own major architecture, at its minor or later.
    if (want == 0 || cc / 10 != want / 10 || cc % 10 < want % 10) {
      std::string name = dsrt_cuda_device_name();
      dsrt_cuda_shutdown();
      return fail("the step was compiled for " + manifest.chip +
                  ", but the device is sm_" + std::to_string(cc) + " (" + name +
                  "): compile it again with ds-run --device cuda --gpu-chip "
                  "sm_" +
                  std::to_string(cc) + " --emit-step");
    }
    if (manifest.emulatedKernels && dsrt_cuda_device_memory_is_host() != 1) {
      std::string name = dsrt_cuda_device_name();
      dsrt_cuda_shutdown();
      return fail("the step's kernels were compiled to run on the host "
                  "(ds-run --gpu-emulate-kernels), which cannot address the "
                  "memory of " +
                  name + ": compile it again without --gpu-emulate-kernels");
    }
    if (!options.quiet)
      std::printf("ds-step-run: device: %s (sm_%d)\n", dsrt_cuda_device_name(),
                  cc);
#else
    return fail("the step was compiled for CUDA, and this ds-step-run was "
                "built without the CUDA backend (no CUDA toolkit at configure "
                "time)");
#endif
  } else if (manifest.device != "cpu") {
    return fail(manifest.dir + "/step.json: unknown device '" +
                manifest.device + "'");
  }

  int code = 0;
  RunResult result;
  {
    StepLibrary library;
    if (!library.open(manifest, error) || dsrt_last_error()) {
      code = fail(error.empty() ? std::string("loading the step's kernels: ") +
                                      dsrt_last_error()
                                : error);
    } else {
      if (!options.quiet)
        std::printf("ds-step-run: %s (%s%s%s): %lld steps\n",
                    manifest.function.c_str(), manifest.device.c_str(),
                    manifest.chip.empty() ? "" : " ", manifest.chip.c_str(),
                    (long long)options.steps);
      if (!runSteps(manifest, library, std::move(args), options, result, error))
        code = fail(error);
    }
#ifdef DSRT_HAVE_COMM
    // Before the device's session ends: NCCL's communicator goes first.
    if (manifest.dataParallel) {
      dsrt_comm_finalize();
      if (code == 0 && dsrt_last_error())
        code = fail(std::string("finishing the collectives: ") +
                    dsrt_last_error());
    }
#endif
    library.close(); // unloads a GPU step's kernels
  }
#ifdef DSRT_HAVE_CUDA
  if (manifest.device == "cuda")
    dsrt_cuda_shutdown();
#endif
  if (code != 0)
    return code;

  if (!options.quiet)
    std::printf("ds-step-run: %.3f ms/step (host %.3f ms enqueueing), steps "
                "%lld..%lld\n",
                result.msPerStep, result.hostMsPerStep,
                (long long)result.timedFrom, (long long)options.steps);
  // A data-parallel step's collectives, as ds-run's report counts them
  // (this rank's; every rank sends as much but for compressed payloads).
  json dataParallel;
#ifdef DSRT_HAVE_COMM
  if (manifest.dataParallel) {
    dsrt_comm_stats comm;
    dsrt_get_comm_stats(&comm);
    double steps = std::max<double>(1.0, double(options.steps));
    const char *backend = dsrt_comm_device_backend();
    dataParallel = {
        {"ranks", options.worldSize},
        {"collectives", comm.collectives},
        {"bytes_sent_per_step", comm.bytes_sent / steps},
        {"bucket_bytes_sent_per_step", comm.bytes_sent_buckets / steps},
        {"dense_bytes_per_step", comm.bytes_dense / steps},
        {"nonfinite_buckets", comm.nonfinite_buckets},
        {"device_collectives", backend}};
    // The buckets' bytes against their dense size, whatever else is sent.
    double ratio = comm.bytes_sent_buckets > 0
                       ? comm.bytes_dense / comm.bytes_sent_buckets
                       : 0;
    if (ratio > 0)
      dataParallel["compression_ratio"] = ratio;
    // The buckets' bytes (what the compression ratio divides), then the
    // other transfers, if any.
    double others = (comm.bytes_sent - comm.bytes_sent_buckets) / steps;
    std::string otherTransfers = others > 0
                                     ? "; " + std::to_string(int64_t(others)) +
                                           " bytes a step of other transfers"
                                     : "";
    if (!options.quiet)
      std::printf("ds-step-run: data parallel: %d rank(s), %llu collectives, "
                  "%.0f bytes sent a step (%.0f dense), %llu non-finite "
                  "buckets%s%s%s\n",
                  options.worldSize, (unsigned long long)comm.collectives,
                  comm.bytes_sent_buckets / steps, comm.bytes_dense / steps,
                  (unsigned long long)comm.nonfinite_buckets,
                  otherTransfers.c_str(),
                  *backend ? "; device collectives: " : "", backend);
  }
#endif
  if (!options.quiet && result.hasDeviceCounts)
    std::printf("ds-step-run: per step: %.0f kernel launches, %.0f cuBLASLt "
                "GEMMs (%.4g GFLOP), %.0f stream-ordered allocations; the "
                "runtime's copies: %.0f bytes to the host, %.0f to the "
                "device\n",
                result.launchesPerStep, result.gemmsPerStep,
                result.gemmGflopPerStep, result.allocationsPerStep,
                result.bytesToHostPerStep, result.bytesToDevicePerStep);
  if (!result.profile.empty())
    printProfile(result, profileTop, options.steps);
  if (!options.quiet && options.cudaGraphs) {
    std::printf("ds-step-run: CUDA graphs: %zu captured",
                result.graphsCaptured);
    if (result.hasDeviceCounts)
      std::printf("; per step %.2f graph launches and %.2f kernels launched "
                  "by the host",
                  result.graphLaunchesPerStep,
                  result.hostKernelLaunchesPerStep);
    std::printf("\n");
  }
  if (!lossesPath.empty()) {
    json steps = json::array();
    for (const StepRecord &r : result.steps) {
      json metrics = json::object();
      for (auto &[name, v] : r.metrics)
        metrics[name] = v;
      steps.push_back({{"step", r.step},
                       {"loss", std::isfinite(r.loss) ? json(r.loss) : json()},
                       {"metrics", metrics}});
    }
    json out = {
        {"function", manifest.function},
        {"device", manifest.device},
        {"chip", manifest.chip},
        {"ms_per_step", result.msPerStep},
        {"host_ms_per_step", result.hostMsPerStep},
        {"per_step",
         result.hasDeviceCounts
             ? json{{"kernel_launches", result.launchesPerStep},
                    {"host_kernel_launches", result.hostKernelLaunchesPerStep},
                    {"graph_launches", result.graphLaunchesPerStep},
                    {"gemms", result.gemmsPerStep},
                    {"gemm_gflop", result.gemmGflopPerStep},
                    {"stream_allocations", result.allocationsPerStep},
                    {"bytes_to_host", result.bytesToHostPerStep},
                    {"bytes_to_device", result.bytesToDevicePerStep}}
             : json()},
        {"steps", steps}};
    if (!dataParallel.is_null())
      out["data_parallel"] = dataParallel;
    std::ofstream os(lossesPath);
    os << out.dump(2) << "\n";
    if (!os)
      return fail("cannot write " + lossesPath);
  }
  if (!saveDir.empty()) {
    if (!makeDirs(saveDir, error))
      return fail(error);
    for (size_t i = 0; i < manifest.args.size(); ++i) {
      const TensorSpec &spec = manifest.args[i];
      if (spec.role == "input" || (options.rank != 0 && !spec.perRank))
        continue;
      // Each rank its own state, named as in ds-run's checkpoints.
      std::string key = spec.name;
      if (spec.perRank && options.worldSize > 1)
        key += "@rank" + std::to_string(options.rank);
      if (!writeNpy(saveDir + "/" + escapeKey(key) + ".npy",
                    result.finalArgs[i], error))
        return fail(error);
    }
  }
  if (!resultsDir.empty()) {
    if (!makeDirs(resultsDir, error))
      return fail(error);
    for (size_t r = 0; r < manifest.results.size(); ++r) {
      const TensorSpec &spec = manifest.results[r];
      std::string name =
          spec.role == "loss" ? std::string("loss")
          : spec.role == "metric"
              ? spec.name
              : spec.role + "." + manifest.args[size_t(spec.of)].name;
      if (!writeNpy(resultsDir + "/" + escapeKey(name) + ".npy",
                    result.lastResults[r], error))
        return fail(error);
    }
  }
  if (!expected.empty()) {
    size_t n = std::min(expected.size(), result.steps.size());
    if (n == 0)
      return fail("--expect: no step to compare");
    double worst = 0;
    int64_t worstStep = 0;
    for (size_t s = 0; s < n; ++s) {
      double a = result.steps[s].loss, b = expected[s];
      double rel = std::fabs(a - b) / std::max(std::fabs(b), 1e-30);
      if (std::isnan(a) != std::isnan(b) || (!std::isnan(a) && rel > worst)) {
        worst = std::isnan(rel) ? INFINITY : rel;
        worstStep = int64_t(s + 1);
      }
    }
    bool ok = worst <= rtol;
    std::string where =
        worstStep ? " at step " + std::to_string(worstStep) : " (identical)";
    std::printf("ds-step-run: losses of %zu steps vs %s: max relative "
                "difference %.3g%s (tolerance %.3g): %s\n",
                n, expectPath.c_str(), worst, where.c_str(), rtol,
                ok ? "PASS" : "FAIL");
    if (!ok)
      return 1;
  }
  return 0;
}

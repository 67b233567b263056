//===- Trainer.cpp - Run a compiled step for N steps ----------------------===//
//
// The step loop with progress lines and held-out evaluation, and the JSON
// report (TrainerState.cpp holds the state: initialisation, checkpoints,
// output checks). Tensors are
// double-buffered: a step writes into `results`, and only after it returned
// successfully are updated tensors swapped into `args`, so the buffers are
// reused and a failed step changes nothing.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/Trainer.h"

#include "StepTensors.h"
#include "TrainerInternal.h"

#include "ds/Runner/Checkpoint.h"
#include "ds/Runner/Random.h"
#include "ds/Runner/Report.h"
#include "ds/Runtime/ds_runtime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

using namespace ds::runner;
using llvm::Error;
using llvm::Expected;
using mlir::ds::ArgRole;
using mlir::ds::ContractArg;
using mlir::ds::InitKind;
using mlir::ds::ResultRole;

using ds::runner::detail::errorf;

/// JSON has no inf or NaN: a non-finite number (the loss of a poisoned
/// step, say) is written as null.
static llvm::json::Value jsonNumber(double v) {
  if (std::isfinite(v))
    return v;
  return nullptr;
}

/// The name of the fault-injection input ds-insert-loss-scaling adds.
static constexpr llvm::StringLiteral kInjectInput = "inject_nonfinite";

static int64_t countNonZero(const HostTensor &t) {
  int64_t n = 0;
  for (int64_t i = 0, e = t.numElements(); i < e; ++i)
    n += t.getDouble(i) != 0.0;
  return n;
}

std::string Trainer::tensorKey(unsigned argIndex) const {
  return program.contract().args[argIndex].name;
}

double Trainer::scalarOf(const HostTensor &t) const {
  return t.numElements() > 0 ? t.getDouble(0) : 0.0;
}

Expected<std::unique_ptr<Trainer>> Trainer::create(StepProgram &program,
                                                   const TrainOptions &options,
                                                   llvm::raw_ostream &out) {
  std::unique_ptr<Trainer> t(new Trainer(program, options, out));
  const auto &c = program.contract();
  for (const ContractArg &arg : c.args) {
    Expected<HostTensor> tensor = makeTensor(arg.type);
    if (!tensor)
      return errorf(arg.name + ": " + llvm::toString(tensor.takeError()));
    t->args.push_back(std::move(*tensor));
  }
  for (const auto &res : c.results) {
    Expected<HostTensor> tensor = makeTensor(res.type);
    if (!tensor)
      return tensor.takeError();
    t->results.push_back(std::move(*tensor));
  }
  if (!c.hasParamUpdates() && !options.quiet)
    out << "ds-run: note: the step updates no parameter; the loss will not "
           "change\n";

  for (auto [i, res] : llvm::enumerate(c.results))
    if (res.role == ResultRole::Metric && res.name == "found_inf" &&
        res.type.getRank() == 0)
      t->foundInfResult = i;

  // Data: one feed input per ds.input argument.
  std::vector<InputSpec> specs;
  for (auto [i, arg] : llvm::enumerate(c.args)) {
    if (arg.role == ArgRole::State && arg.state.getKind() == "loss_scale" &&
        arg.state.getOf().empty())
      t->lossScaleArg = i;
    if (arg.role == ArgRole::State &&
        arg.state.getKind() == mlir::ds::kIterationStateKind &&
        arg.state.getOf().empty() && arg.type.getRank() == 0)
      t->iterationArg = i;
    if (arg.role != ArgRole::Input)
      continue;
    // The fault-injection flag is fed by the runner, not the data.
    if (arg.name == kInjectInput && arg.type.getRank() == 0) {
      t->injectArg = i;
      continue;
    }
    Expected<DType> dtype = dtypeOf(arg.type);
    if (!dtype)
      return dtype.takeError();
    std::vector<int64_t> shape(arg.type.getShape().begin(),
                               arg.type.getShape().end());
    // Data parallel: the feed serves the global batch, N times the step's
    // rows, and feed() keeps this rank's rows.
    if (!shape.empty())
      shape[0] *= options.worldSize;
    specs.push_back({arg.name, *dtype, std::move(shape), arg.range});
    t->inputArgs.push_back(i);
  }
  if (!specs.empty()) {
    Expected<std::unique_ptr<DataFeed>> feed =
        options.dataFiles.empty()
            ? SyntheticFeed::create(specs, options.seed)
            : FileFeed::create(
                  specs, options.dataFiles,
                  options.evalFiles.empty() ? std::nullopt
                                            : std::optional(options.evalFiles),
                  /*heldOutFraction=*/0.1, options.allowNonfiniteInputs);
    if (!feed)
      return feed.takeError();
    t->data = std::move(*feed);
  }

  if (const PrecisionSchedule *schedule = program.schedule();
      schedule && schedule->anomalySteps > 0 && !options.quiet &&
      llvm::none_of(c.results, [](const mlir::ds::ContractResult &r) {
        return r.role == ResultRole::Metric && r.name == "anomaly";
      }))
    out << "ds-run: warning: the schedule switches to the high-precision "
           "variant after gradient anomalies, but the step has no 'anomaly' "
           "metric (add ds-insert-loss-scaling)\n";
  if (!options.injectSteps.empty() && !t->injectArg)
    return errorf("--inject-nonfinite: the step has no 'inject_nonfinite' "
                  "input; add loss scaling with fault injection "
                  "(--loss-scaling, or ds-insert-loss-scaling{"
                  "inject-nonfinite=1})");

  if (Error e = t->checkOutputs())
    return std::move(e);
  dsrt_set_num_threads(options.threads);
  if (Error e = t->initState())
    return std::move(e);
  if (!options.resumeDir.empty())
    if (Error e = t->restore(options.resumeDir))
      return std::move(e);
  if (options.worldSize > 1)
    if (Error e =
            t->checkReplicas(options.resumeDir.empty() ? "after initialisation"
                                                       : "after --resume"))
      return std::move(e);
  return t;
}

Error Trainer::feed(uint64_t batch, bool heldOut) {
  if (!data)
    return Error::success();
  std::vector<HostTensor> tensors;
  if (Error e = data->fill(batch, heldOut, tensors))
    return e;
  for (auto [k, argIndex] : llvm::enumerate(inputArgs)) {
    HostTensor &global = tensors[k];
    if (options.worldSize == 1 || global.shape.empty()) {
      args[argIndex] = std::move(global);
      continue;
    }
    // Rows [r b, (r + 1) b) of the global batch.
    HostTensor &local = args[argIndex];
    size_t bytes = local.sizeInBytes();
    std::copy_n(global.bytes.begin() + size_t(options.rank) * bytes, bytes,
                local.bytes.begin());
  }
  return Error::success();
}

Error Trainer::prepareInt8Weights(llvm::ArrayRef<HostTensor *> leading) {
  const mlir::ds::TrainingContract *integer =
      program.evalContract(EvalKind::Integer);
  const mlir::ds::TrainingContract *prep =
      program.evalContract(EvalKind::Weights);
  size_t shared = leading.size();
  if (int8Weights.empty())
    for (size_t i = shared; i < integer->args.size(); ++i) {
      Expected<HostTensor> t = makeTensor(integer->args[i].type);
      if (!t)
        return t.takeError();
      int8Weights.push_back(std::move(*t));
    }
  if (!prep)
    return Error::success();
  if (evalResults[3].empty())
    for (const auto &res : prep->results) {
      Expected<HostTensor> t = makeTensor(res.type);
      if (!t)
        return t.takeError();
      evalResults[3].push_back(std::move(*t));
    }
  std::vector<HostTensor *> ptrs(leading.begin(), leading.end());
  for (HostTensor &w : int8Weights)
    ptrs.push_back(&w);
  if (Error e = program.runEval(ptrs, evalResults[3], EvalKind::Weights))
    return e;
  for (auto [r, res] : llvm::enumerate(prep->results))
    if (res.role == ResultRole::Update)
      int8Weights[res.argIndex - shared] = evalResults[3][r];
  return Error::success();
}

Expected<Trainer::EvalLosses> Trainer::evaluate() {
  // With a forward-only copy of the step, evaluation runs just the forward
  // on the leading arguments. Otherwise the step's loss (computed before
  // its update) is taken and the update discarded. With integer evaluation,
  // the integer and f32 copies run on the same batches, the integer one
  // with the weights prepared once per evaluation.
  const EvalKind kinds[3] = {EvalKind::Forward, EvalKind::Integer,
                             EvalKind::Float};
  for (unsigned k = 0; k < 3; ++k) {
    const mlir::ds::TrainingContract *eval = program.evalContract(kinds[k]);
    if (eval && evalResults[k].empty())
      for (const auto &res : eval->results) {
        Expected<HostTensor> t = makeTensor(res.type);
        if (!t)
          return t.takeError();
        evalResults[k].push_back(std::move(*t));
      }
  }
  const mlir::ds::TrainingContract *integer =
      program.evalContract(EvalKind::Integer);
  double sums[3] = {0, 0, 0}, seconds[4] = {0, 0, 0, 0};
  // The first evaluation warms every copy up once, untimed (first-touch
  // allocation, and oneDNN generates its integer kernels on first use), so
  // that the forward times compare steady states.
  bool warmUp = evalCalls == 0 && integer;
  std::vector<HostTensor> saved;
  for (unsigned i : inputArgs)
    saved.push_back(args[i]);
  // On a device the forward runs on the resident state (integer copies do
  // not exist there: fake quantization has no GPU lowering yet).
  bool onDevice = tensors && tensors->onDevice() && !integer;
  if (!onDevice)
    if (Error e = syncHost())
      return std::move(e);
  for (int64_t b = 0; b < options.evalBatches; ++b) {
    if (Error e = feed(static_cast<uint64_t>(b), /*heldOut=*/true))
      return std::move(e);
    if (onDevice) {
      for (unsigned i : inputArgs)
        tensors->hostWrote(i);
      double start = nowSeconds();
      Expected<double> loss = tensors->deviceEvalLoss(
          program.evalContract() ? std::optional(EvalKind::Forward)
                                 : std::nullopt);
      if (!loss)
        return loss.takeError();
      seconds[0] += nowSeconds() - start;
      sums[0] += *loss;
      continue;
    }
    std::vector<HostTensor *> ptrs;
    for (HostTensor &t : args)
      ptrs.push_back(&t);
    if (!program.evalContract()) {
      if (Error e = program.run(ptrs, results))
        return std::move(e);
      sums[0] += scalarOf(results[program.contract().getLossIndex()]);
      continue;
    }
    size_t shared = program.evalContract()->args.size();
    if (integer && b == 0) {
      std::vector<HostTensor *> leading(ptrs.begin(), ptrs.begin() + shared);
      double start = nowSeconds();
      if (Error e = prepareInt8Weights(leading))
        return std::move(e);
      seconds[3] = nowSeconds() - start;
    }
    for (unsigned k = 0; k < 3; ++k) {
      const mlir::ds::TrainingContract *eval = program.evalContract(kinds[k]);
      if (!eval)
        continue;
      std::vector<HostTensor *> leading(
          ptrs.begin(), ptrs.begin() + std::min(shared, eval->args.size()));
      if (kinds[k] == EvalKind::Integer)
        for (HostTensor &w : int8Weights)
          leading.push_back(&w);
      if (warmUp && b == 0)
        if (Error e = program.runEval(leading, evalResults[k], kinds[k]))
          return std::move(e);
      double start = nowSeconds();
      if (Error e = program.runEval(leading, evalResults[k], kinds[k]))
        return std::move(e);
      seconds[k] += nowSeconds() - start;
      sums[k] += scalarOf(evalResults[k][eval->getLossIndex()]);
    }
  }
  for (auto [k, i] : llvm::enumerate(inputArgs)) {
    args[i] = std::move(saved[k]);
    if (tensors)
      tensors->hostWrote(i);
  }
  double n = static_cast<double>(options.evalBatches);
  // Data parallel: each rank evaluated its rows of the held-out batches.
  if (options.worldSize > 1 &&
      dsrt_allreduce(sums, 3, DSRT_F64, DSRT_REDUCE_MEAN) != 0)
    return errorf(std::string("held-out evaluation: ") + dsrt_last_error());
  EvalLosses losses;
  losses.loss = sums[0] / n;
  losses.seconds = seconds[0];
  if (integer) {
    losses.integer = sums[1] / n;
    losses.f32 = sums[2] / n;
    losses.integerSeconds = seconds[1];
    losses.f32Seconds = seconds[2];
    losses.weightSeconds = seconds[3];
  }
  for (unsigned k = 0; k < 4; ++k)
    evalSeconds[k] += seconds[k];
  evalCalls += options.evalBatches;
  evaluations += 1;
  return losses;
}

/// The variant step `step + 1` runs, and why: an anomaly fallback, else
/// the schedule's phase (the last phase continues past its end).
unsigned Trainer::chooseVariant(std::string &why) const {
  const PrecisionSchedule *schedule = program.schedule();
  if (!schedule)
    return 0;
  if (fallbackLeft > 0) {
    why = "gradient-anomaly fallback";
    return schedule->high;
  }
  // Schedules read the step's `iteration` counter (which the runner's own
  // count equals when the step has none).
  int64_t iteration = iterationNow ? *iterationNow : step;
  for (const PrecisionSchedule::Phase &p : schedule->phases)
    if (iteration >= p.begin &&
        (iteration < p.end || &p == &schedule->phases.back())) {
      why = "schedule phase '" + p.name + "'";
      return p.variant;
    }
  why = "policy";
  return 0;
}

Trainer::Trainer(StepProgram &program, const TrainOptions &options,
                 llvm::raw_ostream &out)
    : program(program), options(options), out(out) {}

Trainer::~Trainer() = default;

Error Trainer::syncHost(bool withResults) {
  return tensors ? tensors->toHost(withResults) : Error::success();
}

void Trainer::setUpReportRing() {
  const auto &c = program.contract();
  // What recordStep reads: the loss, every one-element metric (found_inf,
  // loss_scale, anomaly, ...), the channel level's per-channel metrics,
  // and the new loss scale and iteration counter.
  ringResults = {c.getLossIndex()};
  for (auto [i, res] : llvm::enumerate(c.results)) {
    bool wanted = res.role == ResultRole::Metric &&
                  (results[i].numElements() == 1 ||
                   llvm::StringRef(res.name).starts_with("channel.high."));
    if (res.role == ResultRole::Update &&
        (res.argIndex == lossScaleArg || res.argIndex == iterationArg)) {
      wanted = results[i].numElements() == 1;
      (res.argIndex == lossScaleArg ? lossScaleUpdate : iterationUpdate) = i;
    }
    if (wanted && !llvm::is_contained(ringResults, unsigned(i)))
      ringResults.push_back(i);
  }
  slotBytes = 0;
  for (unsigned r : ringResults) {
    ringOffsets.push_back(slotBytes);
    slotBytes += (results[r].sizeInBytes() + 7) / 8 * 8;
  }
  ringData = tensors->ring(slotBytes * size_t(reportEvery));
}

Error Trainer::run() {
  if (!tensors) {
    Expected<std::unique_ptr<StepTensors>> created =
        StepTensors::create(program, args, results, options.cudaGraphs);
    if (!created)
      return created.takeError();
    tensors = std::move(*created);
    reportEvery = options.reportEvery > 0 ? options.reportEvery
                  : tensors->onDevice()   ? 10
                                          : 1;
    // A schedule picks each step's variant from the one before (its
    // iteration counter, an anomaly): those are read after every step.
    if (program.schedule() && reportEvery > 1) {
      if (options.reportEvery > 1 && !options.quiet)
        out << "ds-run: note: the precision schedule chooses each step's "
               "variant from the step before: the loss and metrics are read "
               "after every step (--report-every 1)\n";
      reportEvery = 1;
    }
    setUpReportRing();
  }
  if (data && !options.quiet)
    out << "ds-run: data: " << data->describe() << "\n";
  if (tensors->onDevice() && !options.quiet && reportEvery > 1)
    out << "ds-run: state stays on the device; the loss and metrics are read "
           "every "
        << reportEvery << " steps (--report-every)\n";
  if (tensors->onDevice() && !options.quiet && options.cudaGraphs)
    out << "ds-run: CUDA graphs: the step runs directly once on each of its "
           "two sets of buffers, is captured on the next (one graph per "
           "set), and replays the graphs after that (--cuda-graphs)\n";
  lossScaleNow = lossScaleArg ? scalarOf(args[*lossScaleArg]) : 0.0;
  if (iterationArg)
    iterationNow = static_cast<int64_t>(scalarOf(args[*iterationArg]));
  progress.emplace(options.steps);
  windowStart = nowSeconds();

  while (step < options.steps) {
    uint64_t batch = data ? data->cursor() : 0;
    if (Error e = feed(batch, /*heldOut=*/false))
      return e;
    for (unsigned i : inputArgs)
      tensors->hostWrote(i);
    if (data)
      data->setCursor(batch + 1);
    PendingStep p;
    p.step = step + 1;
    p.injected = std::binary_search(options.injectSteps.begin(),
                                    options.injectSteps.end(), p.step);
    if (injectArg) {
      args[*injectArg].setDouble(0, p.injected ? 1.0 : 0.0);
      tensors->hostWrote(*injectArg);
    }
    p.variant = chooseVariant(p.why);
    if (program.schedule() && lastVariant != p.variant && !options.quiet)
      out << "step " << p.step << ": precision: running "
          << program.stepVariants()[p.variant].funcName << " (" << p.why
          << ")\n";
    lastVariant = p.variant;
    if (fallbackLeft > 0)
      --fallbackLeft;
    stepsByVariant.resize(program.stepVariants().size());
    ++stepsByVariant[p.variant];
    dsrt_comm_stats before;
    dsrt_get_comm_stats(&before);
    double start = nowSeconds();
    if (Error e = tensors->run(p.variant))
      return errorf("step " + std::to_string(p.step) + ": " +
                    llvm::toString(std::move(e)) +
                    " (state left as after step " + std::to_string(step) + ")");
    p.ms = (nowSeconds() - start) * 1e3;
    dsrt_comm_stats after;
    dsrt_get_comm_stats(&after);
    p.waitMs = (after.wait_seconds - before.wait_seconds) * 1e3;
    uint8_t *slot = ringData + size_t(step % reportEvery) * slotBytes;
    for (auto [k, r] : llvm::enumerate(ringResults))
      tensors->read(r, slot + ringOffsets[k]);
    pending.push_back(std::move(p));

    // Read the ring at report steps and wherever the host needs the state.
    int64_t done = step + 1;
    bool last = done == options.steps;
    auto every = [&](int64_t k) { return k > 0 && done % k == 0; };
    bool evalNow = options.evalEvery > 0 && data && data->hasHeldOut() &&
                   (every(options.evalEvery) || last);
    bool checkpointNow = !options.checkpointDir.empty() &&
                         every(options.checkpointEvery) && !last;
    bool replicasNow =
        options.worldSize > 1 && every(options.checkReplicasEvery);
    bool report = last || done == 1 || every(reportEvery) || evalNow ||
                  checkpointNow || replicasNow;
    // The ring is read before the newest step's updates are adopted: a
    // non-finite loss found in it leaves the state of the step before.
    if (report)
      if (Error e = drain())
        return e;
    tensors->adoptUpdates();
    ++step;
    if (!report)
      continue;
    if (replicasNow || checkpointNow)
      if (Error e = syncHost())
        return e;
    if (replicasNow)
      if (Error e = checkReplicas("after step " + std::to_string(step)))
        return e;
    if (evalNow) {
      Expected<EvalLosses> evalLoss = evaluate();
      if (!evalLoss)
        return evalLoss.takeError();
      llvm::json::Object entry{{"step", step}, {"loss", evalLoss->loss}};
      if (evalLoss->integer) {
        entry["int8_loss"] = *evalLoss->integer;
        entry["f32_loss"] = *evalLoss->f32;
      }
      evalLog.push_back(std::move(entry));
      if (!options.quiet) {
        out << llvm::format("  eval  step %lld  held-out loss %.4f  (%lld "
                            "batches)",
                            static_cast<long long>(step), evalLoss->loss,
                            static_cast<long long>(options.evalBatches));
        if (evalLoss->integer)
          out << llvm::format(
              "; int8 inference %.4f (%+.2e), f32 forward %.4f; int8 "
              "forward speed-up %.2fx over f32, %.2fx over fake-quant",
              *evalLoss->integer, *evalLoss->integer - evalLoss->loss,
              *evalLoss->f32, evalLoss->f32Seconds / evalLoss->integerSeconds,
              evalLoss->seconds / evalLoss->integerSeconds);
        out << "\n";
      }
    }
    if (checkpointNow)
      if (Error e = saveCheckpoint(options.checkpointDir))
        return e;
    out.flush();
    windowStart = nowSeconds();
  }
  if (Error e = syncHost(/*withResults=*/!options.saveResultsDir.empty()))
    return e;
  if (llvm::json::Object work = tensors->workPerStep(int64_t(stepMs.size()));
      !work.empty() && !options.quiet)
    out << llvm::format(
        "ds-run: device work per step: %.0f kernel launches, "
        "%.0f cuBLASLt GEMMs (%.4g GFLOP), %.0f stream-ordered "
        "allocations, %.2f waits (--report-every %lld); the runtime's "
        "copies: %.1f KiB to the host, %.1f KiB to the device\n",
        *work.getNumber("kernel_launches"), *work.getNumber("gemms"),
        *work.getNumber("gemm_gflop"), *work.getNumber("stream_allocations"),
        *work.getNumber("waits"), static_cast<long long>(reportEvery),
        *work.getNumber("bytes_to_host") / 1024,
        *work.getNumber("bytes_to_device") / 1024);
  if (llvm::json::Object work = tensors->workPerStep(int64_t(stepMs.size()));
      options.cudaGraphs && !work.empty() && !options.quiet)
    out << llvm::format("ds-run: CUDA graphs: %lld captured; per step %.2f "
                        "graph launches and %.2f kernels launched by the "
                        "host\n",
                        static_cast<long long>(tensors->graphsCaptured()),
                        *work.getNumber("graph_launches"),
                        *work.getNumber("host_kernel_launches"));
  if (options.worldSize > 1)
    if (Error e = checkReplicas("at the end"))
      return e;
  if (program.isDataParallel() && !options.quiet) {
    llvm::json::Object dp = dataParallelSummary();
    double buckets = *dp.getNumber("bucket_bytes_sent_per_step") / 1024;
    double others = *dp.getNumber("bytes_sent_per_step") / 1024 - buckets;
    out << llvm::format("ds-run: data parallel: %d rank(s), %.1f KiB/step "
                        "sent (dense %.1f KiB)",
                        options.worldSize, buckets,
                        *dp.getNumber("dense_bytes_per_step") / 1024);
    if (others >= 0.05)
      out << llvm::format(" and %.1f KiB/step of other transfers "
                          "(pipeline stages, checks)",
                          others);
    out << llvm::format(", waits %.2f ms/step",
                        *dp.getNumber("wait_ms_per_step"));
    if (std::optional<llvm::StringRef> on = dp.getString("device_collectives"))
      out << ", device collectives: "
          << (*on == "host" ? "staged through the host" : *on);
    out << "\n";
  }
  if (!options.checkpointDir.empty()) {
    if (Error e = saveCheckpoint(options.checkpointDir))
      return e;
    if (!options.quiet)
      out << "ds-run: checkpoint written to " << options.checkpointDir
          << " (step " << step << ")\n";
  }
  if (!options.saveResultsDir.empty())
    if (Error e = writeResults(options.saveResultsDir))
      return e;
  if (!options.exportQuantizedDir.empty()) {
    if (Error e = exportQuantized(options.exportQuantizedDir))
      return e;
    if (!options.quiet)
      out << "ds-run: int8 model written to " << options.exportQuantizedDir
          << " (step " << step << ")\n";
  }
  if (!options.reportPath.empty())
    if (Error e = writeReport())
      return e;
  return Error::success();
}

Error Trainer::drain() {
  if (pending.empty())
    return Error::success();
  if (Error e = tensors->wait())
    return errorf((pending.size() == 1
                       ? "step " + std::to_string(pending.front().step)
                       : "steps " + std::to_string(pending.front().step) + "-" +
                             std::to_string(pending.back().step)) +
                  ": " + llvm::toString(std::move(e)));
  // On a device the calls only enqueued the steps: what they took is the
  // window's wall time (feeding included) per step.
  if (tensors->onDevice()) {
    double ms = (nowSeconds() - windowStart) * 1e3 / double(pending.size());
    for (PendingStep &p : pending)
      p.ms = ms;
  }
  for (auto [k, p] : llvm::enumerate(pending)) {
    const uint8_t *slot =
        ringData + size_t((p.step - 1) % reportEvery) * slotBytes;
    if (Error e = recordStep(p, slot, k + 1 == pending.size())) {
      pending.clear();
      return e;
    }
  }
  pending.clear();
  return Error::success();
}

Error Trainer::recordStep(const PendingStep &p, const uint8_t *slot,
                          bool newest) {
  const auto &c = program.contract();
  // The results this step copied into the ring; the others stay empty.
  std::vector<HostTensor> got(results.size());
  for (auto [k, r] : llvm::enumerate(ringResults)) {
    got[r] = HostTensor(results[r].dtype, results[r].shape);
    std::memcpy(got[r].bytes.data(), slot + ringOffsets[k],
                got[r].sizeInBytes());
  }
  double loss = scalarOf(got[c.getLossIndex()]);
  // A non-finite loss on a step loss scaling did not skip means the
  // training is broken: stop before its results replace the last good
  // state, and keep that state in the checkpoint.
  if (!std::isfinite(loss) && !options.allowNonfiniteLoss &&
      !(foundInfResult && scalarOf(got[*foundInfResult]) > 0.5)) {
    std::string what =
        "step " + std::to_string(p.step) + ": the loss is " +
        (std::isnan(loss) ? "nan" : "inf") +
        (foundInfResult ? " on a step loss scaling did not skip" : "");
    std::string kept;
    if (newest && !options.checkpointDir.empty()) {
      if (Error e = syncHost())
        return e;
      if (Error e = saveCheckpoint(options.checkpointDir))
        return e;
      kept = "; the state after step " + std::to_string(step) +
             " is in the checkpoint " + options.checkpointDir;
    } else if (!newest) {
      // The steps after it were enqueued before the host read its loss.
      kept = " with the state after step " + std::to_string(step) +
             " (the loss is read every " + std::to_string(reportEvery) +
             " steps, --report-every): it includes the non-finite step, so "
             "no checkpoint is written (--report-every 1 stops before it)";
    }
    out.flush();
    return errorf(what + "; stopped" + kept +
                  " (--allow-nonfinite-loss trains on)");
  }
  llvm::json::Object metrics, channels;
  for (auto [i, res] : llvm::enumerate(c.results)) {
    if (got[i].bytes.empty() || i == c.getLossIndex() ||
        res.role != ResultRole::Metric)
      continue;
    if (got[i].numElements() == 1)
      metrics[res.name] = jsonNumber(scalarOf(got[i]));
    else if (llvm::StringRef(res.name).starts_with("channel.high."))
      // The channel level: how many output channels ran in the high type.
      channels[llvm::StringRef(res.name).drop_front(13)] = countNonZero(got[i]);
  }
  double scaleBefore = lossScaleNow;
  if (lossScaleUpdate)
    lossScaleNow = scalarOf(got[*lossScaleUpdate]);
  if (iterationUpdate)
    iterationNow = static_cast<int64_t>(scalarOf(got[*iterationUpdate]));
  stepMs.push_back(p.ms);
  stepWaitMs.push_back(p.waitMs);
  llvm::json::Object entry{
      {"step", p.step}, {"loss", jsonNumber(loss)}, {"time_ms", p.ms}};
  if (program.schedule()) {
    entry["variant"] = program.stepVariants()[p.variant].funcName;
    entry["precision"] = p.why;
  }
  if (!channels.empty())
    entry["channels_high"] = std::move(channels);
  // Loss scaling: the skip decision and the scale, logged as events.
  auto metric = [&](llvm::StringRef name) -> std::optional<double> {
    if (const llvm::json::Value *v = metrics.get(name))
      return v->getAsNumber() ? *v->getAsNumber()
                              : std::numeric_limits<double>::quiet_NaN();
    return std::nullopt;
  };
  if (std::optional<double> found = metric("found_inf")) {
    bool skipped = *found > 0.5;
    entry["skipped"] = skipped;
    if (std::optional<double> used = metric("loss_scale"))
      entry["loss_scale"] = *used;
    if (skipped) {
      skippedSteps.push_back(p.step);
      bool maskUpdate = metric("sparsity.mask_update").value_or(0) > 0.5;
      out << llvm::format(
          "step %lld: non-finite gradients, skipped; loss "
          "scale %.10g -> %.10g%s%s\n",
          static_cast<long long>(p.step),
          metric("loss_scale").value_or(scaleBefore), lossScaleNow,
          maskUpdate ? " (a mask update: the scaler holds)" : "",
          p.injected ? " (injected)" : "");
    }
  }
  if (p.injected)
    entry["injected_nonfinite"] = true;
  if (std::optional<double> anomaly = metric("anomaly");
      anomaly && *anomaly > 0.5) {
    anomalySteps.push_back(p.step);
    entry["anomaly"] = true;
    out << llvm::format("step %lld: gradient anomaly: the gradient norm "
                        "grew on consecutive steps (grad norm %.6g)",
                        static_cast<long long>(p.step),
                        metric("grad_norm").value_or(0.0));
    const PrecisionSchedule *schedule = program.schedule();
    if (schedule && schedule->anomalySteps > 0) {
      fallbackLeft = schedule->anomalySteps;
      entry["fallback_steps"] = fallbackLeft;
      out << llvm::format(
          "; the next %lld steps run the high-precision "
          "variant %s",
          static_cast<long long>(fallbackLeft),
          program.stepVariants()[schedule->high].funcName.c_str());
    }
    out << "\n";
  }
  if (!metrics.empty())
    entry["metrics"] = std::move(metrics);
  stepLog.push_back(std::move(entry));
  bool last = p.step == options.steps;
  if (!options.quiet &&
      (last || options.printEvery <= 1 || p.step % options.printEvery == 0)) {
    int64_t items = data ? data->itemsPerBatch() : 1;
    llvm::StringRef unit = data ? data->itemUnit() : "steps";
    out << progress->format(p.step, loss, p.ms,
                            static_cast<double>(items) / (p.ms * 1e-3), unit)
        << "\n";
  }
  return Error::success();
}

llvm::json::Array Trainer::quantSummary() const {
  // (value, param) -> field -> the state's final value.
  std::map<std::pair<std::string, std::string>,
           std::map<std::string, const HostTensor *>>
      values;
  const auto &cargs = program.contract().args;
  for (unsigned i = 0; i < cargs.size(); ++i) {
    const auto &a = cargs[i];
    if (a.role != ArgRole::State || !a.state)
      continue;
    llvm::StringRef kind = a.state.getKind();
    if (!kind.consume_front("qat."))
      continue;
    auto [value, field] = kind.split('.');
    if (field.empty() || !a.type.getElementType().isF32() ||
        a.type.getNumElements() == 0)
      continue;
    values[{value.str(), a.state.getOf().str()}][field.str()] = &args[i];
  }
  auto stats = [](const HostTensor *t) -> llvm::json::Value {
    llvm::ArrayRef<float> v(t->data<float>(), size_t(t->numElements()));
    if (v.size() == 1)
      return double(v[0]);
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return llvm::json::Object{{"min", double(*lo)},
                              {"max", double(*hi)},
                              {"count", int64_t(v.size())}};
  };
  llvm::json::Array out;
  for (auto &[key, fields] : values) {
    llvm::json::Object entry{{"layer", key.second}, {"value", key.first}};
    if (auto it = fields.find("scale"); it != fields.end())
      entry["granularity"] = it->second->shape.empty()       ? "tensor"
                             : it->second->shape.size() == 1 ? "channel"
                                                             : "group";
    for (const char *f : {"min", "max", "scale", "zero_point"})
      if (auto it = fields.find(f); it != fields.end())
        entry[f] = stats(it->second);
    out.push_back(std::move(entry));
  }
  return out;
}

llvm::json::Object Trainer::dataParallelSummary() const {
  // This rank's counters (rank 0 writes the report; every rank sends as
  // much, compressed payloads aside).
  dsrt_comm_stats comm;
  dsrt_get_comm_stats(&comm);
  double steps = std::max<double>(1.0, static_cast<double>(stepLog.size()));
  llvm::json::Object dp{
      {"ranks", options.worldSize},
      {"global_batch_factor", options.worldSize},
      {"collectives", static_cast<int64_t>(comm.collectives)},
      {"bytes_sent_per_step", comm.bytes_sent / steps},
      {"bucket_bytes_sent_per_step", comm.bytes_sent_buckets / steps},
      {"dense_bytes_per_step", comm.bytes_dense / steps},
      {"wait_ms_per_step", comm.wait_seconds * 1e3 / steps},
      {"comm_thread_ms_per_step", comm.comm_seconds * 1e3 / steps},
      {"dense_fallbacks", static_cast<int64_t>(comm.dense_fallbacks)},
      {"nonfinite_buckets", static_cast<int64_t>(comm.nonfinite_buckets)},
      {"replica_checks", replicaChecks},
  };
  if (*dsrt_comm_device_backend())
    dp["device_collectives"] = dsrt_comm_device_backend();
  // The buckets' bytes against their dense size: a pipeline's transfers
  // and the runner's own collectives are not the gradients'.
  if (comm.bytes_sent_buckets > 0)
    dp["compression_ratio"] = comm.bytes_dense / comm.bytes_sent_buckets;
  return dp;
}

llvm::json::Object Trainer::sparsitySummary() const {
  // Layers in the order of their metrics.
  static constexpr llvm::StringLiteral kPrefix = "sparsity@";
  std::vector<std::string> layers;
  llvm::json::Object byLayer;
  std::map<std::string, llvm::json::Array> updates;
  for (const llvm::json::Value &entry : stepLog) {
    const llvm::json::Object *obj = entry.getAsObject();
    const llvm::json::Object *metrics = obj->getObject("metrics");
    if (!metrics)
      continue;
    bool update = metrics->getNumber("sparsity.mask_update").value_or(0) > 0.5;
    for (const auto &[key, value] : *metrics) {
      llvm::StringRef name = key;
      if (!name.consume_front(kPrefix))
        continue;
      if (!updates.count(name.str()))
        layers.push_back(name.str());
      llvm::json::Array &list = updates[name.str()];
      if (!update)
        continue;
      auto count = [&](llvm::StringRef kind) {
        return metrics->getNumber((kind + "@" + name).str()).value_or(0);
      };
      list.push_back(
          llvm::json::Object{{"step", obj->getInteger("step").value_or(0)},
                             {"sparsity", value.getAsNumber().value_or(0)},
                             {"dropped", count("sparsity.dropped")},
                             {"grown", count("sparsity.grown")}});
    }
  }
  if (layers.empty())
    return {};
  const llvm::json::Object *last =
      stepLog.back().getAsObject()->getObject("metrics");
  llvm::json::Object summary;
  for (const std::string &layer : layers)
    byLayer[layer] = llvm::json::Object{
        {"final_sparsity", last->getNumber(kPrefix.str() + layer).value_or(0)},
        {"updates", std::move(updates[layer])}};
  summary["layers"] = std::move(byLayer);
  dsrt_stats stats;
  dsrt_get_stats(&stats);
  if (stats.sparse_calls > 0)
    summary["kernels"] =
        llvm::json::Object{{"calls", static_cast<int64_t>(stats.sparse_calls)},
                           {"gflop_executed", stats.sparse_flops * 1e-9},
                           {"gflop_dense", stats.sparse_dense_flops * 1e-9},
                           {"executed_over_dense",
                            stats.sparse_dense_flops > 0
                                ? stats.sparse_flops / stats.sparse_dense_flops
                                : 0.0},
                           {"seconds", stats.sparse_seconds}};
  return summary;
}

Error Trainer::writeReport() {
  std::vector<double> sorted = stepMs;
  std::sort(sorted.begin(), sorted.end());
  // Warm-up steps (JIT page faults, first-touch allocation) are excluded
  // from the mean when the run is long enough to afford it.
  size_t skip = stepMs.size() > 10 ? 5 : 0;
  double sum = 0;
  for (size_t i = skip; i < stepMs.size(); ++i)
    sum += stepMs[i];
  double mean = stepMs.size() > skip ? sum / (stepMs.size() - skip) : 0;
  const CompileTimes &times = program.times();
  llvm::json::Object summary{
      {"module", options.modulePath},
      {"input_level", stringifyModuleLevel(program.inputLevel())},
      {"steps_run", static_cast<int64_t>(stepMs.size())},
      {"final_step", step},
      {"compile_time_s",
       llvm::json::Object{{"mlir", times.mlir},
                          {"llvm", times.llvm},
                          {"total", times.mlir + times.llvm}}},
      {"mean_step_ms", mean},
      {"warmup_steps_excluded", static_cast<int64_t>(skip)},
      {"median_step_ms", sorted.empty() ? 0.0 : sorted[sorted.size() / 2]},
      {"peak_rss_bytes", static_cast<int64_t>(peakRssBytes())},
      {"threads", options.threads},
      {"seed", static_cast<int64_t>(options.seed)},
  };
  if (!stepLog.empty())
    summary["final_loss"] = *stepLog.back().getAsObject()->get("loss");
  if (tensors && tensors->onDevice()) {
    llvm::json::Object work = tensors->workPerStep(int64_t(stepMs.size()));
    work["report_every"] = reportEvery;
    summary["device_work_per_step"] = std::move(work);
  }
  auto toArray = [](const std::vector<int64_t> &v) {
    llvm::json::Array a;
    for (int64_t x : v)
      a.push_back(x);
    return a;
  };
  if (lossScaleArg || !skippedSteps.empty()) {
    summary["skipped_steps"] = static_cast<int64_t>(skippedSteps.size());
    summary["skipped_step_list"] = toArray(skippedSteps);
    if (lossScaleArg)
      summary["final_loss_scale"] = scalarOf(args[*lossScaleArg]);
  }
  if (program.contract().findArg(ArgRole::State, "anomaly.run_length") ||
      !anomalySteps.empty()) {
    summary["anomaly_events"] = static_cast<int64_t>(anomalySteps.size());
    summary["anomaly_step_list"] = toArray(anomalySteps);
  }
  if (injectArg)
    summary["injected_nonfinite_steps"] = toArray(options.injectSteps);
  if (program.isDataParallel())
    summary["data_parallel"] = dataParallelSummary();
  if (program.pipelineStages() > 0) {
    llvm::json::Object pipeline = program.pipelinePlan();
    pipeline["stage_of_this_report"] = options.pipelineStage;
    // This stage's measured step: the time it waited for its neighbours
    // (receives, cross-stage sums) is its share of the bubble.
    size_t skip = stepMs.size() > 10 ? 5 : (stepMs.size() > 1 ? 1 : 0);
    double stepSum = 0, waitSum = 0;
    for (size_t i = skip; i < stepMs.size(); ++i) {
      stepSum += stepMs[i];
      waitSum += stepWaitMs[i];
    }
    double n = std::max<double>(1.0, double(stepMs.size() - skip));
    pipeline["measured"] = llvm::json::Object{
        {"step_ms", stepSum / n},
        {"wait_ms", waitSum / n},
        {"compute_ms", (stepSum - waitSum) / n},
        {"idle_fraction", stepSum > 0 ? waitSum / stepSum : 0.0},
        {"steps_measured", static_cast<int64_t>(stepMs.size() - skip)}};
    summary["pipeline"] = std::move(pipeline);
  }
  if (const PrecisionSchedule *schedule = program.schedule()) {
    llvm::json::Array phases;
    for (const PrecisionSchedule::Phase &p : schedule->phases)
      phases.push_back(llvm::json::Object{
          {"phase", p.name},
          {"variant", program.stepVariants()[p.variant].funcName},
          {"first_step", p.begin + 1},
          {"last_step", p.end}});
    llvm::json::Object bySteps;
    for (auto [i, n] : llvm::enumerate(stepsByVariant))
      bySteps[program.stepVariants()[i].funcName] = n;
    summary["precision_schedule"] =
        llvm::json::Object{{"total_steps", schedule->totalSteps},
                           {"anomaly_steps", schedule->anomalySteps},
                           {"phases", std::move(phases)},
                           {"steps_by_variant", std::move(bySteps)}};
  }
  if (llvm::json::Array quant = quantSummary(); !quant.empty())
    summary["quant"] = std::move(quant);
  if (llvm::json::Object sparse = sparsitySummary(); !sparse.empty())
    summary["sparsity"] = std::move(sparse);
  if (program.evalContract(EvalKind::Integer) && evalCalls > 0) {
    // The integer inference copy: what was converted, and its forward
    // time beside the fake-quantized and f32 forwards on the same batches.
    auto ms = [&](unsigned k) { return evalSeconds[k] * 1e3 / evalCalls; };
    llvm::json::Array left;
    for (const std::string &l : program.integerConversion())
      left.push_back(l);
    summary["integer_eval"] = llvm::json::Object{
        {"forward_ms", llvm::json::Object{{"fake_quant", ms(0)},
                                          {"int8", ms(1)},
                                          {"f32", ms(2)}}},
        {"weight_preparation_ms",
         evaluations ? evalSeconds[3] * 1e3 / evaluations : 0.0},
        {"left_in_f32", std::move(left)}};
  }
  llvm::json::Object report{{"summary", std::move(summary)},
                            {"steps", llvm::json::Array(stepLog)},
                            {"eval", llvm::json::Array(evalLog)}};
  if (!program.precisionMap().empty()) {
    // How many ops compute in each type, then every op's decision.
    std::map<std::string, int64_t> byType;
    for (const llvm::json::Value &e : program.precisionMap())
      if (auto c = e.getAsObject()->getString("compute"))
        ++byType[c->str()];
    llvm::json::Object counts;
    for (auto &[t, n] : byType)
      counts[t] = n;
    report["summary"].getAsObject()->insert(
        {"ops_by_compute_type", std::move(counts)});
    report["precision_map"] = llvm::json::Array(program.precisionMap());
  }
  return writeJsonAtomic(options.reportPath,
                         llvm::json::Value(std::move(report)));
}

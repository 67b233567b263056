//===- ds-plan.cpp - Plan pipeline stages on a heterogeneous cluster -----===//
//
// ds-plan MODEL.mlir --cluster FILE: brings a forward + loss (or gradient)
// module to a training step with ds-training-pipeline, exactly as ds-run
// would (so the cost model sees the precision policy, sparsity and
// compression the run would use), splits the step into layers
// (collectStepLayers) and plans the pipeline three ways:
//
//  - heterogeneity-aware: the planner proper (planPipeline);
//  - uniform split: equal layer counts per stage, devices as assigned;
//  - homogeneous-only: planned as if every device were the slowest, then
//    evaluated on the real devices,
//
// and prints the plan and the predicted step time, utilisation and bubble
// of the three side by side. `--calibrate` instead measures this machine
// and writes it as a cluster file (Calibrate.cpp).
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"

#include "ds/Analysis/StepLayers.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/InitDS.h"
#include "ds/Partition/Planner.h"
#include "ds/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <optional>
#include <thread>

using namespace llvm;
namespace part = ds::partition;

namespace {
cl::OptionCategory planCat("Planning");
cl::OptionCategory stepCat(
    "Training step (ds-training-pipeline, for forward + loss and gradient "
    "modules)");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                               cl::init(""));
cl::opt<std::string> clusterFile("cluster",
                                 cl::desc("Cluster file (YAML or JSON, see "
                                          "docs/PipelinePartitioning.md)"),
                                 cl::value_desc("FILE"), cl::cat(planCat));
cl::opt<unsigned> microBatches(
    "micro-batches",
    cl::desc("Micro-batches per step; the module's batch is one micro-batch "
             "(default 1)"),
    cl::init(1), cl::value_desc("M"), cl::cat(planCat));
cl::opt<part::Schedule> schedule(
    "schedule", cl::desc("Pipeline schedule"),
    cl::init(part::Schedule::OneFOneB),
    cl::values(clEnumValN(part::Schedule::OneFOneB, "1f1b",
                          "One forward, one backward (PipeDream-Flush)"),
               clEnumValN(part::Schedule::GPipe, "gpipe",
                          "All forwards, then all backwards")),
    cl::cat(planCat));
cl::opt<part::AssignObjective> objective(
    "objective", cl::desc("What the device assignment minimises"),
    cl::init(part::AssignObjective::Bottleneck),
    cl::values(clEnumValN(part::AssignObjective::Bottleneck, "bottleneck",
                          "The slowest stage (the step time)"),
               clEnumValN(part::AssignObjective::Sum, "sum",
                          "The sum of stage costs (the seed's Hungarian "
                          "objective)")),
    cl::cat(planCat));
cl::opt<unsigned> stages("stages",
                         cl::desc("Pipeline stages (default: the fastest "
                                  "count up to the number of devices)"),
                         cl::init(0), cl::value_desc("S"), cl::cat(planCat));
cl::opt<std::string> jsonFile("json", cl::desc("Also write the plans as JSON"),
                              cl::value_desc("FILE"), cl::cat(planCat));
cl::opt<bool> calibrate(
    "calibrate",
    cl::desc("Measure this machine with the runtime's kernels and write it "
             "as a cluster file (to -o, default stdout); no model"),
    cl::init(false), cl::cat(planCat));
cl::opt<std::string> outputFile("o",
                                cl::desc("With --calibrate: the cluster file "
                                         "to write"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::cat(planCat));

cl::opt<std::string> entry("entry",
                           cl::desc("Training step to plan (default: the "
                                    "module's first)"),
                           cl::cat(stepCat));
cl::opt<mlir::ds::OptimizerKind>
    optKind("optimizer", cl::desc("Optimizer (its state is resident memory)"),
            cl::init(mlir::ds::OptimizerKind::AdamW),
            mlir::ds::optimizerKindValues(), cl::cat(stepCat));
cl::opt<std::string> precision(
    "precision", cl::ValueOptional,
    cl::desc("Add ds-assign-precision: the default policy (the seeds' mixed "
             "FP8/BF16 mapping), or the policy file given"),
    cl::value_desc("POLICY"), cl::cat(stepCat));
cl::opt<std::string> sparsity(
    "sparsity", cl::ValueOptional,
    cl::desc("Add ds-sparsify-matmul (8x8 block sparsity; the cost model "
             "uses the schedule's final density); a value gives its "
             "options, e.g. --sparsity='final=0.9 distribution=erk'"),
    cl::value_desc("OPTIONS"), cl::cat(stepCat));
cl::opt<std::string> fakeQuant(
    "fake-quant", cl::ValueOptional,
    cl::desc("Add ds-insert-fake-quant (QAT); a value gives its options"),
    cl::value_desc("OPTIONS"), cl::cat(stepCat));
cl::opt<std::string> compressAllReduce(
    "compress-allreduce", cl::ValueOptional,
    cl::desc("Add ds-data-parallel and ds-compress-allreduce (the gradient "
             "all-reduce bytes per layer shrink by the scheme's ratio); a "
             "value gives its options"),
    cl::value_desc("OPTIONS"), cl::cat(stepCat));
cl::opt<std::string> pipelineOptions(
    "pipeline",
    cl::desc("More ds-training-pipeline options, as ds-opt takes them, e.g. "
             "--pipeline='loss-scaling clip clip-max-norm=1'"),
    cl::value_desc("OPTIONS"), cl::cat(stepCat));

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int fail(const Twine &message) {
  errs() << "ds-plan: error: " << message << "\n";
  return 1;
}

/// `prefix` and each word of `text` as `prefix-word`: a technique flag in
/// ds-training-pipeline's spelling (as ds-run's flags are).
std::string prefixed(StringRef prefix, StringRef text) {
  std::string out = prefix.str();
  SmallVector<StringRef> words;
  text.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef word : words)
    out += " " + prefix.str() + "-" + word.str();
  return out;
}

/// The spelling of an optimizer in ds-training-pipeline's options.
StringRef spellingOf(mlir::ds::OptimizerKind kind) {
  switch (kind) {
  case mlir::ds::OptimizerKind::Sgd:
    return "sgd";
  case mlir::ds::OptimizerKind::Momentum:
    return "momentum";
  case mlir::ds::OptimizerKind::Adam:
    return "adam";
  case mlir::ds::OptimizerKind::AdamW:
    return "adamw";
  }
  llvm_unreachable("unknown optimizer kind");
}

/// ds-training-pipeline's options from the flags: the technique flags in
/// the pipeline's spelling, then --pipeline. A technique given twice is
/// refused by getRepeatedOption.
FailureOr<mlir::ds::TrainingPipelineConfig> pipelineConfig(std::string &what) {
  std::string text;
  auto add = [&](const std::string &s) {
    text += (text.empty() ? "" : " ") + s;
  };
  if (optKind.getNumOccurrences())
    add(("optimizer-kind=" + spellingOf(optKind)).str());
  if (precision.getNumOccurrences())
    add(precision.empty() ? "precision" : "policy=" + precision.getValue());
  if (sparsity.getNumOccurrences())
    add(prefixed("sparsity", sparsity));
  if (fakeQuant.getNumOccurrences())
    add(prefixed("fake-quant", fakeQuant));
  if (compressAllReduce.getNumOccurrences())
    add(prefixed("compress", compressAllReduce));
  if (!pipelineOptions.empty())
    add(pipelineOptions);
  // The cosine schedules need a training length; the plan only reads the
  // final targets, so any length does.
  if (StringRef(text).contains("sparsity") &&
      !StringRef(text).contains("total-steps"))
    add("total-steps=1000");
  what = text;
  mlir::ds::TrainingPipelineOptions options;
  std::string parseErrors;
  raw_string_ostream errorStream(parseErrors);
  if (failed(options.parseFromString(text, errorStream))) {
    errs() << "ds-plan: error: cannot parse the training-pipeline options '"
           << text << "':\n"
           << parseErrors;
    return failure();
  }
  if (std::string twice = options.getRepeatedOption(); !twice.empty()) {
    errs() << "ds-plan: error: training-pipeline option '" << twice
           << "' given more than once (by a flag and --pipeline?)\n";
    return failure();
  }
  mlir::ds::TrainingPipelineConfig config = options.getConfig();
  config.lower = false;
  return config;
}

/// The training step of `module`: the first function marked as one (or the
/// one named --entry).
mlir::func::FuncOp findStep(mlir::ModuleOp module) {
  mlir::func::FuncOp found;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    if (!func->hasAttr(mlir::ds::DSDialect::kTrainStepAttrName))
      continue;
    if (!entry.empty() ? func.getName() == entry : !found)
      found = func;
  }
  return found;
}

/// One of the three plans: its options, and the plan or why there is none.
struct Variant {
  const char *name;
  part::PlanOptions options;
  std::optional<part::Plan> plan;
  std::string error;
  double seconds = 0;
};

/// Predicted useful FLOPs per step: what the utilisation is the share of.
double stepFlops(ArrayRef<part::LayerCost> layers, unsigned m) {
  double total = 0;
  for (const part::LayerCost &l : layers)
    for (unsigned p = 0; p < part::kNumPrecisions; ++p)
      total += l.denseFlops[p] + l.sparseFlops[p];
  return total * m;
}

json::Value planToJson(const part::Plan &plan, ArrayRef<part::LayerCost> layers,
                       const part::Cluster &cluster) {
  json::Array stageList;
  for (const part::StagePlan &s : plan.stages) {
    json::Object stage{{"first_layer", s.firstLayer},
                       {"end_layer", s.endLayer},
                       {"layers", layers[s.firstLayer].name +
                                      (s.endLayer > s.firstLayer + 1
                                           ? ".." + layers[s.endLayer - 1].name
                                           : std::string())},
                       {"device", cluster.devices[s.device].name},
                       {"compute_seconds", s.computeSeconds},
                       {"send_seconds", s.sendSeconds},
                       {"memory_bytes", s.memoryBytes},
                       {"memory_limit", s.memoryLimit}};
    if (s.splitDevice >= 0)
      stage["split_device"] = cluster.devices[s.splitDevice].name;
    stageList.push_back(std::move(stage));
  }
  return json::Object{{"step_seconds", plan.stepSeconds},
                      {"bubble_fraction", plan.bubbleFraction},
                      {"utilisation", plan.utilisation},
                      {"cluster_utilisation", plan.clusterUtilisation},
                      {"micro_batches", plan.microBatches},
                      {"schedule", part::stringifySchedule(plan.schedule)},
                      {"rounds", plan.rounds},
                      {"stages", std::move(stageList)}};
}

/// What the planner was given, per layer.
json::Array layersToJson(ArrayRef<part::LayerCost> layers) {
  json::Array list;
  for (const part::LayerCost &l : layers) {
    json::Object dense, sparse;
    for (unsigned p = 0; p < part::kNumPrecisions; ++p) {
      StringRef key = part::stringifyPrecision(part::Precision(p));
      if (l.denseFlops[p] > 0)
        dense[key] = l.denseFlops[p];
      if (l.sparseFlops[p] > 0)
        sparse[key] = l.sparseFlops[p];
    }
    list.push_back(json::Object{{"name", l.name},
                                {"dense_flops", std::move(dense)},
                                {"sparse_flops", std::move(sparse)},
                                {"bytes_moved", l.bytesMoved},
                                {"stream_bytes", l.streamBytes},
                                {"param_bytes", l.paramBytes},
                                {"optimizer_bytes", l.optimizerBytes},
                                {"state_bytes", l.stateBytes},
                                {"activation_bytes", l.activationBytes},
                                {"output_bytes", l.outputBytes},
                                {"all_reduce_bytes", l.allReduceBytes},
                                {"splittable", l.splittable}});
  }
  return list;
}

int runCalibrate() {
  part::DeviceProfile cpu = ds::plan::calibrateThisMachine(errs());
  std::string error;
  auto out = mlir::openOutputFile(outputFile, &error);
  if (!out)
    return fail(error);
  out->os() << ds::plan::clusterFileFor(cpu);
  out->keep();
  // The file must read back: it is what the planner will be given.
  if (Expected<part::Cluster> check =
          part::parseCluster(ds::plan::clusterFileFor(cpu), "<calibrated>");
      !check)
    return fail("the calibrated cluster file does not parse: " +
                toString(check.takeError()));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&planCat, &stepCat});
  cl::ParseCommandLineOptions(
      argc, argv,
      "ds-plan: pipeline stages and devices for a training step on a "
      "heterogeneous cluster\n\n"
      "  ds-plan MODEL.mlir --cluster FILE [--micro-batches M] ...\n"
      "  ds-plan --calibrate [-o FILE]\n");
  if (calibrate) {
    if (!inputFile.empty() || clusterFile.getNumOccurrences())
      return fail("--calibrate measures this machine; it takes no model or "
                  "--cluster");
    return runCalibrate();
  }
  if (inputFile.empty())
    return fail("no model given (ds-plan MODEL.mlir --cluster FILE)");
  if (clusterFile.empty())
    return fail("no cluster given: --cluster FILE (or write one for this "
                "machine with --calibrate)");
  if (microBatches == 0)
    return fail("--micro-batches must be >= 1");

  // 1. The cluster first: a bad file should not wait for the passes.
  Expected<part::Cluster> cluster = part::readClusterFile(clusterFile);
  if (!cluster)
    return fail(toString(cluster.takeError()));
  if (stages > cluster->devices.size())
    return fail(Twine("--stages ") + Twine(stages) + " exceeds the " +
                Twine(cluster->devices.size()) + " devices of the cluster");

  // 2. The model.
  double start = now();
  std::string error;
  std::unique_ptr<MemoryBuffer> file = mlir::openInputFile(inputFile, &error);
  if (!file)
    return fail(error);
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::ds::registerDSDialects(registry);
  mlir::MLIRContext context(registry);
  // Step functions of large models are long; the verifier and passes run
  // on one function, so threads would only cost.
  context.disableMultithreading();
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  mlir::func::FuncOp step = findStep(*module);
  if (!step)
    return fail(entry.empty() ? ("the module has no function marked '" +
                                 mlir::ds::DSDialect::kTrainStepAttrName + "'")
                                    .str()
                              : "no training step named '" + entry + "'");
  std::string stepName = step.getName().str();
  FailureOr<mlir::ds::TrainingContract> contract =
      mlir::ds::TrainingContract::fromFunction(step);
  if (failed(contract))
    return 1;
  double parsed = now();
  errs() << format("ds-plan: parsed %s in %.2f s\n", inputFile.c_str(),
                   parsed - start);

  // 3. To a training step, as ds-run would bring it there.
  bool needGrad = !contract->hasGrads() && !contract->hasParamUpdates();
  bool needOpt = !contract->hasParamUpdates();
  std::string spelled;
  FailureOr<mlir::ds::TrainingPipelineConfig> config = pipelineConfig(spelled);
  if (failed(config))
    return 1;
  config->autodiff = needGrad;
  if (!needOpt)
    config->optimizer.reset();
  if (!needGrad && (config->sparsity || config->fakeQuant))
    return fail("--sparsity and --fake-quant rewrite the forward before "
                "ds-autodiff: give a forward + loss module");
  if (needGrad || needOpt) {
    errs() << "ds-plan: applying ds-training-pipeline"
           << (spelled.empty() ? "" : "{" + spelled + "}") << " ("
           << (needGrad ? "forward + loss" : "gradient") << " module)\n";
    // Keep only the step: the pipeline would transform the others for
    // nothing.
    for (auto func :
         llvm::make_early_inc_range(module->getOps<mlir::func::FuncOp>()))
      if (func != step &&
          func->hasAttr(mlir::ds::DSDialect::kTrainStepAttrName))
        func.erase();
    mlir::PassManager pm(&context);
    mlir::ds::buildTrainingPipeline(pm, *config);
    if (failed(pm.run(*module)))
      return fail("the training pipeline failed");
    step = module->lookupSymbol<mlir::func::FuncOp>(stepName);
    if (!step)
      return fail("the training pipeline removed '" + stepName + "'");
  }
  double piped = now();
  errs() << format("ds-plan: training step ready in %.2f s\n", piped - parsed);

  // 4. Layers and their costs.
  FailureOr<mlir::ds::StepLayers> layers = mlir::ds::collectStepLayers(step);
  if (failed(layers))
    return 1;
  const std::vector<part::LayerCost> &costs = layers->costs;
  double costed = now();
  errs() << format("ds-plan: %zu layers costed in %.2f s\n", costs.size(),
                   costed - piped);

  // 5. The plan and its two baselines.
  part::PlanOptions base;
  base.microBatches = microBatches;
  base.schedule = schedule;
  base.objective = objective;
  base.stages = stages;
  Variant variants[3] = {{"heterogeneity-aware", base, std::nullopt, "", 0},
                         {"uniform split", base, std::nullopt, "", 0},
                         {"homogeneous-only", base, std::nullopt, "", 0}};
  variants[1].options.uniformSplit = true;
  variants[2].options.homogeneousOnly = true;
  // The three are independent searches over the same const inputs: run
  // them side by side (the planner keeps no global state).
  auto runVariant = [&](Variant &v) {
    double begin = now();
    Expected<part::Plan> result =
        part::planPipeline(costs, *cluster, v.options);
    if (result)
      v.plan = std::move(*result);
    else
      v.error = toString(result.takeError());
    v.seconds = now() - begin;
  };
  std::thread uniform(runVariant, std::ref(variants[1]));
  std::thread homogeneous(runVariant, std::ref(variants[2]));
  runVariant(variants[0]);
  uniform.join();
  homogeneous.join();
  for (const Variant &v : variants)
    errs() << format("ds-plan: %s plan in %.2f s\n", v.name, v.seconds);
  double planned = now();
  errs() << format("ds-plan: 3 plans on %zu devices in %.2f s wall (total "
                   "%.2f s)\n",
                   cluster->devices.size(), planned - costed, planned - start);
  if (!variants[0].plan)
    return fail(variants[0].error);

  const part::Plan &plan = *variants[0].plan;
  outs() << "ds-plan: " << stepName << " on " << clusterFile << ": "
         << costs.size() << " layers, " << cluster->devices.size()
         << " devices\n";
  part::printPlan(plan, costs, *cluster, outs());
  outs() << "\n"
         << format("%-20s  %12s  %11s  %9s  %8s  %s\n", "plan", "step ms",
                   "utilisation", "cluster", "bubble", "plan speed-up");
  for (auto [i, v] : llvm::enumerate(variants)) {
    if (!v.plan) {
      outs() << format("%-20s  %12s  ", v.name, "-")
             << "does not fit: " << v.error << "\n";
      continue;
    }
    // How much slower the baseline's step is than the plan's.
    std::string speedup =
        i == 0
            ? "-"
            : formatv("{0:F2}x", v.plan->stepSeconds / plan.stepSeconds).str();
    outs() << format("%-20s  %12.3f  %10.1f%%  %8.1f%%  %7.1f%%  %s\n", v.name,
                     v.plan->stepSeconds * 1e3, v.plan->utilisation * 100,
                     v.plan->clusterUtilisation * 100,
                     v.plan->bubbleFraction * 100, speedup.c_str());
  }
  outs() << format("%.4g FLOP per step (%u micro-batches)\n",
                   stepFlops(costs, microBatches), unsigned(microBatches));

  if (!jsonFile.empty()) {
    auto out = mlir::openOutputFile(jsonFile, &error);
    if (!out)
      return fail(error);
    json::Object root{{"model", inputFile},
                      {"step", stepName},
                      {"cluster", clusterFile},
                      {"layers", costs.size()},
                      {"devices", cluster->devices.size()},
                      {"seconds", json::Object{{"parse", parsed - start},
                                               {"pipeline", piped - parsed},
                                               {"layers", costed - piped},
                                               {"plan", planned - costed}}}};
    static const char *keys[3] = {"plan", "uniform_split", "homogeneous_only"};
    for (auto [i, v] : llvm::enumerate(variants)) {
      json::Object entry =
          v.plan
              ? std::move(*planToJson(*v.plan, costs, *cluster).getAsObject())
              : json::Object{{"error", v.error}};
      entry["planner_seconds"] = v.seconds;
      root[keys[i]] = std::move(entry);
    }
    root["layer_costs"] = layersToJson(costs);
    out->os() << formatv("{0:2}", json::Value(std::move(root))) << "\n";
    out->keep();
  }
  return 0;
}

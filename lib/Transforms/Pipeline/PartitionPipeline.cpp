//===- PartitionPipeline.cpp - ds-partition-pipeline ----------------------===//
//
// Plans the pipeline (layers and their costs from StepLayers, the planner
// of lib/Partition over the cluster's devices) and rewrites every step
// function into stage functions (PipelineSplit). The plan goes into the
// module's `ds.pipeline` attribute, which ds-run reads to pick each rank's
// stage and to report the plan.
//
//===----------------------------------------------------------------------===//

#include "PipelineSplit.h"

#include "ds/Analysis/StepLayers.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Partition/Planner.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::ds {
#define GEN_PASS_DEF_PARTITIONPIPELINEPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace part = ::ds::partition;

namespace {

/// The device of a cluster-less run: `stages` identical devices, so that
/// only the layers' relative costs matter. The rates are nominal (a modern
/// CPU core's order of magnitude); ds-plan --calibrate measures real ones.
part::DeviceProfile nominalDevice() {
  part::DeviceProfile d;
  d.name = d.kind = "device";
  d.flops = {5e10, 1e11, 1e11, 1e11, 2e11};
  d.memoryBytes = 1e15; // never the limit
  d.memoryBandwidth = 2e10;
  d.linkBandwidth = 1e10;
  d.linkLatency = 1e-5;
  return d;
}

/// `value` with every string naming a step renamed to its stage function
/// (`gpt_step_main` -> `gpt_step_main_s1`): the time-level schedule names
/// the step variants it switches between.
Attribute renameSteps(Attribute value, ArrayRef<std::string> steps,
                      StringRef suffix) {
  MLIRContext *ctx = value.getContext();
  if (auto s = dyn_cast<StringAttr>(value))
    return llvm::is_contained(steps, s.getValue().str())
               ? StringAttr::get(ctx, s.getValue() + suffix)
               : value;
  if (auto d = dyn_cast<DictionaryAttr>(value)) {
    NamedAttrList entries;
    for (NamedAttribute e : d)
      entries.append(e.getName(), renameSteps(e.getValue(), steps, suffix));
    return entries.getDictionary(ctx);
  }
  if (auto a = dyn_cast<ArrayAttr>(value)) {
    SmallVector<Attribute> items;
    for (Attribute e : a)
      items.push_back(renameSteps(e, steps, suffix));
    return ArrayAttr::get(ctx, items);
  }
  return value;
}

struct PartitionPipelinePass
    : public mlir::ds::impl::PartitionPipelinePassBase<PartitionPipelinePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    // Errors at the step's location, without the whole module attached.
    Location at = module.getLoc();
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(DSDialect::kTrainStepAttrName)) {
        at = f.getLoc();
        break;
      }
    auto fail = [&](const Twine &what) {
      mlir::emitError(at, "ds-partition-pipeline: ") << what;
      signalPassFailure();
    };
    if (module->hasAttr(DSDialect::kPipelineAttrName))
      return fail("the module is already partitioned into a pipeline");
    if (microBatches < 1)
      return fail("micro-batches must be at least 1, got " +
                  Twine(microBatches));
    if (stages < 0)
      return fail("stages must be at least 1 (or 0: the planner chooses)");
    part::PlanOptions plan;
    plan.microBatches = microBatches;
    if (schedule == "1f1b")
      plan.schedule = part::Schedule::OneFOneB;
    else if (schedule == "gpipe")
      plan.schedule = part::Schedule::GPipe;
    else
      return fail("unknown schedule '" + schedule + "' (1f1b or gpipe)");
    if (objective == "bottleneck")
      plan.objective = part::AssignObjective::Bottleneck;
    else if (objective == "sum")
      plan.objective = part::AssignObjective::Sum;
    else
      return fail("unknown objective '" + objective + "' (bottleneck or sum)");
    plan.stages = stages;

    SmallVector<func::FuncOp> steps;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(DSDialect::kTrainStepAttrName))
        steps.push_back(f);
    if (steps.empty())
      return fail("the module has no training step (a function marked '" +
                  DSDialect::kTrainStepAttrName + "')");

    part::Cluster devices;
    if (!cluster.empty()) {
      llvm::Expected<part::Cluster> c = part::readClusterFile(cluster);
      if (!c)
        return fail(llvm::toString(c.takeError()));
      devices = std::move(*c);
    } else {
      devices = part::homogeneousCluster(nominalDevice(),
                                         std::max<int64_t>(stages, 1));
    }

    FailureOr<StepLayers> layers = collectStepLayers(steps.front());
    if (failed(layers))
      return signalPassFailure();
    if (stages > int64_t(layers->costs.size()))
      return fail(Twine(stages) + " stages but the step has only " +
                  Twine(layers->costs.size()) +
                  " layers (cuts lie between layers)");
    llvm::Expected<part::Plan> planned =
        part::planPipeline(layers->costs, devices, plan);
    if (!planned)
      return fail(llvm::toString(planned.takeError()));
    unsigned numStages = planned->stages.size();
    if (plan.schedule == part::Schedule::OneFOneB && microBatches < numStages)
      mlir::emitWarning(at, "ds-partition-pipeline: ")
          << int64_t(microBatches) << " micro-batches for " << numStages
          << " stages: 1F1B then idles " << int(planned->bubbleFraction * 100)
          << " % of the step (bubble (S - 1) / (M + S - 1)); use at least as "
             "many micro-batches as stages";
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "layers (per micro-batch, forward + backward; GEMMs at the "
          "device's FLOP rate, the rest streams memory):\n";
    for (auto [i, c] : llvm::enumerate(layers->costs)) {
      double flops = 0;
      for (unsigned p = 0; p < part::kNumPrecisions; ++p)
        flops += c.denseFlops[p] + c.sparseFlops[p];
      os << llvm::format("  %-3u %-22s GEMM %9.4f MFLOP  stream %7.3f MiB  "
                         "params %7.3f MiB  stash %7.3f MiB  out %7.3f MiB\n",
                         unsigned(i), c.name.c_str(), flops / 1e6,
                         c.streamBytes / 1048576.0, c.paramBytes / 1048576.0,
                         c.activationBytes / 1048576.0,
                         c.outputBytes / 1048576.0);
    }
    part::printPlan(*planned, layers->costs, devices, os);
    if (printPlan)
      llvm::errs() << text;

    // ds.pipeline: what ds-run needs, and the plan for the report.
    Builder b(ctx);
    SmallVector<Attribute> stageAttrs;
    for (const part::StagePlan &s : planned->stages) {
      NamedAttrList e;
      e.set("first_layer", b.getI64IntegerAttr(s.firstLayer));
      e.set("end_layer", b.getI64IntegerAttr(s.endLayer));
      e.set("layers", b.getStrArrayAttr({layers->costs[s.firstLayer].name,
                                         layers->costs[s.endLayer - 1].name}));
      e.set("device", b.getStringAttr(devices.devices[s.device].name));
      e.set("compute_ms", b.getF64FloatAttr(s.computeSeconds * 1e3));
      e.set("send_ms", b.getF64FloatAttr(s.sendSeconds * 1e3));
      e.set("memory_bytes", b.getF64FloatAttr(s.memoryBytes));
      stageAttrs.push_back(e.getDictionary(ctx));
    }
    NamedAttrList attrs;
    attrs.set("stages", b.getI64IntegerAttr(numStages));
    attrs.set("micro_batches", b.getI64IntegerAttr(microBatches));
    attrs.set("schedule", b.getStringAttr(schedule));
    attrs.set("objective", b.getStringAttr(objective));
    attrs.set("layers", b.getI64IntegerAttr(layers->costs.size()));
    attrs.set("plan", b.getArrayAttr(stageAttrs));
    attrs.set("step_ms", b.getF64FloatAttr(planned->stepSeconds * 1e3));
    attrs.set("bubble", b.getF64FloatAttr(planned->bubbleFraction));
    attrs.set("utilisation", b.getF64FloatAttr(planned->utilisation));
    attrs.set("text", b.getStringAttr(text));
    if (!cluster.empty())
      attrs.set("cluster", b.getStringAttr(cluster));
    if (planOnly) {
      attrs.set("plan_only", b.getUnitAttr());
      module->setAttr("ds.pipeline_plan", attrs.getDictionary(ctx));
      return;
    }

    SmallVector<unsigned> stageOfLayer(layers->costs.size());
    for (auto [k, s] : llvm::enumerate(planned->stages)) {
      if (s.splitDevice >= 0)
        return fail("the plan splits layer '" +
                    layers->costs[s.firstLayer].name +
                    "' over two devices (horizontal blocking), which ds-run "
                    "cannot execute yet; use a cluster whose devices hold it");
      for (unsigned l = s.firstLayer; l < s.endLayer; ++l)
        stageOfLayer[l] = k;
    }
    pipeline::SplitOptions split;
    split.stages = numStages;
    split.microBatches = microBatches;
    split.schedule = plan.schedule == part::Schedule::GPipe
                         ? pipeline::ScheduleKind::GPipe
                         : pipeline::ScheduleKind::OneFOneB;
    int64_t nextTag = 0;
    SmallVector<std::string> names;
    for (auto [i, f] : llvm::enumerate(steps)) {
      names.push_back(f.getSymName().str());
      FailureOr<StepLayers> own =
          i == 0 ? std::move(layers) : collectStepLayers(f);
      if (failed(own))
        return signalPassFailure();
      if (own->costs.size() != stageOfLayer.size())
        return fail("step variant '" + f.getSymName() + "' has " +
                    Twine(own->costs.size()) + " layers, '" + names.front() +
                    "' has " + Twine(stageOfLayer.size()));
      if (failed(pipeline::splitStep(f, *own, stageOfLayer, split, nextTag)))
        return signalPassFailure();
    }
    module->setAttr(DSDialect::kPipelineAttrName, attrs.getDictionary(ctx));

    // Module tables keyed by step name (optimizer, precision map, sparsity)
    // get one entry per stage function too.
    for (NamedAttribute a : module->getAttrs()) {
      auto dict = dyn_cast<DictionaryAttr>(a.getValue());
      if (!dict || a.getName() == DSDialect::kPipelineAttrName)
        continue;
      NamedAttrList entries(dict.getValue());
      bool changed = false;
      for (const std::string &name : names)
        if (Attribute v = dict.get(name)) {
          for (unsigned k = 0; k < numStages; ++k)
            entries.set(name + "_s" + std::to_string(k),
                        renameSteps(v, names, "_s" + std::to_string(k)));
          changed = true;
        }
      if (changed)
        module->setAttr(a.getName(), entries.getDictionary(ctx));
    }
  }
};

} // namespace

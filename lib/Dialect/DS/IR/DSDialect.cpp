//===- DSDialect.cpp - ds dialect -----------------------------------------===//
//
// Registers the ds ops and attributes and verifies the attributes of the
// training-step contract wherever they appear: on functions (`ds.train_step`),
// on their arguments and results, and on the module (`ds.contract`).
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/CausalGemm.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::ds;

#include "ds/Dialect/DS/IR/DSDialect.cpp.inc"

void DSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ds/Dialect/DS/IR/DSOps.cpp.inc"
      >();
  registerAttributes();
}

/// Discardable op attributes that ds passes attach to ops, and what their
/// values must be. Anything else under the `ds.` prefix is a typo.
static LogicalResult verifyOpAnnotation(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  // Names from the front end (module path) and analyses (role), and the link
  // from a generated backward op to the forward op it differentiates.
  if (name == DSDialect::kModuleAttrName || name == DSDialect::kRoleAttrName ||
      name == DSDialect::kVjpOfAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError("attribute '") << name << "' must be a string";
    return success();
  }
  // The forward op an op is, or differentiates: ds-autodiff numbers each
  // differentiated forward op and gives its backward ops the same number,
  // so passes after it (precision assignment) treat a gradient GEMM
  // according to the forward op it belongs to.
  if (name == DSDialect::kOpIdAttrName) {
    if (!isa<IntegerAttr>(attr.getValue()))
      return op->emitOpError("attribute 'ds.op_id' must be an integer");
    return success();
  }
  // Unit markers: the backward seed (the cotangent of the loss) that
  // ds-autodiff creates and loss scaling multiplies, and a tensor-level
  // matmul whose accumulator is not read (ds-prepare-library-gemms).
  if (name == DSDialect::kSeedAttrName ||
      name == DSDialect::kGemmOverwriteAttrName ||
      name == DSDialect::kQuantAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError("attribute '") << name << "' is a unit attribute";
    return success();
  }
  if (name == DSDialect::kGradsAttrName) {
    auto names = dyn_cast<ArrayAttr>(attr.getValue());
    if (!names || !llvm::all_of(names, llvm::IsaPred<StringAttr>))
      return op->emitOpError("attribute '")
             << name << "' must be an array of parameter names";
    return success();
  }
  if (name == DSDialect::kQuantKeepAttrName) {
    auto t = dyn_cast<TypeAttr>(attr.getValue());
    if (!t || !isa<FloatType>(t.getValue()))
      return op->emitOpError("attribute '")
             << name << "' must be a float type (bf16, f16 or f32)";
    return success();
  }
  if (name == DSDialect::kCausalGemmAttrName)
    return verifyCausalGemmAttr(op, attr.getValue());
  if (name == DSDialect::kReadFractionAttrName ||
      name == DSDialect::kWriteFractionAttrName) {
    auto fraction = dyn_cast<FloatAttr>(attr.getValue());
    if (!fraction || !(fraction.getValueAsDouble() >= 0.0) ||
        fraction.getValueAsDouble() > 1.0)
      return op->emitOpError("attribute '")
             << name << "' must be a float in [0, 1]";
    return success();
  }
  return op->emitOpError("unknown ds attribute '") << name << "'";
}

/// Every channel (sender stage, receiver stage, tag) of the pipeline's
/// ds.send / ds.recv has as many receives as sends, all of one type; peers
/// name existing stages.
static LogicalResult verifyPipelineChannels(ModuleOp module, int64_t stages,
                                            bool matchChannels) {
  struct Channel {
    Operation *firstSend = nullptr, *firstRecv = nullptr;
    int64_t sends = 0, recvs = 0;
    Type type;
  };
  std::map<std::tuple<int64_t, int64_t, int64_t>, Channel> channels;
  auto stageOf = [](Operation *op) -> int64_t {
    auto func = op->getParentOfType<FunctionOpInterface>();
    auto a = func ? func->getAttrOfType<IntegerAttr>(
                        DSDialect::kPipelineStageAttrName)
                  : IntegerAttr();
    return a ? a.getInt() : -1;
  };
  LogicalResult result = success();
  module.walk([&](Operation *op) {
    auto send = dyn_cast<SendOp>(op);
    auto recv = dyn_cast<RecvOp>(op);
    if (!send && !recv)
      return;
    int64_t stage = stageOf(op);
    int64_t peer = send ? send.getPeer() : recv.getPeer();
    // Outside a stage function, or to itself: the op's verifier says so.
    if (stage < 0 || peer == stage)
      return;
    if (stage >= stages || peer >= stages) {
      result = op->emitOpError("connects stages ")
               << stage << " and " << peer << " of a " << stages
               << "-stage pipeline";
      return;
    }
    auto key = send ? std::make_tuple(stage, peer, int64_t(send.getTag()))
                    : std::make_tuple(peer, stage, int64_t(recv.getTag()));
    Channel &c = channels[key];
    Type type = send ? send.getInput().getType() : recv.getType();
    if (c.type && c.type != type) {
      result = op->emitOpError("carries ")
               << type << " on a channel that carries " << c.type;
      return;
    }
    c.type = type;
    (send ? c.sends : c.recvs) += 1;
    Operation *&first = send ? c.firstSend : c.firstRecv;
    if (!first)
      first = op;
  });
  if (failed(result) || !matchChannels)
    return result;
  for (auto &[key, c] : channels) {
    auto [from, to, tag] = key;
    if (c.sends == c.recvs)
      continue;
    Operation *at = c.firstSend ? c.firstSend : c.firstRecv;
    return at->emitOpError("channel ")
           << tag << " from stage " << from << " to stage " << to << " has "
           << c.sends << " ds.send and " << c.recvs
           << " ds.recv: every send needs its matching receive";
  }
  return success();
}

LogicalResult DSDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  if (name == kTrainStepAttrName) {
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!func)
      return op->emitOpError("'")
             << kTrainStepAttrName << "' may only mark a function";
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError("'")
             << kTrainStepAttrName << "' is a unit attribute";
    return TrainingContract::fromFunction(func);
  }
  if (name == kContractAttrName) {
    if (!isa<ModuleOp>(op))
      return op->emitOpError("'")
             << kContractAttrName << "' may only be attached to a module";
    auto table = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!table)
      return op->emitOpError("'")
             << kContractAttrName
             << "' must be a dictionary from function name to contract";
    for (NamedAttribute entry : table) {
      if (failed(TrainingContract::fromAttr(entry.getName().strref(),
                                            entry.getValue(),
                                            [&] { return op->emitOpError(); })))
        return failure();
    }
    return success();
  }
  // ds-assign-precision's record of its decisions (per step function, a
  // list of dictionaries), the time-level schedule the runner follows, and
  // ds-insert-optimizer's record of the optimizer it compiled in (per step
  // function, its settings as text), and ds-sparsify-matmul's settings (per
  // step function).
  if (name == kPrecisionMapAttrName || name == kPrecisionScheduleAttrName ||
      name == kOptimizerAttrName || name == kSparsityAttrName ||
      name == kDataParallelAttrName) {
    if (!isa<ModuleOp>(op))
      return op->emitOpError("'")
             << name << "' may only be attached to a module";
    if (!isa<DictionaryAttr>(attr.getValue()))
      return op->emitOpError("'") << name << "' must be a dictionary";
    return success();
  }
  if (name == kPipelineAttrName) {
    auto module = dyn_cast<ModuleOp>(op);
    if (!module)
      return op->emitOpError("'")
             << name << "' may only be attached to a module";
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    auto stages = dict ? dict.getAs<IntegerAttr>("stages") : IntegerAttr();
    if (!stages || stages.getInt() < 1)
      return op->emitOpError("'")
             << name << "' must be a dictionary with 'stages' >= 1";
    // A module holding one stage's functions (ds-run compiles only its own)
    // cannot match channels with the other stages.
    return verifyPipelineChannels(module, stages.getInt(),
                                  !dict.contains("compiled_stage"));
  }
  if (name == kPipelineStageAttrName) {
    auto stage = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !stage || stage.getInt() < 0)
      return op->emitOpError("'")
             << name << "' marks a function with its stage (an integer >= 0)";
    return success();
  }
  return verifyOpAnnotation(op, attr);
}

/// The function owning a region argument or result attribute must be a
/// training step; the whole contract is checked there.
static LogicalResult requireTrainStep(Operation *op, StringRef attrName,
                                      StringRef where, unsigned index) {
  if (!isa<FunctionOpInterface>(op))
    return op->emitOpError("'") << attrName << "' on " << where << " #" << index
                                << " is only valid on a function";
  if (!op->hasAttr(DSDialect::kTrainStepAttrName))
    return op->emitOpError("'") << attrName << "' on " << where << " #" << index
                                << " requires the function to be marked '"
                                << DSDialect::kTrainStepAttrName << "'";
  return success();
}

LogicalResult DSDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  if (failed(verifyContractArgAttr(op, argIndex, attr)))
    return failure();
  return requireTrainStep(op, attr.getName().strref(), "argument", argIndex);
}

LogicalResult DSDialect::verifyRegionResultAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  if (failed(verifyContractResultAttr(op, resultIndex, attr)))
    return failure();
  return requireTrainStep(op, attr.getName().strref(), "result", resultIndex);
}

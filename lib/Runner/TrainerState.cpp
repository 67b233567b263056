//===- TrainerState.cpp - The state a Trainer holds -----------------------===//
//
// Everything about the tensors the runner owns between steps: their initial
// values from the contract (or --params), checkpoints written and resumed
// (refusing one that does not match the step), the last step's results
// written out, and the checks of every output path and checkpoint key made
// before the first step, so that a finished run is never lost to a bad one.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/Trainer.h"

#include "TrainerInternal.h"

#include "ds/Runner/Checkpoint.h"
#include "ds/Runner/Random.h"
#include "ds/Runner/Report.h"
#include "ds/Runtime/ds_runtime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <map>
#include <set>

using namespace ds::runner;
using ds::runner::detail::errorf;
using llvm::Error;
using llvm::Expected;
using mlir::ds::ArgRole;
using mlir::ds::InitKind;
using mlir::ds::ResultRole;

/// Whether a file can be created in the directory `dir` ("" = the current
/// one): creates and removes a probe file, which is what writing will do.
static bool canCreateIn(llvm::StringRef dir) {
  llvm::SmallString<256> probe(dir.empty() ? "." : dir);
  llvm::sys::path::append(probe, ".ds-run-probe-%%%%%%");
  int fd;
  llvm::SmallString<256> made;
  if (llvm::sys::fs::createUniqueFile(probe, fd, made))
    return false;
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  llvm::sys::fs::remove(made);
  return true;
}

/// Checks that `path` can become a file (`wantDir` false) or a directory.
static Error checkOutputPath(llvm::StringRef flag, llvm::StringRef path,
                             bool wantDir) {
  namespace fs = llvm::sys::fs;
  std::string where = flag.str() + " " + path.str();
  if (fs::exists(path)) {
    bool isDir = fs::is_directory(path);
    if (isDir != wantDir)
      return errorf(where + ": is " + (isDir ? "a directory" : "a file") +
                    "; expected " + (wantDir ? "a directory" : "a file path"));
    // An existing directory is written into (or replaced beside itself).
    if (wantDir && !canCreateIn(path))
      return errorf(where + ": the directory is not writable");
  }
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty() && !fs::is_directory(parent))
    return errorf(where + ": directory '" + parent + "' does not exist");
  if (!canCreateIn(parent))
    return errorf(where + ": cannot create files in '" +
                  (parent.empty() ? llvm::StringRef(".") : parent) + "'");
  return Error::success();
}

Error Trainer::checkOutputs() const {
  if (!options.reportPath.empty())
    if (Error e = checkOutputPath("--report", options.reportPath, false))
      return e;
  if (!options.checkpointDir.empty())
    if (Error e = checkOutputPath("--checkpoint", options.checkpointDir, true))
      return e;
  if (!options.saveResultsDir.empty())
    if (Error e =
            checkOutputPath("--save-results", options.saveResultsDir, true))
      return e;
  if (!options.exportQuantizedDir.empty()) {
    if (Error e = checkOutputPath("--export-quantized",
                                  options.exportQuantizedDir, true))
      return e;
    // Refuse to replace what is not an export before training, not after.
    bool exists = false;
    llvm::Expected<std::string> resolved = resolveReplaceableDir(
        options.exportQuantizedDir, kQuantizedIndexFile, "an export", exists);
    if (!resolved)
      return errorf("--export-quantized " + options.exportQuantizedDir + ": " +
                    llvm::toString(resolved.takeError()));
    if (!program.evalContract(EvalKind::Integer) ||
        program.quantizedValues().empty())
      return errorf("--export-quantized: the step has no layer converted to "
                    "integer inference (ds-convert-fake-quant); quantize "
                    "linear layers with --fake-quant");
  }
  // Checkpoint keys: one file per parameter and state, named by its key.
  if (options.checkpointDir.empty())
    return Error::success();
  const auto &c = program.contract();
  std::map<std::string, unsigned> seen;
  // File names longer than this fail on Linux file systems (NAME_MAX).
  constexpr size_t kMaxFileName = 255;
  for (auto [i, arg] : llvm::enumerate(c.args)) {
    if (arg.role == ArgRole::Input)
      continue;
    std::string key = tensorKey(i);
    auto [it, inserted] = seen.try_emplace(key, i);
    if (!inserted)
      return errorf("--checkpoint: " +
                    mlir::ds::stringifyArgRole(c.args[it->second].role) + " '" +
                    c.args[it->second].name + "' and " +
                    mlir::ds::stringifyArgRole(arg.role) + " '" + arg.name +
                    "' would share the checkpoint key '" + key +
                    "'; rename one of them");
    if (tensorFileName(key).size() > kMaxFileName)
      return errorf("--checkpoint: the checkpoint file of " +
                    mlir::ds::stringifyArgRole(arg.role) + " '" +
                    llvm::StringRef(arg.name).take_front(40) + "...' (" +
                    llvm::Twine(arg.name.size()) +
                    " characters) would have a name over " +
                    llvm::Twine(kMaxFileName) + " bytes; shorten the name");
  }
  return Error::success();
}

/// A stream id per tensor name, so each tensor's initial value depends only
/// on the seed and its name (not on the order of arguments).
static uint64_t streamIdOf(llvm::StringRef name) {
  return hashBytes(name) & ((uint64_t(1) << 62) - 1);
}

/// The checkpoint key of rank `rank`'s copy of a per-rank state.
static std::string rankKey(llvm::StringRef key, int rank) {
  return (key + "@rank" + llvm::Twine(rank)).str();
}

Error Trainer::initState() {
  const auto &c = program.contract();
  for (auto [i, arg] : llvm::enumerate(c.args)) {
    if (arg.role == ArgRole::Input)
      continue;
    HostTensor &t = args[i];
    std::string what =
        (mlir::ds::stringifyArgRole(arg.role) + " '" + arg.name + "'").str();
    // Parameters, and state initialised from a file (e.g. batch-norm
    // running statistics from a front end), load from --params DIR by name
    // or state key.
    bool fromFile =
        arg.role == ArgRole::Param || arg.init.getKind() == InitKind::file;
    if (fromFile && !options.paramsDir.empty()) {
      llvm::SmallString<256> path(options.paramsDir);
      llvm::sys::path::append(path, arg.name + ".npy");
      Expected<HostTensor> loaded = readNpy(path, t.dtype);
      if (!loaded)
        return errorf("--params: " + what + ": " +
                      llvm::toString(loaded.takeError()));
      if (Error e = checkTensor(*loaded, t.dtype, t.shape, what))
        return e;
      t = std::move(*loaded);
      continue;
    }
    // The dropout generator's key comes from the seed, so that different
    // seeds give different masks; its counter starts at 0.
    // Other generators (`clip.rng`, ...) get keys of their own.
    llvm::StringRef kind =
        arg.role == ArgRole::State ? arg.state.getKind() : "";
    if ((kind == "rng" || kind.ends_with(".rng")) && t.dtype == DType::I64 &&
        t.numElements() == 2) {
      std::string tag = "rng-key:" + std::to_string(options.seed);
      if (kind != "rng")
        tag += ":" + arg.name;
      t.setInt(0, static_cast<int64_t>(hashBytes(tag)));
      t.setInt(1, 0);
      continue;
    }
    double value = arg.init.getValueAsDouble();
    Error e = Error::success();
    switch (arg.init.getKind()) {
    case InitKind::zeros:
      e = fillConstant(t, 0.0);
      break;
    case InitKind::ones:
      e = fillConstant(t, 1.0);
      break;
    case InitKind::constant:
      e = fillConstant(t, value);
      break;
    case InitKind::normal:
      e = fillNormal(t, value, options.seed, streamIdOf(arg.name));
      break;
    case InitKind::uniform:
      e = fillUniform(t, value, options.seed, streamIdOf(arg.name));
      break;
    case InitKind::file:
      return errorf(what +
                    " is initialised from a file; pass --params DIR "
                    "with " +
                    arg.name + ".npy");
    }
    if (e)
      return errorf(what + ": " + llvm::toString(std::move(e)));
  }
  return Error::success();
}

Error Trainer::restore(llvm::StringRef dir) {
  Expected<Checkpoint> ckpt = readCheckpoint(dir);
  if (!ckpt)
    return ckpt.takeError();
  const llvm::json::Object &state = ckpt->runnerState;
  auto hash = state.getString("module_hash");
  if (!hash || *hash != options.moduleHash)
    return errorf("--resume " + dir +
                  ": the checkpoint was written for a different module "
                  "(module hash " +
                  (hash ? hash->str() : std::string("missing")) + ", this is " +
                  options.moduleHash + ")");
  int64_t savedWorld = state.getInteger("world_size").value_or(1);
  if (savedWorld != options.worldSize)
    return errorf("--resume " + dir + ": the checkpoint was written by " +
                  std::to_string(savedWorld) + " rank(s) and this run has " +
                  std::to_string(options.worldSize) +
                  "; resume with the same number of ranks (the batch split "
                  "and each rank's error-feedback residuals depend on it)");
  int64_t savedStages = state.getInteger("pipeline_stages").value_or(0);
  if (savedStages != options.pipelineStages)
    return errorf("--resume " + dir + ": the checkpoint was written by " +
                  (savedStages ? "a pipeline of " +
                                     std::to_string(savedStages) + " stage(s)"
                               : std::string("a run without a pipeline")) +
                  " and this run has " +
                  (options.pipelineStages
                       ? std::to_string(options.pipelineStages) + " stage(s)"
                       : std::string("none")) +
                  "; resume with the same --stages / --accumulate (each "
                  "stage's checkpoint holds its own parameters)");
  const auto &c = program.contract();
  std::set<std::string> used;
  for (auto [i, arg] : llvm::enumerate(c.args)) {
    if (arg.role == ArgRole::Input)
      continue;
    std::string key = tensorKey(i);
    if (options.worldSize > 1 && isPerRankState(i)) {
      for (int r = 0; r < options.worldSize; ++r)
        used.insert(rankKey(key, r));
      key = rankKey(key, options.rank);
    } else {
      used.insert(key);
    }
    auto it = ckpt->tensors.find(key);
    if (it == ckpt->tensors.end())
      return errorf("--resume " + dir + ": no tensor for '" + key + "'");
    if (Error e = checkTensor(it->second, args[i].dtype, args[i].shape,
                              "checkpoint tensor '" + key + "'"))
      return e;
    args[i] = it->second;
  }
  // State the step does not have would be dropped: a checkpoint of another
  // optimizer or technique (e.g. --optimizer sgd on AdamW moments).
  std::vector<std::string> extra;
  for (const auto &entry : ckpt->tensors)
    if (!used.count(entry.first))
      extra.push_back("'" + entry.first + "'");
  if (!extra.empty()) {
    llvm::sort(extra);
    return errorf("--resume " + dir + ": the checkpoint holds " +
                  llvm::join(extra, ", ") +
                  ", which this step does not have (was it written with "
                  "other optimizer or technique flags?); resume with the "
                  "flags it was trained with");
  }
  std::optional<int64_t> savedStep = state.getInteger("step");
  std::optional<int64_t> cursor = state.getInteger("data_cursor");
  std::optional<int64_t> seed = state.getInteger("seed");
  if (!savedStep || !cursor || !seed)
    return errorf("--resume " + dir +
                  ": runner state lacks step, "
                  "data_cursor or seed");
  if (static_cast<uint64_t>(*seed) != options.seed)
    return errorf("--resume " + dir + ": the checkpoint used --seed " +
                  std::to_string(*seed) + "; resume with the same seed");
  std::optional<int64_t> fallback = state.getInteger("precision_fallback_left");
  if (*savedStep < 0 || *cursor < 0 || (fallback && *fallback < 0))
    return errorf("--resume " + dir + ": runner state out of range (step " +
                  llvm::Twine(*savedStep) + ", data_cursor " +
                  llvm::Twine(*cursor) + "); the checkpoint is damaged");
  if (*savedStep >= options.steps)
    return errorf("--resume " + dir + ": the checkpoint is at step " +
                  llvm::Twine(*savedStep) + ", which is not below --steps " +
                  llvm::Twine(options.steps) +
                  ": nothing is left to train (raise --steps)");
  step = *savedStep;
  fallbackLeft = fallback.value_or(0);
  if (data)
    data->setCursor(static_cast<uint64_t>(*cursor));
  if (!options.quiet)
    out << "ds-run: resumed from " << dir << " at step " << step << "\n";
  return Error::success();
}

bool Trainer::isPerRankState(unsigned i) const {
  return ::ds::runner::isPerRankState(program.contract().args[i]);
}

Error Trainer::checkReplicas(llvm::StringRef when) {
  // One hash over every parameter and every shared state, in order.
  const auto &c = program.contract();
  std::string all;
  for (auto [i, arg] : llvm::enumerate(c.args)) {
    if (arg.role == ArgRole::Input || isPerRankState(i))
      continue;
    uint64_t h = hashBytes(
        llvm::StringRef(reinterpret_cast<const char *>(args[i].bytes.data()),
                        args[i].bytes.size()));
    all.append(reinterpret_cast<const char *>(&h), sizeof(h));
  }
  uint64_t mine = hashBytes(all);
  std::vector<uint64_t> hashes(options.worldSize);
  if (dsrt_allgather(&mine, sizeof(mine), hashes.data()) != 0)
    return errorf("replica check " + when + ": " + dsrt_last_error());
  ++replicaChecks;
  for (int r = 1; r < options.worldSize; ++r)
    if (hashes[r] != hashes[0])
      return errorf("replica check " + when + ": rank " + std::to_string(r) +
                    "'s parameters and state differ from rank 0's (hash " +
                    formatHash(hashes[r]) + " vs " + formatHash(hashes[0]) +
                    "); the ranks have diverged");
  return Error::success();
}

Error Trainer::saveCheckpoint(llvm::StringRef dir) {
  const auto &c = program.contract();
  std::vector<std::string> keys;
  std::vector<std::pair<std::string, const HostTensor *>> tensors;
  // Data parallel: every rank's own state (error-feedback residuals) is
  // gathered to rank 0, which writes the one checkpoint.
  std::vector<HostTensor> gathered;
  gathered.reserve(c.args.size() * options.worldSize);
  for (auto [i, arg] : llvm::enumerate(c.args)) {
    if (arg.role == ArgRole::Input)
      continue;
    if (options.worldSize == 1 || !isPerRankState(i)) {
      tensors.push_back({tensorKey(i), &args[i]});
      continue;
    }
    HostTensor all(args[i].dtype,
                   {int64_t(options.worldSize) * args[i].numElements()});
    if (dsrt_allgather(args[i].bytes.data(), args[i].sizeInBytes(),
                       all.bytes.data()) != 0)
      return errorf("checkpoint: gathering '" + tensorKey(i) +
                    "': " + dsrt_last_error());
    for (int r = 0; r < options.worldSize; ++r) {
      HostTensor &part = gathered.emplace_back(args[i].dtype, args[i].shape);
      std::copy_n(all.bytes.begin() + size_t(r) * part.sizeInBytes(),
                  part.sizeInBytes(), part.bytes.begin());
      keys.push_back(rankKey(tensorKey(i), r));
    }
  }
  for (size_t k = 0; k < keys.size(); ++k)
    tensors.push_back({keys[k], &gathered[k]});
  if (options.rank != 0)
    return Error::success();
  llvm::json::Object state{
      {"step", step},
      {"data_cursor", data ? static_cast<int64_t>(data->cursor()) : 0},
      {"seed", static_cast<int64_t>(options.seed)},
      {"module_hash", options.moduleHash},
      {"module", options.modulePath},
      {"threads", options.threads},
      // The time level's anomaly fallback in progress.
      {"precision_fallback_left", fallbackLeft},
      // Data parallel: the ranks that wrote it (a resume needs as many).
      {"world_size", options.worldSize},
      // Pipeline: the stages (each writes its own directory) and this one.
      {"pipeline_stages", options.pipelineStages},
      {"pipeline_stage", options.pipelineStage},
  };
  return writeCheckpoint(dir, tensors, state);
}

Error Trainer::writeResults(llvm::StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return errorf("--save-results " + dir + ": " + ec.message());
  const auto &c = program.contract();
  for (auto [i, res] : llvm::enumerate(c.results)) {
    std::string name;
    switch (res.role) {
    case ResultRole::Loss:
      name = "loss";
      break;
    case ResultRole::Update:
      name = "update." + c.args[res.argIndex].name;
      break;
    case ResultRole::Grad:
      name = "grad." + c.args[res.argIndex].name;
      break;
    case ResultRole::Metric:
      name = "metric." + res.name;
      break;
    }
    // A pipeline's later stages write their own parameters and state only:
    // the loss, metrics and shared state are stage 0's files too.
    if (options.pipelineStage > 0 &&
        (res.role == ResultRole::Loss || res.role == ResultRole::Metric ||
         (res.role == ResultRole::Update &&
          c.args[res.argIndex].role == ArgRole::State &&
          (!c.args[res.argIndex].state ||
           c.args[res.argIndex].state.getOf().empty()))))
      continue;
    // Updates were swapped into the arguments after the step.
    const HostTensor &t =
        res.role == ResultRole::Update ? args[res.argIndex] : results[i];
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name + ".npy");
    if (Error e = writeNpyAtomic(path, t))
      return e;
  }
  return Error::success();
}

Error Trainer::exportQuantized(llvm::StringRef dir) {
  const auto &c = program.contract();
  std::vector<HostTensor *> leading;
  for (size_t i = 0, e = program.evalContract()->args.size(); i < e; ++i)
    leading.push_back(&args[i]);
  if (Error e = prepareInt8Weights(leading))
    return e;
  const mlir::ds::TrainingContract &integer =
      *program.evalContract(EvalKind::Integer);
  auto lookup = [&](llvm::StringRef key) -> const HostTensor * {
    if (std::optional<unsigned> i = c.findArg(ArgRole::State, key))
      return &args[*i];
    if (std::optional<unsigned> i = c.findArg(ArgRole::Param, key))
      return &args[*i];
    if (std::optional<unsigned> i = integer.findArg(ArgRole::State, key))
      if (*i >= leading.size() && *i - leading.size() < int8Weights.size())
        return &int8Weights[*i - leading.size()];
    return nullptr;
  };
  std::vector<std::pair<std::string, const HostTensor *>> params;
  // The quantizers' own parameters (LSQ's learned changes) are in the
  // exported scales and zero points already; the model has no such
  // parameters.
  for (unsigned i : c.getArgIndices(ArgRole::Param))
    if (!llvm::StringRef(c.args[i].name)
             .contains(mlir::ds::kFakeQuantParamInfix))
      params.push_back({c.args[i].name, &args[i]});
  // The forward's other state (batch-norm running statistics), without the
  // quantizers', the counters and RNG keys.
  std::vector<std::pair<std::string, const HostTensor *>> buffers;
  const mlir::ds::TrainingContract &forward = *program.evalContract();
  for (auto [i, arg] : llvm::enumerate(forward.args))
    if (arg.role == ArgRole::State && arg.type.getElementType().isF32() &&
        !llvm::StringRef(arg.name).starts_with("qat."))
      buffers.push_back({arg.name, &args[i]});
  llvm::json::Object info{{"module", options.modulePath},
                          {"step", step},
                          {"seed", static_cast<int64_t>(options.seed)}};
  return writeQuantizedExport(dir, program.quantizedValues(), lookup, params,
                              buffers, program.integerConversion(),
                              std::move(info));
}

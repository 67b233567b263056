//===- StepExport.cpp - A compiled step as a shared library ---------------===//
//
// Implements StepExport.h: the JIT's object file, linked into a shared
// library by the system's C compiler, and the manifest a runner without
// MLIR reads (docs/AheadOfTime.md).
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/StepExport.h"

#include "ds/Runner/Npy.h"

#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace ::ds::runner;
namespace path = llvm::sys::path;

/// The manifest's description of one tensor: dtype and shape.
static llvm::Expected<llvm::json::Object>
describeTensor(mlir::RankedTensorType type) {
  llvm::Expected<DType> dtype = dtypeOf(type);
  if (!dtype)
    return dtype.takeError();
  llvm::json::Array shape;
  for (int64_t d : type.getShape())
    shape.push_back(d);
  return llvm::json::Object{{"dtype", dtypeName(*dtype).str()},
                            {"shape", std::move(shape)}};
}

static llvm::Expected<llvm::json::Object> manifest(const StepProgram &program,
                                                   const StepExportInfo &info) {
  const mlir::ds::TrainingContract &c = program.contract();
  llvm::json::Array args, results;
  for (auto [i, arg] : llvm::enumerate(c.args)) {
    llvm::Expected<llvm::json::Object> t = describeTensor(arg.type);
    if (!t)
      return t.takeError();
    (*t)["index"] = int64_t(i);
    (*t)["role"] = mlir::ds::stringifyArgRole(arg.role).str();
    // The name of a parameter or input; a state's key (its checkpoint key).
    (*t)["name"] = arg.name;
    if (arg.range > 0)
      (*t)["range"] = arg.range;
    // Each rank's own (a checkpoint of N ranks keeps `name@rank<r>`).
    if (isPerRankState(arg))
      (*t)["per_rank"] = true;
    // The initialiser, for a runner that draws its own initial state
    // (ds-step-run --init-random) instead of reading init/.
    if (arg.init) {
      llvm::json::Object init{
          {"kind", mlir::ds::stringifyInitKind(arg.init.getKind()).str()}};
      if (arg.init.takesValue())
        init["value"] = arg.init.getValueAsDouble();
      (*t)["init"] = std::move(init);
    }
    args.push_back(std::move(*t));
  }
  for (auto [i, result] : llvm::enumerate(c.results)) {
    llvm::Expected<llvm::json::Object> t = describeTensor(result.type);
    if (!t)
      return t.takeError();
    (*t)["index"] = int64_t(i);
    (*t)["role"] = mlir::ds::stringifyResultRole(result.role).str();
    if (result.role == mlir::ds::ResultRole::Update ||
        result.role == mlir::ds::ResultRole::Grad)
      (*t)["of"] = result.argIndex;
    if (result.role == mlir::ds::ResultRole::Metric)
      (*t)["name"] = result.name;
    results.push_back(std::move(*t));
  }
  llvm::json::Object m{
      {"format", "ds-step"},
      {"version", 1},
      {"function", c.funcName},
      // ExecutionEngine's packed wrapper: void(void **), one pointer per
      // argument and result, each to a pointer to its memref descriptor.
      {"symbol", "_mlir__mlir_ciface_" + c.funcName},
      {"library", kStepLibraryFile.str()},
      {"object", kStepObjectFile.str()},
      {"init", kStepInitDir.str()},
      {"device", info.device},
      {"module", info.modulePath},
      {"module_hash", info.moduleHash},
      {"seed", int64_t(info.seed)},
      {"args", std::move(args)},
      {"results", std::move(results)},
  };
  if (info.device == "cuda")
    m["chip"] = info.chip;
  if (info.emulatedKernels)
    m["emulated_kernels"] = true;
  if (program.isDataParallel())
    m["data_parallel"] = true;
  llvm::json::Array passes;
  for (const std::string &p : info.passes)
    passes.push_back(p);
  m["passes"] = std::move(passes);
  return m;
}

/// The JIT turns a module's global constructors and destructors (a GPU
/// step's kernel loading and unloading) into one exported function each,
/// `__orc_init_func.<module>` and `__orc_deinit_func.<module>`, that its
/// platform calls. A shared library runs them at load and unload when they
/// are its DT_INIT and DT_FINI: these are their names, if the object has
/// them.
static llvm::Error findLifetimeFunctions(llvm::StringRef object,
                                         std::string &init, std::string &fini) {
  auto file = llvm::object::ObjectFile::createObjectFile(object);
  if (!file)
    return file.takeError();
  for (const llvm::object::SymbolRef &symbol : file->getBinary()->symbols()) {
    llvm::Expected<llvm::StringRef> name = symbol.getName();
    if (!name)
      return name.takeError();
    for (auto [prefix, out] :
         {std::pair<llvm::StringRef, std::string *>{"__orc_init_func.", &init},
          {"__orc_deinit_func.", &fini}}) {
      if (!name->starts_with(prefix))
        continue;
      if (!out->empty())
        return llvm::createStringError(
            "the compiled step has two constructor functions (" + *out + ", " +
            *name + ")");
      *out = name->str();
    }
  }
  return llvm::Error::success();
}

/// Links `object` into the shared library `library` with the system's C
/// compiler driver.
static llvm::Error linkSharedLibrary(llvm::StringRef object,
                                     llvm::StringRef library,
                                     llvm::StringRef device) {
  std::string init, fini;
  if (llvm::Error e = findLifetimeFunctions(object, init, fini))
    return e;
  std::string driver;
  for (const char *name : {"cc", "clang", "gcc"})
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(name)) {
      driver = *found;
      break;
    }
  if (driver.empty())
    return llvm::createStringError(
        "cannot link " + library +
        ": no C compiler (cc, clang or gcc) on PATH; the object " + object +
        " is complete: link it with 'cc -shared -o step.so step.o'");
  // libm: the step calls pow, exp, ... (a C++ runner has it anyway).
  // -Bsymbolic: the step's calls to its own functions bind to them, not to
  // a same-named symbol the process has already (a step named `step` would
  // otherwise call glibc's regexp `step`).
  std::vector<std::string> argv = {driver, "-shared",     "-Wl,-Bsymbolic",
                                   "-o",   library.str(), object.str(),
                                   "-lm"};
  if (!init.empty())
    argv.push_back("-Wl,-init," + init);
  if (!fini.empty())
    argv.push_back("-Wl,-fini," + fini);
#ifdef DS_MLIR_C_RUNNER_UTILS
  // CPU steps copy differently laid out buffers with memrefCopy from MLIR's
  // C runner utilities; a GPU step needs nothing of MLIR.
  if (device == "cpu") {
    llvm::StringRef utils = DS_MLIR_C_RUNNER_UTILS;
    argv.push_back("-Wl,--as-needed");
    argv.push_back(utils.str());
    argv.push_back("-Wl,-rpath," + path::parent_path(utils).str());
  }
#else
  (void)device;
#endif
  llvm::SmallVector<llvm::StringRef> refs(argv.begin(), argv.end());
  std::string message;
  llvm::SmallString<128> log;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("ds-step-link", "log", log))
    return llvm::createStringError("cannot create a temporary file: " +
                                   ec.message());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  int rc = llvm::sys::ExecuteAndWait(driver, refs, std::nullopt, redirects,
                                     /*SecondsToWait=*/120, 0, &message);
  std::string output;
  if (auto buffer = llvm::MemoryBuffer::getFile(log))
    output = (*buffer)->getBuffer().trim().str();
  (void)llvm::sys::fs::remove(log);
  if (rc != 0)
    return llvm::createStringError("linking " + library + " failed (" +
                                   llvm::join(refs, " ") + ")" +
                                   (message.empty() ? "" : ": " + message) +
                                   (output.empty() ? "" : "\n" + output));
  return llvm::Error::success();
}

llvm::Error ds::runner::writeStepLibrary(const StepProgram &program,
                                         llvm::StringRef dir,
                                         const StepExportInfo &info) {
  if (program.stepVariants().size() > 1)
    return llvm::createStringError(
        "the step has a time-level precision schedule (" +
        llvm::Twine(program.stepVariants().size()) +
        " step variants switched at run time), which the ahead-of-time "
        "runner does not drive; export a policy without phases");
  if (program.pipelineStages() > 0)
    return llvm::createStringError(
        "a pipeline-parallel step cannot be exported: its stages exchange "
        "activations through ds-run");
  llvm::Expected<llvm::json::Object> m = manifest(program, info);
  if (!m)
    return m.takeError();

  llvm::SmallString<256> object(dir), library(dir), json(dir);
  path::append(object, kStepObjectFile);
  path::append(library, kStepLibraryFile);
  path::append(json, kStepManifestFile);
  if (llvm::Error e = program.writeObject(object))
    return e;
  if (llvm::Error e = linkSharedLibrary(object, library, info.device))
    return e;
  std::error_code ec;
  llvm::raw_fd_ostream os(json, ec);
  if (ec)
    return llvm::createStringError("cannot write " + json + ": " +
                                   ec.message());
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(*m))) << "\n";
  os.close();
  if (os.has_error())
    return llvm::createStringError("cannot write " + json + ": " +
                                   os.error().message());
  return llvm::Error::success();
}

//===- StepLibrary.cpp - An exported training step ------------------------===//

#include "StepLibrary.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <random>

using namespace ds::steprun;
using nlohmann::json;

size_t TensorSpec::bytes() const {
  size_t n = elementSize(dtype);
  for (int64_t d : shape)
    n *= size_t(d);
  return n;
}

Tensor TensorSpec::zeros() const {
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.bytes.assign(bytes(), 0);
  return t;
}

static bool readJson(const std::string &path, json &out, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  try {
    out = json::parse(in);
  } catch (const json::exception &e) {
    error = path + ": " + e.what();
    return false;
  }
  return true;
}

static bool readSpecs(const json &array, bool isArgs,
                      std::vector<TensorSpec> &out, std::string &error) {
  if (!array.is_array()) {
    error =
        std::string("'") + (isArgs ? "args" : "results") + "' is not an array";
    return false;
  }
  for (const json &e : array) {
    TensorSpec s;
    s.role = e.at("role").get<std::string>();
    s.name = e.value("name", std::string());
    s.dtype = e.at("dtype").get<std::string>();
    s.shape = e.at("shape").get<std::vector<int64_t>>();
    s.of = e.value("of", int64_t(-1));
    s.range = e.value("range", int64_t(0));
    s.perRank = e.value("per_rank", false);
    if (e.contains("init")) {
      s.initKind = e["init"].at("kind").get<std::string>();
      s.initValue = e["init"].value("value", 0.0);
    }
    if (elementSize(s.dtype) == 0) {
      error = "unknown dtype '" + s.dtype + "'";
      return false;
    }
    if (e.at("index").get<size_t>() != out.size()) {
      error = "entries out of order";
      return false;
    }
    out.push_back(std::move(s));
  }
  return true;
}

bool StepManifest::load(const std::string &stepDir, std::string &error) {
  dir = stepDir;
  std::string path = dir + "/step.json";
  json m;
  if (!readJson(path, m, error))
    return false;
  try {
    if (m.value("format", "") != "ds-step" || m.value("version", 0) != 1) {
      error = path + ": not a ds-step manifest of version 1";
      return false;
    }
    function = m.at("function").get<std::string>();
    symbol = m.at("symbol").get<std::string>();
    library = m.at("library").get<std::string>();
    init = m.at("init").get<std::string>();
    device = m.at("device").get<std::string>();
    chip = m.value("chip", "");
    emulatedKernels = m.value("emulated_kernels", false);
    dataParallel = m.value("data_parallel", false);
    module = m.value("module", "");
    if (!readSpecs(m.at("args"), true, args, error) ||
        !readSpecs(m.at("results"), false, results, error)) {
      error = path + ": " + error;
      return false;
    }
  } catch (const json::exception &e) {
    error = path + ": " + e.what();
    return false;
  }
  for (const TensorSpec &r : results)
    if ((r.role == "update" || r.role == "grad") &&
        (r.of < 0 || size_t(r.of) >= args.size() ||
         args[r.of].bytes() != r.bytes())) {
      error = path + ": a result updates argument " + std::to_string(r.of) +
              ", which does not exist or has another type";
      return false;
    }
  if (lossIndex() < 0) {
    error = path + ": the step has no loss";
    return false;
  }
  return true;
}

int StepManifest::lossIndex() const {
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].role == "loss")
      return int(i);
  return -1;
}

StepLibrary::~StepLibrary() { close(); }

bool StepLibrary::open(const StepManifest &manifest, std::string &error) {
  std::string path = manifest.dir + "/" + manifest.library;
  // RTLD_NOW: a missing runtime symbol is an error here, naming it.
  handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    error = "cannot load " + path + ": " + (why ? why : "unknown error");
    return false;
  }
  entry = reinterpret_cast<void (*)(void **)>(
      dlsym(handle, manifest.symbol.c_str()));
  if (!entry) {
    error = path + " has no symbol " + manifest.symbol;
    close();
    return false;
  }
  return true;
}

void StepLibrary::close() {
  if (handle)
    dlclose(handle);
  handle = nullptr;
  entry = nullptr;
}

bool ds::steprun::readCheckpoint(const std::string &dir,
                                 const StepManifest &manifest,
                                 std::vector<Tensor> &args, std::string &error,
                                 int rank, int worldSize) {
  json runner;
  if (!readJson(dir + "/runner.json", runner, error))
    return false;
  args.assign(manifest.args.size(), Tensor());
  try {
    if (runner.value("format", "") != "ds-checkpoint") {
      error = dir + "/runner.json: not a ds-run checkpoint";
      return false;
    }
    int savedWorld = 1;
    if (runner.contains("runner"))
      savedWorld = runner["runner"].value("world_size", 1);
    for (size_t i = 0; i < manifest.args.size(); ++i) {
      const TensorSpec &spec = manifest.args[i];
      if (spec.role == "input")
        continue;
      // As ds-run keys them (lib/Runner/TrainerState.cpp): a rank's own
      // state by rank when several ranks wrote it.
      std::string key = spec.name;
      if (spec.perRank && savedWorld > 1)
        key += "@rank" + std::to_string(savedWorld == worldSize ? rank : 0);
      const json *entry = nullptr;
      for (const json &t : runner.at("tensors"))
        if (t.at("key").get<std::string>() == key)
          entry = &t;
      if (!entry) {
        error = "checkpoint " + dir + " has no tensor '" + key +
                "' (the step's " + spec.role + ")";
        return false;
      }
      Tensor &t = args[i];
      if (!readNpy(dir + "/" + entry->at("file").get<std::string>(), t, error))
        return false;
      if (t.dtype != spec.dtype || t.shape != spec.shape) {
        error = "checkpoint " + dir + ": '" + spec.name + "' is " +
                describe(t) + ", the step takes " + spec.dtype + " " +
                formatShape(spec.shape);
        return false;
      }
      // Another number of ranks splits the batches differently: its
      // residuals mean nothing here, unless they are all zero (the initial
      // state ds-run --emit-step writes with one rank).
      if (spec.perRank && savedWorld != worldSize &&
          std::any_of(t.bytes.begin(), t.bytes.end(),
                      [](uint8_t b) { return b != 0; })) {
        error = "checkpoint " + dir + " was written by " +
                std::to_string(savedWorld) + " rank(s) and this run has " +
                std::to_string(worldSize) + ": its '" + spec.name +
                "' is each rank's own (error feedback); run with " +
                std::to_string(savedWorld) + " rank(s)";
        return false;
      }
    }
  } catch (const json::exception &e) {
    error = dir + "/runner.json: " + e.what();
    return false;
  }
  return true;
}

bool ds::steprun::randomState(const StepManifest &manifest, uint64_t seed,
                              std::vector<Tensor> &args, std::string &error) {
  std::mt19937_64 rng(seed);
  args.assign(manifest.args.size(), Tensor());
  for (size_t i = 0; i < manifest.args.size(); ++i) {
    const TensorSpec &spec = manifest.args[i];
    if (spec.role == "input")
      continue;
    Tensor &t = args[i] = spec.zeros();
    const std::string &kind = spec.initKind;
    if (kind == "zeros")
      continue;
    if (kind != "ones" && kind != "constant" && kind != "normal" &&
        kind != "uniform") {
      error = spec.role + " '" + spec.name + "' has initialiser '" + kind +
              "': its value must be loaded (give --init DIR)";
      return false;
    }
    bool isFloat = spec.dtype == "f32" || spec.dtype == "f64";
    if (!isFloat && (kind == "normal" || kind == "uniform" ||
                     spec.dtype == "f16" || spec.dtype == "bf16")) {
      error = spec.role + " '" + spec.name + "' (" + spec.dtype +
              "): --init-random draws f32, f64 and integer tensors only";
      return false;
    }
    std::normal_distribution<double> normal(0.0, spec.initValue);
    std::uniform_real_distribution<double> uniform(-spec.initValue,
                                                   spec.initValue);
    size_t size = elementSize(spec.dtype);
    for (int64_t j = 0, n = t.numElements(); j < n; ++j) {
      double v = kind == "ones"       ? 1.0
                 : kind == "constant" ? spec.initValue
                 : kind == "normal"   ? normal(rng)
                                      : uniform(rng);
      uint8_t *p = t.bytes.data() + size_t(j) * size;
      auto store = [&](auto x) { std::memcpy(p, &x, sizeof(x)); };
      if (spec.dtype == "f32")
        store(float(v));
      else if (spec.dtype == "f64")
        store(v);
      else if (spec.dtype == "i64")
        store(int64_t(v));
      else if (spec.dtype == "i32")
        store(int32_t(v));
      else
        store(uint8_t(v));
    }
  }
  return true;
}

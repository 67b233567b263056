//===- DataFeed.cpp - Batches for a training step -------------------------===//
//
// Implements the synthetic and file-backed data feeds. The synthetic tasks
// are chosen so that a correct model and optimiser visibly learn them (the
// targets are a deterministic function of the inputs through a fixed random
// map), yet the map is re-derivable from the seed, which is how the tests
// check them. FileFeed loads whole data sets into memory at creation and
// checks everything there, so that fill() cannot fail on a valid index.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/DataFeed.h"
#include "ds/Runner/Random.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace ds::runner;
using llvm::ArrayRef;
using llvm::Expected;
using llvm::StringRef;

/// RandomStream ids; see the comment on SyntheticFeed.
static constexpr uint64_t kStructureStream = uint64_t(1) << 62;
static constexpr uint64_t kHeldOutStreamBit = uint64_t(1) << 63;
static constexpr uint64_t kBatchIndexMask = (uint64_t(1) << 62) - 1;

std::string ds::runner::formatInputSpec(const InputSpec &spec) {
  std::string s = spec.name + ": " + dtypeName(spec.dtype).str() + " " +
                  formatShape(spec.shape);
  if (isInteger(spec.dtype) && spec.range > 0)
    s += " in [0, " + std::to_string(spec.range) + ")";
  else if (isInteger(spec.dtype))
    s += " (value range unknown)";
  return s;
}

/// Largest value an integer dtype holds.
static int64_t maxValue(DType dtype) {
  switch (dtype) {
  case DType::I8:
    return 127;
  case DType::U8:
    return 255;
  case DType::Bool:
    return 1;
  case DType::I32:
    return std::numeric_limits<int32_t>::max();
  default:
    return std::numeric_limits<int64_t>::max();
  }
}

/// Makes `out` hold one tensor per spec with the spec's dtype and shape,
/// reusing buffers that already fit (every byte is overwritten by fill).
static void prepareOutputs(ArrayRef<InputSpec> specs,
                           std::vector<HostTensor> &out) {
  out.resize(specs.size());
  for (size_t k = 0; k < specs.size(); ++k)
    if (out[k].dtype != specs[k].dtype || out[k].shape != specs[k].shape)
      out[k] = HostTensor(specs[k].dtype, specs[k].shape);
}

//===----------------------------------------------------------------------===//
// DataFeed
//===----------------------------------------------------------------------===//

DataFeed::DataFeed(Kind kind, ArrayRef<InputSpec> specs)
    : specs(specs.begin(), specs.end()), kind(kind) {
  // Two integer inputs of one [B, T] shape: token sequences, counted per
  // token. Otherwise count samples along the leading dimension.
  const InputSpec *firstSeq = nullptr;
  for (const InputSpec &spec : specs) {
    if (!isInteger(spec.dtype) || spec.shape.size() != 2)
      continue;
    if (!firstSeq) {
      firstSeq = &spec;
    } else if (spec.shape == firstSeq->shape) {
      items = spec.shape[0] * spec.shape[1];
      unit = "tokens";
      return;
    }
  }
  for (const InputSpec &spec : specs)
    if (!spec.shape.empty()) {
      items = spec.shape[0];
      break;
    }
}

DataFeed::~DataFeed() = default;

llvm::Error DataFeed::next(std::vector<HostTensor> &out) {
  if (llvm::Error err = fill(nextBatch, /*heldOut=*/false, out))
    return err;
  ++nextBatch;
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// SyntheticFeed
//===----------------------------------------------------------------------===//

/// Decides which synthetic task fits `inputs`; on failure sets `why`.
static std::optional<SyntheticFeed::Task>
recogniseTask(ArrayRef<InputSpec> inputs, std::string &why) {
  using Task = SyntheticFeed::Task;
  std::vector<const InputSpec *> ints, floats;
  for (const InputSpec &spec : inputs)
    (isInteger(spec.dtype) ? ints : floats).push_back(&spec);
  for (const InputSpec &spec : inputs)
    if (spec.shape.empty() ||
        llvm::any_of(spec.shape, [](int64_t d) { return d <= 0; })) {
      why = "input '" + spec.name + "' has shape " + formatShape(spec.shape) +
            ", not [N, ...] with positive dimensions";
      return std::nullopt;
    }
  for (const InputSpec *spec : ints)
    if (spec->range <= 0) {
      why = "integer input '" + spec->name + "' has no known value range";
      return std::nullopt;
    } else if (spec->range - 1 > maxValue(spec->dtype)) {
      why = "integer input '" + spec->name + "' has range " +
            std::to_string(spec->range) + ", too large for " +
            dtypeName(spec->dtype).str();
      return std::nullopt;
    }

  if (floats.empty() && ints.size() >= 2) {
    const InputSpec &first = *ints.front();
    if (first.shape.size() != 2) {
      why = "integer inputs are not [B, T] token sequences";
      return std::nullopt;
    }
    for (const InputSpec *spec : ints)
      if (spec->shape != first.shape || spec->range != first.range) {
        why = "integer inputs differ in shape or range ('" + first.name +
              "' vs '" + spec->name + "')";
        return std::nullopt;
      }
    return Task::LanguageModel;
  }
  if (ints.size() == 1 && !floats.empty()) {
    const InputSpec &label = *ints.front();
    if (label.shape.size() != 1) {
      why = "the integer input '" + label.name + "' is not a label vector [N]";
      return std::nullopt;
    }
    for (const InputSpec *spec : floats)
      if (spec->shape.front() != label.shape.front()) {
        why =
            "float input '" + spec->name + "' does not have one row per label";
        return std::nullopt;
      }
    return Task::Classification;
  }
  if (ints.empty() && floats.size() == 2) {
    if (floats[0]->shape.front() != floats[1]->shape.front()) {
      why = "the two float inputs differ in their first dimension";
      return std::nullopt;
    }
    return Task::Regression;
  }
  why = "no synthetic task has " + std::to_string(ints.size()) +
        " integer and " + std::to_string(floats.size()) + " float inputs";
  return std::nullopt;
}

SyntheticFeed::SyntheticFeed(ArrayRef<InputSpec> specs, Task task,
                             uint64_t seed)
    : DataFeed(Kind::Synthetic, specs), kind(task), rngSeed(seed) {}

Expected<std::unique_ptr<DataFeed>>
SyntheticFeed::create(ArrayRef<InputSpec> inputs, uint64_t seed) {
  std::string why = "the training step has no batch inputs";
  std::optional<Task> task;
  if (!inputs.empty())
    task = recogniseTask(inputs, why);
  if (!task) {
    std::string msg = "cannot synthesise data: " + why + "; the inputs are:\n";
    for (const InputSpec &spec : inputs)
      msg += "  " + formatInputSpec(spec) + "\n";
    msg += "synthetic data covers language modelling (two or more integer "
           "[B, T] inputs with one vocabulary size), classification (one "
           "integer [N] label input with a known number of classes and "
           "float [N, ...] features) and regression (two float [N, ...] "
           "inputs); otherwise pass --data name=file.npy for every input";
    return llvm::createStringError(msg);
  }

  std::unique_ptr<SyntheticFeed> feed(new SyntheticFeed(inputs, *task, seed));
  RandomStream rng(seed, kStructureStream);
  switch (*task) {
  case Task::LanguageModel: {
    // Fisher-Yates shuffle of the identity.
    int64_t vocab = inputs.front().range;
    feed->perm.resize(vocab);
    for (int64_t i = 0; i < vocab; ++i)
      feed->perm[i] = i;
    for (int64_t i = vocab - 1; i > 0; --i)
      std::swap(feed->perm[i], feed->perm[rng.uniformInt(uint64_t(i) + 1)]);
    break;
  }
  case Task::Classification: {
    for (size_t k = 0; k < inputs.size(); ++k)
      if (isInteger(inputs[k].dtype))
        feed->labelInput = k;
    const InputSpec &x = inputs[feed->labelInput == 0 ? 1 : 0];
    int64_t features = numElements(x.shape) / x.shape.front();
    feed->w.resize(size_t(inputs[feed->labelInput].range * features));
    for (double &v : feed->w)
      v = rng.normal();
    break;
  }
  case Task::Regression: {
    int64_t in = numElements(inputs[0].shape) / inputs[0].shape.front();
    int64_t out = numElements(inputs[1].shape) / inputs[1].shape.front();
    double scale = 1 / std::sqrt(double(in));
    feed->w.resize(size_t(in * out));
    for (double &v : feed->w)
      v = rng.normal() * scale;
    break;
  }
  }
  return std::unique_ptr<DataFeed>(std::move(feed));
}

std::string SyntheticFeed::describe() const {
  std::string prefix =
      "synthetic data (seed " + std::to_string(rngSeed) + "): ";
  switch (kind) {
  case Task::LanguageModel:
    return prefix + "language modelling, '" + specs[0].name + "' -> '" +
           specs[1].name + "' follow a fixed random permutation of " +
           std::to_string(perm.size()) + " tokens, " +
           std::to_string(specs[0].shape[0]) + " sequences of " +
           std::to_string(specs[0].shape[1]);
  case Task::Classification: {
    const InputSpec &label = specs[labelInput];
    const InputSpec &x = specs[labelInput == 0 ? 1 : 0];
    if (imageTemplates())
      return prefix + "image classification, '" + x.name +
             "' = a fixed random template of its class in '" + label.name +
             "' (" + std::to_string(label.range) +
             " classes) plus N(0, 0.25) noise, " +
             std::to_string(label.shape[0]) + " samples per batch";
    return prefix + "classification, '" + label.name + "' (" +
           std::to_string(label.range) +
           " classes) = argmax of a fixed random linear map of '" + x.name +
           "' (" + std::to_string(w.size() / label.range) + " features), " +
           std::to_string(label.shape[0]) + " samples per batch";
  }
  case Task::Regression:
    return prefix + "regression, '" + specs[1].name +
           "' = a fixed random linear map of '" + specs[0].name + "' (" +
           std::to_string(numElements(specs[0].shape) / specs[0].shape[0]) +
           " -> " +
           std::to_string(numElements(specs[1].shape) / specs[1].shape[0]) +
           " features), " + std::to_string(specs[0].shape[0]) +
           " samples per batch";
  }
  llvm_unreachable("unknown task");
}

llvm::Error SyntheticFeed::fill(uint64_t batchIndex, bool heldOut,
                                std::vector<HostTensor> &out) {
  prepareOutputs(specs, out);
  uint64_t stream =
      (batchIndex & kBatchIndexMask) | (heldOut ? kHeldOutStreamBit : 0);
  RandomStream rng(seed(), stream);

  switch (kind) {
  case Task::LanguageModel: {
    // Input k of sample b holds s[k .. T + k) of the sample's sequence.
    int64_t batch = specs[0].shape[0], len = specs[0].shape[1];
    size_t ahead = specs.size() - 1;
    std::vector<int64_t> seq(size_t(len) + ahead);
    for (int64_t b = 0; b < batch; ++b) {
      seq[0] = int64_t(rng.uniformInt(perm.size()));
      for (size_t t = 1; t < seq.size(); ++t)
        seq[t] = perm[seq[t - 1]];
      for (size_t k = 0; k < specs.size(); ++k)
        for (int64_t t = 0; t < len; ++t)
          out[k].setInt(b * len + t, seq[t + k]);
    }
    break;
  }
  case Task::Classification: {
    if (imageTemplates()) {
      // Images: each sample is its class's fixed template plus noise, a task
      // whose structure convolution and pooling preserve (a random linear
      // map of raw pixels is not: shallow CNNs learn it very slowly).
      HostTensor &x = out[labelInput == 0 ? 1 : 0];
      HostTensor &labels = out[labelInput];
      int64_t rows = labels.shape[0], classes = specs[labelInput].range;
      int64_t features = x.numElements() / rows;
      for (int64_t n = 0; n < rows; ++n) {
        int64_t c = int64_t(rng.uniformInt(uint64_t(classes)));
        labels.setInt(n, c);
        for (int64_t f = 0; f < features; ++f)
          x.setDouble(n * features + f,
                      w[c * features + f] + 0.5 * rng.normal());
      }
      break;
    }
    // 1. Features, input by input, element by element.
    for (size_t k = 0; k < specs.size(); ++k)
      if (k != labelInput)
        for (int64_t i = 0, e = out[k].numElements(); i < e; ++i)
          out[k].setDouble(i, rng.normal());
    // 2. Labels from the features as stored (after rounding to the dtype).
    const HostTensor &x = out[labelInput == 0 ? 1 : 0];
    HostTensor &labels = out[labelInput];
    int64_t rows = labels.shape[0], classes = specs[labelInput].range;
    int64_t features = x.numElements() / rows;
    for (int64_t n = 0; n < rows; ++n) {
      int64_t best = 0;
      double bestLogit = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c) {
        double logit = 0;
        for (int64_t f = 0; f < features; ++f)
          logit += w[c * features + f] * x.getDouble(n * features + f);
        if (logit > bestLogit) {
          bestLogit = logit;
          best = c;
        }
      }
      labels.setInt(n, best);
    }
    break;
  }
  case Task::Regression: {
    HostTensor &x = out[0], &y = out[1];
    for (int64_t i = 0, e = x.numElements(); i < e; ++i)
      x.setDouble(i, rng.normal());
    int64_t rows = x.shape[0];
    int64_t in = x.numElements() / rows, outF = y.numElements() / rows;
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t j = 0; j < outF; ++j) {
        double acc = 0;
        for (int64_t f = 0; f < in; ++f)
          acc += x.getDouble(n * in + f) * w[f * outF + j];
        y.setDouble(n * outF + j, acc);
      }
    break;
  }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// FileFeed
//===----------------------------------------------------------------------===//

FileFeed::FileFeed(ArrayRef<InputSpec> specs) : DataFeed(Kind::File, specs) {}

/// Quotes and joins names: "'a', 'b'".
static std::string quoteList(ArrayRef<std::string> names) {
  std::string s;
  for (const std::string &name : names)
    s += (s.empty() ? "'" : ", '") + name + "'";
  return s;
}

/// "[S, 16]" for a per-step shape [B, 16].
static std::string dataSetShape(ArrayRef<int64_t> stepShape) {
  std::string rest = formatShape(stepShape.drop_front());
  return rest == "[]" ? "[S]" : "[S, " + rest.substr(1);
}

/// Reads and validates the files of one data set (training or evaluation)
/// into `data` and `paths`; returns the common number of samples.
static Expected<int64_t> loadDataSet(ArrayRef<InputSpec> specs,
                                     const llvm::StringMap<std::string> &files,
                                     bool eval, bool allowNonfinite,
                                     std::vector<HostTensor> &data,
                                     std::vector<std::string> &paths) {
  StringRef setName = eval ? "evaluation data file" : "data file";
  // 1. Exactly the inputs have files.
  std::vector<std::string> missing, unknown, names;
  for (const InputSpec &spec : specs) {
    names.push_back(spec.name);
    if (!files.count(spec.name))
      missing.push_back(spec.name);
  }
  for (const auto &entry : files)
    if (!llvm::is_contained(names, entry.getKey()))
      unknown.push_back(entry.getKey().str());
  llvm::sort(unknown);
  if (!missing.empty())
    return llvm::createStringError(
        "no " + setName + " for input" + (missing.size() > 1 ? "s " : " ") +
        quoteList(missing) +
        (eval ? "; give an evaluation data file for every input ("
              : "; pass --data name=file.npy for every input (") +
        quoteList(names) + ")");
  if (!unknown.empty())
    return llvm::createStringError(
        setName + " " + files.lookup(unknown.front()) +
        " given for unknown input '" + unknown.front() + "'; the inputs are " +
        quoteList(names));

  // 2. Each file: readable .npy of the input's dtype and sample shape.
  int64_t samples = -1;
  std::string firstPath;
  for (const InputSpec &spec : specs) {
    std::string path = files.lookup(spec.name);
    std::string what =
        setName.str() + " " + path + " for input '" + spec.name + "'";
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                    /*RequiresNullTerminator=*/false);
    if (!buffer)
      return llvm::createStringError(
          what + ": cannot read: " + buffer.getError().message());
    Expected<HostTensor> tensor =
        decodeNpy((*buffer)->getBuffer(), what, spec.dtype);
    if (!tensor)
      return tensor.takeError();
    ArrayRef<int64_t> want(spec.shape), got(tensor->shape);
    if (got.size() != want.size() || got.drop_front() != want.drop_front())
      return llvm::createStringError(
          what + ": expected shape " + dataSetShape(want) + " (" +
          dtypeName(spec.dtype) + ") with S >= " + llvm::Twine(want[0]) +
          " samples, got " + formatShape(got) + " (" +
          dtypeName(tensor->dtype) + ")");
    if (got[0] < want[0])
      return llvm::createStringError(what + ": holds " + llvm::Twine(got[0]) +
                                     " samples, fewer than the batch size " +
                                     llvm::Twine(want[0]));
    if (samples >= 0 && got[0] != samples)
      return llvm::createStringError(
          setName + "s hold different numbers of samples: " + firstPath +
          " has " + llvm::Twine(samples) + ", " + path + " has " +
          llvm::Twine(got[0]));
    if (samples < 0) {
      samples = got[0];
      firstPath = path;
    }

    // 3. Integer values within the input's range.
    if (isInteger(spec.dtype) && spec.range > 0) {
      int64_t rowSize = numElements(want.drop_front());
      for (int64_t i = 0, e = tensor->numElements(); i < e; ++i) {
        int64_t v = tensor->getInt(i);
        if (v >= 0 && v < spec.range)
          continue;
        // Report the multi-index [sample, rest...] of the bad element.
        std::vector<int64_t> index(got.size());
        int64_t rem = i % rowSize;
        index[0] = i / rowSize;
        for (size_t d = got.size(); d-- > 1;) {
          index[d] = rem % got[d];
          rem /= got[d];
        }
        return llvm::createStringError(what + ": value " + llvm::Twine(v) +
                                       " at index " + formatShape(index) +
                                       " is outside [0, " +
                                       llvm::Twine(spec.range) + ")");
      }
    }
    // 4. Float values finite: a NaN or inf sample poisons every step that
    //    draws it, silently.
    if (!isInteger(spec.dtype) && !allowNonfinite) {
      int64_t rowSize = std::max<int64_t>(numElements(want.drop_front()), 1);
      for (int64_t i = 0, e = tensor->numElements(); i < e; ++i) {
        double v = tensor->getDouble(i);
        if (std::isfinite(v))
          continue;
        return llvm::createStringError(
            what + ": row " + llvm::Twine(i / rowSize) + ", column " +
            llvm::Twine(i % rowSize) + " is " +
            (std::isnan(v) ? "nan"
             : v > 0       ? "inf"
                           : "-inf") +
            " (columns count the elements of a sample in row-major order); "
            "pass --allow-nonfinite-inputs to train on it anyway");
      }
    }
    data.push_back(std::move(*tensor));
    paths.push_back(std::move(path));
  }
  return samples;
}

Expected<std::unique_ptr<DataFeed>>
FileFeed::create(ArrayRef<InputSpec> inputs,
                 const llvm::StringMap<std::string> &files,
                 const std::optional<llvm::StringMap<std::string>> &evalFiles,
                 double heldOutFraction, bool allowNonfinite) {
  if (inputs.empty())
    return llvm::createStringError("the training step has no batch inputs");
  for (const InputSpec &spec : inputs) {
    if (spec.shape.empty() || spec.shape[0] <= 0)
      return llvm::createStringError(
          "input '" + spec.name + "' has shape " + formatShape(spec.shape) +
          "; a data file needs a positive leading batch dimension");
    if (spec.shape[0] != inputs[0].shape[0])
      return llvm::createStringError(
          "inputs '" + inputs[0].name + "' and '" + spec.name +
          "' have different batch sizes (" + llvm::Twine(inputs[0].shape[0]) +
          " vs " + llvm::Twine(spec.shape[0]) + ")");
  }

  std::unique_ptr<FileFeed> feed(new FileFeed(inputs));
  Expected<int64_t> samples =
      loadDataSet(inputs, files, /*eval=*/false, allowNonfinite,
                  feed->trainData, feed->trainPaths);
  if (!samples)
    return samples.takeError();
  feed->trainRows = {false, 0, *samples};

  int64_t batch = inputs[0].shape[0];
  if (evalFiles) {
    Expected<int64_t> evalSamples =
        loadDataSet(inputs, *evalFiles, /*eval=*/true, allowNonfinite,
                    feed->evalData, feed->evalPaths);
    if (!evalSamples)
      return evalSamples.takeError();
    feed->heldOutRows = {true, 0, *evalSamples};
  } else if (heldOutFraction > 0) {
    // Reserve the tail, at least one batch, if a training batch remains.
    int64_t reserve = std::max<int64_t>(
        batch, int64_t(std::ceil(double(*samples) * heldOutFraction)));
    if (*samples - reserve >= batch) {
      feed->trainRows.count = *samples - reserve;
      feed->heldOutRows = {false, *samples - reserve, reserve};
    }
  }
  return std::unique_ptr<DataFeed>(std::move(feed));
}

std::string FileFeed::describe() const {
  std::string s = "data from files (";
  for (size_t k = 0; k < specs.size(); ++k)
    s += (k ? ", " : "") + specs[k].name + " <- " + trainPaths[k];
  s += "): " + std::to_string(trainRows.count) + " training samples, ";
  if (!hasHeldOut())
    return s + "no held-out samples (too few to reserve a batch)";
  s += std::to_string(heldOutRows.count) + " held-out samples";
  return s + (heldOutRows.fromEvalFiles ? " from evaluation files"
                                        : " (the last rows)");
}

uint64_t FileFeed::batchesPerEpoch(bool heldOut) const {
  int64_t rows = numSamples(heldOut), batch = specs[0].shape[0];
  return uint64_t((rows + batch - 1) / batch);
}

llvm::Error FileFeed::fill(uint64_t batchIndex, bool heldOut,
                           std::vector<HostTensor> &out) {
  const Rows &rows = heldOut ? heldOutRows : trainRows;
  if (rows.count == 0)
    return llvm::createStringError(
        "no held-out data: the data set has " + llvm::Twine(trainRows.count) +
        " samples, too few to reserve a held-out batch; pass evaluation "
        "data files");
  const std::vector<HostTensor> &data =
      rows.fromEvalFiles ? evalData : trainData;
  prepareOutputs(specs, out);

  // First row of the batch: (batchIndex * B) mod count, without overflow.
  uint64_t batch = uint64_t(specs[0].shape[0]);
  uint64_t count = uint64_t(rows.count);
  uint64_t start = uint64_t((unsigned __int128)batchIndex * batch % count);
  for (size_t k = 0; k < specs.size(); ++k) {
    size_t rowBytes = out[k].sizeInBytes() / batch;
    for (uint64_t j = 0; j < batch; ++j) {
      uint64_t row = uint64_t(rows.begin) + (start + j) % count;
      std::memcpy(out[k].bytes.data() + j * rowBytes,
                  data[k].bytes.data() + row * rowBytes, rowBytes);
    }
  }
  return llvm::Error::success();
}

//===- DataFeed.h - Batches for a training step -----------------*- C++ -*-===//
//
// A DataFeed produces the batch inputs of a training step, one HostTensor
// per input in the step's input order. Every batch is a pure function of
// (configuration, batch index, held-out flag): the runner resumes a run by
// restoring a cursor, and training and evaluation batches never overlap.
//
// Two feeds exist. SyntheticFeed invents a task the model can actually
// learn, recognised from the input signature alone (language modelling,
// classification, regression), so that `ds-run` can show a loss falling on
// any compiled model without a data set. FileFeed serves data sets from
// .npy files, validating them against the inputs up front so that a bad
// file fails before the first step, not in the middle of a run.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_DATAFEED_H
#define DS_RUNNER_DATAFEED_H

#include "ds/Runner/Npy.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ds::runner {

/// One batch input of a training step.
struct InputSpec {
  std::string name;
  DType dtype = DType::F32;
  /// The per-step shape; the first dimension is the batch dimension.
  std::vector<int64_t> shape;
  /// For integer inputs: values lie in [0, range); 0 = unknown.
  int64_t range = 0;
};

/// "tokens: i64 [32, 64] in [0, 1000)" (the range only when known).
std::string formatInputSpec(const InputSpec &spec);

/// Source of training and held-out batches.
class DataFeed {
public:
  /// LLVM-style RTTI discriminator.
  enum class Kind { Synthetic, File };

  virtual ~DataFeed();

  Kind getKind() const { return kind; }
  llvm::ArrayRef<InputSpec> inputs() const { return specs; }

  /// One line for the terminal saying where the data comes from.
  virtual std::string describe() const = 0;

  /// Fills `out` with one tensor per input, in input order, for batch
  /// `batchIndex` of the training (`heldOut` false) or held-out stream. The
  /// result depends only on the feed's configuration and the arguments.
  virtual llvm::Error fill(uint64_t batchIndex, bool heldOut,
                           std::vector<HostTensor> &out) = 0;

  /// Whether held-out batches exist (a FileFeed on a data set too small to
  /// split has none).
  virtual bool hasHeldOut() const { return true; }

  /// Number of consecutive batches that together cover every sample of the
  /// training or held-out set once; 0 when the stream is unbounded.
  virtual uint64_t batchesPerEpoch(bool heldOut) const { return 0; }

  /// Units of work per batch for throughput reports: B*T "tokens" when the
  /// inputs look like language modelling, else B "samples".
  int64_t itemsPerBatch() const { return items; }
  llvm::StringRef itemUnit() const { return unit; }

  /// The next training batch to serve; saved in checkpoints.
  uint64_t cursor() const { return nextBatch; }
  void setCursor(uint64_t batchIndex) { nextBatch = batchIndex; }

  /// Fills training batch cursor() and advances the cursor.
  llvm::Error next(std::vector<HostTensor> &out);

protected:
  DataFeed(Kind kind, llvm::ArrayRef<InputSpec> specs);

  std::vector<InputSpec> specs;

private:
  Kind kind;
  int64_t items = 1;
  std::string unit = "samples";
  uint64_t nextBatch = 0;
};

/// Learnable synthetic data derived from a seed.
///
/// Streams of RandomStream(seed, id): the task's fixed structure uses id
/// 2^62, training batch i uses id i and held-out batch i uses 2^63 + i
/// (batch indices are taken modulo 2^62).
class SyntheticFeed : public DataFeed {
public:
  enum class Task { LanguageModel, Classification, Regression };

  /// Recognises the task from `inputs`:
  ///  - language modelling: two or more integer inputs, all of one rank-2
  ///    shape [B, T] and one range V > 0, and nothing else. A fixed random
  ///    permutation `next = perm[cur]` of [0, V) defines the sequences;
  ///    each sample starts at a random token s[0]; input k holds
  ///    s[k .. T + k) (input 0 the tokens, input 1 the targets, further
  ///    inputs targets further ahead). The loss floor is 0.
  ///  - classification: exactly one integer input [N] with range C > 0 and
  ///    float inputs [N, ...]: features ~ N(0, 1), label = argmax_c of
  ///    (W x)_c over the first float input flattened per sample, with a
  ///    fixed W ~ N(0, 1) of shape [C, F] (ties to the lowest class).
  ///  - regression: exactly two float inputs [N, ...] and no integer ones:
  ///    x ~ N(0, 1), y = x_flat W reshaped, with a fixed W [F_in, F_out]
  ///    ~ N(0, 1/F_in).
  /// Anything else is an error that lists the inputs.
  static llvm::Expected<std::unique_ptr<DataFeed>>
  create(llvm::ArrayRef<InputSpec> inputs, uint64_t seed);

  Task task() const { return kind; }
  uint64_t seed() const { return rngSeed; }
  /// Language modelling: the successor of each token.
  llvm::ArrayRef<int64_t> permutation() const { return perm; }
  /// Classification: W as [C, F] row-major; regression: W as [F_in, F_out].
  llvm::ArrayRef<double> weights() const { return w; }

  std::string describe() const override;
  llvm::Error fill(uint64_t batchIndex, bool heldOut,
                   std::vector<HostTensor> &out) override;

  static bool classof(const DataFeed *feed) {
    return feed->getKind() == DataFeed::Kind::Synthetic;
  }

  /// Whether classification uses class templates: a single feature input
  /// of rank 4 ([N, C, H, W] images) with two inputs in all.
  bool imageTemplates() const {
    return kind == Task::Classification && specs.size() == 2 &&
           specs[labelInput == 0 ? 1 : 0].shape.size() == 4;
  }

private:
  SyntheticFeed(llvm::ArrayRef<InputSpec> specs, Task task, uint64_t seed);

  Task kind;
  uint64_t rngSeed;
  std::vector<int64_t> perm;
  std::vector<double> w;
  /// Classification: the label input; the others are features.
  size_t labelInput = 0;
};

/// Data sets read from .npy files.
///
/// The file of an input with per-step shape [B, rest...] holds [S, rest...]
/// with S >= B and the input's dtype. Training batch i takes the B rows
/// starting at (i * B) mod S, wrapping around. Held-out batches come from
/// `evalFiles` when given; otherwise the last `heldOutFraction` of the rows
/// (at least one batch) are reserved for them and never used for training.
/// When the data set is too small for that (fewer than 2 * B rows), all rows
/// train and there are no held-out batches.
class FileFeed : public DataFeed {
public:
  /// Reads and validates every file: each input has a file (and no file
  /// names an unknown input), dtypes and shapes match, all files hold the
  /// same number of samples, integer values lie in [0, range) when the
  /// range is known, float values are finite unless `allowNonfinite`.
  /// Errors name the file, the input and what differs.
  static llvm::Expected<std::unique_ptr<DataFeed>>
  create(llvm::ArrayRef<InputSpec> inputs,
         const llvm::StringMap<std::string> &files,
         const std::optional<llvm::StringMap<std::string>> &evalFiles =
             std::nullopt,
         double heldOutFraction = 0.1, bool allowNonfinite = false);

  /// Rows available to the training or held-out stream.
  int64_t numSamples(bool heldOut) const {
    return heldOut ? heldOutRows.count : trainRows.count;
  }

  std::string describe() const override;
  llvm::Error fill(uint64_t batchIndex, bool heldOut,
                   std::vector<HostTensor> &out) override;
  bool hasHeldOut() const override { return heldOutRows.count > 0; }
  uint64_t batchesPerEpoch(bool heldOut) const override;

  static bool classof(const DataFeed *feed) {
    return feed->getKind() == DataFeed::Kind::File;
  }

private:
  /// A range of rows of trainData or (fromEvalFiles) evalData.
  struct Rows {
    bool fromEvalFiles = false;
    int64_t begin = 0;
    int64_t count = 0;
  };

  explicit FileFeed(llvm::ArrayRef<InputSpec> specs);

  std::vector<std::string> trainPaths, evalPaths;
  std::vector<HostTensor> trainData, evalData;
  Rows trainRows, heldOutRows;
};

} // namespace ds::runner

#endif // DS_RUNNER_DATAFEED_H

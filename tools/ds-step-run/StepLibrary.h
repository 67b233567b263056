//===- StepLibrary.h - An exported training step ---------------*- C++ -*-===//
//
// What ds-run --emit-step wrote (docs/AheadOfTime.md): step.json's
// description of the step's arguments and results, the shared library with
// the compiled step, and the initial state in init/.
//
//===----------------------------------------------------------------------===//

#ifndef DS_STEP_RUN_STEPLIBRARY_H
#define DS_STEP_RUN_STEPLIBRARY_H

#include "Tensor.h"

#include <string>
#include <vector>

namespace ds::steprun {

/// One argument or result of the step (step.json's "args" / "results").
struct TensorSpec {
  std::string role; ///< param/input/state; loss/update/grad/metric
  std::string name; ///< parameter/input name, state key, metric name
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t of = -1;   ///< update/grad: the argument index
  int64_t range = 0; ///< integer inputs: values in [0, range), 0 unknown
  /// Parameters and state: the initialiser (zeros, ones, constant, normal,
  /// uniform, file) and its value.
  std::string initKind;
  double initValue = 0;
  /// State each data-parallel rank keeps for itself (error feedback): a
  /// checkpoint of N ranks holds `name@rank<r>` for each.
  bool perRank = false;

  size_t bytes() const;
  Tensor zeros() const;
};

struct StepManifest {
  std::string dir; ///< the step directory
  std::string function, symbol, library, init, device, chip, module;
  /// The kernels were compiled to run on the host (ds-run
  /// --gpu-emulate-kernels): only the stub libcuda can run the step.
  bool emulatedKernels = false;
  /// The step averages its gradients over the ranks of the comm layer
  /// (ds-run --data-parallel): the runner starts it (dsrt_comm_init).
  bool dataParallel = false;
  std::vector<TensorSpec> args, results;

  /// Reads and checks `dir`/step.json.
  bool load(const std::string &dir, std::string &error);
  /// Index of the loss result.
  int lossIndex() const;
};

/// The step's shared library, loaded with dlopen (its module constructors
/// load a GPU step's kernels: open it after the device).
class StepLibrary {
public:
  ~StepLibrary();
  bool open(const StepManifest &manifest, std::string &error);
  /// Calls the step: `packed[i]` points at a pointer to the memref
  /// descriptor of argument i, then of each result (out-parameters).
  void call(void **packed) const { entry(packed); }
  /// dlclose: the module destructors unload a GPU step's kernels.
  void close();

private:
  void *handle = nullptr;
  void (*entry)(void **) = nullptr;
};

/// Reads the parameters and state of `manifest` from a ds-run checkpoint
/// directory (runner.json's manifest and one .npy per tensor) into `args`
/// (one tensor per argument; inputs are left empty). Rank `rank` of
/// `worldSize` takes its own copy of per-rank state from a checkpoint of as
/// many ranks; from one of another size only zeros (an initial state).
bool readCheckpoint(const std::string &dir, const StepManifest &manifest,
                    std::vector<Tensor> &args, std::string &error, int rank = 0,
                    int worldSize = 1);

/// Draws the parameters and state of `manifest` from their initialisers
/// with a generator of its own (std::mt19937_64 from `seed`; not ds-run's
/// Philox stream, so not ds-run's values): for benchmarks of steps whose
/// state is too large to carry. Fails for `file` initialisers.
bool randomState(const StepManifest &manifest, uint64_t seed,
                 std::vector<Tensor> &args, std::string &error);

} // namespace ds::steprun

#endif // DS_STEP_RUN_STEPLIBRARY_H

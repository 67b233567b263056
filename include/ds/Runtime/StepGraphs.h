//===- StepGraphs.h - A step's launches replayed as CUDA graphs -*- C++ -*-===//
//
// The runners' --cuda-graphs: a step whose host code enqueues hundreds of
// kernels runs as one graph launch. A graph replays fixed addresses, and
// the runners swap each update result's buffer with its argument's after
// every step, so a step sees two sets of buffers, alternating; each set
// (with the step variant) is a key with a graph of its own. A key is run
// directly the first time it is seen (what a step initialises on the side
// - cuBLASLt plans, lazily loaded kernels - happens outside any capture, as
// PyTorch's warm-up before torch.cuda.graph does), captured the second
// time and replayed from then on. Header only and free of LLVM, like
// DeviceTensors.h: ds-run's StepTensors and ds-step-run share it.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_STEPGRAPHS_H
#define DS_RUNTIME_STEPGRAPHS_H

#include "ds/Runtime/ds_runtime.h"
#include "ds/Runtime/ds_runtime_cuda.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace ds::runtime {

/// Why a step with collectives cannot run as CUDA graphs, as the runners
/// can tell before running it, or null: only NCCL's collectives can be
/// captured, and these stage every one through the host. `launched`: under
/// mpirun; `pipeline`: a pipeline's stage (whose transfers NCCL carries,
/// even in a world of one). The environment's DS_CUDA_COLLECTIVES counts.
inline const char *collectivesRefuseGraphs(bool deterministic, bool launched,
                                           bool pipeline) {
  const char *choice = std::getenv("DS_CUDA_COLLECTIVES");
  std::string collectives = choice && *choice ? choice : "auto";
  if (deterministic)
    return "--deterministic stages every collective through the host, to sum "
           "in rank order";
  if (collectives == "host")
    return "DS_CUDA_COLLECTIVES=host stages every collective through the host";
  if (!launched && !pipeline && collectives != "nccl")
    return "a world of one stages its collectives through the host (set "
           "DS_CUDA_COLLECTIVES=nccl to run them on NCCL)";
  return nullptr;
}

class StepGraphs {
public:
  /// What a step is called with: its variant and every buffer it reads or
  /// writes, in order.
  using Key = std::vector<const void *>;

  StepGraphs() = default;
  StepGraphs(const StepGraphs &) = delete;
  StepGraphs &operator=(const StepGraphs &) = delete;
  ~StepGraphs() { clear(); }

  /// Runs `enqueue` (which enqueues one step on the step stream and returns
  /// false with the runtime's error on failure) for `key`: directly, by
  /// capturing it, or by replaying the graph captured for `key`. False with
  /// the runtime's error.
  template <typename Enqueue> bool run(const Key &key, Enqueue &&enqueue) {
    Entry *entry = find(key);
    if (entry && entry->graph)
      return dsrt_cuda_graph_launch(entry->graph) == 0;
    if (!entry) {
      if (entries.size() == kMaxGraphs)
        evictOldest();
      entries.push_back({key, nullptr});
      return enqueue();
    }
    if (dsrt_cuda_graph_begin() != 0)
      return false;
    bool enqueued = enqueue();
    void *graph = dsrt_cuda_graph_end();
    if (!enqueued || !graph) {
      dsrt_cuda_graph_destroy(graph);
      return false;
    }
    entry->graph = graph;
    ++numCaptures;
    return dsrt_cuda_graph_launch(graph) == 0;
  }

  /// Graphs captured so far.
  size_t captures() const { return numCaptures; }

  /// Destroys every graph (waiting for the stream).
  void clear() {
    for (Entry &e : entries)
      dsrt_cuda_graph_destroy(e.graph);
    entries.clear();
  }

private:
  /// A step with more sets of buffers than this is re-captured from the
  /// oldest set on: 2 per variant are enough for the runners' swaps.
  static constexpr size_t kMaxGraphs = 8;

  struct Entry {
    Key key;
    void *graph; // null until captured
  };

  Entry *find(const Key &key) {
    for (Entry &e : entries)
      if (e.key == key)
        return &e;
    return nullptr;
  }

  void evictOldest() {
    dsrt_cuda_graph_destroy(entries.front().graph);
    entries.erase(entries.begin());
  }

  std::vector<Entry> entries;
  size_t numCaptures = 0;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_STEPGRAPHS_H

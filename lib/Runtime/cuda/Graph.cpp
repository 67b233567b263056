//===- Graph.cpp - CUDA graphs of the step stream -------------------------===//
//
// dsrt_cuda_graph_*: capture what a step enqueues on the step stream into a
// CUDA graph and replay it with one launch. While a capture is in progress
// the counters of dsrt_cuda_stats go to the graph's tally, which every
// launch adds to the process's counters, so "kernels per step" means the
// same with and without graphs. What another layer does on the host for
// the work it enqueued (CommNccl.cpp: the collectives' counts, their
// watchdog, the probes' count) is a LaunchHook of the capture, which every
// launch runs around the graph's.
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "Profile.h"

#include "ds/Runtime/ds_runtime_cuda.h"

#include <atomic>
#include <memory>
#include <vector>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

/// What one capture enqueued, as plain numbers.
struct Tally {
  uint64_t kernelLaunches = 0, gemms = 0, gemmFlops = 0, streamAllocations = 0,
           bytesToHost = 0, bytesToDevice = 0;
};

using Hooks = std::vector<std::pair<const void *, std::unique_ptr<LaunchHook>>>;

struct Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  Tally tally;
  Hooks hooks;
};

/// What a capture in progress gathers for its graph.
struct Capture {
  Counters counters;
  Hooks hooks;
};

/// The capture in progress, if any (one at a time: there is one stream).
std::atomic<Capture *> activeCapture{nullptr};

Tally snapshot(const Counters &c) {
  Tally t;
  t.kernelLaunches = c.kernelLaunches.load(std::memory_order_relaxed);
  t.gemms = c.gemms.load(std::memory_order_relaxed);
  t.gemmFlops = c.gemmFlops.load(std::memory_order_relaxed);
  t.streamAllocations = c.streamAllocations.load(std::memory_order_relaxed);
  t.bytesToHost = c.bytesToHost.load(std::memory_order_relaxed);
  t.bytesToDevice = c.bytesToDevice.load(std::memory_order_relaxed);
  return t;
}

/// Ends the capture in progress; the graph it made, if any, in `graph`,
/// and its hooks in `hooks`.
CUresult endCapture(CUgraph &graph, Hooks &hooks) {
  graph = nullptr;
  std::unique_ptr<Capture> capture(activeCapture.exchange(nullptr));
  if (capture)
    hooks = std::move(capture->hooks);
  return driver().cuStreamEndCapture(stepStream(), &graph);
}

} // namespace

Counters &dsrt::cuda::counters() {
  Capture *capture = activeCapture.load(std::memory_order_acquire);
  return capture ? capture->counters : processCounters();
}

LaunchHook *dsrt::cuda::captureHook(const void *owner,
                                    std::unique_ptr<LaunchHook> (*make)()) {
  Capture *capture = activeCapture.load(std::memory_order_acquire);
  if (!capture)
    return nullptr;
  for (auto &[key, hook] : capture->hooks)
    if (key == owner)
      return hook.get();
  capture->hooks.emplace_back(owner, make());
  return capture->hooks.back().second.get();
}

bool dsrt::cuda::capturing() {
  return activeCapture.load(std::memory_order_acquire) != nullptr;
}

Status dsrt::cuda::refuseWhileCapturing(const char *fn, const char *what) {
  if (!capturing())
    return Status::success();
  return DS_ERROR("%s: cannot %s while the step stream is being captured "
                  "into a CUDA graph; this step cannot run as a graph",
                  fn, what);
}

int dsrt_cuda_graph_begin(void) {
  if (ensureReady().failed())
    return -1;
  if (profiling()) {
    // A graph would record the profile's events as its own nodes.
    (void)DS_ERROR("dsrt_cuda_graph_begin: cannot capture a graph while "
                   "profiling (dsrt_cuda_profile_begin)");
    return -1;
  }
  if (capturing()) {
    (void)DS_ERROR("dsrt_cuda_graph_begin: a capture is already in progress");
    return -1;
  }
  if (DS_CU(cuStreamBeginCapture, stepStream(), CU_STREAM_CAPTURE_MODE_RELAXED)
          .failed())
    return -1;
  activeCapture.store(new Capture, std::memory_order_release);
  return 0;
}

void *dsrt_cuda_graph_end(void) {
  Capture *capture = activeCapture.load(std::memory_order_acquire);
  if (!capture) {
    (void)DS_ERROR("dsrt_cuda_graph_end: no capture is in progress");
    return nullptr;
  }
  for (auto &hook : capture->hooks)
    hook.second->beforeEnd();
  Tally tally = snapshot(capture->counters);
  CUgraph raw = nullptr;
  auto graph = std::make_unique<Graph>();
  CUresult ended = endCapture(raw, graph->hooks);
  graph->graph = raw;
  graph->tally = tally;
  // An error of a captured call means the graph misses that work: drop it.
  if (checkResult(ended, "cuStreamEndCapture", __FILE__, __LINE__).failed() ||
      dsrt_last_error() ||
      DS_CU(cuGraphInstantiateWithFlags, &graph->exec, raw, 0).failed()) {
    if (graph->graph)
      (void)DS_CU(cuGraphDestroy, graph->graph);
    return nullptr;
  }
  return graph.release();
}

int dsrt_cuda_graph_launch(void *handle) {
  if (!handle) {
    (void)DS_ERROR("dsrt_cuda_graph_launch: the graph is null");
    return -1;
  }
  if (ensureReady().failed() ||
      refuseWhileCapturing("dsrt_cuda_graph_launch", "launch a graph").failed())
    return -1;
  auto *graph = static_cast<Graph *>(handle);
  for (auto &hook : graph->hooks)
    hook.second->beforeLaunch();
  if (DS_CU(cuGraphLaunch, graph->exec, stepStream()).failed())
    return -1;
  for (auto &hook : graph->hooks)
    hook.second->afterLaunch();
  Counters &c = processCounters();
  const Tally &t = graph->tally;
  c.kernelLaunches.fetch_add(t.kernelLaunches, std::memory_order_relaxed);
  c.gemms.fetch_add(t.gemms, std::memory_order_relaxed);
  c.gemmFlops.fetch_add(t.gemmFlops, std::memory_order_relaxed);
  c.streamAllocations.fetch_add(t.streamAllocations, std::memory_order_relaxed);
  c.graphLaunches.fetch_add(1, std::memory_order_relaxed);
  c.graphKernels.fetch_add(t.kernelLaunches, std::memory_order_relaxed);
  c.bytesToHost.fetch_add(t.bytesToHost, std::memory_order_relaxed);
  c.bytesToDevice.fetch_add(t.bytesToDevice, std::memory_order_relaxed);
  return 0;
}

void dsrt_cuda_graph_destroy(void *handle) {
  if (!handle)
    return;
  std::unique_ptr<Graph> graph(static_cast<Graph *>(handle));
  // After dsrt_cuda_shutdown the context, and the graph with it, is gone.
  if (!dsrt_cuda_stream() || ensureReady().failed())
    return;
  // A replay may still be running.
  if (DS_CU(cuStreamSynchronize, stepStream()).failed())
    return;
  (void)DS_CU(cuGraphExecDestroy, graph->exec);
  (void)DS_CU(cuGraphDestroy, graph->graph);
}

void dsrt::cuda::abandonCapture() {
  if (!capturing())
    return;
  CUgraph graph = nullptr;
  Hooks hooks;
  if (endCapture(graph, hooks) == CUDA_SUCCESS && graph)
    (void)driver().cuGraphDestroy(graph);
}

//===- Stats.cpp - Counters for the runner's report -----------------------===//
//
// Totals over successful runtime GEMM and block-sparse calls. One mutex
// guards all counters so that a snapshot is consistent; it is taken once per
// call, a cost that disappears next to the product itself.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <mutex>

using namespace dsrt;

namespace {
std::mutex statsMutex;
dsrt_stats totals = {};
} // namespace

void dsrt::recordGemm(double flops, double seconds) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.gemm_calls += 1;
  totals.gemm_flops += flops;
  totals.gemm_seconds += seconds;
}

void dsrt::recordInt8Gemm(bool split) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.int8_gemm_calls += 1;
  totals.int8_split_calls += split ? 1 : 0;
}

void dsrt::recordSparse(double flops, double denseFlops, double seconds,
                        bool fallback) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals.sparse_calls += 1;
  totals.sparse_flops += flops;
  totals.sparse_dense_flops += denseFlops;
  totals.sparse_seconds += seconds;
  totals.sparse_fallback_calls += fallback ? 1 : 0;
}

void dsrt_get_stats(dsrt_stats *out) {
  if (!out)
    return;
  std::lock_guard<std::mutex> lock(statsMutex);
  *out = totals;
}

void dsrt_reset_stats(void) {
  std::lock_guard<std::mutex> lock(statsMutex);
  totals = dsrt_stats{};
}

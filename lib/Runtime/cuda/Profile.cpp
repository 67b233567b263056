//===- Profile.cpp - Device time of each kernel and GEMM ------------------===//
//
// The events of a profile are made as the first step needs them and reused
// by the next (a step of the 12-layer GPT makes about 1,500 pairs); the
// device times are read at the end, or when kMaxPending pairs wait, which
// then waits for the stream in the middle of a step (a profile only).
//
//===----------------------------------------------------------------------===//

#include "Profile.h"

#include "Context.h"

#include "ds/Runtime/ds_runtime_cuda.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

using namespace dsrt;
using namespace dsrt::cuda;

namespace {

constexpr size_t kMaxPending = size_t(1) << 15;

struct Pair {
  std::string name;
  CUevent start = nullptr, end = nullptr;
};

struct Total {
  uint64_t calls = 0;
  double ms = 0;
};

struct Profile {
  std::mutex mutex;
  std::atomic<bool> on{false};
  /// Event pairs; the first `used` are recorded and not read yet.
  std::vector<Pair> pairs;
  size_t used = 0;
  std::map<std::string, Total> totals;
  /// dsrt_cuda_profile_end's answer, valid until the next begin.
  std::vector<std::string> names;
  std::vector<dsrt_cuda_profile_entry> entries;
};

Profile &profile() {
  static auto *p = new Profile; // outlives static destructors
  return *p;
}

/// Adds the recorded pairs' times to the totals (waits for the last one).
Status collect(Profile &p) {
  if (p.used == 0)
    return Status::success();
  DS_RETURN_IF_ERROR(DS_CU(cuEventSynchronize, p.pairs[p.used - 1].end));
  for (size_t i = 0; i < p.used; ++i) {
    float ms = 0;
    DS_RETURN_IF_ERROR(
        DS_CU(cuEventElapsedTime, &ms, p.pairs[i].start, p.pairs[i].end));
    Total &t = p.totals[p.pairs[i].name];
    ++t.calls;
    t.ms += ms;
  }
  p.used = 0;
  return Status::success();
}

void destroyEvents(Profile &p) {
  for (Pair &pair : p.pairs)
    for (CUevent e : {pair.start, pair.end})
      if (e)
        (void)DS_CU(cuEventDestroy, e);
  p.pairs.clear();
  p.used = 0;
}

} // namespace

bool dsrt::cuda::profiling() {
  return profile().on.load(std::memory_order_relaxed);
}

ProfiledWork::ProfiledWork(const std::string &name) {
  if (!profiling())
    return;
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.used == kMaxPending && collect(p).failed())
    return;
  if (p.used == p.pairs.size()) {
    Pair pair;
    if (DS_CU(cuEventCreate, &pair.start, CU_EVENT_DEFAULT).failed())
      return;
    if (DS_CU(cuEventCreate, &pair.end, CU_EVENT_DEFAULT).failed()) {
      (void)DS_CU(cuEventDestroy, pair.start);
      return;
    }
    p.pairs.push_back(pair);
  }
  Pair &pair = p.pairs[p.used];
  if (DS_CU(cuEventRecord, pair.start, stepStream()).failed())
    return;
  pair.name = name;
  index = static_cast<long>(p.used++);
}

ProfiledWork::~ProfiledWork() {
  if (index < 0)
    return;
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  (void)DS_CU(cuEventRecord, p.pairs[size_t(index)].end, stepStream());
}

int dsrt_cuda_profile_begin(void) {
  if (ensureReady().failed() ||
      refuseWhileCapturing("dsrt_cuda_profile_begin", "profile").failed())
    return -1;
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.totals.clear();
  p.names.clear();
  p.entries.clear();
  p.used = 0;
  p.on = true;
  return 0;
}

int64_t dsrt_cuda_profile_end(const dsrt_cuda_profile_entry **entries) {
  Profile &p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (entries)
    *entries = nullptr;
  if (!p.on) {
    (void)DS_ERROR("dsrt_cuda_profile_end: no profile was begun");
    return -1;
  }
  p.on = false;
  Status read = ensureReady().failed() ? Status::failure() : collect(p);
  destroyEvents(p);
  if (read.failed())
    return -1;
  std::vector<std::pair<std::string, Total>> sorted(p.totals.begin(),
                                                    p.totals.end());
  std::sort(sorted.begin(), sorted.end(), [](auto &x, auto &y) {
    return x.second.ms != y.second.ms ? x.second.ms > y.second.ms
                                      : x.first < y.first;
  });
  p.names.clear();
  p.entries.clear();
  for (auto &[name, total] : sorted)
    p.names.push_back(name);
  for (size_t i = 0; i < sorted.size(); ++i)
    p.entries.push_back(dsrt_cuda_profile_entry{
        p.names[i].c_str(), sorted[i].second.calls, sorted[i].second.ms});
  if (entries)
    *entries = p.entries.data();
  return static_cast<int64_t>(p.entries.size());
}

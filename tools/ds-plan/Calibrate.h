//===- Calibrate.h - Measure this CPU as a planner device ------*- C++ -*-===//
//
// `ds-plan --calibrate`: the profile of this machine as one `custom` device
// of a cluster file, from the kernels the runtime really runs (its GEMMs
// and block-sparse products) and a memory copy, so that a plan for this
// CPU uses the rates ds-run reaches rather than datasheet peaks.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TOOLS_DS_PLAN_CALIBRATE_H
#define DS_TOOLS_DS_PLAN_CALIBRATE_H

#include "ds/Partition/Cluster.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace ds::plan {

/// Measures this machine; progress and the per-kernel results go to
/// `log`. The profile is named "cpu", kind "custom".
partition::DeviceProfile calibrateThisMachine(llvm::raw_ostream &log);

/// The cluster file (YAML, docs/PipelinePartitioning.md) holding `cpu` as
/// its one device, with comments on how each number was obtained.
std::string clusterFileFor(const partition::DeviceProfile &cpu);

} // namespace ds::plan

#endif // DS_TOOLS_DS_PLAN_CALIBRATE_H

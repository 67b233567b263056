//===- Cluster.h - Device profiles and cluster files -----------*- C++ -*-===//
//
// What the pipeline planner knows about hardware: per device, the seed's
// resource profile (FLOP/s per precision, sparse speed-up, memory size and
// bandwidth, link bandwidth and latency, position in the topology). A
// cluster is a list of devices read from a YAML or JSON file (see
// docs/PipelinePartitioning.md), built from built-in profiles (H100, H200,
// A100, V100, MI210, Grace) or from `--calibrate` measurements of this CPU.
// Pure C++ over LLVMSupport: no MLIR here.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PARTITION_CLUSTER_H
#define DS_PARTITION_CLUSTER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <string>
#include <vector>

namespace ds::partition {

/// The arithmetic a GEMM or an elementwise op runs in. F16 runs at the BF16
/// rate; F64 is the CPU tests' precision.
enum class Precision : unsigned { F64, F32, BF16, FP8, INT8 };
constexpr unsigned kNumPrecisions = 5;
llvm::StringRef stringifyPrecision(Precision p);

using PerPrecision = std::array<double, kNumPrecisions>;

struct DeviceProfile {
  /// Unique within a cluster ("h100.3"); `kind` is the profile it came from
  /// ("h100", "cpu", or "custom").
  std::string name, kind;
  /// Dense FLOP/s per precision; 0 = not supported natively (the cost model
  /// then uses the next wider precision the device has).
  PerPrecision flops{};
  /// Speed-up of the device's block-sparse kernels per executed FLOP
  /// relative to its dense rate at the same precision (1 = none).
  double sparseSpeedup = 1;
  double memoryBytes = 0;     ///< device memory, bytes
  double memoryBandwidth = 0; ///< bytes/s
  double linkBandwidth = 0;   ///< bytes/s to devices of the same node
  double linkLatency = 0;     ///< seconds, same node
  /// Topology position: devices with the same node talk over `link*`,
  /// others over the cluster's interconnect.
  unsigned node = 0;
  /// Where it was defined (1-based line in the cluster file; 0 = built in).
  unsigned line = 0;
};

struct Cluster {
  std::vector<DeviceProfile> devices;
  double interconnectBandwidth = 25e9; ///< bytes/s between nodes
  double interconnectLatency = 5e-6;   ///< seconds between nodes
  /// Bandwidth and latency of the path between devices `a` and `b`.
  double bandwidth(unsigned a, unsigned b) const;
  double latency(unsigned a, unsigned b) const;
  /// Seconds to send `bytes` from device `a` to device `b`.
  double transferTime(unsigned a, unsigned b, double bytes) const;
};

/// Parses a cluster file (YAML; JSON is accepted, it is YAML). Errors are
/// "<bufferName>:<line>:<col>: <what>": unknown fields and device kinds,
/// non-positive numbers, missing memory.
llvm::Expected<Cluster> parseCluster(llvm::StringRef text,
                                     llvm::StringRef bufferName);
llvm::Expected<Cluster> readClusterFile(llvm::StringRef path);

/// The built-in profiles ("h100", "h200", "a100", "v100", "mi210",
/// "grace"), each number from the public source cited in
/// docs/PipelinePartitioning.md. builtinProfile() also finds the kinds
/// given to registerProfile() (those first); null for an unknown kind.
/// builtinProfiles() lists the built-in ones only.
const DeviceProfile *builtinProfile(llvm::StringRef kind);
llvm::ArrayRef<DeviceProfile> builtinProfiles();

/// Makes `profile` (e.g. this CPU's `--calibrate` measurements, kind
/// "cpu") known to cluster files and builtinProfile() under its `kind`,
/// replacing an earlier registration of that kind; a registered kind
/// shadows a built-in one. Not thread-safe: call it before parsing.
void registerProfile(DeviceProfile profile);

/// `count` copies of `profile` on one node, named "<kind>.<i>".
Cluster homogeneousCluster(const DeviceProfile &profile, unsigned count);

} // namespace ds::partition

#endif // DS_PARTITION_CLUSTER_H

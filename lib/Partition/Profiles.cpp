//===- Profiles.cpp - Built-in device profiles ----------------------------===//
//
// The vendor peak figures of the built-in devices and the registry of
// measured ones (registerProfile). Every number is cited, with its
// document, in docs/PipelinePartitioning.md ("Cluster files and device
// profiles"); change both together.
//
// Conventions: dense peaks (the "with sparsity" 2:4 figures are twice these
// and do not apply to our 8x8 block sparsity, so sparseSpeedup stays 1),
// SXM boards, decimal units as the datasheets print them (80 GB = 80e9
// bytes). F64 and F32 take the matrix (tensor core) rate where one exists
// for that precision without changing its numerics (no TF32 for F32).
//
//===----------------------------------------------------------------------===//

#include "PartitionInternal.h"

#include <deque>

using namespace ds::partition;

namespace {
constexpr double kTera = 1e12, kGiga = 1e9;

DeviceProfile makeProfile(llvm::StringRef kind, PerPrecision flops,
                          double memory, double memoryBandwidth,
                          double linkBandwidth, double linkLatency) {
  DeviceProfile p;
  p.name = kind.str();
  p.kind = kind.str();
  p.flops = flops;
  p.memoryBytes = memory;
  p.memoryBandwidth = memoryBandwidth;
  p.linkBandwidth = linkBandwidth;
  p.linkLatency = linkLatency;
  return p;
}
} // namespace

llvm::ArrayRef<DeviceProfile> ds::partition::builtinProfiles() {
  // Order: F64, F32, BF16, FP8, INT8 (FLOP/s or OP/s). Link latencies are
  // assumptions (a few microseconds per message), not datasheet figures.
  static const std::vector<DeviceProfile> profiles = {
      // NVIDIA H100 SXM5: FP64 TC 67, FP32 67, BF16 989.5, FP8 1979,
      // INT8 1979 TOPS; 80 GB HBM3 at 3.35 TB/s; NVLink 900 GB/s.
      makeProfile(
          "h100",
          {67 * kTera, 67 * kTera, 989.5 * kTera, 1979 * kTera, 1979 * kTera},
          80 * kGiga, 3350 * kGiga, 900 * kGiga, 3e-6),
      // NVIDIA H200 SXM: the H100's compute; 141 GB HBM3e at 4.8 TB/s.
      makeProfile(
          "h200",
          {67 * kTera, 67 * kTera, 989.5 * kTera, 1979 * kTera, 1979 * kTera},
          141 * kGiga, 4800 * kGiga, 900 * kGiga, 3e-6),
      // NVIDIA A100 SXM 80GB: FP64 TC 19.5, FP32 19.5, BF16 312, no FP8,
      // INT8 624 TOPS; 80 GB HBM2e at 2039 GB/s; NVLink 600 GB/s.
      makeProfile("a100",
                  {19.5 * kTera, 19.5 * kTera, 312 * kTera, 0, 624 * kTera},
                  80 * kGiga, 2039 * kGiga, 600 * kGiga, 3e-6),
      // NVIDIA V100 SXM2 32GB: FP64 7.8, FP32 15.7, FP16 tensor 125 (our
      // BF16 rate: F16 runs there), no BF16/FP8/INT8 tensor cores; 32 GB
      // HBM2 at 900 GB/s; NVLink 300 GB/s.
      makeProfile("v100", {7.8 * kTera, 15.7 * kTera, 125 * kTera, 0, 0},
                  32 * kGiga, 900 * kGiga, 300 * kGiga, 3e-6),
      // AMD Instinct MI210: FP64 matrix 45.3, FP32 matrix 45.3, BF16 181,
      // no FP8, INT8 181 TOPS; 64 GB HBM2e at 1.6 TB/s; three Infinity
      // Fabric links of 100 GB/s, 300 GB/s together.
      makeProfile("mi210",
                  {45.3 * kTera, 45.3 * kTera, 181 * kTera, 0, 181 * kTera},
                  64 * kGiga, 1600 * kGiga, 300 * kGiga, 3e-6),
      // NVIDIA Grace CPU (one of the Grace CPU Superchip's two): 72 Neoverse
      // V2 cores, FP64 3.55 (half the superchip's 7.1), FP32 twice that
      // (same SIMD width, twice the lanes: derived, not a datasheet figure),
      // no BF16/FP8/INT8 figure published; 480 GB LPDDR5X at 500 GB/s
      // (half the superchip's 960 GB and 1 TB/s); NVLink-C2C 900 GB/s.
      makeProfile("grace", {3.55 * kTera, 7.1 * kTera, 0, 0, 0}, 480 * kGiga,
                  500 * kGiga, 900 * kGiga, 1e-6),
  };
  return profiles;
}

/// Profiles given to registerProfile(); a deque keeps the pointers
/// builtinProfile() returned valid as more are added.
static std::deque<DeviceProfile> &registeredProfiles() {
  static std::deque<DeviceProfile> registered;
  return registered;
}

void ds::partition::registerProfile(DeviceProfile profile) {
  assert(!profile.kind.empty() && profile.kind != "custom" &&
         "a registered profile needs a kind other than 'custom'");
  profile.line = 0;
  for (DeviceProfile &p : registeredProfiles()) {
    if (p.kind == profile.kind) {
      p = std::move(profile);
      return;
    }
  }
  registeredProfiles().push_back(std::move(profile));
}

const DeviceProfile *ds::partition::builtinProfile(llvm::StringRef kind) {
  for (const DeviceProfile &p : registeredProfiles())
    if (p.kind == kind)
      return &p;
  for (const DeviceProfile &p : builtinProfiles())
    if (p.kind == kind)
      return &p;
  return nullptr;
}

std::string ds::partition::detail::knownKinds() {
  std::string kinds;
  for (const DeviceProfile &p : builtinProfiles())
    kinds += p.kind + ", ";
  kinds += "custom";
  if (!registeredProfiles().empty()) {
    kinds += "; registered:";
    for (const DeviceProfile &p : registeredProfiles())
      kinds += " " + p.kind;
  }
  return kinds;
}

//===- ClusterTest.cpp - Cluster files and device profiles ----------------===//

#include "ds/Partition/Cluster.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace ds::partition;

namespace {

constexpr unsigned kBF16 = unsigned(Precision::BF16);
constexpr unsigned kFP8 = unsigned(Precision::FP8);
constexpr unsigned kF32 = unsigned(Precision::F32);

/// The error of parsing `text` as "c.yaml" (empty when it parses).
std::string parseError(llvm::StringRef text) {
  llvm::Expected<Cluster> cluster = parseCluster(text, "c.yaml");
  if (cluster)
    return "";
  return llvm::toString(cluster.takeError());
}

const char *const kSeedCluster = R"(
interconnect: {bandwidth: 25e9, latency: 5e-6}   # between nodes
devices:
  - kind: h100
    count: 8
    node: 0
  - kind: v100
    count: 4
    node: 1
  - kind: custom
    name: myaccel
    flops: {f64: 1e12, f32: 2e12, bf16: 8e12, fp8: 0, int8: 16e12}
    sparse_speedup: 1.5
    memory: 16e9
    memory_bandwidth: 900e9
    link_bandwidth: 64e9
    link_latency: 2e-6
)";

TEST(ClusterTest, ParsesTheSeedCluster) {
  llvm::Expected<Cluster> cluster = parseCluster(kSeedCluster, "seed.yaml");
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  ASSERT_EQ(cluster->devices.size(), 13u);
  EXPECT_EQ(cluster->interconnectBandwidth, 25e9);
  EXPECT_EQ(cluster->interconnectLatency, 5e-6);
  for (unsigned i = 0; i < 8; ++i) {
    EXPECT_EQ(cluster->devices[i].name, "h100." + std::to_string(i));
    EXPECT_EQ(cluster->devices[i].kind, "h100");
    EXPECT_EQ(cluster->devices[i].node, 0u);
    EXPECT_EQ(cluster->devices[i].line, 4u);
  }
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(cluster->devices[8 + i].name, "v100." + std::to_string(i));
    EXPECT_EQ(cluster->devices[8 + i].node, 1u);
  }
  const DeviceProfile &custom = cluster->devices[12];
  EXPECT_EQ(custom.name, "myaccel");
  EXPECT_EQ(custom.kind, "custom");
  EXPECT_EQ(custom.flops, (PerPrecision{1e12, 2e12, 8e12, 0, 16e12}));
  EXPECT_EQ(custom.sparseSpeedup, 1.5);
  EXPECT_EQ(custom.memoryBytes, 16e9);
  EXPECT_EQ(custom.memoryBandwidth, 900e9);
  EXPECT_EQ(custom.linkBandwidth, 64e9);
  EXPECT_EQ(custom.linkLatency, 2e-6);
  EXPECT_EQ(custom.line, 10u);

  // Same node: the slower link; across nodes: the interconnect.
  EXPECT_EQ(cluster->bandwidth(0, 1), 900e9);
  EXPECT_EQ(cluster->bandwidth(0, 8), 25e9);
  EXPECT_EQ(cluster->latency(0, 8), 5e-6);
  EXPECT_EQ(cluster->bandwidth(0, 12), 64e9);
  EXPECT_EQ(cluster->latency(0, 12), 3e-6);
  EXPECT_DOUBLE_EQ(cluster->transferTime(0, 8, 25e6), 5e-6 + 1e-3);
  EXPECT_EQ(cluster->transferTime(3, 3, 1e9), 0);
  EXPECT_EQ(cluster->transferTime(0, 1, 0), 0);
}

TEST(ClusterTest, ReadsJson) {
  llvm::Expected<Cluster> cluster = parseCluster(
      R"({"interconnect": {"bandwidth": 1e10},
          "devices": [{"kind": "a100", "count": 2},
                      {"kind": "mi210", "node": 1}]})",
      "c.json");
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  ASSERT_EQ(cluster->devices.size(), 3u);
  EXPECT_EQ(cluster->devices[1].name, "a100.1");
  EXPECT_EQ(cluster->devices[2].name, "mi210.0");
  EXPECT_EQ(cluster->interconnectBandwidth, 1e10);
  EXPECT_EQ(cluster->interconnectLatency, 5e-6); // the default
}

TEST(ClusterTest, BuiltinKindWithOverrides) {
  llvm::Expected<Cluster> cluster = parseCluster(R"(devices:
  - kind: h100
    memory: 40e9
    flops: {fp8: 0, bf16: 5e14}
)",
                                                 "c.yaml");
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  const DeviceProfile &d = cluster->devices[0];
  const DeviceProfile &h100 = *builtinProfile("h100");
  EXPECT_EQ(d.memoryBytes, 40e9);
  EXPECT_EQ(d.flops[kFP8], 0);
  EXPECT_EQ(d.flops[kBF16], 5e14);
  // What was not given comes from the profile.
  EXPECT_EQ(d.flops[kF32], h100.flops[kF32]);
  EXPECT_EQ(d.memoryBandwidth, h100.memoryBandwidth);
  EXPECT_EQ(d.linkBandwidth, h100.linkBandwidth);
}

TEST(ClusterTest, CountExpansionAndNames) {
  llvm::Expected<Cluster> cluster = parseCluster(R"(devices:
  - {kind: h100, count: 2}
  - {kind: v100}
  - {kind: h100}
  - {kind: a100, name: big, count: 2}
  - {kind: a100, name: solo}
  - {kind: custom, memory: 1e9, flops: {f32: 1e9}, count: 2}
)",
                                                 "c.yaml");
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  std::vector<std::string> names;
  for (const DeviceProfile &d : cluster->devices)
    names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"h100.0", "h100.1", "v100.0",
                                             "h100.2", "big.0", "big.1", "solo",
                                             "custom.0", "custom.1"}));
}

TEST(ClusterTest, ErrorsAreLocated) {
  EXPECT_EQ(parseError("devices:\n  - kind: h100\n    colour: red\n"),
            "c.yaml:3:5: unknown field 'colour' in device (expected one of: "
            "kind, name, count, node, flops, sparse_speedup, memory, "
            "memory_bandwidth, link_bandwidth, link_latency)");
  EXPECT_EQ(parseError("devices:\n  - kind: tpu\n"),
            "c.yaml:2:11: unknown device kind 'tpu' (built in: h100, h200, "
            "a100, v100, mi210, grace, custom)");
  EXPECT_EQ(parseError("devices:\n  - kind: h100\n    memory: -8e9\n"),
            "c.yaml:3:13: 'memory' must be a positive number, got '-8e9'");
  EXPECT_EQ(parseError("devices:\n  - kind: custom\n    name: x\n"
                       "    flops: {f32: 1e12}\n"),
            "c.yaml:2:5: device 'x' has no 'memory' (bytes)");
  EXPECT_EQ(parseError("devices:\n  - kind: custom\n    memory: 1e9\n"),
            "c.yaml:2:5: 'custom' device has no nonzero 'flops' (FLOP/s per "
            "precision: f64, f32, bf16, fp8, int8)");
  EXPECT_EQ(parseError("devices:\n  - kind: h100\n    flops: {bf16: -1}\n"),
            "c.yaml:3:19: 'bf16' must be a non-negative number, got '-1'");
  EXPECT_EQ(parseError("devices:\n  - kind: h100\n    count: 0\n"),
            "c.yaml:3:12: 'count' must be a positive integer, got '0'");
  EXPECT_EQ(parseError("devices: []\n"), "c.yaml:1:1: cluster has no devices");
  EXPECT_EQ(parseError("interconnect: {bandwidth: 1e9}\n"),
            "c.yaml:1:1: cluster has no 'devices'");
  EXPECT_EQ(parseError("devices:\n  - {kind: h100, name: a}\n"
                       "  - {kind: v100, name: a}\n"),
            "c.yaml:3:6: duplicate device name 'a' (first defined on line 2)");
  EXPECT_EQ(parseError("devices:\n  - {kind: h100, kind: v100}\n"),
            "c.yaml:2:18: duplicate field 'kind'");
  EXPECT_EQ(parseError("devices:\n  - {count: 2}\n"),
            "c.yaml:2:6: device has no 'kind' (one of: h100, h200, a100, "
            "v100, mi210, grace, custom)");
  // YAML syntax errors come from the scanner, located the same way.
  EXPECT_EQ(parseError("devices: [\n").rfind("c.yaml:1:11: ", 0), 0u)
      << parseError("devices: [\n");
}

TEST(ClusterTest, ReadClusterFile) {
  llvm::Expected<Cluster> missing = readClusterFile("/nonexistent/c.yaml");
  ASSERT_FALSE(bool(missing));
  std::string message = llvm::toString(missing.takeError());
  EXPECT_NE(message.find("cannot read cluster file '/nonexistent/c.yaml'"),
            std::string::npos)
      << message;

  llvm::SmallString<128> path;
  int fd;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("cluster", "yaml", fd, path));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << "devices:\n  - kind: grace\n    colour: 1\n";
  }
  llvm::Expected<Cluster> bad = readClusterFile(path);
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()).rfind((path + ":3:5: ").str(), 0),
            0u);
  llvm::sys::fs::remove(path);
}

TEST(ClusterTest, BuiltinProfiles) {
  std::vector<std::string> kinds;
  for (const DeviceProfile &p : builtinProfiles()) {
    kinds.push_back(p.kind);
    EXPECT_EQ(builtinProfile(p.kind), &p);
    EXPECT_GT(p.memoryBytes, 0) << p.kind;
    EXPECT_GT(p.memoryBandwidth, 0) << p.kind;
    EXPECT_GT(p.linkBandwidth, 0) << p.kind;
    // Dense figures: our block sparsity is not NVIDIA's 2:4.
    EXPECT_EQ(p.sparseSpeedup, 1) << p.kind;
    EXPECT_GT(p.flops[unsigned(Precision::F64)], 0) << p.kind;
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"h100", "h200", "a100", "v100",
                                             "mi210", "grace"}));
  EXPECT_EQ(builtinProfile("custom"), nullptr);
  EXPECT_EQ(builtinProfile("tpu"), nullptr);
  EXPECT_EQ(builtinProfile("v100")->flops[kBF16], 125e12);
  EXPECT_EQ(builtinProfile("v100")->flops[kFP8], 0);
}

TEST(ClusterTest, RegisteredCpuProfile) {
  // Unknown until registered (this test registers it last thing it does
  // before parsing; no other test uses "cpu").
  EXPECT_NE(
      parseError("devices: [{kind: cpu}]\n").find("unknown device kind 'cpu'"),
      std::string::npos);
  DeviceProfile cpu;
  cpu.kind = "cpu";
  cpu.name = "cpu";
  cpu.flops = {1e11, 2e11, 0, 0, 0};
  cpu.memoryBytes = 64e9;
  cpu.memoryBandwidth = 50e9;
  registerProfile(cpu);
  cpu.memoryBytes = 32e9; // re-registering replaces
  registerProfile(cpu);
  llvm::Expected<Cluster> cluster =
      parseCluster("devices: [{kind: cpu, count: 2}]\n", "c.yaml");
  ASSERT_TRUE(bool(cluster)) << llvm::toString(cluster.takeError());
  EXPECT_EQ(cluster->devices[1].name, "cpu.1");
  EXPECT_EQ(cluster->devices[1].memoryBytes, 32e9);
  EXPECT_NE(parseError("devices: [{kind: tpu}]\n").find("registered: cpu"),
            std::string::npos);
}

TEST(ClusterTest, HomogeneousCluster) {
  Cluster cluster = homogeneousCluster(*builtinProfile("a100"), 3);
  ASSERT_EQ(cluster.devices.size(), 3u);
  EXPECT_EQ(cluster.devices[2].name, "a100.2");
  EXPECT_EQ(cluster.bandwidth(0, 2), 600e9);
}

} // namespace

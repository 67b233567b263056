//===- Cluster.cpp - Cluster files and the paths between devices ----------===//
//
// Reads cluster files with LLVM's YAML parser (JSON is YAML, so one parser
// serves both) rather than the YAMLTraits mapping: every node keeps its
// position, so each error names the line and column of what is wrong.
// The format is documented in docs/PipelinePartitioning.md.
//
//===----------------------------------------------------------------------===//

#include "PartitionInternal.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace ds::partition;
using llvm::SMLoc;
using llvm::StringRef;
using llvm::Twine;
namespace yaml = llvm::yaml;

llvm::StringRef ds::partition::stringifyPrecision(Precision p) {
  switch (p) {
  case Precision::F64:
    return "f64";
  case Precision::F32:
    return "f32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP8:
    return "fp8";
  case Precision::INT8:
    return "int8";
  }
  llvm_unreachable("unknown precision");
}

//===----------------------------------------------------------------------===//
// Paths between devices
//===----------------------------------------------------------------------===//

double Cluster::bandwidth(unsigned a, unsigned b) const {
  if (a == b)
    return std::numeric_limits<double>::infinity();
  const DeviceProfile &da = devices[a], &db = devices[b];
  // A device without a link figure (a custom one) talks over the
  // interconnect even inside its node.
  if (da.node != db.node || da.linkBandwidth <= 0 || db.linkBandwidth <= 0)
    return interconnectBandwidth;
  return std::min(da.linkBandwidth, db.linkBandwidth);
}

double Cluster::latency(unsigned a, unsigned b) const {
  if (a == b)
    return 0;
  const DeviceProfile &da = devices[a], &db = devices[b];
  if (da.node != db.node || da.linkBandwidth <= 0 || db.linkBandwidth <= 0)
    return interconnectLatency;
  return std::max(da.linkLatency, db.linkLatency);
}

double Cluster::transferTime(unsigned a, unsigned b, double bytes) const {
  if (a == b || bytes <= 0)
    return 0;
  return latency(a, b) + bytes / bandwidth(a, b);
}

Cluster ds::partition::homogeneousCluster(const DeviceProfile &profile,
                                          unsigned count) {
  Cluster cluster;
  for (unsigned i = 0; i < count; ++i) {
    DeviceProfile device = profile;
    device.name = profile.kind + "." + std::to_string(i);
    device.node = 0;
    cluster.devices.push_back(std::move(device));
  }
  return cluster;
}

//===----------------------------------------------------------------------===//
// Cluster files
//===----------------------------------------------------------------------===//

namespace {
constexpr StringRef kPrecisionKeys[kNumPrecisions] = {"f64", "f32", "bf16",
                                                      "fp8", "int8"};

/// One `devices:` entry as written, before the profile is applied.
struct DeviceEntry {
  SMLoc loc, kindLoc;
  unsigned line = 0;
  std::optional<std::string> kind, name;
  unsigned count = 1, node = 0;
  std::array<std::optional<double>, kNumPrecisions> flops;
  std::optional<double> sparseSpeedup, memory, memoryBandwidth, linkBandwidth,
      linkLatency;
};

class ClusterParser {
public:
  ClusterParser(llvm::SourceMgr &sm, StringRef bufferName)
      : sm(sm), bufferName(bufferName) {}

  llvm::Expected<Cluster> parse(yaml::Node *root);

private:
  llvm::Error error(SMLoc loc, const Twine &message) {
    auto [line, col] = sm.getLineAndColumn(loc);
    return llvm::createStringError(
        llvm::formatv("{0}:{1}:{2}: {3}", bufferName, line, col, message.str())
            .str());
  }
  llvm::Error error(yaml::Node *node, const Twine &message) {
    return error(node->getSourceRange().Start, message);
  }

  /// Checks each key of `map` against `allowed` (and for duplicates), then
  /// hands it to `fn` (key, key node, value node).
  llvm::Error forEachField(
      yaml::Node *node, StringRef what, llvm::ArrayRef<StringRef> allowed,
      llvm::function_ref<llvm::Error(StringRef, yaml::Node *, yaml::Node *)>
          fn);
  llvm::Expected<std::string> scalar(yaml::Node *node, StringRef field);
  /// A finite number; > 0, or >= 0 when `allowZero`.
  llvm::Expected<double> number(yaml::Node *node, StringRef field,
                                bool allowZero);
  llvm::Expected<unsigned> integer(yaml::Node *node, StringRef field,
                                   bool allowZero);

  llvm::Error parseInterconnect(yaml::Node *node, Cluster &cluster);
  llvm::Expected<DeviceEntry> parseDevice(yaml::Node *node);
  /// Applies `entry` to its profile and appends its `count` devices.
  llvm::Error addDevices(const DeviceEntry &entry, Cluster &cluster);

  llvm::SourceMgr &sm;
  StringRef bufferName;
  llvm::StringMap<unsigned> perKindCount;
  llvm::StringMap<unsigned> nameLines;
};
} // namespace

llvm::Error ClusterParser::forEachField(
    yaml::Node *node, StringRef what, llvm::ArrayRef<StringRef> allowed,
    llvm::function_ref<llvm::Error(StringRef, yaml::Node *, yaml::Node *)> fn) {
  auto *map = llvm::dyn_cast<yaml::MappingNode>(node);
  if (!map)
    return error(node, "expected a mapping for " + what);
  llvm::StringSet<> seen;
  for (yaml::KeyValueNode &kv : *map) {
    yaml::Node *keyNode = kv.getKey();
    llvm::Expected<std::string> key = scalar(keyNode, "key");
    if (!key)
      return key.takeError();
    if (!llvm::is_contained(allowed, StringRef(*key)))
      return error(keyNode,
                   llvm::formatv("unknown field '{0}' in {1} (expected one "
                                 "of: {2})",
                                 *key, what, llvm::join(allowed, ", ")));
    if (!seen.insert(*key).second)
      return error(keyNode, "duplicate field '" + *key + "'");
    if (llvm::Error err = fn(*key, keyNode, kv.getValue()))
      return err;
  }
  return llvm::Error::success();
}

llvm::Expected<std::string> ClusterParser::scalar(yaml::Node *node,
                                                  StringRef field) {
  auto *s = llvm::dyn_cast_or_null<yaml::ScalarNode>(node);
  if (!s)
    return error(node, "'" + field + "' must be a scalar");
  llvm::SmallString<32> storage;
  return s->getValue(storage).trim().str();
}

llvm::Expected<double> ClusterParser::number(yaml::Node *node, StringRef field,
                                             bool allowZero) {
  llvm::Expected<std::string> text = scalar(node, field);
  if (!text)
    return text.takeError();
  double value;
  StringRef kind = allowZero ? "a non-negative number" : "a positive number";
  if (StringRef(*text).getAsDouble(value) || !std::isfinite(value) ||
      value < 0 || (!allowZero && value == 0))
    return error(node,
                 "'" + field + "' must be " + kind + ", got '" + *text + "'");
  return value;
}

llvm::Expected<unsigned>
ClusterParser::integer(yaml::Node *node, StringRef field, bool allowZero) {
  llvm::Expected<std::string> text = scalar(node, field);
  if (!text)
    return text.takeError();
  unsigned value;
  StringRef kind = allowZero ? "a non-negative integer" : "a positive integer";
  if (StringRef(*text).getAsInteger(10, value) || (!allowZero && value == 0))
    return error(node,
                 "'" + field + "' must be " + kind + ", got '" + *text + "'");
  return value;
}

llvm::Error ClusterParser::parseInterconnect(yaml::Node *node,
                                             Cluster &cluster) {
  return forEachField(node, "interconnect", {"bandwidth", "latency"},
                      [&](StringRef key, yaml::Node *keyNode,
                          yaml::Node *value) -> llvm::Error {
                        bool isLatency = key == "latency";
                        llvm::Expected<double> v =
                            number(value, key, isLatency);
                        if (!v)
                          return v.takeError();
                        (isLatency ? cluster.interconnectLatency
                                   : cluster.interconnectBandwidth) = *v;
                        return llvm::Error::success();
                      });
}

llvm::Expected<DeviceEntry> ClusterParser::parseDevice(yaml::Node *node) {
  DeviceEntry entry;
  entry.loc = node->getSourceRange().Start;
  entry.line = sm.getLineAndColumn(entry.loc).first;
  static const StringRef fields[] = {
      "kind",           "name",           "count",  "node",
      "flops",          "sparse_speedup", "memory", "memory_bandwidth",
      "link_bandwidth", "link_latency"};
  llvm::Error err = forEachField(
      node, "device", fields,
      [&](StringRef key, yaml::Node *keyNode,
          yaml::Node *value) -> llvm::Error {
        if (key == "kind" || key == "name") {
          llvm::Expected<std::string> text = scalar(value, key);
          if (!text)
            return text.takeError();
          if (text->empty())
            return error(value, "'" + key + "' must not be empty");
          if (key == "kind") {
            entry.kind = *text;
            entry.kindLoc = value->getSourceRange().Start;
          } else {
            entry.name = *text;
          }
          return llvm::Error::success();
        }
        if (key == "count" || key == "node") {
          llvm::Expected<unsigned> v = integer(value, key, key == "node");
          if (!v)
            return v.takeError();
          (key == "count" ? entry.count : entry.node) = *v;
          return llvm::Error::success();
        }
        if (key == "flops")
          return forEachField(
              value, "flops", kPrecisionKeys,
              [&](StringRef p, yaml::Node *, yaml::Node *rate) -> llvm::Error {
                llvm::Expected<double> v = number(rate, p, true);
                if (!v)
                  return v.takeError();
                unsigned index =
                    llvm::find(kPrecisionKeys, p) - std::begin(kPrecisionKeys);
                entry.flops[index] = *v;
                return llvm::Error::success();
              });
        // Latencies may be 0; sizes, rates and speed-ups may not.
        llvm::Expected<double> v = number(value, key, key == "link_latency");
        if (!v)
          return v.takeError();
        std::optional<double> *slot = &entry.linkLatency;
        if (key == "sparse_speedup")
          slot = &entry.sparseSpeedup;
        else if (key == "memory")
          slot = &entry.memory;
        else if (key == "memory_bandwidth")
          slot = &entry.memoryBandwidth;
        else if (key == "link_bandwidth")
          slot = &entry.linkBandwidth;
        *slot = *v;
        return llvm::Error::success();
      });
  if (err)
    return std::move(err);
  return entry;
}

llvm::Error ClusterParser::addDevices(const DeviceEntry &entry,
                                      Cluster &cluster) {
  if (!entry.kind)
    return error(entry.loc,
                 "device has no 'kind' (one of: " + detail::knownKinds() + ")");
  DeviceProfile profile;
  bool custom = *entry.kind == "custom";
  if (!custom) {
    const DeviceProfile *builtin = builtinProfile(*entry.kind);
    if (!builtin)
      return error(entry.kindLoc, "unknown device kind '" + *entry.kind +
                                      "' (built in: " + detail::knownKinds() +
                                      ")");
    profile = *builtin;
  }
  profile.kind = *entry.kind;
  profile.node = entry.node;
  profile.line = entry.line;
  for (unsigned p = 0; p < kNumPrecisions; ++p)
    if (entry.flops[p])
      profile.flops[p] = *entry.flops[p];
  if (entry.sparseSpeedup)
    profile.sparseSpeedup = *entry.sparseSpeedup;
  if (entry.memory)
    profile.memoryBytes = *entry.memory;
  if (entry.memoryBandwidth)
    profile.memoryBandwidth = *entry.memoryBandwidth;
  if (entry.linkBandwidth)
    profile.linkBandwidth = *entry.linkBandwidth;
  if (entry.linkLatency)
    profile.linkLatency = *entry.linkLatency;

  std::string what = entry.name ? "device '" + *entry.name + "'"
                                : "'" + *entry.kind + "' device";
  if (profile.memoryBytes <= 0)
    return error(entry.loc, what + " has no 'memory' (bytes)");
  if (llvm::all_of(profile.flops, [](double f) { return f <= 0; }))
    return error(entry.loc, what + " has no nonzero 'flops' (FLOP/s per "
                                   "precision: f64, f32, bf16, fp8, int8)");

  for (unsigned i = 0; i < entry.count; ++i) {
    if (entry.name)
      profile.name = entry.count == 1
                         ? *entry.name
                         : llvm::formatv("{0}.{1}", *entry.name, i).str();
    else
      profile.name =
          llvm::formatv("{0}.{1}", *entry.kind, perKindCount[*entry.kind]++)
              .str();
    auto [it, inserted] = nameLines.try_emplace(profile.name, entry.line);
    if (!inserted)
      return error(entry.loc, llvm::formatv("duplicate device name '{0}' "
                                            "(first defined on line {1})",
                                            profile.name, it->second));
    cluster.devices.push_back(profile);
  }
  return llvm::Error::success();
}

llvm::Expected<Cluster> ClusterParser::parse(yaml::Node *root) {
  Cluster cluster;
  if (!root || llvm::isa<yaml::NullNode>(root))
    return error(SMLoc::getFromPointer(
                     sm.getMemoryBuffer(sm.getMainFileID())->getBufferStart()),
                 "empty cluster file (expected a mapping with 'devices')");
  bool sawDevices = false;
  std::vector<DeviceEntry> entries;
  yaml::Node *devicesKey = nullptr;
  llvm::Error err =
      forEachField(root, "cluster", {"interconnect", "devices"},
                   [&](StringRef key, yaml::Node *keyNode,
                       yaml::Node *value) -> llvm::Error {
                     if (key == "interconnect")
                       return parseInterconnect(value, cluster);
                     sawDevices = true;
                     devicesKey = keyNode;
                     auto *list = llvm::dyn_cast<yaml::SequenceNode>(value);
                     if (!list)
                       return error(value, "'devices' must be a list");
                     for (yaml::Node &device : *list) {
                       llvm::Expected<DeviceEntry> entry = parseDevice(&device);
                       if (!entry)
                         return entry.takeError();
                       entries.push_back(std::move(*entry));
                     }
                     return llvm::Error::success();
                   });
  if (err)
    return std::move(err);
  if (!sawDevices)
    return error(root, "cluster has no 'devices'");
  if (entries.empty())
    return error(devicesKey, "cluster has no devices");
  for (const DeviceEntry &entry : entries)
    if (llvm::Error err = addDevices(entry, cluster))
      return std::move(err);
  return cluster;
}

llvm::Expected<Cluster> ds::partition::parseCluster(StringRef text,
                                                    StringRef bufferName) {
  llvm::MemoryBufferRef buffer(text, bufferName);
  // Syntax first: the YAML scanner reports through the SourceMgr, and a
  // document with a syntax error yields nodes the checks below would
  // misreport.
  {
    llvm::SourceMgr sm;
    std::string firstError;
    sm.setDiagHandler(
        [](const llvm::SMDiagnostic &diag, void *context) {
          auto &message = *static_cast<std::string *>(context);
          if (message.empty())
            message = llvm::formatv("{0}:{1}:{2}: {3}", diag.getFilename(),
                                    diag.getLineNo(), diag.getColumnNo() + 1,
                                    diag.getMessage())
                          .str();
        },
        &firstError);
    yaml::Stream stream(buffer, sm, /*ShowColors=*/false);
    if (!stream.validate())
      return llvm::createStringError(firstError.empty()
                                         ? (bufferName + ": invalid YAML").str()
                                         : firstError);
  }
  llvm::SourceMgr sm;
  yaml::Stream stream(buffer, sm, /*ShowColors=*/false);
  yaml::document_iterator doc = stream.begin();
  ClusterParser parser(sm, bufferName);
  return parser.parse(doc == stream.end() ? nullptr : doc->getRoot());
}

llvm::Expected<Cluster> ds::partition::readClusterFile(StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return llvm::createStringError(file.getError(),
                                   "cannot read cluster file '" + path +
                                       "': " + file.getError().message());
  return parseCluster((*file)->getBuffer(), path);
}

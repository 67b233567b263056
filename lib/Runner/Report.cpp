//===- Report.cpp - Process measurements and run reports ------------------===//
//
// Implements the measurement helpers, the atomic file writes every other
// component of the runner builds on, and the progress line formatter.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/Report.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sys/resource.h>

using namespace ds::runner;
using llvm::StringRef;

size_t ds::runner::peakRssBytes() {
  // VmHWM is the high-water mark of the resident set, in kB.
  if (FILE *f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned long long kb = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof(line), f))
      found = std::sscanf(line, "VmHWM: %llu kB", &kb) == 1;
    std::fclose(f);
    if (found)
      return size_t(kb) * 1024;
  }
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    return size_t(usage.ru_maxrss) * 1024; // Linux reports kilobytes.
  return 0;
}

double ds::runner::nowSeconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

uint64_t ds::runner::hashBytes(StringRef bytes) {
  return llvm::xxh3_64bits(bytes);
}

std::string ds::runner::formatHash(uint64_t hash) {
  return llvm::formatv("{0:x-16}", hash).str();
}

std::string ds::runner::formatBytes(uint64_t bytes) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  double value = double(bytes) / 1024;
  unsigned unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:f1} {1}", value, units[unit]).str();
}

llvm::Error ds::runner::writeFileAtomic(
    StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> write) {
  // The temporary lives beside `path` so that the rename stays within one
  // file system and is atomic.
  llvm::SmallString<256> tmp;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, tmp))
    return llvm::createStringError(ec, path +
                                           ": cannot create a temporary "
                                           "file: " +
                                           ec.message());
  std::error_code writeError;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    write(os);
    os.close();
    if (os.has_error()) {
      writeError = os.error();
      os.clear_error();
    }
  }
  if (!writeError)
    writeError = llvm::sys::fs::rename(tmp, path);
  if (writeError) {
    llvm::sys::fs::remove(tmp);
    return llvm::createStringError(
        writeError, path + ": cannot write: " + writeError.message());
  }
  return llvm::Error::success();
}

llvm::Error ds::runner::writeFileAtomic(StringRef path, StringRef contents) {
  return writeFileAtomic(path, [&](llvm::raw_ostream &os) { os << contents; });
}

/// `v` with every inf and NaN replaced by null: JSON has neither, and
/// llvm::json would print them as `nan` and `inf`, which no parser reads
/// (a diverged run's losses, say).
static llvm::json::Value finiteOrNull(const llvm::json::Value &v) {
  if (const llvm::json::Object *obj = v.getAsObject()) {
    llvm::json::Object out;
    for (const auto &[key, item] : *obj)
      out[key] = finiteOrNull(item);
    return out;
  }
  if (const llvm::json::Array *arr = v.getAsArray()) {
    llvm::json::Array out;
    for (const llvm::json::Value &item : *arr)
      out.push_back(finiteOrNull(item));
    return out;
  }
  if (v.kind() == llvm::json::Value::Number && !v.getAsInteger() &&
      !std::isfinite(*v.getAsNumber()))
    return nullptr;
  return v;
}

llvm::Error ds::runner::writeJsonAtomic(StringRef path,
                                        const llvm::json::Value &value) {
  llvm::json::Value finite = finiteOrNull(value);
  return writeFileAtomic(path, [&](llvm::raw_ostream &os) {
    os << llvm::formatv("{0:2}", finite) << '\n';
  });
}

//===----------------------------------------------------------------------===//
// ProgressLine
//===----------------------------------------------------------------------===//

ProgressLine::ProgressLine(int64_t totalSteps)
    : totalSteps(totalSteps),
      stepWidth(std::max<size_t>(4, std::to_string(totalSteps).size())) {}

/// Right-aligns `text` in a column of `width`, widening the column when the
/// text does not fit.
static std::string column(const std::string &text, size_t &width) {
  width = std::max(width, text.size());
  return std::string(width - text.size(), ' ') + text;
}

std::string ProgressLine::format(int64_t step, double loss, double stepMs,
                                 double throughput, StringRef unit) {
  std::string line = "step " + column(std::to_string(step), stepWidth);
  if (totalSteps > 0)
    line += "/" + std::to_string(totalSteps);
  line += "  loss " + column(llvm::formatv("{0:f4}", loss).str(), lossWidth);
  line += "  " + column(llvm::formatv("{0:f1}", stepMs).str(), msWidth);
  line += " ms  " +
          column(llvm::formatv("{0:f1}", throughput).str(), throughputWidth);
  line += " " + unit.str() + "/s";
  return line;
}

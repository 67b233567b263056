//===- Report.h - Process measurements and run reports ----------*- C++ -*-===//
//
// Small helpers ds-run uses to measure a run and to report on it: peak
// resident memory, a monotonic clock, a content hash, crash-safe file writes
// (temporary file + rename) and the per-step progress line printed to the
// terminal.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_REPORT_H
#define DS_RUNNER_REPORT_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds::runner {

/// Peak resident set size of this process in bytes (VmHWM from
/// /proc/self/status, else getrusage's ru_maxrss). 0 when unknown.
size_t peakRssBytes();

/// Seconds on a monotonic clock; only differences are meaningful.
double nowSeconds();

/// 64-bit XXH3 hash of `bytes`.
uint64_t hashBytes(llvm::StringRef bytes);

/// Formats `hash` as 16 lower-case hex digits.
std::string formatHash(uint64_t hash);

/// Formats a byte count for humans: "512 B", "1.5 KiB", "2.0 GiB".
std::string formatBytes(uint64_t bytes);

/// Writes `contents` to `path` through a uniquely named temporary file in
/// the same directory followed by a rename, so that `path` holds either its
/// old contents or the new ones, never a partial file. The temporary is
/// removed on failure.
llvm::Error writeFileAtomic(llvm::StringRef path, llvm::StringRef contents);

/// As above, with the contents produced by `write` (which streams large
/// buffers without copying them first).
llvm::Error
writeFileAtomic(llvm::StringRef path,
                llvm::function_ref<void(llvm::raw_ostream &)> write);

/// Writes `value` pretty-printed (2-space indent, trailing newline) to
/// `path` atomically, as writeFileAtomic does. JSON has no inf or NaN:
/// non-finite numbers are written as null.
llvm::Error writeJsonAtomic(llvm::StringRef path,
                            const llvm::json::Value &value);

/// Formats the per-step progress line:
///
///   step   12/300  loss 2.3456  41.2 ms  388.3 samples/s
///
/// Columns are right-aligned; a column that once needed more room keeps
/// it, so that successive lines of a run stay aligned.
class ProgressLine {
public:
  explicit ProgressLine(int64_t totalSteps);

  /// The line for `step` (1-based) with the step's loss, wall time in
  /// milliseconds and throughput in `unit` per second ("samples",
  /// "tokens"). No trailing newline.
  std::string format(int64_t step, double loss, double stepMs,
                     double throughput, llvm::StringRef unit);

private:
  int64_t totalSteps;
  size_t stepWidth;
  size_t lossWidth = 6;
  size_t msWidth = 4;
  size_t throughputWidth = 5;
};

} // namespace ds::runner

#endif // DS_RUNNER_REPORT_H

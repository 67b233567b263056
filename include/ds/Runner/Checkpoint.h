//===- Checkpoint.h - Checkpoint directories --------------------*- C++ -*-===//
//
// A checkpoint is a directory holding one .npy file per tensor (parameters,
// optimizer state, RNG keys, ...) and `runner.json`: the runner's own state
// (step, data cursor, module hash, ...; opaque here) and a manifest listing
// every tensor's file, dtype, shape and XXH3 checksum. Plain .npy files keep
// checkpoints inspectable with NumPy; the manifest makes a truncated,
// corrupted or incomplete checkpoint an error at load time instead of a
// silently wrong resume.
//
// Writes are atomic at directory level: everything goes into a fresh
// temporary directory beside the target, which then replaces the old
// checkpoint in one step, so a crash or a failed write never destroys the
// last good checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_CHECKPOINT_H
#define DS_RUNNER_CHECKPOINT_H

#include "ds/Runner/Npy.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>
#include <utility>

namespace ds::runner {

/// The contents of a checkpoint directory.
struct Checkpoint {
  /// Tensor key -> tensor.
  std::map<std::string, HostTensor> tensors;
  /// The object given to writeCheckpoint as `runnerState`.
  llvm::json::Object runnerState;
};

/// Escapes a tensor key into a file name stem: bytes outside
/// [A-Za-z0-9._@-] become %XX (upper-case hex), so "adam.m@fc1.weight" stays
/// as is and "a/b" becomes "a%2Fb". The mapping is injective.
std::string escapeTensorKey(llvm::StringRef key);

/// Inverse of escapeTensorKey; std::nullopt when `stem` is not an escaped
/// key.
std::optional<std::string> unescapeTensorKey(llvm::StringRef stem);

/// Name of the file that holds tensor `key`: escapeTensorKey(key) + ".npy".
std::string tensorFileName(llvm::StringRef key);

/// Name of the manifest and runner state file inside a checkpoint.
inline constexpr llvm::StringLiteral kRunnerStateFile = "runner.json";

/// Writes a checkpoint of `tensors` (key, tensor; keys unique and
/// non-empty) and `runnerState` to `dir`, creating its parent directories.
/// The checkpoint is assembled in a temporary directory beside `dir` and
/// then swapped in; an existing checkpoint at `dir` is replaced only once
/// the new one is complete, and is left intact on any failure. Refuses to
/// replace a non-empty directory that is not a checkpoint.
llvm::Error writeCheckpoint(
    llvm::StringRef dir,
    llvm::ArrayRef<std::pair<std::string, const HostTensor *>> tensors,
    const llvm::json::Object &runnerState);

/// Where a directory that is written whole (a checkpoint, an export) goes:
/// `dir` made absolute, without dots or a trailing separator. Fails when
/// `dir` exists and is not a directory, or is a non-empty directory without
/// the file `marker` (what identifies `kind`, e.g. "a checkpoint"): such a
/// directory is the user's, never replaced. `exists` says whether `dir`
/// exists.
llvm::Expected<std::string> resolveReplaceableDir(llvm::StringRef dir,
                                                  llvm::StringRef marker,
                                                  llvm::StringRef kind,
                                                  bool &exists);

/// Puts the complete directory `tmp` (beside `target`) at `target`: a
/// rename, or where `target` exists a swap that leaves the old directory in
/// place on any failure. `tmp` is removed whatever happens.
llvm::Error installDirectory(llvm::StringRef tmp, llvm::StringRef target,
                             bool exists);

/// Removes `.<name>.tmp-XXXXXX` directories in `parent`: what writes of
/// `name` that never finished (a killed run) left.
void removeStaleTemporaries(llvm::StringRef parent, llvm::StringRef name);

/// Reads and verifies the checkpoint at `dir`: every manifest entry's file
/// must exist and match its dtype, shape and checksum. Errors read like
/// "corrupt checkpoint ckpt/: adam.m@fc1.weight.npy: checksum mismatch
/// (...)".
llvm::Expected<Checkpoint> readCheckpoint(llvm::StringRef dir);

namespace detail {
/// Whether writeCheckpoint may swap directories with renameat2
/// (RENAME_EXCHANGE); tests clear it to exercise the portable fallback.
extern bool useRenameExchange;
} // namespace detail

} // namespace ds::runner

#endif // DS_RUNNER_CHECKPOINT_H

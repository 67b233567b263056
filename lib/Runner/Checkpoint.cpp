//===- Checkpoint.cpp - Checkpoint directories ----------------------------===//
//
// Implements checkpoint writing and verified reading. Replacing the old
// checkpoint uses Linux's renameat2(RENAME_EXCHANGE), a single atomic swap
// of the two directories, where the file system supports it; elsewhere it
// falls back to rename-old-away, rename-new-in, which is atomic except for a
// window in which only the backup exists (readCheckpoint then names the
// backup in its error).
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/Checkpoint.h"
#include "ds/Runner/Report.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#ifdef __linux__
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#endif

using namespace ds::runner;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
namespace json = llvm::json;

bool ds::runner::detail::useRenameExchange = true;

static constexpr StringRef kFormatName = "ds-checkpoint";
/// Version 2 covers the runner state and the manifest with a checksum.
static constexpr int64_t kFormatVersion = 2;

/// The checksum of everything in the manifest but the checksum itself:
/// llvm::json prints object keys sorted, so the text is canonical.
static std::string manifestChecksum(const json::Object &runner,
                                    const json::Array &tensors) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(json::Object{{"runner", json::Object(runner)},
                                 {"tensors", json::Array(tensors)}});
  return formatHash(hashBytes(text));
}

//===----------------------------------------------------------------------===//
// Key escaping
//===----------------------------------------------------------------------===//

static bool isPlainKeyChar(char c) {
  return llvm::isAlnum(c) || c == '.' || c == '_' || c == '@' || c == '-';
}

std::string ds::runner::escapeTensorKey(StringRef key) {
  std::string out;
  for (char c : key) {
    if (isPlainKeyChar(c)) {
      out += c;
      continue;
    }
    out += '%';
    out += llvm::hexdigit(uint8_t(c) >> 4, /*LowerCase=*/false);
    out += llvm::hexdigit(uint8_t(c) & 15, /*LowerCase=*/false);
  }
  return out;
}

std::optional<std::string> ds::runner::unescapeTensorKey(StringRef stem) {
  std::string out;
  for (size_t i = 0; i < stem.size(); ++i) {
    char c = stem[i];
    if (isPlainKeyChar(c)) {
      out += c;
      continue;
    }
    // Only the canonical form: "%XX", upper-case, of a byte that needs it.
    auto isUpperHex = [](char h) {
      return llvm::isDigit(h) || (h >= 'A' && h <= 'F');
    };
    if (c != '%' || i + 2 >= stem.size() || !isUpperHex(stem[i + 1]) ||
        !isUpperHex(stem[i + 2]))
      return std::nullopt;
    char decoded = char(llvm::hexDigitValue(stem[i + 1]) << 4 |
                        llvm::hexDigitValue(stem[i + 2]));
    if (isPlainKeyChar(decoded))
      return std::nullopt;
    out += decoded;
    i += 2;
  }
  return out;
}

std::string ds::runner::tensorFileName(StringRef key) {
  return escapeTensorKey(key) + ".npy";
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

/// `dir` as shown in messages, with one trailing slash.
static std::string displayDir(StringRef dir) {
  return dir.ends_with("/") ? dir.str() : dir.str() + "/";
}

/// Atomically swaps two existing directories; false where unsupported.
static bool exchangePaths(const Twine &a, const Twine &b) {
#if defined(__linux__) && defined(SYS_renameat2)
  llvm::SmallString<256> aBuf, bBuf;
  StringRef aPath = a.toNullTerminatedStringRef(aBuf);
  StringRef bPath = b.toNullTerminatedStringRef(bBuf);
  return syscall(SYS_renameat2, AT_FDCWD, aPath.data(), AT_FDCWD, bPath.data(),
                 RENAME_EXCHANGE) == 0;
#else
  (void)a;
  (void)b;
  return false;
#endif
}

/// Writes one tensor file (inside the temporary directory, so no atomic
/// write is needed).
static llvm::Error writeTensorFile(StringRef filePath,
                                   const HostTensor &tensor) {
  std::error_code ec;
  llvm::raw_fd_ostream os(filePath, ec, fs::OF_None);
  if (!ec) {
    writeNpy(os, tensor);
    os.close();
    if (os.has_error()) {
      ec = os.error();
      os.clear_error();
    }
  }
  if (ec)
    return llvm::createStringError(ec, ec.message());
  return llvm::Error::success();
}

/// Fills the temporary directory `tmp` with the tensor files and the
/// manifest.
static llvm::Error
populate(StringRef tmp,
         llvm::ArrayRef<std::pair<std::string, const HostTensor *>> tensors,
         const json::Object &runnerState) {
  json::Array manifest;
  for (const auto &[key, tensor] : tensors) {
    std::string file = tensorFileName(key);
    llvm::SmallString<256> filePath(tmp);
    path::append(filePath, file);
    if (llvm::Error err = writeTensorFile(filePath, *tensor))
      return llvm::createStringError(file + ": " +
                                     llvm::toString(std::move(err)));
    json::Array shape;
    for (int64_t d : tensor->shape)
      shape.push_back(d);
    manifest.push_back(json::Object{
        {"key", key},
        {"file", file},
        {"dtype", dtypeName(tensor->dtype)},
        {"shape", std::move(shape)},
        {"xxh3", formatHash(hashBytes(StringRef(
                     reinterpret_cast<const char *>(tensor->bytes.data()),
                     tensor->bytes.size())))},
    });
  }
  std::string checksum = manifestChecksum(runnerState, manifest);
  json::Object root{{"format", kFormatName},
                    {"version", kFormatVersion},
                    {"runner", json::Object(runnerState)},
                    {"tensors", std::move(manifest)},
                    {"xxh3", checksum}};
  llvm::SmallString<256> statePath(tmp);
  path::append(statePath, kRunnerStateFile);
  return writeJsonAtomic(statePath, json::Value(std::move(root)));
}

void ds::runner::removeStaleTemporaries(StringRef parent, StringRef name) {
  std::string prefix = ("." + name + ".tmp-").str();
  std::error_code ec;
  std::vector<std::string> stale;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end;
       it.increment(ec)) {
    StringRef file = path::filename(it->path());
    if (!file.starts_with(prefix) || file.size() != prefix.size() + 6 ||
        !llvm::all_of(file.drop_front(prefix.size()), llvm::isAlnum))
      continue;
    if (fs::is_directory(it->path()))
      stale.push_back(it->path());
  }
  for (const std::string &dir : stale)
    fs::remove_directories(dir);
}

llvm::Expected<std::string> ds::runner::resolveReplaceableDir(StringRef dir,
                                                              StringRef marker,
                                                              StringRef kind,
                                                              bool &exists) {
  llvm::SmallString<256> target(dir);
  if (std::error_code ec = fs::make_absolute(target))
    return llvm::createStringError(ec.message());
  path::remove_dots(target, /*remove_dot_dot=*/true);
  while (target.size() > 1 && path::is_separator(target.back()))
    target.pop_back();
  exists = fs::exists(target);
  if (!exists)
    return std::string(target);
  if (!fs::is_directory(target))
    return llvm::createStringError("it exists and is not a directory");
  std::error_code ec;
  bool empty = fs::directory_iterator(target, ec) == fs::directory_iterator();
  llvm::SmallString<256> markerPath(target);
  path::append(markerPath, marker);
  if (!ec && !empty && !fs::exists(markerPath))
    return llvm::createStringError("refusing to replace a non-empty directory "
                                   "that is not " +
                                   kind + " (no " + marker + ")");
  return std::string(target);
}

llvm::Error ds::runner::writeCheckpoint(
    StringRef dir,
    llvm::ArrayRef<std::pair<std::string, const HostTensor *>> tensors,
    const json::Object &runnerState) {
  std::string shown = displayDir(dir);
  auto fail = [&](const Twine &what) {
    return llvm::createStringError("cannot write checkpoint " + shown + ": " +
                                   what);
  };

  // 1. Validate the tensors before touching the disk.
  llvm::StringSet<> keys;
  for (const auto &[key, tensor] : tensors) {
    if (key.empty())
      return fail("empty tensor key");
    if (!keys.insert(key).second)
      return fail("duplicate tensor key '" + key + "'");
    if (!tensor)
      return fail("no tensor for key '" + key + "'");
    if (tensor->bytes.size() !=
        size_t(tensor->numElements()) * tensor->elementSize())
      return fail("tensor '" + key + "' has " + Twine(tensor->bytes.size()) +
                  " bytes, its shape " + formatShape(tensor->shape) +
                  " needs " +
                  Twine(tensor->numElements() * tensor->elementSize()));
  }

  // 2. Resolve `dir` to an absolute path without a trailing separator; an
  //    existing directory there must be a checkpoint.
  bool exists = false;
  llvm::Expected<std::string> resolved =
      resolveReplaceableDir(dir, kRunnerStateFile, "a checkpoint", exists);
  if (!resolved)
    return fail(llvm::toString(resolved.takeError()));
  llvm::SmallString<256> target(*resolved);
  StringRef parent = path::parent_path(target);
  std::string name = path::filename(target).str();
  if (std::error_code ec = fs::create_directories(parent))
    return fail(Twine(parent) + ": " + ec.message());

  // 3. Assemble the new checkpoint in a temporary directory beside `dir`,
  //    first removing what an interrupted write (a killed run) left: only
  //    directories named as this function names them.
  removeStaleTemporaries(parent, name);
  llvm::SmallString<256> tmp;
  if (std::error_code ec =
          fs::createUniqueDirectory(parent + "/." + name + ".tmp", tmp))
    return fail("cannot create a temporary directory in " + parent + ": " +
                ec.message());
  if (llvm::Error err = populate(tmp, tensors, runnerState)) {
    fs::remove_directories(tmp);
    return fail(llvm::toString(std::move(err)));
  }

  // 4. Swap it in.
  if (llvm::Error err = installDirectory(tmp, target, exists))
    return fail(llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Error ds::runner::installDirectory(StringRef tmp, StringRef target,
                                         bool exists) {
  auto fail = [&](const Twine &what) {
    fs::remove_directories(tmp);
    return llvm::createStringError(what);
  };
  if (!exists) {
    if (std::error_code ec = fs::rename(tmp, target))
      return fail(ec.message());
    return llvm::Error::success();
  }
  if (detail::useRenameExchange && exchangePaths(tmp, target)) {
    fs::remove_directories(tmp); // Now holds the old directory.
    return llvm::Error::success();
  }
  StringRef parent = path::parent_path(target);
  llvm::SmallString<256> backup;
  if (std::error_code ec = fs::getPotentiallyUniqueFileName(
          parent + "/." + path::filename(target) + ".old-%%%%%%", backup))
    return fail(ec.message());
  if (std::error_code ec = fs::rename(target, backup))
    return fail("cannot move the old directory aside: " + ec.message());
  if (std::error_code ec = fs::rename(tmp, target)) {
    fs::rename(backup, target); // Put the old directory back.
    return fail(ec.message());
  }
  fs::remove_directories(backup);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

/// Verifies one manifest entry and loads its tensor into `ckpt`. Errors
/// are relative to the checkpoint ("file.npy: what").
static llvm::Error readEntry(StringRef dir, const json::Value &value,
                             size_t index, Checkpoint &ckpt) {
  auto bad = [&](const Twine &what) {
    return llvm::createStringError(Twine(kRunnerStateFile) + ": tensor #" +
                                   Twine(index) + ": " + what);
  };
  const json::Object *entry = value.getAsObject();
  if (!entry)
    return bad("not an object");
  std::optional<StringRef> key = entry->getString("key");
  std::optional<StringRef> file = entry->getString("file");
  std::optional<StringRef> dtypeStr = entry->getString("dtype");
  std::optional<StringRef> checksum = entry->getString("xxh3");
  const json::Array *shapeArr = entry->getArray("shape");
  if (!key || !file || !dtypeStr || !checksum || !shapeArr)
    return bad("needs 'key', 'file', 'dtype', 'shape' and 'xxh3'");
  // The file name is derived from the key, never trusted: a manifest
  // cannot point outside the checkpoint.
  if (*file != tensorFileName(*key))
    return bad("file '" + *file + "' is not the file of key '" + *key + "'");
  std::optional<DType> dtype = parseDType(*dtypeStr);
  if (!dtype)
    return bad("unknown dtype '" + *dtypeStr + "'");
  std::vector<int64_t> shape;
  for (const json::Value &d : *shapeArr) {
    std::optional<int64_t> dim = d.getAsInteger();
    if (!dim || *dim < 0)
      return bad("malformed shape");
    shape.push_back(*dim);
  }
  if (ckpt.tensors.count(key->str()))
    return bad("duplicate key '" + *key + "'");

  llvm::SmallString<256> filePath(dir);
  path::append(filePath, *file);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(filePath, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer) {
    if (buffer.getError() == std::errc::no_such_file_or_directory)
      return llvm::createStringError(*file + ": file is missing");
    return llvm::createStringError(*file + ": " + buffer.getError().message());
  }
  Expected<HostTensor> tensor =
      decodeNpy((*buffer)->getBuffer(), *file, *dtype);
  if (!tensor)
    return tensor.takeError();
  if (tensor->shape != shape)
    return llvm::createStringError(
        *file + ": shape " + formatShape(tensor->shape) +
        " differs from the manifest's " + formatShape(shape));
  std::string actual = formatHash(
      hashBytes(StringRef(reinterpret_cast<const char *>(tensor->bytes.data()),
                          tensor->bytes.size())));
  if (actual != *checksum)
    return llvm::createStringError(*file + ": checksum mismatch (manifest " +
                                   *checksum + ", data " + actual + ")");
  ckpt.tensors.emplace(key->str(), std::move(*tensor));
  return llvm::Error::success();
}

Expected<Checkpoint> ds::runner::readCheckpoint(StringRef dir) {
  std::string shown = displayDir(dir);
  auto corrupt = [&](const Twine &what) {
    return llvm::createStringError("corrupt checkpoint " + shown + ": " + what);
  };
  if (!fs::is_directory(dir)) {
    // An interrupted non-atomic replace leaves only the backup behind.
    std::string hint;
    llvm::SmallString<256> abs(dir);
    fs::make_absolute(abs);
    while (abs.size() > 1 && path::is_separator(abs.back()))
      abs.pop_back();
    std::string prefix = "." + path::filename(abs).str() + ".old-";
    std::error_code ec;
    for (fs::directory_iterator it(path::parent_path(abs), ec), end;
         !ec && it != end; it.increment(ec))
      if (path::filename(it->path()).starts_with(prefix))
        hint = " (an interrupted write left the previous checkpoint in " +
               it->path() + ")";
    return llvm::createStringError("no checkpoint at " + shown +
                                   ": not a directory" + hint);
  }

  // 1. runner.json: the runner state and the manifest.
  llvm::SmallString<256> statePath(dir);
  path::append(statePath, kRunnerStateFile);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> stateBuf =
      llvm::MemoryBuffer::getFile(statePath, /*IsText=*/true);
  if (!stateBuf)
    return corrupt(Twine(kRunnerStateFile) + " is missing or unreadable (" +
                   stateBuf.getError().message() + ")");
  Expected<json::Value> root = json::parse((*stateBuf)->getBuffer());
  if (!root)
    return corrupt(Twine(kRunnerStateFile) + ": " +
                   llvm::toString(root.takeError()));
  json::Object *obj = root->getAsObject();
  if (!obj || obj->getString("format") != kFormatName)
    return corrupt(Twine(kRunnerStateFile) + ": not a " + kFormatName +
                   " manifest");
  std::optional<int64_t> version = obj->getInteger("version");
  if (version != kFormatVersion)
    return corrupt(Twine(kRunnerStateFile) + ": format version " +
                   (version ? Twine(*version) : Twine("missing")) +
                   ", this ds-run reads version " + Twine(kFormatVersion));
  json::Object *runner = obj->getObject("runner");
  json::Array *entries = obj->getArray("tensors");
  std::optional<StringRef> checksum = obj->getString("xxh3");
  if (!runner || !entries || !checksum)
    return corrupt(Twine(kRunnerStateFile) +
                   ": needs a 'runner' object, a 'tensors' array and 'xxh3'");
  std::string actual = manifestChecksum(*runner, *entries);
  if (actual != *checksum)
    return corrupt(Twine(kRunnerStateFile) + ": checksum mismatch (recorded " +
                   *checksum + ", content " + actual +
                   "): the manifest was edited or "
                   "damaged");

  // 2. Every tensor, verified against the manifest.
  Checkpoint ckpt;
  ckpt.runnerState = std::move(*runner);
  for (size_t i = 0; i < entries->size(); ++i)
    if (llvm::Error err = readEntry(dir, (*entries)[i], i, ckpt))
      return corrupt(llvm::toString(std::move(err)));
  return ckpt;
}

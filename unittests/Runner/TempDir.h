//===- TempDir.h - Scratch directories for runner tests --------*- C++ -*-===//

#ifndef DS_UNITTESTS_RUNNER_TEMPDIR_H
#define DS_UNITTESTS_RUNNER_TEMPDIR_H

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ds::runner::testing {

/// A fresh directory, removed with everything in it at scope exit.
struct TempDir {
  llvm::SmallString<128> path;
  explicit TempDir(llvm::StringRef prefix = "ds-runner-test") {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory(prefix, path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() {
    // Tests may make the directory read-only; make it removable again.
    llvm::sys::fs::setPermissions(path, llvm::sys::fs::all_all);
    llvm::sys::fs::remove_directories(path);
  }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  /// Names of the entries directly inside the directory (or `sub`), sorted.
  std::vector<std::string> entries(llvm::StringRef sub = "") const {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator
             it(sub.empty() ? std::string(path) : file(sub), ec),
         end;
         !ec && it != end; it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    std::sort(names.begin(), names.end());
    return names;
  }
};

} // namespace ds::runner::testing

#endif // DS_UNITTESTS_RUNNER_TEMPDIR_H

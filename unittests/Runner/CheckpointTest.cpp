//===- CheckpointTest.cpp - Checkpoint directories ------------------------===//

#include "ds/Runner/Checkpoint.h"
#include "ds/Runner/Random.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "TempDir.h"
#include "gtest/gtest.h"

#include <sys/stat.h>
#include <unistd.h>

using namespace ds::runner;
namespace fs = llvm::sys::fs;

namespace {

using ds::runner::testing::TempDir;

std::string message(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}
template <typename T> std::string message(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}

/// A small model state: two parameters, an Adam moment, a step counter, an
/// RNG key and a bf16 tensor.
struct State {
  HostTensor w{DType::F32, {4, 3}}, b{DType::F64, {3}}, m{DType::F32, {4, 3}};
  HostTensor step{DType::I64, {}}, key{DType::I64, {2}}, half{DType::BF16, {5}};
  explicit State(uint64_t seed) {
    EXPECT_FALSE(fillNormal(w, 1.0, seed, 0));
    EXPECT_FALSE(fillNormal(b, 1.0, seed, 1));
    EXPECT_FALSE(fillNormal(m, 0.1, seed, 2));
    EXPECT_FALSE(fillNormal(half, 1.0, seed, 3));
    step.setInt(0, int64_t(seed));
    key.setInt(0, -1);
    key.setInt(1, int64_t(seed) << 40);
  }
  std::vector<std::pair<std::string, const HostTensor *>> list() const {
    return {{"fc1.weight", &w},        {"fc1.bias", &b},
            {"adam.m@fc1.weight", &m}, {"step", &step},
            {"rng/dropout key", &key}, {"half", &half}};
  }
};

llvm::json::Object runnerState(int64_t step) {
  return llvm::json::Object{{"step", step},
                            {"data_cursor", step + 1},
                            {"module_hash", "0123456789abcdef"},
                            {"threads", 2}};
}

void expectCheckpoint(const std::string &dir, const State &state,
                      int64_t step) {
  llvm::Expected<Checkpoint> ckpt = readCheckpoint(dir);
  ASSERT_TRUE(bool(ckpt)) << message(ckpt);
  ASSERT_EQ(ckpt->tensors.size(), state.list().size());
  for (const auto &[key, tensor] : state.list()) {
    ASSERT_TRUE(ckpt->tensors.count(key)) << key;
    EXPECT_EQ(ckpt->tensors.at(key), *tensor) << key; // Bit-identical.
  }
  EXPECT_EQ(llvm::json::Value(llvm::json::Object(ckpt->runnerState)),
            llvm::json::Value(runnerState(step)));
}

TEST(Checkpoint, KeyEscaping) {
  EXPECT_EQ(escapeTensorKey("adam.m@fc1.weight"), "adam.m@fc1.weight");
  EXPECT_EQ(escapeTensorKey("a/b c%"), "a%2Fb%20c%25");
  EXPECT_EQ(tensorFileName("rng/key"), "rng%2Fkey.npy");
  std::string all;
  for (int c = 1; c < 256; ++c)
    all += char(c);
  EXPECT_EQ(unescapeTensorKey(escapeTensorKey(all)), all);
  EXPECT_EQ(unescapeTensorKey("a%2Fb%20c%25"), "a/b c%");
  for (llvm::StringRef bad : {"a b", "%2f", "%41", "%2", "x%", "a/b"})
    EXPECT_EQ(unescapeTensorKey(bad), std::nullopt) << bad.str();
}

TEST(Checkpoint, RoundTrip) {
  TempDir dir;
  State state(1);
  std::string ckpt = dir.file("ckpt");
  ASSERT_EQ(message(writeCheckpoint(ckpt, state.list(), runnerState(10))), "");
  expectCheckpoint(ckpt, state, 10);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt"});
  EXPECT_EQ(dir.entries("ckpt"),
            (std::vector<std::string>{"adam.m@fc1.weight.npy", "fc1.bias.npy",
                                      "fc1.weight.npy", "half.npy",
                                      "rng%2Fdropout%20key.npy", "runner.json",
                                      "step.npy"}));
  // The files are plain .npy files.
  llvm::Expected<HostTensor> w = readNpy(dir.file("ckpt/fc1.weight.npy"));
  ASSERT_TRUE(bool(w)) << message(w);
  EXPECT_EQ(*w, state.w);
}

TEST(Checkpoint, ReplaceAndNestedParent) {
  TempDir dir;
  State first(1), second(2);
  std::string ckpt = dir.file("runs/a/ckpt/"); // Parents are created.
  ASSERT_EQ(message(writeCheckpoint(ckpt, first.list(), runnerState(10))), "");
  ASSERT_EQ(message(writeCheckpoint(ckpt, second.list(), runnerState(20))), "");
  expectCheckpoint(ckpt, second, 20);
  // Neither the temporary directory nor the old checkpoint is left behind.
  EXPECT_EQ(dir.entries("runs/a"), std::vector<std::string>{"ckpt"});
}

TEST(Checkpoint, ReplaceWithoutRenameExchange) {
  TempDir dir;
  State first(1), second(2);
  std::string ckpt = dir.file("ckpt");
  detail::useRenameExchange = false;
  ASSERT_EQ(message(writeCheckpoint(ckpt, first.list(), runnerState(10))), "");
  ASSERT_EQ(message(writeCheckpoint(ckpt, second.list(), runnerState(20))), "");
  detail::useRenameExchange = true;
  expectCheckpoint(ckpt, second, 20);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt"});
}

TEST(Checkpoint, FailedWriteKeepsOldCheckpoint) {
  TempDir dir;
  State first(1), second(2);
  std::string ckpt = dir.file("ckpt");
  ASSERT_EQ(message(writeCheckpoint(ckpt, first.list(), runnerState(10))), "");
  // A key whose file name exceeds NAME_MAX cannot be written.
  auto tensors = second.list();
  HostTensor extra(DType::F32, {1});
  tensors.push_back({std::string(300, 'k'), &extra});
  std::string msg = message(writeCheckpoint(ckpt, tensors, runnerState(20)));
  EXPECT_NE(msg.find("cannot write checkpoint " + ckpt + "/: kkkk"),
            std::string::npos)
      << msg;
  expectCheckpoint(ckpt, first, 10);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt"});

  // Invalid input is rejected before anything is written.
  tensors = second.list();
  tensors.push_back({"fc1.bias", &extra});
  msg = message(writeCheckpoint(ckpt, tensors, runnerState(20)));
  EXPECT_NE(msg.find("duplicate tensor key 'fc1.bias'"), std::string::npos);
  HostTensor broken(DType::F32, {2});
  broken.bytes.pop_back();
  msg = message(writeCheckpoint(ckpt, {{"x", &broken}}, runnerState(20)));
  EXPECT_NE(msg.find("has 7 bytes"), std::string::npos) << msg;
  expectCheckpoint(ckpt, first, 10);
}

TEST(Checkpoint, ReadOnlyParentKeepsOldCheckpoint) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "permissions do not apply to root";
  TempDir dir;
  State first(1), second(2);
  std::string ckpt = dir.file("ckpt");
  ASSERT_EQ(message(writeCheckpoint(ckpt, first.list(), runnerState(10))), "");
  ASSERT_EQ(::chmod(dir.path.c_str(), 0555), 0);
  EXPECT_NE(message(writeCheckpoint(ckpt, second.list(), runnerState(20))), "");
  ::chmod(dir.path.c_str(), 0755);
  expectCheckpoint(ckpt, first, 10);
}

TEST(Checkpoint, RefusesToReplaceOtherDirectories) {
  TempDir dir;
  std::string other = dir.file("results");
  ASSERT_FALSE(fs::create_directory(other));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(dir.file("results/notes.txt"), ec);
    os << "precious";
  }
  State state(1);
  std::string msg =
      message(writeCheckpoint(other, state.list(), runnerState(1)));
  EXPECT_NE(msg.find("refusing to replace"), std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(dir.file("results/notes.txt")));
  // An empty directory is fine.
  std::string empty = dir.file("empty");
  ASSERT_FALSE(fs::create_directory(empty));
  EXPECT_EQ(message(writeCheckpoint(empty, state.list(), runnerState(1))), "");
}

/// Rewrites `path` with its byte at `offset` (from the end when negative)
/// flipped.
void flipByte(const std::string &path, int64_t offset) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bool(buffer));
  std::string bytes = (*buffer)->getBuffer().str();
  size_t at = offset < 0 ? bytes.size() + offset : size_t(offset);
  bytes[at] ^= 0x40;
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  os << bytes;
}

TEST(Checkpoint, DetectsCorruption) {
  TempDir dir;
  State state(1);
  std::string ckpt = dir.file("ckpt");
  auto write = [&] {
    ASSERT_EQ(message(writeCheckpoint(ckpt, state.list(), runnerState(1))), "");
  };
  auto readError = [&] {
    llvm::Expected<Checkpoint> c = readCheckpoint(ckpt);
    EXPECT_FALSE(bool(c));
    return message(c);
  };
  std::string prefix = "corrupt checkpoint " + ckpt + "/: ";

  write();
  flipByte(dir.file("ckpt/adam.m@fc1.weight.npy"), -3);
  std::string msg = readError();
  EXPECT_EQ(msg.rfind(prefix + "adam.m@fc1.weight.npy: checksum mismatch", 0),
            0u)
      << msg;

  write();
  ASSERT_FALSE(fs::remove(dir.file("ckpt/fc1.bias.npy")));
  EXPECT_EQ(readError(), prefix + "fc1.bias.npy: file is missing");

  write();
  HostTensor reshaped = state.w;
  reshaped.shape = {3, 4};
  ASSERT_EQ(message(writeNpyAtomic(dir.file("ckpt/fc1.weight.npy"), reshaped)),
            "");
  EXPECT_EQ(readError(), prefix + "fc1.weight.npy: shape [3, 4] differs from "
                                  "the manifest's [4, 3]");

  write();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(dir.file("ckpt/step.npy"), ec);
    os << "garbage";
  }
  EXPECT_EQ(readError(), prefix + "step.npy: not an .npy file (bad magic)");

  write();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(dir.file("ckpt/runner.json"), ec);
    os << "{\"format\": \"ds-checkpoint\", ";
  }
  msg = readError();
  EXPECT_EQ(msg.rfind(prefix + "runner.json: ", 0), 0u) << msg;

  // A manifest cannot point outside the checkpoint.
  write();
  auto json = llvm::MemoryBuffer::getFile(dir.file("ckpt/runner.json"));
  ASSERT_TRUE(bool(json));
  std::string text = (*json)->getBuffer().str();
  size_t at = text.find("\"step.npy\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "\"../x.npy\"");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(dir.file("ckpt/runner.json"), ec);
    os << text;
  }
  // (The manifest's checksum catches the edit first; the file name is
  // also derived from the key, never trusted.)
  msg = readError();
  EXPECT_NE(msg.find("runner.json: checksum mismatch"), std::string::npos)
      << msg;

  ASSERT_FALSE(fs::remove(dir.file("ckpt/runner.json")));
  EXPECT_NE(readError().find("runner.json is missing"), std::string::npos);

  llvm::Expected<Checkpoint> none = readCheckpoint(dir.file("nothing"));
  EXPECT_EQ(message(none),
            "no checkpoint at " + dir.file("nothing") + "/: not a directory");

  // What an interrupted fallback replace leaves behind is pointed out.
  ASSERT_FALSE(fs::create_directory(dir.file(".nothing.old-a1b2c3")));
  none = readCheckpoint(dir.file("nothing"));
  EXPECT_NE(message(none).find("previous checkpoint in " +
                               dir.file(".nothing.old-a1b2c3")),
            std::string::npos);
}

} // namespace

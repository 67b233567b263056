//===- ReportTest.cpp - Process measurements and run reports --------------===//

#include "ds/Runner/Report.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <limits>
#include <memory>

using namespace ds::runner;

namespace {

std::string message(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

TEST(ProgressLine, Format) {
  ProgressLine progress(300);
  EXPECT_EQ(progress.format(12, 2.3456, 41.2, 388.3, "samples"),
            "step   12/300  loss 2.3456  41.2 ms  388.3 samples/s");
  EXPECT_EQ(progress.format(300, 0.01234, 5.04, 12.0, "samples"),
            "step  300/300  loss 0.0123   5.0 ms   12.0 samples/s");
  // A wider value widens its column for the rest of the run.
  EXPECT_EQ(progress.format(13, 12.5, 141.26, 123456.78, "tokens"),
            "step   13/300  loss 12.5000  141.3 ms  123456.8 tokens/s");
  EXPECT_EQ(progress.format(14, 2.0, 41.0, 388.0, "tokens"),
            "step   14/300  loss  2.0000   41.0 ms     388.0 tokens/s");

  ProgressLine big(100000);
  EXPECT_EQ(big.format(7, 1.0, 1.0, 1.0, "samples"),
            "step      7/100000  loss 1.0000   1.0 ms    1.0 samples/s");
}

TEST(Report, Hash) {
  // XXH3-64 of the empty input with seed 0.
  EXPECT_EQ(hashBytes(""), 0x2D06800538D394C2ull);
  EXPECT_NE(hashBytes("a"), hashBytes("b"));
  EXPECT_EQ(formatHash(0x2D06800538D394C2ull), "2d06800538d394c2");
  EXPECT_EQ(formatHash(1), "0000000000000001");
}

TEST(Report, FormatBytes) {
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(formatBytes(uint64_t(3) << 30), "3.0 GiB");
}

TEST(Report, Clock) {
  double a = nowSeconds();
  double b = nowSeconds();
  EXPECT_LE(a, b);
}

TEST(Report, PeakRss) {
  size_t before = peakRssBytes();
  EXPECT_GT(before, 0u);
  // Touch 64 MiB; the high-water mark must cover it.
  const size_t size = size_t(64) << 20;
  std::unique_ptr<char[]> block(new char[size]);
  volatile char *bytes = block.get(); // Keeps the writes (and the block).
  for (size_t i = 0; i < size; i += 4096)
    bytes[i] = 1;
  EXPECT_GE(peakRssBytes(), size);
}

TEST(Report, WriteJsonAtomic) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ds-runner-report", dir));
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, "report.json");

  llvm::json::Value value =
      llvm::json::Object{{"steps", 3}, {"loss", llvm::json::Array{2.5, 1.25}}};
  ASSERT_EQ(message(writeJsonAtomic(path, value)), "");
  ASSERT_EQ(message(writeJsonAtomic(path, value)), ""); // Overwrites.
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bool(buffer));
  llvm::StringRef text = (*buffer)->getBuffer();
  EXPECT_TRUE(text.ends_with("}\n"));
  EXPECT_NE(text.find("\n  \"steps\": 3"), llvm::StringRef::npos) << text.str();
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  ASSERT_TRUE(bool(parsed));
  EXPECT_EQ(*parsed, value);

  // Only the file itself is left: no temporaries.
  std::error_code ec;
  int entries = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    ++entries;
  EXPECT_EQ(entries, 1);

  // JSON has no NaN or inf: a diverged run's numbers are written as null,
  // so the report still parses.
  llvm::json::Value diverged = llvm::json::Object{
      {"eval",
       llvm::json::Array{llvm::json::Object{
           {"loss", std::numeric_limits<double>::quiet_NaN()}, {"step", 2}}}},
      {"final_loss", -std::numeric_limits<double>::infinity()},
      {"ok", 1.5}};
  ASSERT_EQ(message(writeJsonAtomic(path, diverged)), "");
  buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(bool(buffer));
  parsed = llvm::json::parse((*buffer)->getBuffer());
  ASSERT_TRUE(bool(parsed)) << (*buffer)->getBuffer().str();
  const llvm::json::Object *root = parsed->getAsObject();
  EXPECT_EQ(*root->get("final_loss"), nullptr);
  EXPECT_EQ(*root->getArray("eval")->front().getAsObject()->get("loss"),
            nullptr);
  EXPECT_EQ(root->getNumber("ok"), 1.5);

  llvm::SmallString<128> missing(dir);
  llvm::sys::path::append(missing, "no/such/dir/x.json");
  std::string msg = message(writeJsonAtomic(missing, value));
  EXPECT_NE(msg.find(std::string(missing)), std::string::npos) << msg;
  llvm::sys::fs::remove_directories(dir);
}

} // namespace

//===- DataFeedTest.cpp - Synthetic and file-backed data feeds ------------===//

#include "ds/Runner/DataFeed.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "TempDir.h"
#include "gtest/gtest.h"

#include <cmath>
#include <set>

using namespace ds::runner;

namespace {

using ds::runner::testing::TempDir;

std::string message(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}
template <typename T> std::string message(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}

InputSpec spec(std::string name, DType dtype, std::vector<int64_t> shape,
               int64_t range = 0) {
  return InputSpec{std::move(name), dtype, std::move(shape), range};
}

std::vector<HostTensor> batch(DataFeed &feed, uint64_t index,
                              bool heldOut = false) {
  std::vector<HostTensor> out;
  llvm::Error err = feed.fill(index, heldOut, out);
  EXPECT_EQ(message(std::move(err)), "");
  return out;
}

//===----------------------------------------------------------------------===//
// SyntheticFeed
//===----------------------------------------------------------------------===//

TEST(SyntheticFeed, LanguageModel) {
  const int64_t B = 4, T = 16, V = 50;
  std::vector<InputSpec> specs = {spec("tokens", DType::I64, {B, T}, V),
                                  spec("targets", DType::I32, {B, T}, V)};
  auto feed = SyntheticFeed::create(specs, 42);
  ASSERT_TRUE(bool(feed)) << message(feed);
  auto *syn = llvm::cast<SyntheticFeed>(feed->get());
  EXPECT_EQ(syn->task(), SyntheticFeed::Task::LanguageModel);
  EXPECT_EQ((*feed)->itemsPerBatch(), B * T);
  EXPECT_EQ((*feed)->itemUnit(), "tokens");
  EXPECT_NE((*feed)->describe().find("language modelling"), std::string::npos);

  // The successor table is a permutation of [0, V).
  llvm::ArrayRef<int64_t> perm = syn->permutation();
  ASSERT_EQ(perm.size(), size_t(V));
  EXPECT_EQ(std::set<int64_t>(perm.begin(), perm.end()).size(), size_t(V));
  EXPECT_EQ(*std::max_element(perm.begin(), perm.end()), V - 1);

  std::vector<HostTensor> b0 = batch(**feed, 0);
  ASSERT_EQ(b0.size(), 2u);
  EXPECT_EQ(b0[0].dtype, DType::I64);
  EXPECT_EQ(b0[1].dtype, DType::I32);
  EXPECT_EQ(b0[0].shape, (std::vector<int64_t>{B, T}));
  EXPECT_EQ(b0[1].shape, (std::vector<int64_t>{B, T}));
  std::set<int64_t> starts;
  for (int64_t b = 0; b < B; ++b) {
    starts.insert(b0[0].getInt(b * T));
    for (int64_t t = 0; t < T; ++t) {
      int64_t tok = b0[0].getInt(b * T + t), tgt = b0[1].getInt(b * T + t);
      ASSERT_GE(tok, 0);
      ASSERT_LT(tok, V);
      EXPECT_EQ(tgt, perm[tok]);
      if (t + 1 < T)
        EXPECT_EQ(tgt, b0[0].getInt(b * T + t + 1)); // Shifted by one.
    }
  }
  EXPECT_GT(starts.size(), 1u);

  // Deterministic in (seed, index, heldOut), also across feed objects.
  auto again = SyntheticFeed::create(specs, 42);
  ASSERT_TRUE(bool(again));
  EXPECT_EQ(batch(**again, 0), b0);
  EXPECT_EQ(batch(**feed, 5), batch(**again, 5));
  EXPECT_NE(batch(**feed, 1), b0);
  EXPECT_NE(batch(**feed, 0, /*heldOut=*/true), b0);
  EXPECT_EQ(batch(**feed, 0, true), batch(**again, 0, true));

  auto otherSeed = SyntheticFeed::create(specs, 43);
  ASSERT_TRUE(bool(otherSeed));
  EXPECT_NE(llvm::cast<SyntheticFeed>(otherSeed->get())->permutation(), perm);
}

TEST(SyntheticFeed, LanguageModelExtraTargets) {
  std::vector<InputSpec> specs = {spec("x", DType::I64, {2, 8}, 20),
                                  spec("y", DType::I64, {2, 8}, 20),
                                  spec("y2", DType::I64, {2, 8}, 20)};
  auto feed = SyntheticFeed::create(specs, 1);
  ASSERT_TRUE(bool(feed)) << message(feed);
  std::vector<HostTensor> b = batch(**feed, 3);
  for (int64_t i = 0; i < 16; ++i)
    if (i % 8 < 6)
      EXPECT_EQ(b[2].getInt(i), b[0].getInt(i + 2));
}

TEST(SyntheticFeed, Classification) {
  const int64_t N = 64, C = 5;
  std::vector<InputSpec> specs = {spec("x", DType::F32, {N, 3, 4}),
                                  spec("label", DType::I64, {N}, C),
                                  spec("aux", DType::F64, {N, 2})};
  auto feed = SyntheticFeed::create(specs, 7);
  ASSERT_TRUE(bool(feed)) << message(feed);
  auto *syn = llvm::cast<SyntheticFeed>(feed->get());
  EXPECT_EQ(syn->task(), SyntheticFeed::Task::Classification);
  EXPECT_EQ((*feed)->itemsPerBatch(), N);
  EXPECT_EQ((*feed)->itemUnit(), "samples");
  llvm::ArrayRef<double> w = syn->weights();
  ASSERT_EQ(w.size(), size_t(C * 12));

  std::set<int64_t> seen;
  double sum = 0, sumSq = 0;
  for (uint64_t index : {0, 1, 2}) {
    std::vector<HostTensor> b = batch(**feed, index);
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b[0].shape, (std::vector<int64_t>{N, 3, 4}));
    EXPECT_EQ(b[1].dtype, DType::I64);
    EXPECT_EQ(b[2].dtype, DType::F64);
    for (int64_t n = 0; n < N; ++n) {
      // Re-derive the label: argmax over classes of W x.
      int64_t best = 0;
      double bestLogit = -INFINITY;
      for (int64_t c = 0; c < C; ++c) {
        double logit = 0;
        for (int64_t f = 0; f < 12; ++f)
          logit += w[c * 12 + f] * b[0].getDouble(n * 12 + f);
        if (logit > bestLogit) {
          bestLogit = logit;
          best = c;
        }
      }
      int64_t label = b[1].getInt(n);
      ASSERT_GE(label, 0);
      ASSERT_LT(label, C);
      EXPECT_EQ(label, best);
      seen.insert(label);
    }
    for (double v : b[0].values<float>()) {
      sum += v;
      sumSq += v * v;
    }
  }
  EXPECT_EQ(seen.size(), size_t(C)); // Not a constant task.
  double count = 3 * N * 12;
  EXPECT_NEAR(sum / count, 0.0, 0.15);
  EXPECT_NEAR(sumSq / count, 1.0, 0.15);
  EXPECT_NE(batch(**feed, 0, true), batch(**feed, 0));
}

TEST(SyntheticFeed, ClassificationLabelFirst) {
  std::vector<InputSpec> specs = {spec("y", DType::I32, {8}, 3),
                                  spec("x", DType::F32, {8, 4})};
  auto feed = SyntheticFeed::create(specs, 7);
  ASSERT_TRUE(bool(feed)) << message(feed);
  EXPECT_EQ(llvm::cast<SyntheticFeed>(feed->get())->weights().size(), 12u);
  std::vector<HostTensor> b = batch(**feed, 0);
  EXPECT_EQ(b[0].dtype, DType::I32);
  for (int64_t n = 0; n < 8; ++n)
    EXPECT_LT(b[0].getInt(n), 3);
}

TEST(SyntheticFeed, Regression) {
  const int64_t N = 16, F = 8, G = 2;
  std::vector<InputSpec> specs = {spec("x", DType::F32, {N, F}),
                                  spec("y", DType::F32, {N, G})};
  auto feed = SyntheticFeed::create(specs, 3);
  ASSERT_TRUE(bool(feed)) << message(feed);
  auto *syn = llvm::cast<SyntheticFeed>(feed->get());
  EXPECT_EQ(syn->task(), SyntheticFeed::Task::Regression);
  llvm::ArrayRef<double> w = syn->weights();
  ASSERT_EQ(w.size(), size_t(F * G));
  std::vector<HostTensor> b = batch(**feed, 11);
  double ySq = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < G; ++j) {
      double expected = 0;
      for (int64_t f = 0; f < F; ++f)
        expected += b[0].getDouble(n * F + f) * w[f * G + j];
      EXPECT_NEAR(b[1].getDouble(n * G + j), expected, 1e-5);
      ySq += expected * expected;
    }
  EXPECT_GT(ySq, 0.1 * N * G); // W is scaled to keep y at unit scale.
  EXPECT_EQ(batch(**feed, 11), b);
  EXPECT_NE(batch(**feed, 11, true), b);
}

TEST(SyntheticFeed, Unrecognised) {
  auto one = SyntheticFeed::create({spec("x", DType::F32, {4, 4})}, 0);
  std::string msg = message(one);
  EXPECT_NE(msg.find("x: f32 [4, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--data name=file.npy"), std::string::npos) << msg;

  auto noRange = SyntheticFeed::create(
      {spec("tok", DType::I64, {2, 8}), spec("tgt", DType::I64, {2, 8})}, 0);
  msg = message(noRange);
  EXPECT_NE(msg.find("'tok' has no known value range"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("tgt: i64 [2, 8] (value range unknown)"),
            std::string::npos)
      << msg;

  auto mismatch = SyntheticFeed::create(
      {spec("x", DType::F32, {4, 4}), spec("y", DType::I64, {5}, 3)}, 0);
  EXPECT_NE(message(mismatch).find("one row per label"), std::string::npos);
  auto tooBig = SyntheticFeed::create(
      {spec("a", DType::I8, {2, 8}, 1000), spec("b", DType::I8, {2, 8}, 1000)},
      0);
  EXPECT_NE(message(tooBig).find("too large for i8"), std::string::npos);
  auto none = SyntheticFeed::create({}, 0);
  EXPECT_NE(message(none).find("no batch inputs"), std::string::npos);
}

TEST(SyntheticFeed, Cursor) {
  auto feed = SyntheticFeed::create(
      {spec("x", DType::F32, {2, 2}), spec("y", DType::F32, {2, 1})}, 5);
  ASSERT_TRUE(bool(feed));
  std::vector<HostTensor> out;
  EXPECT_EQ((*feed)->cursor(), 0u);
  ASSERT_EQ(message((*feed)->next(out)), "");
  ASSERT_EQ(message((*feed)->next(out)), "");
  EXPECT_EQ((*feed)->cursor(), 2u);
  EXPECT_EQ(out, batch(**feed, 1));
  (*feed)->setCursor(9);
  ASSERT_EQ(message((*feed)->next(out)), "");
  EXPECT_EQ(out, batch(**feed, 9));
}

//===----------------------------------------------------------------------===//
// FileFeed
//===----------------------------------------------------------------------===//

/// Writes x = [S, 3] f32 with x[r, c] = 10 r + c and y = [S] i64 with
/// y[r] = r; returns {x path, y path}.
std::pair<std::string, std::string> writeDataSet(const TempDir &dir,
                                                 llvm::StringRef prefix,
                                                 int64_t samples,
                                                 int64_t yOffset = 0) {
  HostTensor x(DType::F32, {samples, 3}), y(DType::I64, {samples});
  for (int64_t r = 0; r < samples; ++r) {
    for (int64_t c = 0; c < 3; ++c)
      x.setDouble(r * 3 + c, 10 * r + c);
    y.setInt(r, r + yOffset);
  }
  std::string xp = dir.file((prefix + "x.npy").str());
  std::string yp = dir.file((prefix + "y.npy").str());
  EXPECT_EQ(message(writeNpyAtomic(xp, x)), "");
  EXPECT_EQ(message(writeNpyAtomic(yp, y)), "");
  return {xp, yp};
}

std::vector<InputSpec> fileSpecs() {
  return {spec("x", DType::F32, {4, 3}), spec("y", DType::I64, {4}, 100)};
}

/// The sample rows of a batch (read from y).
std::vector<int64_t> rows(const std::vector<HostTensor> &b) {
  std::vector<int64_t> r;
  for (int64_t i = 0; i < 4; ++i) {
    r.push_back(b[1].getInt(i));
    EXPECT_EQ(b[0].getDouble(i * 3 + 2), 10.0 * b[1].getInt(i) + 2);
  }
  return r;
}

TEST(FileFeed, WrapAroundWithoutHeldOut) {
  TempDir dir;
  auto [xp, yp] = writeDataSet(dir, "", 10);
  llvm::StringMap<std::string> files{{"x", xp}, {"y", yp}};
  auto feed = FileFeed::create(fileSpecs(), files, std::nullopt, 0.0);
  ASSERT_TRUE(bool(feed)) << message(feed);
  EXPECT_FALSE((*feed)->hasHeldOut());
  EXPECT_EQ(rows(batch(**feed, 0)), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(rows(batch(**feed, 2)), (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(rows(batch(**feed, 3)), (std::vector<int64_t>{2, 3, 4, 5}));
  // (2^62 + 1) * 4 mod 10 = 0, but 4 if the product wrapped at 2^64.
  EXPECT_EQ(rows(batch(**feed, (uint64_t(1) << 62) + 1)),
            (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ((*feed)->batchesPerEpoch(false), 3u);
  std::vector<HostTensor> out;
  EXPECT_NE(message((*feed)->fill(0, true, out)).find("no held-out data"),
            std::string::npos);
}

TEST(FileFeed, HeldOutSplit) {
  TempDir dir;
  auto [xp, yp] = writeDataSet(dir, "", 20);
  llvm::StringMap<std::string> files{{"x", xp}, {"y", yp}};
  auto feed = FileFeed::create(fileSpecs(), files);
  ASSERT_TRUE(bool(feed)) << message(feed);
  auto *ff = llvm::cast<FileFeed>(feed->get());
  // 10% of 20 is 2 rows, raised to one batch of 4: rows 16..19 held out.
  EXPECT_EQ(ff->numSamples(false), 16);
  EXPECT_EQ(ff->numSamples(true), 4);
  EXPECT_TRUE(ff->hasHeldOut());
  std::set<int64_t> trainRows;
  for (uint64_t i = 0; i < 8; ++i)
    for (int64_t r : rows(batch(**feed, i)))
      trainRows.insert(r);
  EXPECT_EQ(trainRows.size(), 16u);
  EXPECT_EQ(*trainRows.rbegin(), 15);
  EXPECT_EQ(rows(batch(**feed, 0, true)),
            (std::vector<int64_t>{16, 17, 18, 19}));
  EXPECT_EQ(rows(batch(**feed, 7, true)),
            (std::vector<int64_t>{16, 17, 18, 19}));
  EXPECT_NE((*feed)->describe().find("16 training samples"), std::string::npos);
}

TEST(FileFeed, EvalFiles) {
  TempDir dir;
  auto [xp, yp] = writeDataSet(dir, "", 8);
  auto [exp, eyp] = writeDataSet(dir, "eval-", 6, /*yOffset=*/50);
  llvm::StringMap<std::string> files{{"x", xp}, {"y", yp}};
  llvm::StringMap<std::string> evalFiles{{"x", exp}, {"y", eyp}};
  auto feed = FileFeed::create(fileSpecs(), files, evalFiles);
  ASSERT_TRUE(bool(feed)) << message(feed);
  auto *ff = llvm::cast<FileFeed>(feed->get());
  EXPECT_EQ(ff->numSamples(false), 8); // Nothing reserved.
  EXPECT_EQ(ff->numSamples(true), 6);
  std::vector<HostTensor> held = batch(**feed, 1, true);
  // Rows 4, 5, 0, 1 of the evaluation set; x is 10 * (row) + c there.
  EXPECT_EQ(held[1].getInt(0), 54);
  EXPECT_EQ(held[1].getInt(2), 50);
  EXPECT_EQ(held[0].getDouble(0), 40.0);
  EXPECT_EQ(ff->batchesPerEpoch(true), 2u);
}

TEST(FileFeed, Errors) {
  TempDir dir;
  auto [xp, yp] = writeDataSet(dir, "", 10);
  auto [shortX, shortY] = writeDataSet(dir, "short-", 9);
  auto [bigX, bigY] = writeDataSet(dir, "big-", 10, /*yOffset=*/95);
  auto create = [&](llvm::StringMap<std::string> files,
                    std::vector<InputSpec> specs = fileSpecs()) {
    auto feed = FileFeed::create(specs, files);
    return message(feed);
  };

  std::string msg = create({{"x", xp}});
  EXPECT_NE(msg.find("no data file for input 'y'"), std::string::npos) << msg;

  msg = create({{"x", xp}, {"y", yp}, {"z", yp}});
  EXPECT_NE(msg.find("unknown input 'z'"), std::string::npos) << msg;

  msg = create({{"x", xp}, {"y", shortY}});
  EXPECT_NE(msg.find("different numbers of samples: " + xp + " has 10, " +
                     shortY + " has 9"),
            std::string::npos)
      << msg;

  msg = create({{"x", xp}, {"y", bigY}});
  EXPECT_EQ(msg, "data file " + bigY +
                     " for input 'y': value 100 at index [5] is outside "
                     "[0, 100)");

  msg = create({{"x", yp}, {"y", yp}});
  EXPECT_EQ(msg,
            "data file " + yp + " for input 'x': expected dtype f32, got i64");

  msg = create({{"x", xp}, {"y", yp}}, {spec("x", DType::F32, {4, 2}),
                                        spec("y", DType::I64, {4}, 100)});
  EXPECT_EQ(msg, "data file " + xp +
                     " for input 'x': expected shape [S, 2] (f32) with S >= "
                     "4 samples, got [10, 3] (f32)");

  msg = create({{"x", xp}, {"y", yp}}, {spec("x", DType::F32, {16, 3}),
                                        spec("y", DType::I64, {16}, 100)});
  EXPECT_NE(msg.find("holds 10 samples, fewer than the batch size 16"),
            std::string::npos)
      << msg;

  msg = create({{"x", dir.file("nope.npy")}, {"y", yp}});
  EXPECT_NE(msg.find("nope.npy for input 'x': cannot read"), std::string::npos)
      << msg;
}

} // namespace

//===- TrainingPipelineTest.cpp - ds-training-pipeline's options ----------===//
//
// Every option of every pass ds-training-pipeline runs is reachable from the
// pipeline under its prefixed name, defaults are the passes' own, and a
// value given to the pipeline reaches the pass.
//
//===----------------------------------------------------------------------===//

#include "ds/Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"

#include "gtest/gtest.h"

#include <set>

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The option names of a printed pass or option struct, "name{a=1 b=x}" or
/// "{a=1 b=x}".
std::set<std::string> optionNames(StringRef printed) {
  std::set<std::string> names;
  StringRef body = printed.drop_until([](char c) { return c == '{'; });
  body = body.drop_front().drop_back();
  SmallVector<StringRef> words;
  body.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef w : words)
    names.insert(w.split('=').first.str());
  return names;
}

std::string print(const Pass &pass) {
  std::string s;
  llvm::raw_string_ostream os(s);
  const_cast<Pass &>(pass).printAsTextualPipeline(os);
  return s;
}

/// Each pass the pipeline runs, with the prefix of its options there.
struct SubPass {
  std::unique_ptr<Pass> pass;
  std::string prefix;
};

std::vector<SubPass> subPasses() {
  std::vector<SubPass> all;
  all.push_back({createAssignPrecisionPass(), ""});
  all.push_back({createInsertLossScalingPass(), "loss-scaling-"});
  all.push_back({createClipGradientsPass(), "clip-"});
  all.push_back({createInsertOptimizerPass(), "optimizer-"});
  return all;
}

std::string printPipeline(StringRef options) {
  TrainingPipelineOptions parsed;
  EXPECT_TRUE(succeeded(parsed.parseFromString(options))) << options.str();
  OpPassManager pm("builtin.module");
  buildTrainingPipeline(pm, parsed.getConfig());
  std::string s;
  llvm::raw_string_ostream os(s);
  pm.printAsTextualPipeline(os);
  return s;
}

TEST(TrainingPipeline, EveryPassOptionIsReachable) {
  std::string printed;
  llvm::raw_string_ostream os(printed);
  TrainingPipelineOptions().print(os);
  std::set<std::string> pipeline = optionNames(printed);
  size_t checked = 0;
  for (SubPass &sub : subPasses()) {
    std::set<std::string> names = optionNames(print(*sub.pass));
    EXPECT_FALSE(names.empty()) << print(*sub.pass);
    for (const std::string &name : names) {
      EXPECT_TRUE(pipeline.count(sub.prefix + name))
          << sub.pass->getArgument().str() << "'s option '" << name
          << "' is not reachable as '" << sub.prefix << name
          << "' from ds-training-pipeline " << printed;
      ++checked;
    }
  }
  // ds-cpu-pipeline's, with lower.
  std::string cpu;
  llvm::raw_string_ostream cos(cpu);
  CPUPipelineOptions().print(cos);
  for (const std::string &name : optionNames(cpu)) {
    EXPECT_TRUE(pipeline.count(name)) << name;
    ++checked;
  }
  EXPECT_GE(checked, 30u);
}

TEST(TrainingPipeline, DefaultsAreThePasses) {
  std::string built = printPipeline("precision loss-scaling clip");
  for (SubPass &sub : subPasses())
    EXPECT_NE(built.find(print(*sub.pass)), std::string::npos)
        << print(*sub.pass) << "\nnot in\n"
        << built;
  // In the canonical order.
  size_t autodiff = built.find("ds-autodiff");
  size_t precision = built.find("ds-assign-precision");
  size_t scaling = built.find("ds-insert-loss-scaling");
  size_t clip = built.find("ds-clip-gradients");
  size_t optimizer = built.find("ds-insert-optimizer");
  EXPECT_LT(autodiff, precision);
  EXPECT_LT(precision, scaling);
  EXPECT_LT(scaling, clip);
  EXPECT_LT(clip, optimizer);
  EXPECT_NE(optimizer, std::string::npos);
}

TEST(TrainingPipeline, GivenValuesReachThePasses) {
  std::string built =
      printPipeline("policy=p.yaml anomaly-steps=2 total-steps=50 "
                    "loss-scaling-hysteresis=3 loss-scaling-anomaly=false "
                    "clip-mode=adaptive clip-history=7 optimizer-kind=sgd "
                    "optimizer-schedule=warmup-cosine optimizer-warmup-steps=5 "
                    "optimizer-nesterov=true optimizer-momentum=0.5");
  for (StringRef want :
       {"policy=p.yaml", "anomaly-steps=2", "hysteresis=3", "anomaly=false",
        "mode=adaptive", "history=7", "kind=sgd", "schedule=warmup-cosine",
        "warmup-steps=5", "nesterov=true",
        // One training length for the precision schedule and the cosine.
        "total-steps=50"})
    EXPECT_NE(built.find(want.str()), std::string::npos)
        << want.str() << " not in " << built;
  // Options of a technique turn it on.
  EXPECT_NE(built.find("ds-assign-precision"), std::string::npos);
  EXPECT_NE(built.find("ds-insert-loss-scaling"), std::string::npos);
  EXPECT_NE(built.find("ds-clip-gradients"), std::string::npos);
  // Nothing was asked of these.
  std::string plain = printPipeline("");
  EXPECT_EQ(plain.find("ds-assign-precision"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("ds-clip-gradients"), std::string::npos) << plain;
}

TEST(TrainingPipeline, BadOptionsAreRejected) {
  for (StringRef bad :
       {"optimizer-kind=lamb", "optimizer-lr=x", "clip-norm-type=1",
        "no-such-option=1", "optimizer='kind=sgd'"}) {
    TrainingPipelineOptions parsed;
    EXPECT_TRUE(failed(parsed.parseFromString(bad))) << bad.str();
  }
}

} // namespace

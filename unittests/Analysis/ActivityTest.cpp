//===- ActivityTest.cpp - Activity, seed dependence, parameter tracing ----===//
//
// The step analyses on a small parsed step: which values are active, which
// backward values are cotangents once ds-autodiff has run, and which
// parameter an operand reads through data movement.
//
//===----------------------------------------------------------------------===//

#include "ds/Analysis/Activity.h"
#include "ds/Analysis/StepQueries.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

// %dead depends on a parameter but not the loss; %xx on an input only.
constexpr const char *kStep = R"mlir(
func.func @step(
    %w: tensor<4x3xf32> {ds.param = "fc.weight", ds.init = #ds.init<normal, 0.02>},
    %b: tensor<1x4xf32> {ds.param = "fc.bias", ds.init = #ds.init<zeros>},
    %x: tensor<2x3xf32> {ds.input = "x"},
    %y: tensor<2x4xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %wt = ds.transpose %w [1, 0] {test.name = "wt"} : tensor<4x3xf32> -> tensor<3x4xf32>
  %p = ds.matmul %x, %wt {test.name = "p"} : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %q = ds.add %p, %b {test.name = "q"} : tensor<2x4xf32>, tensor<1x4xf32> -> tensor<2x4xf32>
  %t = ds.tanh %q {test.name = "t"} : tensor<2x4xf32>
  %dead = ds.neg %w {test.name = "dead"} : tensor<4x3xf32>
  %xx = ds.mul %x, %x {test.name = "xx"} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %l = ds.mse_loss %t, %y {test.name = "l"} : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
)mlir";

class ActivityTest : public ::testing::Test {
protected:
  ActivityTest() {
    DialectRegistry registry;
    registry.insert<DSDialect, func::FuncDialect, arith::ArithDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    module = parseSourceString<ModuleOp>(kStep, &ctx);
  }

  func::FuncOp step() { return *module->getOps<func::FuncOp>().begin(); }
  Block &body() { return step().getBody().front(); }
  /// The result of the op tagged `test.name = name`.
  Value named(StringRef name) {
    for (Operation &op : body())
      if (auto n = op.getAttrOfType<StringAttr>("test.name");
          n && n.getValue() == name)
        return op.getResult(0);
    return Value();
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

TEST_F(ActivityTest, ActiveValuesLieBetweenParamsAndLoss) {
  ASSERT_TRUE(module);
  Block &b = body();
  Value loss = b.getTerminator()->getOperand(0);
  ActivityAnalysis activity(b, {b.getArgument(0), b.getArgument(1)}, loss);
  for (StringRef name : {"wt", "p", "q", "t", "l"})
    EXPECT_TRUE(activity.isActive(named(name))) << name.str();
  // The loss does not depend on %dead; %xx and the inputs depend on no
  // parameter.
  for (StringRef name : {"dead", "xx"})
    EXPECT_FALSE(activity.isActive(named(name))) << name.str();
  EXPECT_FALSE(activity.isActive(b.getArgument(2)));
  EXPECT_TRUE(activity.isActive(b.getArgument(0)));
  EXPECT_TRUE(activity.hasActiveResult(named("q").getDefiningOp()));
  EXPECT_FALSE(activity.hasActiveResult(named("dead").getDefiningOp()));

  // With the input as the only source, nothing but the input path is active.
  ActivityAnalysis fromInput(b, {b.getArgument(2)}, loss);
  EXPECT_TRUE(fromInput.isActive(named("p")));
  EXPECT_FALSE(fromInput.isActive(named("wt")));
  EXPECT_FALSE(fromInput.isActive(named("xx")));
}

TEST_F(ActivityTest, TracesParametersThroughDataMovement) {
  ASSERT_TRUE(module);
  Block &b = body();
  EXPECT_EQ(traceToParam(named("wt")), b.getArgument(0));
  EXPECT_EQ(traceToParam(b.getArgument(1)), b.getArgument(1));
  // An input is no parameter, and a matmul is no view.
  EXPECT_FALSE(traceToParam(b.getArgument(2)));
  EXPECT_FALSE(traceToParam(named("p")));
  SmallVector<BlockArgument> mm = consumedParams(named("p").getDefiningOp());
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_EQ(getParamName(mm.front()), "fc.weight");
  SmallVector<BlockArgument> add = consumedParams(named("q").getDefiningOp());
  ASSERT_EQ(add.size(), 1u);
  EXPECT_EQ(getParamName(add.front()), "fc.bias");
  EXPECT_TRUE(consumedParams(named("t").getDefiningOp()).empty());
}

TEST_F(ActivityTest, SeedDependenceSeparatesCotangentsFromPrimals) {
  ASSERT_TRUE(module);
  ASSERT_TRUE(succeeded(differentiateTrainingStep(step())));
  Block &b = body();
  SeedDependence seeds(b);
  Operation *ret = b.getTerminator();
  // Results: the loss, then the gradients of fc.weight and fc.bias.
  ASSERT_EQ(ret->getNumOperands(), 3u);
  EXPECT_FALSE(seeds.dependsOnSeed(ret->getOperand(0)));
  EXPECT_TRUE(seeds.dependsOnSeed(ret->getOperand(1)));
  EXPECT_TRUE(seeds.dependsOnSeed(ret->getOperand(2)));
  // Forward values and arguments are primal, even where the backward
  // reads them.
  for (StringRef name : {"wt", "p", "q", "t"})
    EXPECT_FALSE(seeds.dependsOnSeed(named(name))) << name.str();
  EXPECT_FALSE(seeds.dependsOnSeed(b.getArgument(2)));
  // The seed itself, and the backward's matmuls: each reads one cotangent
  // and one primal value.
  unsigned seedCount = 0, gradMatmuls = 0;
  for (Operation &op : b) {
    if (op.hasAttr(DSDialect::kSeedAttrName)) {
      ++seedCount;
      EXPECT_TRUE(seeds.dependsOnSeed(op.getResult(0)));
    }
    if (isa<MatMulOp>(op) && !isForwardOp(&op)) {
      ++gradMatmuls;
      EXPECT_TRUE(seeds.dependsOnSeed(op.getResult(0)));
      EXPECT_NE(seeds.dependsOnSeed(op.getOperand(0)),
                seeds.dependsOnSeed(op.getOperand(1)));
    }
  }
  EXPECT_EQ(seedCount, 1u);
  EXPECT_EQ(gradMatmuls, 1u);
}

TEST(CreatedOpsTest, RecordsInsertedAndForgetsErased) {
  MLIRContext ctx;
  ctx.loadDialect<arith::ArithDialect>();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
  CreatedOps created;
  IRRewriter rewriter(&ctx, &created);
  rewriter.setInsertionPointToEnd(module->getBody());
  Location loc = UnknownLoc::get(&ctx);
  auto a = arith::ConstantIndexOp::create(rewriter, loc, 1);
  auto c = arith::ConstantIndexOp::create(rewriter, loc, 2);
  ASSERT_EQ(created.size(), 2u);
  EXPECT_EQ(created.getOps().front(), a.getOperation());
  rewriter.eraseOp(a);
  EXPECT_EQ(created.size(), 1u);
  EXPECT_TRUE(created.contains(c));
}

} // namespace

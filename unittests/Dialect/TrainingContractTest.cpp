//===- TrainingContractTest.cpp - Reading and checking contracts ----------===//

#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

class TrainingContractTest : public ::testing::Test {
protected:
  TrainingContractTest() {
    registry.insert<DSDialect, func::FuncDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Parses `src`, capturing diagnostics into `diagnostics`.
  OwningOpRef<ModuleOp> parse(StringRef src) {
    diagnostics.clear();
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return success();
    });
    return parseSourceString<ModuleOp>(src, &ctx);
  }

  DialectRegistry registry;
  MLIRContext ctx;
  std::string diagnostics;
};

constexpr const char *kLinearStep = R"mlir(
func.func @step(
    %w: tensor<4x3xf32> {ds.param = "fc.weight", ds.init = #ds.init<normal, 0.02>},
    %m: tensor<4x3xf32> {ds.state = #ds.state<"adam.m", of = "fc.weight">, ds.init = #ds.init<zeros>},
    %t: tensor<i64> {ds.state = #ds.state<"step">, ds.init = #ds.init<zeros>},
    %x: tensor<2x3xf32> {ds.input = "x"},
    %y: tensor<2x4xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}, tensor<4x3xf32> {ds.update = 0 : i64},
        tensor<4x3xf32> {ds.update = 1 : i64}, tensor<f32> {ds.metric = "loss_copy"})
    attributes {ds.train_step} {
  %p = ds.matmul %x, %w transpose_rhs : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %l = ds.mse_loss %p, %y : tensor<2x4xf32> -> tensor<f32>
  return %l, %w, %m, %l : tensor<f32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>
}
)mlir";

TEST_F(TrainingContractTest, ReadsRolesFromAttributes) {
  OwningOpRef<ModuleOp> module = parse(kLinearStep);
  ASSERT_TRUE(module) << diagnostics;
  FailureOr<SmallVector<TrainingContract>> contracts = readContracts(*module);
  ASSERT_TRUE(succeeded(contracts));
  ASSERT_EQ(contracts->size(), 1u);
  const TrainingContract &c = contracts->front();
  EXPECT_EQ(c.funcName, "step");
  ASSERT_EQ(c.args.size(), 5u);
  EXPECT_EQ(c.args[0].role, ArgRole::Param);
  EXPECT_EQ(c.args[0].name, "fc.weight");
  EXPECT_EQ(c.args[0].init.getKind(), InitKind::normal);
  EXPECT_DOUBLE_EQ(c.args[0].init.getValueAsDouble(), 0.02);
  EXPECT_EQ(c.args[1].name, "adam.m@fc.weight");
  EXPECT_EQ(c.args[2].name, "step");
  EXPECT_EQ(c.args[3].role, ArgRole::Input);
  EXPECT_EQ(c.getLossIndex(), 0u);
  EXPECT_EQ(c.findUpdateOf(0), std::optional<unsigned>(1));
  EXPECT_EQ(c.findUpdateOf(2), std::nullopt);
  EXPECT_EQ(c.findArg(ArgRole::Input, "y"), std::optional<unsigned>(4));
  EXPECT_EQ(c.getArgIndices(ArgRole::State), (SmallVector<unsigned>{1, 2}));
  EXPECT_TRUE(c.hasParamUpdates());
  EXPECT_EQ(c.results[3].name, "loss_copy");
}

TEST_F(TrainingContractTest, ModuleTableRoundTrips) {
  OwningOpRef<ModuleOp> module = parse(kLinearStep);
  ASSERT_TRUE(module) << diagnostics;
  ASSERT_TRUE(succeeded(exportContracts(*module, /*strip=*/true)));
  ASSERT_TRUE(succeeded(verify(*module)));
  auto func = cast<func::FuncOp>(module->getBody()->front());
  EXPECT_FALSE(func->hasAttr(DSDialect::kTrainStepAttrName));
  EXPECT_FALSE(func.getArgAttr(0, DSDialect::kParamAttrName));

  // The table alone gives back the same contract.
  FailureOr<SmallVector<TrainingContract>> contracts = readContracts(*module);
  ASSERT_TRUE(succeeded(contracts));
  const TrainingContract &c = contracts->front();
  EXPECT_EQ(c.args.size(), 5u);
  EXPECT_EQ(c.args[1].state.getKind(), "adam.m");
  EXPECT_EQ(c.args[1].state.getOf(), "fc.weight");
  EXPECT_EQ(c.results[2].argIndex, 1);
  EXPECT_EQ(c.results[2].type, c.args[1].type);
  auto table =
      (*module)->getAttrOfType<DictionaryAttr>(DSDialect::kContractAttrName);
  ASSERT_TRUE(table);
  EXPECT_EQ(Attribute(c.toAttr(&ctx)), table.get("step"));
}

TEST_F(TrainingContractTest, RejectsTwoLosses) {
  std::string src = kLinearStep;
  size_t pos = src.find("{ds.metric = \"loss_copy\"}");
  src.replace(pos, std::string("{ds.metric = \"loss_copy\"}").size(),
              "{ds.loss}");
  OwningOpRef<ModuleOp> module = parse(src);
  EXPECT_FALSE(module);
  EXPECT_NE(diagnostics.find("exactly one result marked 'ds.loss', found 2"),
            std::string::npos)
      << diagnostics;
}

TEST_F(TrainingContractTest, MatMulBuilderInfersType) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  auto f32 = b.getF32Type();
  OwningOpRef<func::FuncOp> func = func::FuncOp::create(
      b, loc, "f",
      b.getFunctionType({RankedTensorType::get({8, 5, 3}, f32),
                         RankedTensorType::get({7, 3}, f32)},
                        {}));
  Block *body = func->addEntryBlock();
  b.setInsertionPointToStart(body);
  auto mm = MatMulOp::create(b, loc, body->getArgument(0), body->getArgument(1),
                             /*transposeLhs=*/false, /*transposeRhs=*/true);
  EXPECT_EQ(mm.getType(), RankedTensorType::get({8, 5, 7}, f32));
  EXPECT_TRUE(mm.isRhsBroadcast());
  func::ReturnOp::create(b, loc);
}

} // namespace

//===- ScalarBuilderTest.cpp - ScalarBuilder's constant cache -------------===//
//
// The cache may only hand out a constant that dominates the insertion point:
// in the insertion block, before the insertion point. These tests move the
// builder the ways the passes do (down the block, back up, into another
// block) and check when a constant is reused.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/Utils/ScalarBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

struct ScalarBuilderTest : ::testing::Test {
  ScalarBuilderTest() : builder(&ctx) {
    ctx.loadDialect<arith::ArithDialect>();
    module = ModuleOp::create(UnknownLoc::get(&ctx));
    builder.setInsertionPointToEnd(module->getBody());
  }
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  OpBuilder builder;
};

TEST_F(ScalarBuilderTest, ReusesByTypeAndBits) {
  ScalarBuilder s(builder, builder.getUnknownLoc());
  Value one = s.f64(1.0);
  EXPECT_EQ(s.f64(1.0), one);
  EXPECT_NE(s.f64(2.0), one);
  // +0.0 and -0.0 differ in their bits; an i64 1 differs in its type.
  EXPECT_NE(s.f64(0.0), s.f64(-0.0));
  EXPECT_EQ(s.f64(-0.0), s.f64(-0.0));
  EXPECT_NE(s.i64(1), s.i32(1));
  EXPECT_EQ(s.i64(1), s.i64(1));
}

TEST_F(ScalarBuilderTest, OnlyReusesADominatingConstant) {
  ScalarBuilder s(builder, builder.getUnknownLoc());
  Value one = s.f64(1.0);
  // Before the cached constant: a new one, which the cache then holds.
  builder.setInsertionPoint(one.getDefiningOp());
  Value earlier = s.f64(1.0);
  EXPECT_NE(earlier, one);
  EXPECT_TRUE(earlier.getDefiningOp()->isBeforeInBlock(one.getDefiningOp()));
  // Back at the end: the earlier constant dominates and is reused.
  builder.setInsertionPointToEnd(module->getBody());
  EXPECT_EQ(s.f64(1.0), earlier);
  // Another block: its own constant.
  Block other;
  builder.setInsertionPointToEnd(&other);
  Value inOther = s.f64(1.0);
  EXPECT_NE(inOther, earlier);
  EXPECT_EQ(inOther.getDefiningOp()->getBlock(), &other);
  // Erase what the test created in `other` before the block goes away.
  inOther.getDefiningOp()->erase();
}

} // namespace

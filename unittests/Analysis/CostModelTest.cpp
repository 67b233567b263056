//===- CostModelTest.cpp - FLOPs, precision and bytes of step ops ---------===//
//
// The cost model on small parsed modules: a matmul in f32, in bf16 behind
// casts and in FP8 (E5M2 x E4M3, the backward's mix) counts the same FLOPs
// at the precision of its operands, whatever the accumulator; a
// block-sparse matmul counts the dense FLOPs times the density of the
// module's sparsity schedule, apart from dense FLOPs; convolution,
// quantized and linalg products count their contractions.
//
//===----------------------------------------------------------------------===//

#include "ds/Analysis/CostModel.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include <string>

using namespace mlir;
using namespace mlir::ds;
using ::ds::partition::Precision;

namespace {

class CostModelTest : public ::testing::Test {
protected:
  CostModelTest() {
    context.loadDialect<DSDialect, arith::ArithDialect, func::FuncDialect,
                        linalg::LinalgDialect, math::MathDialect,
                        tensor::TensorDialect>();
  }

  /// Parses `text`; the test fails when it does not parse.
  OwningOpRef<ModuleOp> parse(const std::string &text) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(text, ParserConfig(&context));
    EXPECT_TRUE(module) << text;
    return module;
  }

  /// The op carrying `test.name = name`.
  static Operation *find(ModuleOp module, StringRef name) {
    Operation *found = nullptr;
    module.walk([&](Operation *op) {
      if (auto attr = op->getAttrOfType<StringAttr>("test.name"))
        if (attr.getValue() == name)
          found = op;
    });
    EXPECT_TRUE(found) << "no op named " << name.str();
    return found;
  }

  static double total(const ::ds::partition::PerPrecision &flops) {
    double sum = 0;
    for (double f : flops)
      sum += f;
    return sum;
  }
  static double at(const ::ds::partition::PerPrecision &flops, Precision p) {
    return flops[unsigned(p)];
  }

  MLIRContext context;
};

// A linear layer on [4, 32, 64] activations, weight [128, 64] (transposed):
// M = 4 x 32 rows, N = 128, K = 64.
constexpr double kLinearFlops = 2.0 * 4 * 32 * 128 * 64;

TEST_F(CostModelTest, MatMulF32) {
  auto module = parse(R"mlir(
func.func @step(%x: tensor<4x32x64xf32>, %w: tensor<128x64xf32>) -> tensor<4x32x128xf32> {
  %y = ds.matmul %x, %w transpose_rhs {test.name = "mm"} : tensor<4x32x64xf32>, tensor<128x64xf32> -> tensor<4x32x128xf32>
  return %y : tensor<4x32x128xf32>
}
)mlir");
  Operation *mm = find(*module, "mm");
  OpCost cost = costOf(mm);
  EXPECT_EQ(precisionOf(mm), Precision::F32);
  EXPECT_DOUBLE_EQ(at(cost.denseFlops, Precision::F32), kLinearFlops);
  EXPECT_DOUBLE_EQ(total(cost.denseFlops), kLinearFlops);
  EXPECT_DOUBLE_EQ(total(cost.sparseFlops), 0);
  EXPECT_DOUBLE_EQ(cost.bytesMoved,
                   4.0 * (4 * 32 * 64 + 128 * 64 + 4 * 32 * 128));
  EXPECT_DOUBLE_EQ(bytesOf(mm->getOperand(1)), 4.0 * 128 * 64);
}

TEST_F(CostModelTest, MatMulTransposedLhsAndBatched) {
  // lhs^T: K is the lhs's second-to-last dimension. 8 batches of
  // [16 x 24]^T... : M = 24, K = 16, N = 40.
  auto module = parse(R"mlir(
func.func @step(%a: tensor<8x16x24xf64>, %b: tensor<8x16x40xf64>) -> tensor<8x24x40xf64> {
  %y = ds.matmul %a, %b transpose_lhs {test.name = "mm"} : tensor<8x16x24xf64>, tensor<8x16x40xf64> -> tensor<8x24x40xf64>
  return %y : tensor<8x24x40xf64>
}
)mlir");
  Operation *mm = find(*module, "mm");
  EXPECT_EQ(precisionOf(mm), Precision::F64);
  EXPECT_DOUBLE_EQ(at(costOf(mm).denseFlops, Precision::F64),
                   2.0 * 8 * 24 * 40 * 16);
}

TEST_F(CostModelTest, MatMulBF16BehindCasts) {
  // The accumulator (f32 result) does not decide: the operands do.
  auto module = parse(R"mlir(
func.func @step(%x: tensor<4x32x64xf32>, %w: tensor<128x64xf32>) -> tensor<4x32x128xf32> {
  %xb = ds.cast %x {test.name = "cast"} : tensor<4x32x64xf32> -> tensor<4x32x64xbf16>
  %wb = ds.cast %w : tensor<128x64xf32> -> tensor<128x64xbf16>
  %y = ds.matmul %xb, %wb transpose_rhs {test.name = "mm"} : tensor<4x32x64xbf16>, tensor<128x64xbf16> -> tensor<4x32x128xf32>
  return %y : tensor<4x32x128xf32>
}
)mlir");
  Operation *mm = find(*module, "mm");
  OpCost cost = costOf(mm);
  EXPECT_EQ(precisionOf(mm), Precision::BF16);
  EXPECT_DOUBLE_EQ(at(cost.denseFlops, Precision::BF16), kLinearFlops);
  EXPECT_DOUBLE_EQ(at(cost.denseFlops, Precision::F32), 0);
  // bf16 operands, f32 result.
  EXPECT_DOUBLE_EQ(cost.bytesMoved,
                   2.0 * (4 * 32 * 64 + 128 * 64) + 4.0 * 4 * 32 * 128);
  // A cast is one op per element, in the precision it reads.
  Operation *cast = find(*module, "cast");
  EXPECT_EQ(precisionOf(cast), Precision::F32);
  EXPECT_DOUBLE_EQ(at(costOf(cast).denseFlops, Precision::F32), 4.0 * 32 * 64);
}

TEST_F(CostModelTest, MatMulFP8) {
  // The backward's mix: E5M2 gradients times E4M3 weights.
  auto module = parse(R"mlir(
func.func @step(%g: tensor<4x32x128xf8E5M2>, %w: tensor<128x64xf8E4M3FN>) -> tensor<4x32x64xf32> {
  %y = ds.matmul %g, %w {test.name = "mm"} : tensor<4x32x128xf8E5M2>, tensor<128x64xf8E4M3FN> -> tensor<4x32x64xf32>
  return %y : tensor<4x32x64xf32>
}
)mlir");
  Operation *mm = find(*module, "mm");
  OpCost cost = costOf(mm);
  EXPECT_EQ(precisionOf(mm), Precision::FP8);
  EXPECT_DOUBLE_EQ(at(cost.denseFlops, Precision::FP8), kLinearFlops);
  EXPECT_DOUBLE_EQ(total(cost.denseFlops), kLinearFlops);
  EXPECT_DOUBLE_EQ(cost.bytesMoved,
                   1.0 * (4 * 32 * 128 + 128 * 64) + 4.0 * 4 * 32 * 64);
}

// The block-sparse linear layer and its weight gradient, on a module whose
// sparsity schedule ends at `final` with `distribution`.
std::string sparseModule(const char *final, const char *distribution) {
  return std::string(R"mlir(
module attributes {ds.sparsity = {step = {block = 8 : i64, distribution = ")mlir") +
         distribution + R"mlir(", final = )mlir" + final +
         R"mlir( : f64, initial = 0.5 : f64, schedule = "cosine"}}} {
func.func @step(%x: tensor<4x32x64xf32>, %w: tensor<128x64xf32>, %m: tensor<16x8xi8>,
                %dy: tensor<4x32x128xf32>) -> (tensor<4x32x128xf32>, tensor<128x64xf32>) {
  %y = ds.block_sparse_matmul %x, %w, %m block = 8 transpose_weight {test.name = "sp"}
      : tensor<4x32x64xf32>, tensor<128x64xf32>, tensor<16x8xi8> -> tensor<4x32x128xf32>
  %dw = ds.block_sampled_matmul %dy, %x, %m block = 8 {test.name = "sddmm"}
      : tensor<4x32x128xf32>, tensor<4x32x64xf32>, tensor<16x8xi8> -> tensor<128x64xf32>
  return %y, %dw : tensor<4x32x128xf32>, tensor<128x64xf32>
}
}
)mlir";
}

TEST_F(CostModelTest, BlockSparseAtDensity) {
  auto module = parse(sparseModule("9.000000e-01", "uniform"));
  Operation *sp = find(*module, "sp");
  EXPECT_NEAR(blockDensityOf(sp), 0.1, 1e-12);
  OpCost cost = costOf(sp);
  EXPECT_EQ(precisionOf(sp), Precision::F32);
  EXPECT_NEAR(at(cost.sparseFlops, Precision::F32), 0.1 * kLinearFlops, 1e-6);
  EXPECT_DOUBLE_EQ(total(cost.denseFlops), 0);
  // Only the active blocks of the weight are read; the mask is a byte per
  // block.
  EXPECT_NEAR(cost.bytesMoved,
              4.0 * (4 * 32 * 64 + 0.1 * 128 * 64 + 4 * 32 * 128) + 16 * 8,
              1e-6);
  // The weight gradient: the same contraction, sampled on the mask.
  OpCost grad = costOf(find(*module, "sddmm"));
  EXPECT_NEAR(at(grad.sparseFlops, Precision::F32), 0.1 * kLinearFlops, 1e-6);
}

TEST_F(CostModelTest, BlockSparseGlobalUsesTheTarget) {
  auto module = parse(sparseModule("7.500000e-01", "global"));
  EXPECT_NEAR(blockDensityOf(find(*module, "sp")), 0.25, 1e-12);
}

TEST_F(CostModelTest, BlockSparseWithoutScheduleIsDense) {
  auto module = parse(R"mlir(
func.func @step(%x: tensor<4x64xf32>, %w: tensor<128x64xf32>, %m: tensor<16x8xi8>) -> tensor<4x128xf32> {
  %y = ds.block_sparse_matmul %x, %w, %m block = 8 transpose_weight {test.name = "sp"}
      : tensor<4x64xf32>, tensor<128x64xf32>, tensor<16x8xi8> -> tensor<4x128xf32>
  return %y : tensor<4x128xf32>
}
)mlir");
  Operation *sp = find(*module, "sp");
  EXPECT_DOUBLE_EQ(blockDensityOf(sp), 1);
  EXPECT_DOUBLE_EQ(at(costOf(sp).sparseFlops, Precision::F32),
                   2.0 * 4 * 128 * 64);
}

TEST_F(CostModelTest, BlockSparseERK) {
  // ERK gives the smaller (relatively wider) layer the higher density and
  // keeps the active weights at (1 - final) of all, up to block rounding.
  auto module = parse(R"mlir(
module attributes {ds.sparsity = {step = {block = 8 : i64, distribution = "erk", final = 9.000000e-01 : f64}}} {
func.func @step(%x: tensor<4x64xf32>, %w1: tensor<512x64xf32>, %m1: tensor<64x8xi8>,
                %w2: tensor<64x512xf32>, %m2: tensor<8x64xi8>, %w3: tensor<512x512xf32>,
                %m3: tensor<64x64xi8>) -> tensor<4x512xf32> {
  %h = ds.block_sparse_matmul %x, %w1, %m1 block = 8 transpose_weight {test.name = "a"}
      : tensor<4x64xf32>, tensor<512x64xf32>, tensor<64x8xi8> -> tensor<4x512xf32>
  %g = ds.block_sparse_matmul %h, %w2, %m2 block = 8 transpose_weight {test.name = "b"}
      : tensor<4x512xf32>, tensor<64x512xf32>, tensor<8x64xi8> -> tensor<4x64xf32>
  %y = ds.block_sparse_matmul %g, %w1, %m1 block = 8 transpose_weight {test.name = "c"}
      : tensor<4x64xf32>, tensor<512x64xf32>, tensor<64x8xi8> -> tensor<4x512xf32>
  %z = ds.block_sparse_matmul %y, %w3, %m3 block = 8 transpose_weight {test.name = "d"}
      : tensor<4x512xf32>, tensor<512x512xf32>, tensor<64x64xi8> -> tensor<4x512xf32>
  return %z : tensor<4x512xf32>
}
}
)mlir");
  double a = blockDensityOf(find(*module, "a"));
  double b = blockDensityOf(find(*module, "b"));
  double c = blockDensityOf(find(*module, "c"));
  double d = blockDensityOf(find(*module, "d"));
  EXPECT_DOUBLE_EQ(a, c); // the same mask
  EXPECT_DOUBLE_EQ(a, b); // (R + C) / (R C) is symmetric
  EXPECT_LT(d, a);
  double active = a * 512 * 64 + b * 64 * 512 + d * 512 * 512;
  EXPECT_NEAR(active / (2 * 512 * 64 + 512 * 512), 0.1, 0.01);
}

TEST_F(CostModelTest, ConvolutionAndItsGradients) {
  // 2 N Cout Cin KH KW OH OW (+ the bias) for the forward and each
  // gradient.
  auto module = parse(R"mlir(
func.func @step(%x: tensor<8x3x28x28xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>,
                %dy: tensor<8x16x28x28xf32>) -> (tensor<8x16x28x28xf32>, tensor<8x3x28x28xf32>, tensor<16x3x3x3xf32>) {
  %y = ds.conv2d %x, %w, %b padding = [1, 1] {test.name = "conv"}
      : tensor<8x3x28x28xf32>, tensor<16x3x3x3xf32>, tensor<16xf32> -> tensor<8x16x28x28xf32>
  %dx = ds.conv2d_grad_input %dy, %w padding = [1, 1] {test.name = "dx"}
      : tensor<8x16x28x28xf32>, tensor<16x3x3x3xf32> -> tensor<8x3x28x28xf32>
  %dw = ds.conv2d_grad_weight %dy, %x padding = [1, 1] {test.name = "dw"}
      : tensor<8x16x28x28xf32>, tensor<8x3x28x28xf32> -> tensor<16x3x3x3xf32>
  return %y, %dx, %dw : tensor<8x16x28x28xf32>, tensor<8x3x28x28xf32>, tensor<16x3x3x3xf32>
}
)mlir");
  double macs = 8.0 * 16 * 3 * 3 * 3 * 28 * 28;
  EXPECT_DOUBLE_EQ(at(costOf(find(*module, "conv")).denseFlops, Precision::F32),
                   2 * macs + 8.0 * 16 * 28 * 28);
  EXPECT_DOUBLE_EQ(at(costOf(find(*module, "dx")).denseFlops, Precision::F32),
                   2 * macs);
  EXPECT_DOUBLE_EQ(at(costOf(find(*module, "dw")).denseFlops, Precision::F32),
                   2 * macs);
}

TEST_F(CostModelTest, QuantizedMatMulIsInt8) {
  auto module = parse(R"mlir(
func.func @step(%xi: tensor<2x4xi8>, %wi: tensor<8x4xi8>, %sx: tensor<f32>, %zx: tensor<f32>,
                %sw: tensor<8xf32>, %zw: tensor<8xf32>) -> tensor<2x8xf32> {
  %y = ds.quantized_matmul %xi, %wi, %sx, %zx, %sw, %zw transpose_rhs {test.name = "q"}
      : tensor<2x4xi8>, tensor<8x4xi8>, tensor<f32>, tensor<8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
)mlir");
  Operation *q = find(*module, "q");
  OpCost cost = costOf(q);
  EXPECT_EQ(precisionOf(q), Precision::INT8);
  EXPECT_DOUBLE_EQ(at(cost.denseFlops, Precision::INT8), 2.0 * 2 * 8 * 4);
  // The f32 epilogue (zero points, scales).
  EXPECT_DOUBLE_EQ(at(cost.denseFlops, Precision::F32), 4.0 * 2 * 8);
}

TEST_F(CostModelTest, ElementwiseReductionsAndDataMovement) {
  auto module = parse(R"mlir(
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<32xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = ds.add %x, %x {test.name = "add"} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %e = ds.exp %x {test.name = "exp"} : tensor<4x8xf32>
  %s = ds.reduce_sum %x [1] {test.name = "sum"} : tensor<4x8xf32> -> tensor<4xf32>
  %t = ds.transpose %x [1, 0] {test.name = "transpose"} : tensor<4x8xf32> -> tensor<8x4xf32>
  %r = ds.reshape %x {test.name = "reshape"} : tensor<4x8xf32> -> tensor<32xf32>
  %n = ds.layer_norm %x, %w, %b {test.name = "ln"} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %p = ds.softmax %e axis = 1 {test.name = "softmax"} : tensor<4x8xf32>
  return %a, %s, %t, %r, %n, %p : tensor<4x8xf32>, tensor<4xf32>, tensor<8x4xf32>, tensor<32xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
)mlir");
  auto flops = [&](StringRef name) {
    return total(costOf(find(*module, name)).denseFlops);
  };
  EXPECT_DOUBLE_EQ(flops("add"), 32);
  EXPECT_DOUBLE_EQ(flops("exp"), 4 * 32);
  EXPECT_DOUBLE_EQ(flops("sum"), 32);
  EXPECT_DOUBLE_EQ(flops("ln"), 8 * 32);
  EXPECT_DOUBLE_EQ(flops("softmax"), 8 * 32);
  // A transpose copies; a reshape is a view.
  EXPECT_DOUBLE_EQ(flops("transpose"), 0);
  EXPECT_DOUBLE_EQ(costOf(find(*module, "transpose")).bytesMoved, 2 * 4 * 32);
  EXPECT_DOUBLE_EQ(flops("reshape"), 0);
  EXPECT_DOUBLE_EQ(costOf(find(*module, "reshape")).bytesMoved, 0);
}

TEST_F(CostModelTest, LinalgAndArith) {
  // linalg.matmul: its body (mulf, addf) over the M x N x K iteration space.
  auto module = parse(R"mlir(
func.func @step(%a: tensor<16x32xbf16>, %b: tensor<32x8xbf16>, %c: tensor<16x8xf32>, %s: f32) -> (tensor<16x8xf32>, f32, f32) {
  %y = linalg.matmul {test.name = "mm"} ins(%a, %b : tensor<16x32xbf16>, tensor<32x8xbf16>) outs(%c : tensor<16x8xf32>) -> tensor<16x8xf32>
  %t = arith.mulf %s, %s {test.name = "mulf"} : f32
  %e = math.exp %t {test.name = "mexp"} : f32
  return %y, %t, %e : tensor<16x8xf32>, f32, f32
}
)mlir");
  Operation *mm = find(*module, "mm");
  EXPECT_EQ(precisionOf(mm), Precision::BF16);
  EXPECT_DOUBLE_EQ(at(costOf(mm).denseFlops, Precision::BF16),
                   2.0 * 16 * 8 * 32);
  EXPECT_DOUBLE_EQ(at(costOf(find(*module, "mulf")).denseFlops, Precision::F32),
                   1);
  EXPECT_DOUBLE_EQ(at(costOf(find(*module, "mexp")).denseFlops, Precision::F32),
                   4);
}

} // namespace

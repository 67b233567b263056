//===- DeviceEncodersTest.cpp - The step's encoders against the runtime's -===//
//
// The device encoders (lib/Conversion/LinalgToRuntime/DeviceEncoders.h) are
// linalg on tensors; here they run on the CPU, built into a function that
// ds-cpu-pipeline lowers and the JIT runs, on vectors made to reach their
// corners. Top-k: ties at the k-th magnitude (zeros included), every
// element equal, a bucket of one, k = 0, ratio 1, sizes off the pyramid's
// blocks of 32 and past the radix select's 65536 (4-bit digits), and a
// ratio the step computes (DGC's warm-up). Three
// tiers: ties at both quantiles, all zeros, subnormal and near-maximal
// thresholds (t16 from a subnormal's bits, t16 clamped to 2^127), fixed
// thresholds. Each result is compared with the runtime's own encoder
// (dsrt_compress_encode_f32), which the CPU path runs: the same elements
// sent, the same values, scales and residuals, bit for bit. The emulated
// GPU runs (ds-run-parallel-emulated.test) check the same kernels on
// training buckets.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Conversion/LinalgToRuntime/DeviceEncoders.h"

#include "ds/InitDS.h"
#include "ds/Runtime/ds_runtime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/TargetSelect.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace mlir;

namespace {

/// A rank-1 memref descriptor, as the JIT's C interface takes it.
template <typename T> struct Memref1 {
  T *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];

  explicit Memref1(std::vector<T> &data)
      : allocated(data.data()), aligned(data.data()),
        offset(0), sizes{static_cast<int64_t>(data.size())}, strides{1} {}
};

/// What the runtime's top-k encoder sends: indices and values.
struct Sent {
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

/// What the runtime's three-tier encoder sends: each tier's indices and
/// values, and the two scales.
struct Tiers {
  std::vector<uint32_t> high, mid;
  std::vector<int8_t> q;
  std::vector<uint16_t> h;
  uint32_t s8 = 0, t16 = 0; // bits
};

/// A payload's little-endian fields and LEB128 index gaps.
struct Cursor {
  const std::vector<uint8_t> &p;
  size_t at = 0;

  uint8_t u8() { return p.at(at++); }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t(u8()) << (8 * i);
    return v;
  }
  std::vector<uint32_t> indices(uint32_t count) {
    std::vector<uint32_t> out;
    uint64_t next = 0;
    for (uint32_t k = 0; k < count; ++k) {
      uint64_t gap = 0;
      for (int shift = 0;; shift += 7) {
        uint8_t byte = u8();
        gap |= uint64_t(byte & 0x7f) << shift;
        if (!(byte & 0x80))
          break;
      }
      next += gap;
      out.push_back(static_cast<uint32_t>(next++));
    }
    return out;
  }
};

/// The runtime's three-tier payload (DSRT_COMPRESS_THREE_TIER), parsed: u8
/// scheme, u32 n, u32 #high, u32 #mid, f32 s8, f32 t16, the high indices,
/// their int8 values, the middle indices, their f16 values.
Tiers parseThreeTier(const std::vector<uint8_t> &p, int64_t n) {
  Cursor c{p};
  EXPECT_EQ(c.u8(), DSRT_COMPRESS_THREE_TIER);
  EXPECT_EQ(c.u32(), static_cast<uint32_t>(n));
  uint32_t nHigh = c.u32(), nMid = c.u32();
  Tiers t;
  t.s8 = c.u32();
  t.t16 = c.u32();
  t.high = c.indices(nHigh);
  for (uint32_t k = 0; k < nHigh; ++k)
    t.q.push_back(static_cast<int8_t>(c.u8()));
  t.mid = c.indices(nMid);
  for (uint32_t k = 0; k < nMid; ++k) {
    uint16_t low = c.u8();
    t.h.push_back(static_cast<uint16_t>(low | (c.u8() << 8)));
  }
  EXPECT_EQ(c.at, p.size());
  return t;
}

/// The runtime's top-k payload (DSRT_COMPRESS_TOPK), parsed: u8 scheme,
/// u32 n, u32 count, count LEB128 gaps, count f32 (little-endian).
Sent parseTopK(const std::vector<uint8_t> &p, int64_t n) {
  Cursor c{p};
  EXPECT_EQ(c.u8(), DSRT_COMPRESS_TOPK);
  EXPECT_EQ(c.u32(), static_cast<uint32_t>(n));
  uint32_t count = c.u32();
  Sent s;
  s.indices = c.indices(count);
  for (uint32_t k = 0; k < count; ++k) {
    uint32_t bits = c.u32();
    float x;
    std::memcpy(&x, &bits, 4);
    s.values.push_back(x);
  }
  EXPECT_EQ(c.at, p.size());
  return s;
}

/// What the device encoder returns.
struct Encoded {
  std::vector<int32_t> indices;
  std::vector<float> values, scalars, residual;
  std::vector<int32_t> count; // [1]: the slots used
};

uint32_t bitsOf(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

class DeviceEncoders : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  }

  DeviceEncoders() {
    DialectRegistry registry;
    registerAllDialects(registry);
    registerAllExtensions(registry);
    registerAllToLLVMIRTranslations(registry);
    ds::registerDSDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// `@NAME(g, r, params) -> results` whose body `build` writes, for
  /// buckets of n (params: tensor<3xf64>), lowered by ds-cpu-pipeline and
  /// compiled; null (with a test failure) if any of that fails.
  std::unique_ptr<ExecutionEngine>
  compile(StringRef name, int64_t n, ArrayRef<Type> results,
          function_ref<SmallVector<Value>(OpBuilder &, Location, Value, Value,
                                          Value)>
              build) {
    OpBuilder b(&context);
    Location loc = b.getUnknownLoc();
    module = ModuleOp::create(loc);
    // No training step: an empty contract table.
    (*module)->setAttr("ds.contract", b.getDictionaryAttr({}));
    b.setInsertionPointToEnd(module->getBody());
    auto vector = RankedTensorType::get({n}, b.getF32Type());
    auto params = RankedTensorType::get({3}, b.getF64Type());
    auto func = func::FuncOp::create(
        b, loc, name, b.getFunctionType({vector, vector, params}, results));
    func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    Block *body = func.addEntryBlock();
    b.setInsertionPointToStart(body);
    func::ReturnOp::create(b, loc,
                           build(b, loc, body->getArgument(0),
                                 body->getArgument(1), body->getArgument(2)));

    PassManager pm(&context);
    ds::buildCPUPipeline(pm, /*libraryGemm=*/false);
    if (failed(pm.run(*module))) {
      ADD_FAILURE() << "ds-cpu-pipeline failed on @" << name.str()
                    << " (n = " << n << ")";
      return nullptr;
    }
    ExecutionEngineOptions options;
    SmallVector<StringRef, 1> libs = {DS_MLIR_C_RUNNER_UTILS};
    options.sharedLibPaths = libs;
    auto engine = ExecutionEngine::create(*module, options);
    if (!engine) {
      ADD_FAILURE() << llvm::toString(engine.takeError());
      return nullptr;
    }
    return std::move(*engine);
  }

  /// `@topk(g, r, params) -> (indices, values, count, scalars, residual)` by
  /// buildTopKOnDevice: p0 = `low` when `high` is not given, else p0 from
  /// the params, which the encoder knows to lie in [low, high].
  std::unique_ptr<ExecutionEngine>
  compileTopK(int64_t n, double low, std::optional<double> high = {}) {
    Builder b(&context);
    int64_t slots = ds::topKSlots(n, high.value_or(low));
    return compile(
        "topk", n,
        {RankedTensorType::get({slots}, b.getI32Type()),
         RankedTensorType::get({slots}, b.getF32Type()),
         RankedTensorType::get({1}, b.getI32Type()),
         RankedTensorType::get({1}, b.getF32Type()),
         RankedTensorType::get({n}, b.getF32Type())},
        [&](OpBuilder &nb, Location loc, Value g, Value r, Value params) {
          ds::TopKRatio ratio{high ? params : Value(), low, high.value_or(low)};
          ds::DeviceTopK e = ds::buildTopKOnDevice(nb, loc, g, r, ratio);
          return SmallVector<Value>{e.indices, e.values, e.count, e.scalars,
                                    e.residual};
        });
  }

  /// `@tiers(g, r) -> (codes, scalars, residual)` by
  /// buildThreeTierOnDevice.
  std::unique_ptr<ExecutionEngine>
  compileThreeTier(int64_t n, const ds::ThreeTierParams &params) {
    Builder b(&context);
    return compile("tiers", n,
                   {RankedTensorType::get({n}, b.getIntegerType(16)),
                    RankedTensorType::get({3}, b.getF32Type()),
                    RankedTensorType::get({n}, b.getF32Type())},
                   [&](OpBuilder &nb, Location loc, Value g, Value r, Value) {
                     ds::DeviceThreeTier e =
                         ds::buildThreeTierOnDevice(nb, loc, g, r, params);
                     return SmallVector<Value>{e.codes, e.scalars, e.residual};
                   });
  }

  /// Calls @name with the memref descriptors `d`; false (with a test
  /// failure) if the call fails.
  static bool call(ExecutionEngine &engine, StringRef name,
                   ArrayRef<void *> d) {
    SmallVector<void *> descriptors(d), args;
    for (void *&x : descriptors)
      args.push_back(&x);
    if (llvm::Error error =
            engine.invokePacked(("_mlir_ciface_" + name).str(), args)) {
      ADD_FAILURE() << llvm::toString(std::move(error));
      return false;
    }
    return true;
  }

  /// Calls the compiled top-k encoder on (g, r, [p0, 0, 0]); empty
  /// results if the call fails.
  static Encoded run(ExecutionEngine &engine, std::vector<float> g,
                     std::vector<float> r, int64_t slots, double p0 = 0) {
    Encoded e{std::vector<int32_t>(slots), std::vector<float>(slots),
              std::vector<float>(1), std::vector<float>(g.size()),
              std::vector<int32_t>(1)};
    std::vector<double> params{p0, 0, 0};
    Memref1<float> gD(g), rD(r), valuesD(e.values), scalarsD(e.scalars),
        residualD(e.residual);
    Memref1<double> paramsD(params);
    Memref1<int32_t> indicesD(e.indices), countD(e.count);
    if (!call(engine, "topk",
              {&gD, &rD, &paramsD, &indicesD, &valuesD, &countD, &scalarsD,
               &residualD}))
      return {};
    return e;
  }

  /// Runs the device encoder and the runtime's on g + r and compares them.
  void checkTopK(const std::vector<float> &g, const std::vector<float> &r,
                 double ratio, const std::string &what) {
    SCOPED_TRACE(what);
    int64_t n = g.size();
    std::unique_ptr<ExecutionEngine> engine = compileTopK(n, ratio);
    ASSERT_TRUE(engine);
    compareTopK(run(*engine, g, r, ds::topKSlots(n, ratio)), g, r, ratio);
  }

  /// Compares the device encoder's `e` with the runtime's encoder on g + r
  /// at p0 = ratio.
  void compareTopK(const Encoded &e, const std::vector<float> &g,
                   const std::vector<float> &r, double ratio) {
    int64_t n = g.size();
    ASSERT_FALSE(e.values.empty());

    // The runtime's encoder on the same vectors.
    std::vector<float> decoded(n);
    int64_t bytes = 64 + 9 * n;
    std::vector<uint8_t> payload(bytes);
    ASSERT_EQ(dsrt_compress_encode_f32(g.data(), r.data(), n,
                                       DSRT_COMPRESS_TOPK, ratio, 0, 0,
                                       decoded.data(), payload.data(), &bytes),
              0);
    payload.resize(bytes);
    Sent want = parseTopK(payload, n);

    ASSERT_TRUE(std::isfinite(e.scalars[0]));
    Sent got;
    size_t slots = e.indices.size();
    for (size_t s = 0; s < slots; ++s) {
      if (static_cast<uint32_t>(e.indices[s]) == DSRT_TOPK_SLOT_EMPTY) {
        for (size_t t = s; t < slots; ++t)
          EXPECT_EQ(static_cast<uint32_t>(e.indices[t]), DSRT_TOPK_SLOT_EMPTY);
        break;
      }
      got.indices.push_back(static_cast<uint32_t>(e.indices[s]));
      got.values.push_back(e.values[s]);
    }
    EXPECT_EQ(got.indices, want.indices);
    // The count, by which the runtime copies only the used slots.
    EXPECT_EQ(size_t(e.count[0]), got.indices.size());
    ASSERT_EQ(got.values.size(), want.values.size());
    for (size_t k = 0; k < got.values.size(); ++k)
      EXPECT_EQ(bitsOf(got.values[k]), bitsOf(want.values[k])) << "slot " << k;
    // The residual the CPU start keeps: v - decoded.
    for (int64_t i = 0; i < n; ++i) {
      float v = g[i] + r[i];
      EXPECT_EQ(bitsOf(e.residual[i]), bitsOf(v - decoded[i]))
          << "element " << i;
    }
  }

  /// Runs the three-tier device encoder and the runtime's on g + r and
  /// compares them: the tiers and scales of the payload written from the
  /// codes, and the residual.
  void checkThreeTier(const std::vector<float> &g, const std::vector<float> &r,
                      const ds::ThreeTierParams &params,
                      const std::string &what) {
    SCOPED_TRACE(what);
    int64_t n = g.size();
    std::unique_ptr<ExecutionEngine> engine = compileThreeTier(n, params);
    ASSERT_TRUE(engine);
    std::vector<float> gIn(g), rIn(r), scalars(3), residual(n);
    std::vector<uint16_t> codes(n);
    std::vector<double> unused(3);
    Memref1<float> gD(gIn), rD(rIn), scalarsD(scalars), residualD(residual);
    Memref1<double> paramsD(unused);
    Memref1<uint16_t> codesD(codes);
    ASSERT_TRUE(call(*engine, "tiers",
                     {&gD, &rD, &paramsD, &codesD, &scalarsD, &residualD}));

    std::vector<float> decoded(n);
    int64_t bytes = 64 + 7 * n;
    std::vector<uint8_t> payload(bytes);
    ASSERT_EQ(dsrt_compress_encode_f32(
                  g.data(), r.data(), n, DSRT_COMPRESS_THREE_TIER,
                  params.fixed ? 1 : 0, params.low, params.high, decoded.data(),
                  payload.data(), &bytes),
              0);
    payload.resize(bytes);
    Tiers want = parseThreeTier(payload, n);

    ASSERT_TRUE(std::isfinite(scalars[2]));
    Tiers got;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t c = codes[i];
      if (c == DSRT_THREE_TIER_CODE_NONE)
        continue;
      if ((c & 0xff00) == DSRT_THREE_TIER_CODE_HIGH) {
        got.high.push_back(static_cast<uint32_t>(i));
        got.q.push_back(static_cast<int8_t>(c & 0xff));
      } else {
        got.mid.push_back(static_cast<uint32_t>(i));
        got.h.push_back(c);
      }
    }
    EXPECT_EQ(got.high, want.high);
    EXPECT_EQ(got.q, want.q);
    EXPECT_EQ(got.mid, want.mid);
    EXPECT_EQ(got.h, want.h);
    // s8 is only written when the 8-bit tier has elements.
    if (!want.high.empty())
      EXPECT_EQ(bitsOf(scalars[0]), want.s8);
    EXPECT_EQ(bitsOf(scalars[1]), want.t16);
    for (int64_t i = 0; i < n; ++i) {
      float v = g[i] + r[i];
      EXPECT_EQ(bitsOf(residual[i]), bitsOf(v - decoded[i])) << "element " << i;
    }
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

std::vector<float> randomVector(int64_t n, unsigned seed, float scale = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(rng);
  return v;
}

TEST_F(DeviceEncoders, TopKExactReselection) {
  // DGC's 0.1 %: the sample's threshold passes far more than 2k.
  checkTopK(randomVector(5000, 1), randomVector(5000, 2, 0.1f), 0.001,
            "0.1 % of 5000");
  // More than 65536 elements: 4-bit digits, a pyramid of four levels.
  checkTopK(randomVector(70001, 3), std::vector<float>(70001, 0.0f), 0.001,
            "0.1 % of 70001");
}

TEST_F(DeviceEncoders, TopKSampledThresholdAlone) {
  checkTopK(randomVector(3001, 4), randomVector(3001, 5, 0.1f), 0.3,
            "30 % of 3001");
  checkTopK(randomVector(100, 6), std::vector<float>(100, 0.0f), 1.0,
            "ratio 1");
}

TEST_F(DeviceEncoders, TopKTiesGoToTheLowerIndex) {
  // Mostly zeros: the threshold is 0, every element passes, and the k
  // largest end among the zeros, which go by index. Then magnitudes that
  // tie across signs and blocks of 32.
  std::vector<float> g(4000, 0.0f), zero(4000, 0.0f);
  for (int64_t i = 0; i < 4000; i += 397)
    g[i] = float(i % 7) - 3.0f;
  checkTopK(g, zero, 0.01, "zeros");
  std::vector<float> ties(3000);
  for (int64_t i = 0; i < 3000; ++i)
    ties[i] = float((i * 37) % 5 - 2) * 0.25f;
  checkTopK(ties, std::vector<float>(3000, 0.0f), 0.05, "5 magnitudes");
  // Every element equal: the first k.
  checkTopK(std::vector<float>(1000, -0.5f), std::vector<float>(1000, 0.0f),
            0.01, "all equal");
}

TEST_F(DeviceEncoders, TopKSmallBuckets) {
  checkTopK({0.25f}, {0.5f}, 0.001, "one element");
  checkTopK({1, -2, 3}, {0, 0, 0}, 0.0, "k = 0");
  checkTopK(randomVector(33, 7), randomVector(33, 8), 0.2, "33 elements");
}

TEST_F(DeviceEncoders, TopKComputedRatio) {
  // DGC's warm-up: p0 is computed by the step (25 %, 6.25 %, 1.5625 %,
  // 0.4 %, then the final 0.1 %); one compiled encoder with slots for
  // 25 % takes each. 25 % keeps the sample's threshold, 0.1 % re-selects.
  int64_t n = 5000;
  std::vector<float> g = randomVector(n, 18), r = randomVector(n, 19, 0.1f);
  std::unique_ptr<ExecutionEngine> engine = compileTopK(n, 0.001, 0.25);
  ASSERT_TRUE(engine);
  for (double p0 : {0.25, 0.0625, 0.015625, 0.004, 0.001}) {
    SCOPED_TRACE("p0 " + std::to_string(p0));
    compareTopK(run(*engine, g, r, ds::topKSlots(n, 0.25), p0), g, r, p0);
  }
  // Ties across the range's ends, k = 0 and p0 = 1.
  std::vector<float> ties(3000), zero(3000, 0.0f);
  for (int64_t i = 0; i < 3000; ++i)
    ties[i] = float((i * 37) % 5 - 2) * 0.25f;
  engine = compileTopK(3000, 0.0, 1.0);
  ASSERT_TRUE(engine);
  for (double p0 : {0.0, 0.05, 0.3, 1.0}) {
    SCOPED_TRACE("ties, p0 " + std::to_string(p0));
    compareTopK(run(*engine, ties, zero, ds::topKSlots(3000, 1.0), p0), ties,
                zero, p0);
  }
}

TEST_F(DeviceEncoders, TopKNonFiniteKeepsTheResidual) {
  std::vector<float> g = randomVector(500, 9), r = randomVector(500, 10);
  g[123] = std::numeric_limits<float>::infinity();
  std::unique_ptr<ExecutionEngine> engine = compileTopK(500, 0.01);
  ASSERT_TRUE(engine);
  Encoded e = run(*engine, g, r, ds::topKSlots(500, 0.01));
  ASSERT_FALSE(e.scalars.empty());
  EXPECT_TRUE(std::isnan(e.scalars[0]));
  for (int64_t i = 0; i < 500; ++i)
    EXPECT_EQ(bitsOf(e.residual[i]), bitsOf(r[i])) << "element " << i;
}

} // namespace

TEST_F(DeviceEncoders, ThreeTierQuantiles) {
  ds::ThreeTierParams seeds{false, 0.5, 0.9};
  checkThreeTier(randomVector(5000, 11), randomVector(5000, 12, 0.1f), seeds,
                 "5000, quantiles 0.5 and 0.9");
  checkThreeTier(randomVector(70001, 13), std::vector<float>(70001, 0.0f),
                 seeds, "70001 (4-bit digits)");
  checkThreeTier({0.75f}, {-0.25f}, seeds, "one element");
}

TEST_F(DeviceEncoders, ThreeTierTiesAndEdges) {
  ds::ThreeTierParams seeds{false, 0.5, 0.9};
  // Magnitudes that tie at both quantiles, across signs.
  std::vector<float> ties(3000), zero(3000, 0.0f);
  for (int64_t i = 0; i < 3000; ++i)
    ties[i] = float((i * 37) % 9 - 4) * 0.125f;
  checkThreeTier(ties, zero, seeds, "9 magnitudes");
  // Nothing but zeros: both thresholds 0, nothing sent, t16 = 1.
  checkThreeTier(zero, zero, seeds, "zeros");
  // Subnormal magnitudes: t16 from the bits of a subnormal threshold.
  std::vector<float> tiny = randomVector(1000, 14, 1e-39f);
  checkThreeTier(tiny, std::vector<float>(1000, 0.0f), seeds, "subnormals");
  // Near the largest floats: t16 clamped to 2^127.
  std::vector<float> huge(1000);
  for (int64_t i = 0; i < 1000; ++i)
    huge[i] = (i % 2 ? -1.0f : 1.0f) * (1.8e38f + float(i % 97) * 1e36f);
  checkThreeTier(huge, std::vector<float>(1000, 0.0f), seeds, "huge");
  // The thresholds from the parameters.
  checkThreeTier(randomVector(2000, 16, 0.01f), randomVector(2000, 17, 0.001f),
                 ds::ThreeTierParams{true, 0.001, 0.02}, "fixed thresholds");
}

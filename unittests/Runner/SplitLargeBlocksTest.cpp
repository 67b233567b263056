//===- SplitLargeBlocksTest.cpp - Chunks extracted, results unchanged -----===//
//
// A long straight-line function (allocas used in one stretch and across
// stretches, values defined early and used late, stores to memory) is
// split with a small limit; the module must verify, have the expected
// extracted functions, and compute exactly what the unsplit one does when
// both are JIT-compiled.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/SplitLargeBlocks.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <string>

using namespace llvm;

namespace {

/// `i64 @f(ptr %out, i64 %x)`: `steps` dependent updates of an accumulator;
/// every 7th goes through a two-slot alloca of its own (used only there),
/// every 13th through one alloca shared by the whole function, and every
/// 50th is stored to `out`. The result also adds a value from the start.
std::string longFunction(int steps) {
  std::string s = "define i64 @f(ptr %out, i64 %x) {\n"
                  "entry:\n"
                  "  %shared = alloca i64, align 8\n"
                  "  %early = mul i64 %x, 7919\n"
                  "  %a0 = add i64 %x, 1\n";
  for (int k = 1; k <= steps; ++k) {
    std::string prev = "%a" + std::to_string(k - 1);
    std::string cur = "%a" + std::to_string(k);
    std::string t = "%t" + std::to_string(k);
    if (k % 7 == 0) {
      std::string slot = "%slot" + std::to_string(k);
      s += "  " + slot + " = alloca [2 x i64], align 8\n";
      s += "  store i64 " + prev + ", ptr " + slot + "\n";
      s += "  " + t + " = load volatile i64, ptr " + slot + "\n";
    } else if (k % 13 == 0) {
      s += "  store i64 " + prev + ", ptr %shared\n";
      s += "  " + t + " = load volatile i64, ptr %shared\n";
    } else {
      s += "  " + t + " = xor i64 " + prev + ", " +
           std::to_string(k * 2654435761LL % 1000003) + "\n";
    }
    s += "  " + cur + " = mul i64 " + t + ", 6364136223846793005\n";
    if (k % 50 == 0) {
      std::string at = "%at" + std::to_string(k);
      s += "  " + at + " = getelementptr i64, ptr %out, i64 " +
           std::to_string(k / 50 - 1) + "\n";
      s += "  store i64 " + cur + ", ptr " + at + "\n";
    }
  }
  s += "  %r = add i64 %a" + std::to_string(steps) + ", %early\n";
  s += "  ret i64 %r\n}\n";
  return s;
}

struct Outcome {
  uint64_t result = 0;
  uint64_t out[8] = {};
};

/// JIT-compiles `module` and calls f(out, 12345).
Outcome runF(std::unique_ptr<Module> module, std::unique_ptr<LLVMContext> ctx) {
  auto jit = cantFail(orc::LLJITBuilder().create());
  cantFail(jit->addIRModule(
      orc::ThreadSafeModule(std::move(module), std::move(ctx))));
  auto f =
      cantFail(jit->lookup("f")).toPtr<uint64_t (*)(uint64_t *, uint64_t)>();
  Outcome r;
  r.result = f(r.out, 12345);
  return r;
}

std::unique_ptr<Module> parse(const std::string &text, LLVMContext &ctx) {
  SMDiagnostic err;
  std::unique_ptr<Module> m = parseAssemblyString(text, err, ctx);
  if (!m) {
    std::string msg;
    raw_string_ostream os(msg);
    err.print("split-test", os);
    ADD_FAILURE() << msg;
  }
  return m;
}

/// The same function parsed twice, each copy in a context of its own (the
/// JIT takes both): one to split, one to compare with.
struct Pair {
  explicit Pair(const std::string &text)
      : plainCtx(std::make_unique<LLVMContext>()),
        splitCtx(std::make_unique<LLVMContext>()),
        plain(parse(text, *plainCtx)), split(parse(text, *splitCtx)) {}
  std::unique_ptr<LLVMContext> plainCtx, splitCtx;
  std::unique_ptr<Module> plain, split;
};

/// Splits `m` with `limit` and expects a valid module.
ds::runner::BlockSplitStats splitAndVerify(Module &m, unsigned limit) {
  ds::runner::BlockSplitStats stats = ds::runner::splitLargeBlocks(m, limit);
  std::string problems;
  raw_string_ostream os(problems);
  EXPECT_FALSE(verifyModule(m, &os)) << problems;
  return stats;
}

/// JIT-compiles both modules of `modules` and expects f(out, 12345) to
/// return and store the same values.
void expectSameResults(Pair &modules) {
  Outcome want = runF(std::move(modules.plain), std::move(modules.plainCtx));
  Outcome got = runF(std::move(modules.split), std::move(modules.splitCtx));
  EXPECT_EQ(got.result, want.result);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(got.out[i], want.out[i]) << "out[" << i << "]";
}

TEST(SplitLargeBlocks, ExtractsChunksAndKeepsResults) {
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  const std::string text = longFunction(400);

  Pair modules(text);
  ASSERT_TRUE(modules.plain && modules.split);
  Module *split = modules.split.get();

  ds::runner::BlockSplitStats stats = splitAndVerify(*split, 40);
  EXPECT_EQ(stats.blocksSplit, 1u);
  // ~1000 instructions in chunks of 40; the entry piece stays.
  EXPECT_GT(stats.chunksExtracted, 20u);
  unsigned defined = 0;
  for (Function &fn : *split)
    defined += !fn.isDeclaration();
  EXPECT_EQ(defined, 1 + stats.chunksExtracted);

  // Every alloca stays a slot of @f's frame, at the top of its entry
  // block; the pieces reach them through pointer arguments.
  Function *f = split->getFunction("f");
  for (Function &fn : *split)
    for (Instruction &inst : instructions(fn))
      if (isa<AllocaInst>(inst))
        EXPECT_TRUE(&fn == f && inst.getParent() == &f->getEntryBlock())
            << fn.getName().str();

  expectSameResults(modules);
}

/// A vector mask made in one stretch and used in a later one stays where
/// it is: passing `<16 x i1>` between functions made X86's code generator
/// abort on AVX-512 hosts (the JIT targets the host).
TEST(SplitLargeBlocks, KeepsVectorValuesInPlace) {
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  std::string text = "define i64 @f(ptr %out, i64 %x) {\n"
                     "entry:\n"
                     "  %a0 = add i64 %x, 1\n";
  for (int k = 1; k <= 200; ++k) {
    std::string prev = "%a" + std::to_string(k - 1);
    text += "  %a" + std::to_string(k) + " = mul i64 " + prev + ", " +
            std::to_string(2 * k + 1) + "\n";
    if (k == 60)
      text += "  %vx = insertelement <16 x i64> zeroinitializer, i64 %a60, "
              "i64 3\n"
              "  %mask = icmp ugt <16 x i64> %vx, splat (i64 5)\n";
    if (k == 150)
      text += "  %sel = select <16 x i1> %mask, <16 x i32> splat (i32 3), "
              "<16 x i32> splat (i32 1)\n"
              "  %sum = call i32 @llvm.vector.reduce.add.v16i32(<16 x i32> "
              "%sel)\n"
              "  %at1 = getelementptr i64, ptr %out, i64 1\n"
              "  %sum64 = zext i32 %sum to i64\n"
              "  store i64 %sum64, ptr %at1\n";
  }
  text += "  %bits = bitcast <16 x i1> %mask to i16\n"
          "  %wide = zext i16 %bits to i64\n"
          "  store i64 %wide, ptr %out\n"
          "  %r = add i64 %a200, %wide\n"
          "  ret i64 %r\n}\n"
          "declare i32 @llvm.vector.reduce.add.v16i32(<16 x i32>)\n";
  Pair modules(text);
  ASSERT_TRUE(modules.plain && modules.split);
  Module *split = modules.split.get();
  ds::runner::BlockSplitStats stats = splitAndVerify(*split, 20);
  EXPECT_GT(stats.chunksExtracted, 3u);
  for (Function &fn : *split) {
    if (fn.isDeclaration())
      continue;
    for (Argument &arg : fn.args())
      EXPECT_FALSE(arg.getType()->isVectorTy()) << fn.getName().str();
  }
  expectSameResults(modules);
}

/// A large loop body: a value carried through memory from one iteration
/// to the next, two buffers swapped through phis, and a pointer into one
/// of them computed in one stretch and used in a later one. Pieces of the
/// loop run once per iteration and must see the same frame every time.
TEST(SplitLargeBlocks, LoopBodiesKeepTheirFrame) {
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  std::string text = "define i64 @f(ptr %out, i64 %x) {\n"
                     "entry:\n"
                     "  %st = alloca i64, align 8\n"
                     "  %A = alloca [8 x i64], align 8\n"
                     "  %B = alloca [8 x i64], align 8\n"
                     "  store i64 %x, ptr %st\n"
                     "  call void @llvm.memset.p0.i64(ptr %A, i8 0, i64 64, "
                     "i1 false)\n"
                     "  call void @llvm.memset.p0.i64(ptr %B, i8 1, i64 64, "
                     "i1 false)\n"
                     "  br label %loop\n"
                     "loop:\n"
                     "  %i = phi i64 [0, %entry], [%i1, %loop]\n"
                     "  %cur = phi ptr [%A, %entry], [%nxt, %loop]\n"
                     "  %nxt = phi ptr [%B, %entry], [%cur, %loop]\n"
                     "  %slot = and i64 %i, 7\n"
                     "  %p = getelementptr i64, ptr %cur, i64 %slot\n"
                     "  %old = load i64, ptr %st\n"
                     "  %v0 = add i64 %old, %i\n";
  for (int k = 1; k <= 60; ++k)
    text += "  %v" + std::to_string(k) + " = mul i64 %v" +
            std::to_string(k - 1) + ", " + std::to_string(2 * k + 3) + "\n";
  text += "  %q = getelementptr i64, ptr %nxt, i64 %slot\n"
          "  %prev = load i64, ptr %q\n"
          "  %mix = xor i64 %v60, %prev\n"
          "  store i64 %mix, ptr %p\n"
          "  store i64 %mix, ptr %st\n"
          "  %i1 = add i64 %i, 1\n"
          "  %again = icmp ult i64 %i1, 37\n"
          "  br i1 %again, label %loop, label %exit\n"
          "exit:\n"
          "  %last = load i64, ptr %st\n"
          "  store i64 %last, ptr %out\n"
          "  %a3 = getelementptr i64, ptr %A, i64 3\n"
          "  %b5 = getelementptr i64, ptr %B, i64 5\n"
          "  %x3 = load i64, ptr %a3\n"
          "  %x5 = load i64, ptr %b5\n"
          "  %o1 = getelementptr i64, ptr %out, i64 1\n"
          "  store i64 %x3, ptr %o1\n"
          "  %r = add i64 %x5, %last\n"
          "  ret i64 %r\n}\n"
          "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)\n";
  Pair modules(text);
  ASSERT_TRUE(modules.plain && modules.split);
  Module *split = modules.split.get();
  ds::runner::BlockSplitStats stats = splitAndVerify(*split, 10);
  EXPECT_EQ(stats.blocksSplit, 1u);
  EXPECT_GT(stats.chunksExtracted, 3u);
  expectSameResults(modules);
}

TEST(SplitLargeBlocks, LeavesSmallBlocksAlone) {
  LLVMContext ctx;
  std::unique_ptr<Module> m = parse(longFunction(20), ctx);
  ASSERT_TRUE(m);
  ds::runner::BlockSplitStats stats = ds::runner::splitLargeBlocks(*m, 1000);
  EXPECT_EQ(stats.blocksSplit, 0u);
  EXPECT_EQ(stats.chunksExtracted, 0u);
  EXPECT_EQ(m->size(), 1u);
}

} // namespace

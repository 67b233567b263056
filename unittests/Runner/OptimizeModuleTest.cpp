//===- OptimizeModuleTest.cpp - The step pipeline skips one pass ----------===//
//
// optimizeModule is LLVM's default pipeline less CalledValuePropagation
// (see OptimizeModule.h). An indirect call whose possible callees are
// known is what that pass annotates with !callees: LLVM's own pipeline
// does, ours must not, and both must leave a valid module.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/OptimizeModule.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

using namespace llvm;

namespace {

constexpr const char *kIndirectCall = R"(
@sink = global i32 0
define internal void @a() noinline { store volatile i32 1, ptr @sink
  ret void }
define internal void @b() noinline { store volatile i32 2, ptr @sink
  ret void }
define internal void @call(ptr %f) noinline {
  call void %f()
  ret void
}
define void @entry(i1 %c) {
  %f = select i1 %c, ptr @a, ptr @b
  call void @call(ptr %f)
  ret void
}
)";

/// Whether some call in `m` carries !callees.
bool hasCalleesMetadata(Module &m) {
  for (Function &f : m)
    for (Instruction &inst : instructions(f))
      if (inst.getMetadata(LLVMContext::MD_callees))
        return true;
  return false;
}

std::unique_ptr<Module> parse(LLVMContext &ctx) {
  SMDiagnostic err;
  std::unique_ptr<Module> m = parseAssemblyString(kIndirectCall, err, ctx);
  EXPECT_TRUE(m) << err.getMessage().str();
  return m;
}

TEST(OptimizeModule, SkipsCalledValuePropagation) {
  LLVMContext ctx;
  // LLVM's default O3 pipeline annotates the call (the control).
  std::unique_ptr<Module> stock = parse(ctx);
  ASSERT_TRUE(stock);
  {
    PassBuilder builder;
    LoopAnalysisManager lam;
    FunctionAnalysisManager fam;
    CGSCCAnalysisManager cgam;
    ModuleAnalysisManager mam;
    builder.registerModuleAnalyses(mam);
    builder.registerCGSCCAnalyses(cgam);
    builder.registerFunctionAnalyses(fam);
    builder.registerLoopAnalyses(lam);
    builder.crossRegisterProxies(lam, fam, cgam, mam);
    builder.buildPerModuleDefaultPipeline(OptimizationLevel::O3)
        .run(*stock, mam);
  }
  EXPECT_TRUE(hasCalleesMetadata(*stock));

  std::unique_ptr<Module> ours = parse(ctx);
  ASSERT_TRUE(ours);
  EXPECT_FALSE(errorToBool(ds::runner::optimizeModule(*ours, 3, nullptr)));
  EXPECT_FALSE(verifyModule(*ours, &errs()));
  EXPECT_FALSE(hasCalleesMetadata(*ours));
}

TEST(OptimizeModule, EveryLevelRunsAndOthersFail) {
  for (unsigned level = 0; level <= 3; ++level) {
    LLVMContext ctx;
    std::unique_ptr<Module> m = parse(ctx);
    ASSERT_TRUE(m);
    EXPECT_FALSE(errorToBool(ds::runner::optimizeModule(*m, level, nullptr)))
        << "level " << level;
    EXPECT_FALSE(verifyModule(*m, &errs()));
  }
  LLVMContext ctx;
  std::unique_ptr<Module> m = parse(ctx);
  Error e = ds::runner::optimizeModule(*m, 4, nullptr);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(toString(std::move(e)).find("expected 0 to 3"), std::string::npos);
}

} // namespace

//===- SplitLargeBlocks.cpp - Bound the size of basic blocks --------------===//

#include "ds/Runner/SplitLargeBlocks.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"

using namespace llvm;

namespace {

/// Whether `bb` may become a function of its own. It must not touch the
/// frame: no allocas (the entry block's static ones were hoisted out of
/// every piece, and any other would either become a slot of the wrong frame
/// or allocate anew each time), no stack save or restore, no setjmp-like
/// call (`returns_twice`), no phis or landing pads.
bool isMovable(const BasicBlock &bb) {
  for (const Instruction &inst : bb) {
    if (isa<AllocaInst, PHINode, LandingPadInst>(inst))
      return false;
    if (const auto *call = dyn_cast<CallBase>(&inst);
        call && call->hasFnAttr(Attribute::ReturnsTwice))
      return false;
    if (const auto *ii = dyn_cast<IntrinsicInst>(&inst))
      if (ii->getIntrinsicID() == Intrinsic::stacksave ||
          ii->getIntrinsicID() == Intrinsic::stackrestore ||
          ii->getIntrinsicID() == Intrinsic::vastart)
        return false;
  }
  return true;
}

/// Moves the static allocas of `f`'s entry block to its top, in order, so
/// that the pieces cut from it hold none: a piece then reaches the slots it
/// uses through pointer arguments into its caller's frame, which stays
/// valid for the whole call. (A static alloca is a fixed frame slot
/// wherever it stands in the entry block.)
void hoistStaticAllocas(Function &f) {
  SmallVector<AllocaInst *> allocas;
  for (Instruction &inst : f.getEntryBlock())
    if (auto *alloca = dyn_cast<AllocaInst>(&inst);
        alloca && alloca->isStaticAlloca())
      allocas.push_back(alloca);
  // (No comesBefore queries here: each would renumber the whole block.)
  BasicBlock::iterator top = f.getEntryBlock().getFirstNonPHIOrDbg();
  for (AllocaInst *alloca : allocas)
    if (&*top == alloca)
      ++top;
    else
      alloca->moveBefore(top);
}

/// Whether a value of type `t` may cross into or out of an extracted
/// function. Scalars and pointers only: vectors of i1 (AVX-512 masks)
/// passed between functions made X86's code generator fail ("Cannot emit
/// physreg copy instruction"), and a piece that vectorised code crosses
/// is rare in the long straight-line blocks this is for.
bool isPlainType(Type *t) {
  return t->isPointerTy() || t->isFloatTy() || t->isDoubleTy() ||
         (t->isIntegerTy() && t->getIntegerBitWidth() <= 64);
}

/// Cuts `bb` into blocks of at most `limit` instructions; returns the new
/// blocks before the last one (each ends in a branch to the next).
SmallVector<BasicBlock *> cutBlock(BasicBlock *bb, unsigned limit) {
  SmallVector<BasicBlock *> chunks;
  BasicBlock *rest = bb;
  while (rest->size() > limit) {
    // Allocas and phis at the top stay in the first piece; count from
    // there.
    auto cut = rest->getFirstNonPHIOrDbgOrAlloca();
    unsigned n = 0;
    for (; cut != rest->end() && n < limit; ++cut)
      ++n;
    if (cut == rest->end() || cut->isTerminator())
      break;
    chunks.push_back(rest);
    rest = rest->splitBasicBlock(cut, rest->getName() + ".chunk");
  }
  return chunks;
}

} // namespace

ds::runner::BlockSplitStats
ds::runner::splitLargeBlocks(Module &module, unsigned maxInstructions) {
  BlockSplitStats stats;
  SmallVector<Function *> functions;
  for (Function &f : module)
    if (!f.isDeclaration())
      functions.push_back(&f);
  for (Function *f : functions) {
    SmallVector<BasicBlock *> large;
    for (BasicBlock &bb : *f)
      if (bb.size() > maxInstructions)
        large.push_back(&bb);
    if (large.empty())
      continue;
    hoistStaticAllocas(*f);
    SmallVector<BasicBlock *> chunks;
    for (BasicBlock *bb : large) {
      SmallVector<BasicBlock *> cut = cutBlock(bb, maxInstructions);
      if (!cut.empty())
        ++stats.blocksSplit;
      chunks.append(cut.begin(), cut.end());
    }
    // One cache per function: extraction keeps it valid.
    CodeExtractorAnalysisCache cache(*f);
    for (BasicBlock *chunk : chunks) {
      // The entry block keeps the function's own stack slots.
      if (chunk == &f->getEntryBlock() || !isMovable(*chunk))
        continue;
      CodeExtractor extractor(ArrayRef<BasicBlock *>{chunk}, /*DT=*/nullptr,
                              /*AggregateArgs=*/false, nullptr, nullptr,
                              nullptr, /*AllowVarArgs=*/false,
                              /*AllowAlloca=*/false, nullptr, "part");
      if (!extractor.isEligible())
        continue;
      SetVector<Value *> inputs, outputs, sunk;
      extractor.findInputsOutputs(inputs, outputs, sunk);
      if (!all_of(inputs, [](Value *v) { return isPlainType(v->getType()); }) ||
          !all_of(outputs, [](Value *v) { return isPlainType(v->getType()); }))
        continue;
      if (Function *part = extractor.extractCodeRegion(cache)) {
        part->addFnAttr(Attribute::NoInline);
        ++stats.chunksExtracted;
      }
    }
  }
  return stats;
}

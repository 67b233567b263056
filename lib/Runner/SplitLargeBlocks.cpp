//===- SplitLargeBlocks.cpp - Bound the size of basic blocks
//---------------===//

#include "ds/Runner/SplitLargeBlocks.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"

using namespace llvm;

namespace {

/// Whether `bb` may become a function of its own: it neither saves nor
/// restores the stack pointer, and each alloca in it has a constant size and
/// is used only inside it (it becomes the new function's own stack slot; a
/// pointer to it must not outlive the call).
bool isMovable(const BasicBlock &bb) {
  for (const Instruction &inst : bb) {
    if (const auto *alloca = dyn_cast<AllocaInst>(&inst)) {
      if (!isa<ConstantInt>(alloca->getArraySize()))
        return false;
      for (const User *user : alloca->users())
        if (cast<Instruction>(user)->getParent() != &bb)
          return false;
    }
    if (isa<PHINode, LandingPadInst>(inst))
      return false;
    if (const auto *ii = dyn_cast<IntrinsicInst>(&inst))
      if (ii->getIntrinsicID() == Intrinsic::stacksave ||
          ii->getIntrinsicID() == Intrinsic::stackrestore ||
          ii->getIntrinsicID() == Intrinsic::vastart)
        return false;
  }
  return true;
}

/// The static allocas of `f`'s entry block, in order.
SmallVector<AllocaInst *> staticAllocas(Function &f) {
  SmallVector<AllocaInst *> allocas;
  for (Instruction &inst : f.getEntryBlock())
    if (auto *alloca = dyn_cast<AllocaInst>(&inst);
        alloca && alloca->isStaticAlloca())
      allocas.push_back(alloca);
  return allocas;
}

/// Moves the static allocas of `f`'s entry block to its top, in order, so
/// that the chunks cut from it start after them.
void hoistStaticAllocas(Function &f) {
  // (No comesBefore queries here: each would renumber the whole block.)
  BasicBlock::iterator top = f.getEntryBlock().getFirstNonPHIOrDbg();
  for (AllocaInst *alloca : staticAllocas(f))
    if (&*top == alloca)
      ++top;
    else
      alloca->moveBefore(top);
}

/// Each static alloca of the entry block that only `chunk` uses moves into
/// it, so that it becomes the extracted function's own stack slot rather
/// than one more argument. (A GPU step makes one for every launch's
/// argument array.)
void confineAllocas(Function &f, ArrayRef<BasicBlock *> chunks) {
  SmallPtrSet<BasicBlock *, 16> isChunk(llvm::from_range, chunks);
  BasicBlock &entry = f.getEntryBlock();
  for (AllocaInst *alloca : staticAllocas(f)) {
    BasicBlock *owner = nullptr;
    bool single = !alloca->use_empty();
    for (User *user : alloca->users()) {
      auto *inst = dyn_cast<Instruction>(user);
      if (!inst || (owner && inst->getParent() != owner)) {
        single = false;
        break;
      }
      owner = inst->getParent();
    }
    if (single && owner != &entry && isChunk.contains(owner))
      alloca->moveBefore(owner->getFirstInsertionPt());
  }
}

/// Puts the allocas an extracted function received back at the top of its
/// entry block, where code generation treats them as fixed stack slots.
void allocasToEntry(Function &part) {
  BasicBlock &entry = part.getEntryBlock();
  SmallVector<AllocaInst *> allocas;
  for (BasicBlock &bb : part)
    if (&bb != &entry)
      for (Instruction &inst : bb)
        if (auto *alloca = dyn_cast<AllocaInst>(&inst);
            alloca && isa<ConstantInt>(alloca->getArraySize()))
          allocas.push_back(alloca);
  for (AllocaInst *alloca : allocas)
    alloca->moveBefore(entry.getFirstInsertionPt());
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
    auto cut = rest->getFirstNonPHIOrDbgOrAlloca();
    // Allocas and phis at the top stay in the first piece; count from
    // there.
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
    confineAllocas(*f, chunks);
    // One cache per function: extraction keeps it valid.
    CodeExtractorAnalysisCache cache(*f);
    for (BasicBlock *chunk : chunks) {
      // The entry block keeps the function's own stack slots.
      if (chunk == &f->getEntryBlock() || !isMovable(*chunk))
        continue;
      CodeExtractor extractor(ArrayRef<BasicBlock *>{chunk}, /*DT=*/nullptr,
                              /*AggregateArgs=*/false, nullptr, nullptr,
                              nullptr, /*AllowVarArgs=*/false,
                              /*AllowAlloca=*/true, nullptr, "part");
      if (!extractor.isEligible())
        continue;
      SetVector<Value *> inputs, outputs, sunk;
      extractor.findInputsOutputs(inputs, outputs, sunk);
      if (!all_of(inputs, [](Value *v) { return isPlainType(v->getType()); }) ||
          !all_of(outputs, [](Value *v) { return isPlainType(v->getType()); }))
        continue;
      if (Function *part = extractor.extractCodeRegion(cache)) {
        part->addFnAttr(Attribute::NoInline);
        allocasToEntry(*part);
        ++stats.chunksExtracted;
      }
    }
  }
  return stats;
}

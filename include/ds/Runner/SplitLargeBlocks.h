//===- SplitLargeBlocks.h - Bound the size of basic blocks ---- -*- C++ -*-===//
//
// LLVM's instruction selection and pre-RA scheduling work one basic block at
// a time, and their dependency building grows faster than linearly in the
// block's memory operations. A GPU step's host function is one block of
// thousands of launches (and a large CPU step can have long straight-line
// stretches too), so after optimisation and before code generation its
// large blocks are cut into chunks, each moved into a function of its own
// (LLVM's CodeExtractor; live values cross as arguments and out-pointers).
// Per-block splitting alone would not survive: CodeGenPrepare merges a
// block into its single predecessor.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_SPLITLARGEBLOCKS_H
#define DS_RUNNER_SPLITLARGEBLOCKS_H

namespace llvm {
class Module;
} // namespace llvm

namespace ds::runner {

/// What splitLargeBlocks did.
struct BlockSplitStats {
  unsigned blocksSplit = 0;     ///< blocks over the limit
  unsigned chunksExtracted = 0; ///< functions made
};

/// Cuts every basic block of a defined function in `module` with more than
/// `maxInstructions` instructions into chunks of about that many, and moves
/// each chunk that can be moved into a new internal function called in its
/// place. A chunk stays where it is when it is the entry block or the last
/// piece (which ends in the block's own terminator), holds an alloca, a
/// phi, a landing pad, a stack save or restore or a `returns_twice` call,
/// or when a value other than a scalar or a pointer would cross its
/// boundary. The entry block's static allocas move to its top first, so
/// the pieces reach them through pointers into the caller's frame.
/// Semantics are unchanged.
BlockSplitStats splitLargeBlocks(llvm::Module &module,
                                 unsigned maxInstructions);

} // namespace ds::runner

#endif // DS_RUNNER_SPLITLARGEBLOCKS_H

//===- TrainerInternal.h - Helpers shared by the Trainer files --*- C++ -*-===//
//
// Internal to lib/Runner: what Trainer.cpp and TrainerState.cpp share.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNNER_TRAINERINTERNAL_H
#define DS_LIB_RUNNER_TRAINERINTERNAL_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace ds::runner::detail {

inline llvm::Error errorf(const llvm::Twine &msg) {
  return llvm::createStringError(msg.str());
}

} // namespace ds::runner::detail

#endif // DS_LIB_RUNNER_TRAINERINTERNAL_H

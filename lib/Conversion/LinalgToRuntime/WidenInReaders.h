//===- WidenInReaders.h - A widening folded into its readers ----*- C++ -*-===//
//
// DDP's fp16/bf16 hooks leave the gradients' mean as 16-bit values, which
// the step widens to f32 for the optimizer. As a kernel of its own the
// widening reads the 16-bit bucket and writes an f32 copy that every
// reader then loads again; the readers (the optimizer's update, its moments,
// the clipping norm) can as well load the 16-bit values and widen them
// where they use them.
//
//===----------------------------------------------------------------------===//

#ifndef DS_CONVERSION_LINALGTORUNTIME_WIDENINREADERS_H
#define DS_CONVERSION_LINALGTORUNTIME_WIDENINREADERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir::ds {

/// `wide` is the elementwise widening (arith.extf) of `narrow`, a tensor
/// of the same shape. Makes each linalg.generic that reads `wide` as an
/// input, directly or through tensor.extract_slice, expand_shape and
/// collapse_shape ops, read the same slices of `narrow` instead and widen
/// the element at the top of its body. Readers of any other kind keep
/// `wide`; slices and reshapes left without users are erased. Returns
/// whether `wide` has no users left.
bool widenInReaders(OpBuilder &b, Value narrow, Value wide);

} // namespace mlir::ds

#endif // DS_CONVERSION_LINALGTORUNTIME_WIDENINREADERS_H

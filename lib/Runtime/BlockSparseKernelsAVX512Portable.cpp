//===- BlockSparseKernelsAVX512Portable.cpp - AVX-512 kernels, any CPU ----===//
//
// BlockSparseKernelsAVX512.cpp compiled for the baseline ISA, as
// portableAVX512SparseKernels(): the AVX-512 micro-kernels' algorithm (pair-
// interleaved rows, broadcast pairs, de-interleaving) on any CPU, which
// DSRT_SPARSE_KERNEL=avx512-portable selects so that the unit tests check
// that path on machines without AVX-512. It is never chosen automatically.
//
//===----------------------------------------------------------------------===//

#define DSRT_SPARSE_AVX512_PORTABLE
#include "BlockSparseKernelsAVX512.cpp"

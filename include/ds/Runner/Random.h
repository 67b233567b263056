//===- Random.h - Counter-based random numbers ------------------*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11), bit-exact with Random123, cuRAND and PyTorch's CUDA generator.
// A counter-based generator has no sequential state: output block n is a
// pure function of (key, n), so compiled kernels, the host and a resumed run
// all agree on every random number without sharing a stream.
//
// On top of it: dropoutKeep, the reference definition of `ds.dropout`'s mask
// that compiled code is tested against, and RandomStream, the seeded stream
// used for parameter initialisation and synthetic data. RandomStream's
// floating-point transforms use only correctly rounded IEEE operations (no
// libm, no std:: distributions), so its output is the same on every machine
// and standard library.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNNER_RANDOM_H
#define DS_RUNNER_RANDOM_H

#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>

namespace ds::runner {

struct HostTensor;

/// One Philox4x32 block with 10 rounds.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key);

/// Whether `ds.dropout` keeps element `index` of a tensor whose mask uses
/// `key` and `counterBase`: with c = counterBase + index (mod 2^64), the
/// Philox block of counter {lo32(c), hi32(c), 0, 0} and key {lo32(key),
/// hi32(key)} gives word w = out[0]; the element is kept iff
/// w * 2^-32 >= p (computed in double).
bool dropoutKeep(uint64_t key, uint64_t counterBase, uint64_t index, double p);

/// Natural logarithm of `x` > 0 and cosine of 2*pi*`turns`, computed with
/// +, -, *, / only, so the results are identical on every platform (within
/// about 1e-15 relative of the exact values). Exposed for testing.
double portableLog(double x);
double portableCos2Pi(double turns);

/// A deterministic stream of random numbers: Philox blocks with key = seed
/// and counter = {block lo, block hi, lo32(streamId), hi32(streamId)}, read
/// four 32-bit words per block. Distinct stream ids give independent
/// streams for the same seed.
class RandomStream {
public:
  RandomStream(uint64_t seed, uint64_t streamId);

  uint32_t nextU32();
  /// Two words, the first one in the high half.
  uint64_t nextU64();
  /// Uniform in the open interval (0, 1), 52 random bits.
  double uniform01();
  /// Uniform integer in [0, n), unbiased (rejection sampling); n > 0.
  uint64_t uniformInt(uint64_t n);
  /// Standard normal by Box-Muller (cosine branch) from two uniform01().
  double normal();

  uint64_t seed() const { return key; }
  uint64_t streamId() const { return stream; }
  /// Number of 32-bit words consumed so far; with seed and streamId this
  /// is the stream's whole state (for checkpoints).
  uint64_t position() const { return consumed; }
  /// Continues the stream after `position` words.
  void seek(uint64_t position);

private:
  void refill();

  uint64_t key;
  uint64_t stream;
  uint64_t consumed = 0;
  std::array<uint32_t, 4> block;
};

/// Fills a float tensor (F16, BF16, F32, F64) with N(0, std^2) samples of
/// RandomStream(seed, streamId), in element order.
llvm::Error fillNormal(HostTensor &tensor, double std, uint64_t seed,
                       uint64_t streamId);

/// Fills a float tensor with U(-bound, bound) samples of
/// RandomStream(seed, streamId), in element order.
llvm::Error fillUniform(HostTensor &tensor, double bound, uint64_t seed,
                        uint64_t streamId);

/// Sets every element to `value`. Integer dtypes require an integral value
/// that fits the type.
llvm::Error fillConstant(HostTensor &tensor, double value);

} // namespace ds::runner

#endif // DS_RUNNER_RANDOM_H

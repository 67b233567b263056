//===- TopK.cpp - The top-k selection of mask updates ---------------------===//
//
// dsrt_top_k_mask_*: marks the k highest-ranked of n scores. Scores rank by
// value, equal values by index (the higher index ranks higher, as the tail
// of a stable ascending sort), NaN below every number. The ranking is a
// strict total order, so the selection is unique and equals NumPy's
// `np.argsort(s, kind="stable")[n - k:]` on NaN-free scores. One
// nth_element over an index array: O(n), once per mask update and layer.
//
//===----------------------------------------------------------------------===//

#include "RuntimeInternal.h"

#include "ds/Runtime/ds_runtime.h"

#include <algorithm>
#include <cmath>

using namespace dsrt;

namespace {

template <typename T, typename Memref>
void topKMask(const Memref *scores, int64_t k, dsrt_memref1_i8 *out) {
  if (!scores || !out) {
    (void)DS_ERROR("top-k mask: null descriptor");
    return;
  }
  int64_t n = scores->sizes[0];
  if (n < 0 || out->sizes[0] != n) {
    (void)DS_ERROR("top-k mask: %lld scores but a mask of %lld elements",
                   static_cast<long long>(n),
                   static_cast<long long>(out->sizes[0]));
    return;
  }
  if (n > 0 && (!scores->aligned || !out->aligned || scores->offset < 0 ||
                out->offset < 0 || (n > 1 && out->strides[0] == 0))) {
    (void)DS_ERROR("top-k mask: bad descriptor (null data, negative offset "
                   "or an output with stride 0)");
    return;
  }
  k = std::clamp<int64_t>(k, 0, n);
  Buffer<int64_t> order = allocateBuffer<int64_t>(n, "the top-k order");
  if (!order)
    return;
  const T *s = scores->aligned + scores->offset;
  int64_t stride = scores->strides[0];
  auto value = [&](int64_t i) { return s[i * stride]; };
  // a ranks above b.
  auto above = [&](int64_t a, int64_t b) {
    T va = value(a), vb = value(b);
    bool nanA = std::isnan(va), nanB = std::isnan(vb);
    if (nanA != nanB)
      return nanB;
    if (!nanA && va != vb)
      return va > vb;
    return a > b;
  };
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  if (k > 0 && k < n)
    std::nth_element(order.get(), order.get() + k, order.get() + n, above);
  int8_t *o = out->aligned + out->offset;
  for (int64_t i = 0; i < n; ++i)
    o[i * out->strides[0]] = 0;
  for (int64_t i = 0; i < k; ++i)
    o[order[i] * out->strides[0]] = 1;
}

} // namespace

void _mlir_ciface_dsrt_top_k_mask_f32(dsrt_memref1_f32 *scores, int64_t k,
                                      dsrt_memref1_i8 *out) {
  topKMask<float>(scores, k, out);
}

void _mlir_ciface_dsrt_top_k_mask_f64(dsrt_memref1_f64 *scores, int64_t k,
                                      dsrt_memref1_i8 *out) {
  topKMask<double>(scores, k, out);
}

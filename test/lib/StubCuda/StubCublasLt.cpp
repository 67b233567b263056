//===- StubCublasLt.cpp - A stub cuBLASLt for tests without a GPU ---------===//
//
// libcublasLt.so for tests, next to the stub driver (StubCuda.cpp), whose
// "device" memory is host memory. It exports the cublasLt* functions the
// runtime resolves (lib/Runtime/cuda/CublasLt.h) with cublasLt.h's
// prototypes, and runs cublasLtMatmul as a plain loop over cuBLASLt's
// documented column-major semantics
//   D[b] = alpha * (scaleA * scaleB) * opA(A[b]) * opB(B[b]) + beta * C[b]
//          (+ bias, a vector along D's rows, with CUBLASLT_EPILOGUE_BIAS)
// (f32, bf16, f16, E4M3 and E5M2 inputs; f32 C and D, or bf16/f16 ones
// rounded to nearest even from the sum, as cuBLASLt's type table allows),
// so a test can check
// the runtime's row-major mapping against a reference computed apart from
// both. It refuses what cuBLASLt refuses and the runtime must never ask
// for: FP8 outside the TN layout, E5M2 x E5M2, ld < rows. Each call to the
// heuristic and to cublasLtMatmul is logged to $DS_STUB_CUDA_LOG
// (StubCommon.h), and the exit report counts live handles and descriptors.
//
//===----------------------------------------------------------------------===//

#include "StubCommon.h"

// The library is built with hidden visibility; only the functions the
// header declares are exported (a declaration fixes a symbol's visibility).
#pragma GCC visibility push(default)
#include <cublasLt.h>
#pragma GCC visibility pop

#include <atomic>
#include <cmath>
#include <new>
#include <type_traits>

using namespace stubcuda;

namespace {

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scaleType;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  const float *scaleA = nullptr, *scaleB = nullptr;
  int8_t fastAccum = 0;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t biasType = -1; // -1: D's type.
};

struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t batchStride = 0;
};

struct Pref {
  uint64_t workspace = 0;
  uint32_t alignment[4] = {256, 256, 256, 256};
};

std::atomic<int> liveHandles{0}, liveDescs{0}, liveLayouts{0}, livePrefs{0};

void runGemm(const Desc &d, const Layout &a, const Layout &b, const Layout &c,
             const Layout &dl, uint64_t m, uint64_t n, uint64_t k,
             float alphaValue, float betaValue, const char *pa, const char *pb,
             const char *pc, char *pd);

__attribute__((destructor)) void reportAtExit() {
  logLine("stub-cublaslt-exit live-handles=%d live-descs=%d live-layouts=%d "
          "live-preferences=%d",
          liveHandles.load(), liveDescs.load(), liveLayouts.load(),
          livePrefs.load());
}

const char *typeName(cudaDataType_t t) {
  switch (t) {
  case CUDA_R_32F:
    return "f32";
  case CUDA_R_16BF:
    return "bf16";
  case CUDA_R_16F:
    return "f16";
  case CUDA_R_8F_E4M3:
    return "e4m3";
  case CUDA_R_8F_E5M2:
    return "e5m2";
  default:
    return "other";
  }
}

bool isFp8(cudaDataType_t t) {
  return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2;
}

int64_t elementBytes(cudaDataType_t t) {
  switch (t) {
  case CUDA_R_32F:
    return 4;
  case CUDA_R_16BF:
  case CUDA_R_16F:
    return 2;
  default:
    return 1;
  }
}

/// A small float with `exponentBits` and `mantissaBits`, IEEE-like except
/// that E4M3 has no infinities and only S.1111.111 is NaN.
float decodeSmall(uint32_t bits, int exponentBits, int mantissaBits,
                  bool e4m3) {
  uint32_t sign = bits >> (exponentBits + mantissaBits);
  uint32_t exponent = (bits >> mantissaBits) & ((1u << exponentBits) - 1);
  uint32_t mantissa = bits & ((1u << mantissaBits) - 1);
  int bias = (1 << (exponentBits - 1)) - 1;
  float value;
  uint32_t maxExponent = (1u << exponentBits) - 1;
  if (e4m3 && exponent == maxExponent && mantissa == (1u << mantissaBits) - 1)
    value = NAN;
  else if (!e4m3 && exponent == maxExponent)
    value = mantissa ? NAN : INFINITY;
  else if (exponent == 0)
    value = std::ldexp(float(mantissa), 1 - bias - mantissaBits);
  else
    value = std::ldexp(float(mantissa | (1u << mantissaBits)),
                       int(exponent) - bias - mantissaBits);
  return sign ? -value : value;
}

float load(const char *base, cudaDataType_t t, int64_t index) {
  const char *p = base + index * elementBytes(t);
  switch (t) {
  case CUDA_R_32F: {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case CUDA_R_16BF: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    uint32_t bits = uint32_t(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  case CUDA_R_16F: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return decodeSmall(h, 5, 10, false);
  }
  case CUDA_R_8F_E4M3:
    return decodeSmall(static_cast<uint8_t>(*p), 4, 3, true);
  case CUDA_R_8F_E5M2:
    return decodeSmall(static_cast<uint8_t>(*p), 5, 2, false);
  default:
    return NAN;
  }
}

/// Stores v in element type t, rounded to nearest even (bf16, f16) as
/// cuBLASLt's epilogue does.
void store(char *base, cudaDataType_t t, int64_t index, float v) {
  char *p = base + index * elementBytes(t);
  if (t == CUDA_R_32F) {
    std::memcpy(p, &v, 4);
  } else if (t == CUDA_R_16BF) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    uint16_t h = std::isnan(v)
                     ? uint16_t((bits >> 16) | 0x40)
                     : uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
    std::memcpy(p, &h, 2);
  } else if (t == CUDA_R_16F) {
    _Float16 h = static_cast<_Float16>(v); // IEEE round to nearest even.
    std::memcpy(p, &h, 2);
  }
}

/// opA's shape (m x k) from A's layout and op.
void opShape(const Layout &l, int32_t op, uint64_t &rows, uint64_t &cols) {
  rows = op == CUBLAS_OP_N ? l.rows : l.cols;
  cols = op == CUBLAS_OP_N ? l.cols : l.rows;
}

/// The checks the real library makes that the runtime must satisfy.
cublasStatus_t validate(const Desc &d, const Layout &a, const Layout &b,
                        const Layout &c, const Layout &dl, const char *&why) {
  uint64_t am, ak, bk, bn;
  opShape(a, d.transa, am, ak);
  opShape(b, d.transb, bk, bn);
  why = nullptr;
  if (am != dl.rows || bn != dl.cols || ak != bk)
    why = "shapes-mismatch";
  else if (a.ld < int64_t(a.rows) || b.ld < int64_t(b.rows) ||
           dl.ld < int64_t(dl.rows) || a.ld < 1 || b.ld < 1 || dl.ld < 1)
    why = "ld-below-rows";
  else if (c.rows != dl.rows || c.cols != dl.cols || c.ld != dl.ld)
    why = "c-differs-from-d";
  else if (a.batch != dl.batch || b.batch != dl.batch || c.batch != dl.batch)
    why = "batch-counts-differ";
  else if (c.type != dl.type)
    why = "c-type-differs-from-d";
  else if (!(dl.type == CUDA_R_32F ||
             (dl.type == CUDA_R_16BF &&
              (a.type == CUDA_R_16BF || isFp8(a.type))) ||
             (dl.type == CUDA_R_16F &&
              (a.type == CUDA_R_16F || isFp8(a.type)))))
    why = "unsupported-output-type";
  else if (d.compute != CUBLAS_COMPUTE_32F || d.scaleType != CUDA_R_32F)
    why = "compute-not-32f";
  else if (isFp8(a.type) != isFp8(b.type))
    why = "mixed-fp8";
  else if (isFp8(a.type) &&
           (d.transa != CUBLAS_OP_T || d.transb != CUBLAS_OP_N))
    why = "fp8-needs-tn";
  else if (a.type == CUDA_R_8F_E5M2 && b.type == CUDA_R_8F_E5M2)
    why = "fp8-e5m2-e5m2";
  else if (!isFp8(a.type) && a.type != b.type)
    why = "mixed-types";
  else if ((d.scaleA || d.scaleB) && !isFp8(a.type))
    why = "scales-without-fp8";
  else if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
           d.epilogue != CUBLASLT_EPILOGUE_BIAS)
    why = "unsupported-epilogue";
  // Bias vectors of D's type (bf16 D from FP8 may take f32 too; the
  // runtime never asks).
  else if (d.epilogue == CUBLASLT_EPILOGUE_BIAS &&
           !(d.biasType == -1 || d.biasType == int32_t(dl.type)))
    why = "bias-type-differs-from-d";
  return why ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
}

/// A stub object in the storage of cuBLASLt's opaque type, so that the
/// handle is a real pointer to that type.
template <typename T, typename Storage> T *make(std::atomic<int> &count) {
  static_assert(sizeof(T) <= sizeof(Storage), "stub state too large");
  static_assert(std::is_trivially_destructible_v<T>, "deleted as Storage");
  ++count;
  return new (new Storage()) T();
}

} // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  static int storage;
  ++liveHandles;
  *lightHandle = reinterpret_cast<cublasLtHandle_t>(&storage);
  logLine("cublasLtCreate");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  (void)lightHandle;
  --liveHandles;
  logLine("cublasLtDestroy");
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  Desc *d = make<Desc, cublasLtMatmulDescOpaque_t>(liveDescs);
  d->compute = computeType;
  d->scaleType = scaleType;
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  --liveDescs;
  delete matmulDesc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                               cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t sizeInBytes) {
  auto *d = reinterpret_cast<Desc *>(matmulDesc);
  auto set = [&](auto &field) {
    if (sizeInBytes != sizeof(field))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, buf, sizeof(field));
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return set(d->transa);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return set(d->transb);
  case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
    return set(d->scaleA);
  case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    return set(d->scaleB);
  case CUBLASLT_MATMUL_DESC_FAST_ACCUM:
    return set(d->fastAccum);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return set(d->epilogue);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return set(d->bias);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return set(d->biasType);
  default:
    logLine("cublasLtMatmulDescSetAttribute unsupported-attribute=%d",
            static_cast<int>(attr));
    return CUBLAS_STATUS_INVALID_VALUE;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  Layout *l = make<Layout, cublasLtMatrixLayoutOpaque_t>(liveLayouts);
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  --liveLayouts;
  delete matLayout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                 cublasLtMatrixLayoutAttribute_t attr,
                                 const void *buf, size_t sizeInBytes) {
  auto *l = reinterpret_cast<Layout *>(matLayout);
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && sizeInBytes == 4) {
    std::memcpy(&l->batch, buf, 4);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && sizeInBytes == 8) {
    std::memcpy(&l->batchStride, buf, 8);
    return CUBLAS_STATUS_SUCCESS;
  }
  logLine("cublasLtMatrixLayoutSetAttribute unsupported-attribute=%d size=%zu",
          static_cast<int>(attr), sizeInBytes);
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  Pref *p = make<Pref, cublasLtMatmulPreferenceOpaque_t>(livePrefs);
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  --livePrefs;
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                     cublasLtMatmulPreferenceAttributes_t attr,
                                     const void *buf, size_t sizeInBytes) {
  auto *p = reinterpret_cast<Pref *>(pref);
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && sizeInBytes == 8) {
    std::memcpy(&p->workspace, buf, 8);
    return CUBLAS_STATUS_SUCCESS;
  }
  int index = attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES   ? 0
              : attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES ? 1
              : attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES ? 2
              : attr == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES ? 3
                                                                   : -1;
  if (index >= 0 && sizeInBytes == 4) {
    std::memcpy(&p->alignment[index], buf, 4);
    return CUBLAS_STATUS_SUCCESS;
  }
  logLine("cublasLtMatmulPreferenceSetAttribute unsupported-attribute=%d",
          static_cast<int>(attr));
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
    cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
    int *returnAlgoCount) {
  (void)lightHandle;
  auto &d = *reinterpret_cast<Desc *>(operationDesc);
  auto &p = *reinterpret_cast<Pref *>(preference);
  const char *why = nullptr;
  cublasStatus_t status = validate(d, *reinterpret_cast<Layout *>(Adesc),
                                   *reinterpret_cast<Layout *>(Bdesc),
                                   *reinterpret_cast<Layout *>(Cdesc),
                                   *reinterpret_cast<Layout *>(Ddesc), why);
  logLine("cublasLtMatmulAlgoGetHeuristic workspace=%llu "
          "alignment=%u,%u,%u,%u%s%s",
          static_cast<unsigned long long>(p.workspace), p.alignment[0],
          p.alignment[1], p.alignment[2], p.alignment[3],
          why ? " refused=" : "", why ? why : "");
  if (requestedAlgoCount < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  if (status != CUBLAS_STATUS_SUCCESS)
    return status;
  std::memset(&heuristicResultsArray[0], 0, sizeof(heuristicResultsArray[0]));
  heuristicResultsArray[0].algo.data[0] = 42;
  heuristicResultsArray[0].workspaceSize = 0;
  heuristicResultsArray[0].state = CUBLAS_STATUS_SUCCESS;
  heuristicResultsArray[0].wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
               const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
               const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
               const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
               cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
               void *workspace, size_t workspaceSizeInBytes,
               cudaStream_t stream) {
  (void)lightHandle;
  (void)workspace;
  auto &d = *reinterpret_cast<Desc *>(computeDesc);
  auto &a = *reinterpret_cast<Layout *>(Adesc);
  auto &b = *reinterpret_cast<Layout *>(Bdesc);
  auto &c = *reinterpret_cast<Layout *>(Cdesc);
  auto &dl = *reinterpret_cast<Layout *>(Ddesc);
  uint64_t m, k, kb, n;
  opShape(a, d.transa, m, k);
  opShape(b, d.transb, kb, n);
  char streamBuf[32], line[640];
  std::snprintf(
      line, sizeof(line),
      "cublasLtMatmul m=%llu n=%llu k=%llu transa=%c transb=%c "
      "types=%s,%s,%s lda=%lld ldb=%lld ldd=%lld batch=%d "
      "strides=%lld,%lld,%lld scales=%s,%s%s workspace=%zu stream=%s",
      static_cast<unsigned long long>(m), static_cast<unsigned long long>(n),
      static_cast<unsigned long long>(k), d.transa == CUBLAS_OP_N ? 'N' : 'T',
      d.transb == CUBLAS_OP_N ? 'N' : 'T', typeName(a.type), typeName(b.type),
      typeName(dl.type), static_cast<long long>(a.ld),
      static_cast<long long>(b.ld), static_cast<long long>(dl.ld), dl.batch,
      static_cast<long long>(a.batchStride),
      static_cast<long long>(b.batchStride),
      static_cast<long long>(dl.batchStride), d.scaleA ? "set" : "none",
      d.scaleB ? "set" : "none",
      d.epilogue == CUBLASLT_EPILOGUE_BIAS ? " epilogue=bias" : "",
      workspaceSizeInBytes, streamName(stream, streamBuf, sizeof(streamBuf)));
  const char *why = nullptr;
  // As the H200's cuBLASLt 13 does: a scale pointer that is not 16-byte
  // aligned is refused when the GEMM is called.
  auto misaligned = [](const float *scale) {
    return reinterpret_cast<uintptr_t>(scale) % 16 != 0;
  };
  if (misaligned(d.scaleA) || misaligned(d.scaleB)) {
    logLine("%s refused=scale-not-16-byte-aligned", line);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (validate(d, a, b, c, dl, why) != CUBLAS_STATUS_SUCCESS || !algo ||
      algo->data[0] != 42 ||
      (d.epilogue == CUBLASLT_EPILOGUE_BIAS && !d.bias)) {
    logLine("%s", line);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // The host pointer mode: alpha and beta are host floats, read now; the
  // scales are device pointers, read when the GEMM runs.
  float alphaValue = *static_cast<const float *>(alpha);
  float betaValue = *static_cast<const float *>(beta);
  auto gemm = [=] {
    runGemm(d, a, b, c, dl, m, n, k, alphaValue, betaValue,
            static_cast<const char *>(A), static_cast<const char *>(B),
            static_cast<const char *>(C), static_cast<char *>(D));
  };
  // On a stream of the stub driver the GEMM is enqueued: a capture
  // records it for the graph's launches.
  auto *s = reinterpret_cast<Stream *>(stream);
  if (s && s->magic == kStreamMagic && s->enqueue) {
    s->enqueue(s, line, gemm);
  } else {
    gemm();
    logLine("%s", line);
  }
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
/// D = alpha * scaleA * scaleB * opA(A) * opB(B) + beta * C (+ bias[row]),
/// column-major.
void runGemm(const Desc &d, const Layout &a, const Layout &b, const Layout &c,
             const Layout &dl, uint64_t m, uint64_t n, uint64_t k,
             float alphaValue, float betaValue, const char *pa, const char *pb,
             const char *pc, char *pd) {
  float scale = (d.scaleA ? *d.scaleA : 1.0f) * (d.scaleB ? *d.scaleB : 1.0f);
  for (int32_t batch = 0; batch < dl.batch; ++batch) {
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        double sum = 0;
        for (uint64_t l = 0; l < k; ++l) {
          // Column-major: element (r, c) of a stored matrix is r + c * ld.
          int64_t ia = d.transa == CUBLAS_OP_N ? int64_t(i + l * a.ld)
                                               : int64_t(l + i * a.ld);
          int64_t ib = d.transb == CUBLAS_OP_N ? int64_t(l + j * b.ld)
                                               : int64_t(j + l * b.ld);
          sum += double(load(pa, a.type, batch * a.batchStride + ia)) *
                 double(load(pb, b.type, batch * b.batchStride + ib));
        }
        int64_t id = batch * dl.batchStride + int64_t(i + j * dl.ld);
        int64_t ic = batch * c.batchStride + int64_t(i + j * c.ld);
        float result = alphaValue * scale * float(sum);
        // beta == 0: C is not read (it may hold NaN), as in cuBLASLt.
        if (betaValue != 0.0f)
          result += betaValue * load(pc, c.type, ic);
        // The bias of D's row i, the same for every batch.
        if (d.epilogue == CUBLASLT_EPILOGUE_BIAS)
          result +=
              load(static_cast<const char *>(d.bias), dl.type, int64_t(i));
        store(pd, dl.type, id, result);
      }
    }
  }
}
} // namespace

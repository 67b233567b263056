/* A header that disagrees with MLIR's calls, for mgpu-signatures.test: a
   32-bit size, a missing function, a wrong return type. */
#define DSRT_API
DSRT_API void *mgpuMemAlloc(int32_t bytes, void *stream, int8_t isHostShared);
DSRT_API void mgpuMemFree(void *ptr, void *stream);
DSRT_API int mgpuStreamCreate(void);

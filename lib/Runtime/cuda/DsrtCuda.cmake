# Defines the target dsrt_cuda (libdsrt_cuda.so: the CUDA backend of libdsrt
# and its error slot) from the sources under `source_root` (a ds-mlir tree,
# or a GPU-check bundle that mirrors its layout). Used by this directory's
# standalone build and by scripts/gpu-check/CMakeLists.txt; needs the
# CUDAToolkit and Threads packages found.
function(ds_add_dsrt_cuda source_root)
  include(${source_root}/lib/Runtime/cuda/Sources.cmake)
  find_path(DSRT_CUBLASLT_INCLUDE_DIR cublasLt.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(NOT DSRT_CUBLASLT_INCLUDE_DIR)
    message(FATAL_ERROR "cublasLt.h is not in the CUDA toolkit's include "
      "directories (${CUDAToolkit_INCLUDE_DIRS})")
  endif()
  add_library(dsrt_cuda SHARED
    ${DSRT_CUDA_SOURCES}
    ${source_root}/lib/Runtime/Error.cpp
    )
  # Only the DSRT_API functions are exported, as from libdsrt.
  set_target_properties(dsrt_cuda PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  target_include_directories(dsrt_cuda PUBLIC ${source_root}/include)
  target_include_directories(dsrt_cuda SYSTEM PRIVATE
    ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(dsrt_cuda PUBLIC DSRT_HAVE_CUDA=1)
  # libcuda and cuBLASLt are loaded with dlopen: nothing of CUDA is linked.
  target_link_libraries(dsrt_cuda PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
  message(STATUS "dsrt_cuda: CUDA ${CUDAToolkit_VERSION} headers in "
    "${CUDAToolkit_INCLUDE_DIRS}")
endfunction()

# The sources of libdsrt's CUDA backend, shared by the two builds that
# compile them: lib/Runtime/CMakeLists.txt (into libdsrt) and the
# standalone project in this directory (libdsrt_cuda.so).
set(DSRT_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/Context.cpp
  ${CMAKE_CURRENT_LIST_DIR}/CublasLt.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Driver.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Graph.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Memory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/MgpuWrappers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Profile.cpp
  )

# The sources of ds-step-run, shared by tools/ds-step-run/CMakeLists.txt and
# the GPU check's standalone build (scripts/gpu-check/CMakeLists.txt).
set(DS_STEP_RUN_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ds-step-run.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Runner.cpp
  ${CMAKE_CURRENT_LIST_DIR}/StepLibrary.cpp
  ${CMAKE_CURRENT_LIST_DIR}/Tensor.cpp
  )

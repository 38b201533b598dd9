# Finds CUDA and NCCL for the NCCL transport (KOLO_WITH_NCCL = AUTO | ON | OFF).
# Sets KOLO_HAVE_NCCL and KOLO_NCCL_REASON (why it is or is not built).
set(KOLO_HAVE_NCCL OFF)
set(KOLO_NCCL_REASON "disabled with KOLO_WITH_NCCL=OFF")
if(NOT KOLO_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(KOLO_NCCL_INCLUDE_DIR nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include ENV NCCL_HOME
            PATH_SUFFIXES include)
  find_library(KOLO_NCCL_LIBRARY nccl
               HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 ENV NCCL_HOME
               PATH_SUFFIXES lib lib64)
  if(CUDAToolkit_FOUND AND KOLO_NCCL_INCLUDE_DIR AND KOLO_NCCL_LIBRARY)
    set(KOLO_HAVE_NCCL ON)
    set(KOLO_NCCL_REASON "CUDA ${CUDAToolkit_VERSION}, NCCL at ${KOLO_NCCL_LIBRARY}")
  else()
    set(KOLO_NCCL_REASON "built without NCCL: CUDA toolkit or NCCL not found at configure time")
    if(KOLO_WITH_NCCL STREQUAL "ON")
      message(FATAL_ERROR "KOLO_WITH_NCCL=ON but CUDA or NCCL was not found")
    endif()
  endif()
endif()
message(STATUS "kolo: NCCL transport: ${KOLO_HAVE_NCCL} (${KOLO_NCCL_REASON})")

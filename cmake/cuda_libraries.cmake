# The CUDA runtime, NCCL and nvJPEG that retort's CUDA code links: retort::cudart, retort::nccl
# (sets RETORT_HAVE_NCCL) and retort::nvjpeg (sets RETORT_HAVE_NVJPEG). Included after
# torch.cmake.
#
# One process must hold one libcudart.so.13 and one libnccl.so.2. When LibTorch comes from a
# PyPI wheel, its libraries load the runtime and NCCL of the nvidia-* wheels beside it (their
# RPATH says so), which can be newer than the toolkit's; retort then links exactly those files
# too. Otherwise (a user's own LibTorch, or no LibTorch) the toolkit's runtime and the NCCL found
# in the toolkit or NCCL_HOME are used. Headers come from the toolkit either way (older headers
# against a newer runtime of the same major version are supported by CUDA).
set(RETORT_HAVE_NCCL OFF)
set(RETORT_HAVE_NVJPEG OFF)
if(NOT RETORT_HAVE_CUDA)
  return()
endif()

set(_retort_wheel_nvidia "")
if(RETORT_TORCH_ROOT AND EXISTS "${RETORT_TORCH_ROOT}/../nvidia")
  get_filename_component(_retort_wheel_nvidia "${RETORT_TORCH_ROOT}/../nvidia" ABSOLUTE)
endif()

add_library(retort_cudart INTERFACE)
set(_retort_wheel_cudart "${_retort_wheel_nvidia}/cu${CUDAToolkit_VERSION_MAJOR}/lib/libcudart.so.${CUDAToolkit_VERSION_MAJOR}")
if(_retort_wheel_nvidia AND EXISTS "${_retort_wheel_cudart}")
  target_include_directories(retort_cudart SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(retort_cudart INTERFACE "${_retort_wheel_cudart}")
  message(STATUS "retort: CUDA runtime of the torch wheel (${_retort_wheel_cudart})")
else()
  target_link_libraries(retort_cudart INTERFACE CUDA::cudart)
endif()
add_library(retort::cudart ALIAS retort_cudart)

set(_retort_nccl_hints "")
if(_retort_wheel_nvidia)
  list(APPEND _retort_nccl_hints "${_retort_wheel_nvidia}/nccl")
endif()
list(APPEND _retort_nccl_hints "$ENV{NCCL_HOME}" "${CUDAToolkit_LIBRARY_ROOT}" "${CUDAToolkit_TARGET_DIR}")
find_path(RETORT_NCCL_INCLUDE_DIR nccl.h HINTS ${_retort_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(RETORT_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_retort_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
if(RETORT_NCCL_INCLUDE_DIR AND RETORT_NCCL_LIBRARY)
  add_library(retort::nccl UNKNOWN IMPORTED)
  set_target_properties(retort::nccl PROPERTIES
    IMPORTED_LOCATION "${RETORT_NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${RETORT_NCCL_INCLUDE_DIR}")
  set(RETORT_HAVE_NCCL ON)
  message(STATUS "retort: NCCL ${RETORT_NCCL_LIBRARY}")
else()
  message(STATUS "retort: no NCCL found (set NCCL_HOME): the NCCL communicator is off")
endif()

# nvJPEG (the GPU JPEG decoder of the data pipeline): the toolkit's, or the nvidia-nvjpeg wheel
# beside torch's (scripts/python-requirements.txt installs it). Its library links the CUDA
# runtime statically, so either works with the runtime above.
set(_retort_nvjpeg_hints "${CUDAToolkit_LIBRARY_ROOT}" "${CUDAToolkit_TARGET_DIR}")
if(_retort_wheel_nvidia)
  list(PREPEND _retort_nvjpeg_hints "${_retort_wheel_nvidia}/cu${CUDAToolkit_VERSION_MAJOR}")
endif()
find_path(RETORT_NVJPEG_INCLUDE_DIR nvjpeg.h HINTS ${_retort_nvjpeg_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(RETORT_NVJPEG_LIBRARY NAMES nvjpeg libnvjpeg.so.${CUDAToolkit_VERSION_MAJOR}
             NAMES_PER_DIR HINTS ${_retort_nvjpeg_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
if(RETORT_NVJPEG_INCLUDE_DIR AND RETORT_NVJPEG_LIBRARY)
  add_library(retort::nvjpeg UNKNOWN IMPORTED)
  set_target_properties(retort::nvjpeg PROPERTIES
    IMPORTED_LOCATION "${RETORT_NVJPEG_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${RETORT_NVJPEG_INCLUDE_DIR}")
  set(RETORT_HAVE_NVJPEG ON)
  message(STATUS "retort: nvJPEG ${RETORT_NVJPEG_LIBRARY}")
else()
  message(STATUS "retort: no nvJPEG found (CUDA toolkit or the nvidia-nvjpeg wheel): GPU JPEG "
                 "decoding is off")
endif()

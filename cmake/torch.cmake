# Finds LibTorch and exposes it as one target, retort::torch (sets RETORT_HAVE_TORCH and
# RETORT_TORCH_ROOT, the folder holding LibTorch's include/ and lib/).
#
# Where LibTorch comes from, first match wins:
#   1. a user's own LibTorch: -DTorch_DIR=<libtorch>/share/cmake/Torch or
#      -DCMAKE_PREFIX_PATH=<libtorch>;
#   2. the torch package of the project's Python environment (RETORT_PYTHON, by default the
#      .venv that scripts/setup creates), through torch.utils.cmake_prefix_path.
#
# LibTorch's own CMake config is not used: for the PyPI wheel (a CUDA build) it stops when no
# CUDA toolkit is installed, and where one is, it links the toolkit's CUDA libraries beside the
# newer ones the wheel's libraries load themselves. retort links LibTorch's libraries alone
# (their RPATHs find their CUDA dependencies), the CUDA ones when the build has CUDA.
#
# retort::torch links libstdc++ ahead of LibTorch. libtorch_cpu.so of the PyPI wheels exports
# its own copy of std::filesystem (142 symbols in 2.15); with libstdc++ last on the link line
# the dynamic linker bound our std::filesystem calls to that copy and a remove_all crashed.
# tests/trainer/link_order_test.cc checks the binding.
#
# LibTorch's OpenMP: ATen's at::parallel_for is a header template over `#pragma omp parallel`,
# so our translation units are compiled with -fopenmp; they link the libgomp LibTorch ships
# (one OpenMP runtime per process), or the compiler's where it ships none.
set(RETORT_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python3" CACHE FILEPATH
    "Python whose torch package supplies LibTorch when no Torch_DIR/CMAKE_PREFIX_PATH names one")

set(RETORT_HAVE_TORCH OFF)
set(RETORT_TORCH_ROOT "")
if(NOT RETORT_BUILD_TRAINER)
  return()
endif()

set(_retort_torch_hints "")
if(Torch_DIR)
  list(APPEND _retort_torch_hints "${Torch_DIR}")
elseif(EXISTS "${RETORT_PYTHON}")
  execute_process(
    COMMAND "${RETORT_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _retort_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _retort_torch_rc ERROR_QUIET)
  if(_retort_torch_rc EQUAL 0)
    list(APPEND _retort_torch_hints "${_retort_torch_prefix}/Torch")
  endif()
endif()
# CMAKE_PREFIX_PATH is searched before the hints.
find_path(_retort_torch_config_dir TorchConfig.cmake HINTS ${_retort_torch_hints}
          PATH_SUFFIXES share/cmake/Torch NO_CACHE)
if(NOT _retort_torch_config_dir)
  message(STATUS "retort: no LibTorch found (run scripts/setup, or pass -DTorch_DIR=...): "
                 "the trainer and the worker's training session are off")
  return()
endif()
get_filename_component(RETORT_TORCH_ROOT "${_retort_torch_config_dir}/../../.." ABSOLUTE)

set(_retort_torch_names torch torch_cpu c10)
if(RETORT_HAVE_CUDA)
  list(APPEND _retort_torch_names torch_cuda c10_cuda)
endif()
set(_retort_torch_libs stdc++)
foreach(name ${_retort_torch_names})
  find_library(_retort_torch_lib ${name} PATHS "${RETORT_TORCH_ROOT}/lib" NO_DEFAULT_PATH NO_CACHE)
  if(NOT _retort_torch_lib)
    message(FATAL_ERROR "LibTorch at ${RETORT_TORCH_ROOT} has no lib${name}.so (for a CPU-only "
                        "LibTorch with a CUDA toolkit installed, configure with -DRETORT_WITH_CUDA=OFF)")
  endif()
  if(name MATCHES "cuda" OR name STREQUAL "torch")
    # Nothing of ours calls into these directly, but loading them is what registers LibTorch's
    # CUDA backend (torch::cuda::device_count() is 0 without them): keep them past --as-needed,
    # the linker default of Debian's and Ubuntu's compilers. libtorch.so likewise: the kernels of
    # an exported (AOTInductor) teacher that trainer/models/aoti_model.cc dlopens name it as a
    # dependency without a search path, found only when the process has it loaded already.
    list(APPEND _retort_torch_libs "-Wl,--no-as-needed,${_retort_torch_lib}" "-Wl,--as-needed")
  else()
    list(APPEND _retort_torch_libs "${_retort_torch_lib}")
  endif()
  unset(_retort_torch_lib)
endforeach()

find_library(_retort_torch_gomp NAMES libgomp.so.1 PATHS "${RETORT_TORCH_ROOT}/lib"
             NO_DEFAULT_PATH NO_CACHE)
if(_retort_torch_gomp)
  list(APPEND _retort_torch_libs "${_retort_torch_gomp}")
else()
  find_package(OpenMP REQUIRED)
  list(APPEND _retort_torch_libs OpenMP::OpenMP_CXX)
endif()

# The wheels ship protobuf's headers in include/google/protobuf. Ours come from the system's
# protoc and must be compiled against the system's headers, which LibTorch's include folder
# (searched first) would shadow: torch 2.15's are 3.21.12 like Debian bookworm's, torch 2.11's
# (the GPU machines' image) are 3.13.0, and the generated code does not compile against them.
# When the two versions differ, LibTorch's include folder is replaced by a folder of links to
# everything in it but google/ (LibTorch's own headers do not include protobuf's).
set(_retort_torch_include "${RETORT_TORCH_ROOT}/include")
set(_retort_torch_pb "${_retort_torch_include}/google/protobuf/stubs/common.h")
find_path(_retort_system_pb_include google/protobuf/stubs/common.h NO_CACHE)
if(EXISTS "${_retort_torch_pb}" AND _retort_system_pb_include)
  file(STRINGS "${_retort_torch_pb}" _retort_torch_pb_version
       REGEX "^#define GOOGLE_PROTOBUF_VERSION ")
  file(STRINGS "${_retort_system_pb_include}/google/protobuf/stubs/common.h"
       _retort_system_pb_version REGEX "^#define GOOGLE_PROTOBUF_VERSION ")
  string(REGEX REPLACE "[^0-9]" "" _retort_torch_pb_version "${_retort_torch_pb_version}")
  string(REGEX REPLACE "[^0-9]" "" _retort_system_pb_version "${_retort_system_pb_version}")
  if(NOT _retort_torch_pb_version STREQUAL _retort_system_pb_version)
    set(_retort_torch_include "${CMAKE_BINARY_DIR}/torch-include-without-protobuf")
    file(REMOVE_RECURSE "${_retort_torch_include}")
    file(MAKE_DIRECTORY "${_retort_torch_include}")
    file(GLOB _retort_torch_entries RELATIVE "${RETORT_TORCH_ROOT}/include"
         "${RETORT_TORCH_ROOT}/include/*")
    foreach(entry ${_retort_torch_entries})
      if(NOT entry STREQUAL "google")
        file(CREATE_LINK "${RETORT_TORCH_ROOT}/include/${entry}"
             "${_retort_torch_include}/${entry}" SYMBOLIC)
      endif()
    endforeach()
    message(STATUS "retort: LibTorch's protobuf headers (${_retort_torch_pb_version}) differ from "
                   "the system's (${_retort_system_pb_version}): LibTorch's include folder is "
                   "used without them (${_retort_torch_include})")
  endif()
endif()

add_library(retort_torch INTERFACE)
target_include_directories(retort_torch SYSTEM INTERFACE
  "${_retort_torch_include}" "${RETORT_TORCH_ROOT}/include/torch/csrc/api/include")
target_link_libraries(retort_torch INTERFACE ${_retort_torch_libs})
target_compile_options(retort_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fopenmp>)
target_compile_features(retort_torch INTERFACE cxx_std_20)
if(RETORT_HAVE_CUDA)
  target_include_directories(retort_torch SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
endif()
add_library(retort::torch ALIAS retort_torch)
set(RETORT_HAVE_TORCH ON)
message(STATUS "retort: LibTorch from ${RETORT_TORCH_ROOT}")

# Finds optional and required dependencies and exposes them as imported targets.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# --- UCX (data plane between processes/nodes) ---
set(RETORT_HAVE_UCX OFF)
if(RETORT_WITH_UCX)
  pkg_check_modules(UCX IMPORTED_TARGET ucx)
  if(UCX_FOUND)
    set(RETORT_HAVE_UCX ON)
  endif()
endif()

# --- CUDA toolkit, LibTorch, then the CUDA runtime and NCCL that match that LibTorch ---
include(${CMAKE_CURRENT_LIST_DIR}/cuda.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/torch.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda_libraries.cmake)

# --- gRPC / protobuf (control plane) ---
if(RETORT_BUILD_COORDINATOR)
  find_package(Protobuf REQUIRED)
  find_package(gRPC CONFIG QUIET)
  if(NOT gRPC_FOUND)
    pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++)
    add_library(gRPC::grpc++ ALIAS PkgConfig::GRPCPP)
    find_library(GRPCPP_REFLECTION_LIB grpc++_reflection REQUIRED)
    add_library(gRPC::grpc++_reflection UNKNOWN IMPORTED)
    set_target_properties(gRPC::grpc++_reflection PROPERTIES IMPORTED_LOCATION ${GRPCPP_REFLECTION_LIB})
  endif()
  find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
  # libcrypto: `retortctl certs` (a test cluster's CA and certificates).
  find_package(OpenSSL REQUIRED COMPONENTS Crypto)
  find_package(nlohmann_json REQUIRED)
  find_package(yaml-cpp REQUIRED)
  # Prometheus metrics of the coordinator and the workers (Debian prometheus-cpp-dev).
  find_package(prometheus-cpp CONFIG REQUIRED)
endif()

if(RETORT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

set(RETORT_WITH_UCX_FOUND ${RETORT_HAVE_UCX})
set(RETORT_WITH_CUDA_FOUND ${RETORT_HAVE_CUDA})
set(RETORT_WITH_NCCL_FOUND ${RETORT_HAVE_NCCL})
set(RETORT_WITH_TORCH_FOUND ${RETORT_HAVE_TORCH})

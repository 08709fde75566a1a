// RETORT_NATIVE_CHECK: the shape NCCL_CHECK, CUDA_CHECK (nccl/nccl_check.h) and UCX_CHECK
// (ucx/ucx_check.h) share. Evaluates `expr` once into a `Result`; when `failed(result)`, returns
// `to_status(result, what, __FILE__, __LINE__)` from the enclosing function.
#pragma once

#define RETORT_NATIVE_CHECK(Result, expr, failed, to_status, what)       \
  do {                                                                   \
    const Result retort_native_result_ = (expr);                         \
    if (failed(retort_native_result_))                                   \
      return to_status(retort_native_result_, what, __FILE__, __LINE__); \
  } while (0)

# retort_set_warnings(target): the project's warning set, applied per target (no global flags).
# With RETORT_THREAD_SAFETY_ANALYSIS under clang, also clang's thread-safety analysis of the lock
# annotations (common/thread_annotations.h), its findings errors.
function(retort_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>)
  if(RETORT_THREAD_SAFETY_ANALYSIS AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety -Werror=thread-safety>)
  endif()
endfunction()

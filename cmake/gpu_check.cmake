# What scripts/gpu-check builds on a GPU machine, and nothing more (its device time is short):
# one target per step of the check, retort_gpu_check_<step>, so a step re-run alone
# (scripts/gpu-check --step NAME) builds only what it runs, and retort_gpu_check for them all.
# The steps' order and time bounds are defined in scripts/gpu_check_summary.py (STEPS); the
# names here must match it (the ctest gpu_check_plumbing compares them).
set(RETORT_GPU_CHECK_STEPS kd tests staging jpeg teacher)
# Test executables labelled "gpu", by the step that runs them; one not named here runs in step
# "tests". retort_add_gtest gives each the label gpu_check_<step> (the step's ctest -L).
set(RETORT_GPU_CHECK_TESTS_jpeg trainer_nvjpeg_gpu_test)

add_custom_target(retort_gpu_check)
foreach(step ${RETORT_GPU_CHECK_STEPS})
  add_custom_target(retort_gpu_check_${step})
  add_dependencies(retort_gpu_check retort_gpu_check_${step})
endforeach()

# retort_gpu_check_needs(STEP TARGET...): STEP's run needs TARGET... built. Step "teacher" runs
# exported_teacher_bench once its folder says retort_gpu_check_needs(teacher exported_teacher_bench).
function(retort_gpu_check_needs step)
  if(NOT step IN_LIST RETORT_GPU_CHECK_STEPS)
    message(FATAL_ERROR "retort_gpu_check_needs: unknown step '${step}' "
                        "(steps: ${RETORT_GPU_CHECK_STEPS})")
  endif()
  add_dependencies(retort_gpu_check_${step} ${ARGN})
endfunction()

# retort_gpu_check_step_of_test(TEST_EXECUTABLE OUT_VAR): the step that runs a "gpu" test.
function(retort_gpu_check_step_of_test name out_var)
  set(result tests)
  foreach(step ${RETORT_GPU_CHECK_STEPS})
    if(name IN_LIST RETORT_GPU_CHECK_TESTS_${step})
      set(result ${step})
    endif()
  endforeach()
  set(${out_var} ${result} PARENT_SCOPE)
endfunction()

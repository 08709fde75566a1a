# Installs the Python package from a copy of python/ into SITE (cmake -P; tests/python).
# Built from a copy in the build tree so that test runs of several build folders of one
# checkout never share setup.py's build folder; RETORT_SOURCE_DIR tells setup.py the checkout.
# -DPYTHON=interpreter -DSOURCE=checkout -DSTAGE=copy folder -DSITE=install folder
file(REMOVE_RECURSE "${STAGE}" "${SITE}")
file(COPY "${SOURCE}/python/" DESTINATION "${STAGE}" PATTERN "build" EXCLUDE
     PATTERN "*.egg-info" EXCLUDE PATTERN "__pycache__" EXCLUDE)
set(ENV{RETORT_SOURCE_DIR} "${SOURCE}")
execute_process(
  COMMAND "${PYTHON}" -m pip install --no-deps --no-build-isolation --disable-pip-version-check
          --no-cache-dir -q --target "${SITE}" "${STAGE}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pip install of ${SOURCE}/python failed (${rc}); the project's Python "
                      "environment needs setuptools and grpcio-tools (scripts/setup)")
endif()

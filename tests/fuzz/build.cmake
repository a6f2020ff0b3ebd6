# The fuzz.build test: configures and builds tests/fuzz/ with Clang (cmake -P, so it runs in ctest).
#   -DCXX=<clang++ or empty> -DSOURCE=<tests/fuzz> -DBINARY=<build dir> [-DLAUNCHER=ccache]
# Without Clang or libFuzzer it prints a line starting "MISSING:" that the test's
# SKIP_REGULAR_EXPRESSION turns into a skip the summary lists, so the group never passes silently.
if(NOT CXX)
  message("MISSING: no clang++ found (scripts/install-deps.sh installs clang-14 and libclang-rt-14-dev): "
          "the fuzz.* tests cannot run")
  return()
endif()
set(launcher)
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -DCMAKE_CXX_COMPILER=${CXX} ${launcher}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  if(err MATCHES "MISSING:[^\n]*")
    message("${CMAKE_MATCH_0}")
    return()
  endif()
  message(FATAL_ERROR "configuring the fuzz targets failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} --target fuzz_idx fuzz_idx_gzip fuzz_safetensors fuzz_image RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the fuzz targets failed:\n${out}\n${err}")
endif()
message(STATUS "fuzz targets built with ${CXX} in ${BINARY}")

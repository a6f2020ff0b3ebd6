# packaging.install_and_consume: installs a configured cohort build tree into a fresh prefix, then
# configures, builds and runs tests/install/consumer against that prefix only, and checks that
# find_package(cohort) refuses what the installation does not have. Everything happens under
# WORK_DIR (inside the build directory).
#
#   cmake -DBUILD_DIR=<cohort build> -DWORK_DIR=<scratch> -DSOURCE_DIR=<tests/install>
#         -DGENERATOR=<generator> -DCXX=<compiler> [-DCONFIG=Release] [-DEXPECT_MPI=ON|OFF]
#         [-DEXPECT_KERNELS=ON|OFF]
#         -P install_and_consume.cmake
cmake_minimum_required(VERSION 3.22)
foreach(var BUILD_DIR WORK_DIR SOURCE_DIR GENERATOR CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_and_consume.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Runs a command; on failure stops the test with the command line and everything it printed.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmdline)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n  ${cmdline}\n${out}${err}")
  endif()
  set(run_output "${out}${err}" PARENT_SCOPE)
endfunction()

# Neither a package registry nor a cohort under a system prefix may stand in for the fresh one.
set(hermetic -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)

# 1. Install.
run("cmake --install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")

# Every header of the source tree is installed, and the package files are where find_package looks.
file(READ "${BUILD_DIR}/CMakeCache.txt" cache)
string(REGEX MATCH "cohort_SOURCE_DIR:STATIC=([^\n]*)" _ "${cache}")
set(source_tree "${CMAKE_MATCH_1}")
file(GLOB_RECURSE headers RELATIVE "${source_tree}/include" "${source_tree}/include/cohort/*")
foreach(h IN LISTS headers)
  if(NOT EXISTS "${prefix}/include/${h}")
    message(FATAL_ERROR "cmake --install did not install include/${h}")
  endif()
endforeach()
file(GLOB_RECURSE config_files "${prefix}/*/cohortConfig.cmake")
if(NOT config_files)
  message(FATAL_ERROR "cmake --install did not install cohortConfig.cmake")
endif()
foreach(f share/doc/cohort/LICENSE share/doc/cohort/README.md)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()

# 2. Configure, build and run the consumer against the prefix.
set(expect_mpi)
if(DEFINED EXPECT_MPI)
  set(expect_mpi "-DCOHORT_EXPECT_MPI=${EXPECT_MPI}")
endif()
if(DEFINED EXPECT_KERNELS)
  list(APPEND expect_mpi "-DCOHORT_EXPECT_KERNELS=${EXPECT_KERNELS}")
endif()
# The tree's compiler launcher (ccache in scripts/test.sh), so that a warm re-run does not compile
# the consumers again (issue 32); the consumer still compiles against the installed headers.
set(launcher)
if(LAUNCHER)
  set(launcher "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
run("configuring the consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/consumer" -B "${consumer_build}" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_BUILD_TYPE=${CONFIG}" "-DCMAKE_PREFIX_PATH=${prefix}" ${hermetic}
    ${launcher} ${expect_mpi})
file(STRINGS "${consumer_build}/CMakeCache.txt" cohort_dir REGEX "^cohort_DIR:")
string(REGEX REPLACE "^cohort_DIR:[A-Z]+=" "" cohort_dir "${cohort_dir}")
string(FIND "${cohort_dir}" "${prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "the consumer found cohort at '${cohort_dir}', not in ${prefix}")
endif()
run("building the consumer" ${CMAKE_COMMAND} --build "${consumer_build}" --config "${CONFIG}" --parallel 2)
find_program(consumer_exe consumer PATHS "${consumer_build}" "${consumer_build}/${CONFIG}" NO_DEFAULT_PATH)
if(NOT consumer_exe)
  message(FATAL_ERROR "the consumer was built, but no consumer executable is in ${consumer_build}")
endif()
run("running the consumer" "${consumer_exe}")
message(STATUS "${run_output}")
# Compiled mode (component kernels): its consumer must be there exactly when the library is.
find_program(consumer_compiled_exe consumer_compiled PATHS "${consumer_build}" "${consumer_build}/${CONFIG}" NO_DEFAULT_PATH)
if(EXPECT_KERNELS AND NOT consumer_compiled_exe)
  message(FATAL_ERROR "cohort was installed with its kernel library, but no consumer_compiled was built")
endif()
if(consumer_compiled_exe)
  run("running the compiled-mode consumer" "${consumer_compiled_exe}")
  message(STATUS "${run_output}")
endif()

# 3. Requests the installation cannot satisfy fail at configure time, saying why.
function(expect_refusal request expected)
  set(dir "${WORK_DIR}/components")
  execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/components" -B "${dir}" -G "${GENERATOR}"
                          "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_PREFIX_PATH=${prefix}" ${hermetic}
                          "-DCOHORT_REQUEST=${request}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "find_package(cohort ${request}) succeeded, but it must fail:\n${out}${err}")
  endif()
  string(REGEX REPLACE "[ \t\r\n]+" " " said "${out}${err}")  # CMake wraps long messages
  if(NOT said MATCHES "${expected}")
    message(FATAL_ERROR "find_package(cohort ${request}) failed without saying '${expected}':\n${out}${err}")
  endif()
  message(STATUS "find_package(cohort ${request}) refused, as expected")
endfunction()
expect_refusal("CONFIG REQUIRED COMPONENTS cuda" "component cuda: not built in this installation")
expect_refusal("CONFIG REQUIRED COMPONENTS nccl" "component nccl: not built in this installation")
expect_refusal("CONFIG REQUIRED COMPONENTS gpu" "component gpu: unknown component")
expect_refusal("99 CONFIG REQUIRED" "compatible with requested version \"99\"")
if(DEFINED EXPECT_MPI AND NOT EXPECT_MPI)
  expect_refusal("CONFIG REQUIRED COMPONENTS mpi" "component mpi: not built in this installation")
endif()

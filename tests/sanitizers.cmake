# Sanitizer builds of the tests that read untrusted bytes or share memory between threads
# (issue 15). Each group is its own small executable built from only the sources it checks, with
# the sanitizer flags on those sources alone, and is registered with ctest one case at a time:
#   asan.*  AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer included): the I/O, data
#           and checkpoint tests (tests/io/, tests/data/, tests/train/checkpoint.cpp);
#   tsan.*  ThreadSanitizer: the thread pool, the CPU replica engine, the batch prefetcher,
#           ImageFolder's decode workers and,
#           where the CCCL headers are found, the device replica all-reduce (Thrust's plain C++
#           device system: libgomp is not instrumented, so the OpenMP system would only report
#           false races).
# -fno-sanitize-recover=all: a UBSan finding stops the test and fails it (by default UBSan prints
# and carries on). The groups compile only the -march=native kernel path
# (COHORT_CPU_TARGET_ISA_ONLY): the sanitizers look at memory and threads, not at which ISA path
# ran, and this halves their compile time. asan at -Og (GCC's level for debugging: half -O1's
# compile time, issue 32: the unit of io/onnx, safetensors and checkpoint 56 -> 28 s, the group
# 141 -> 71 compiler-s, while its tests take 30 s instead of 16; -O0 compiled as fast, but they
# took 60), tsan at -O1 (its tests train networks for minutes).
# Included from tests/CMakeLists.txt (doctest_discover_tests is loaded there).

include(CheckCXXSourceCompiles)

option(COHORT_SANITIZER_TESTS "Build and run the asan.* and tsan.* test groups where the compiler supports them" ON)

# Whether the compiler can build and link a threaded program with `flags` (a list).
function(cohort_check_sanitizer var flags)
  set(CMAKE_REQUIRED_FLAGS "${flags}")
  string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "${flags}")
  set(CMAKE_REQUIRED_LINK_OPTIONS ${flags})
  set(CMAKE_REQUIRED_QUIET ON)
  check_cxx_source_compiles("#include <thread>\nint main() { std::thread t([] {}); t.join(); }" ${var})
  set(${var} ${${var}} PARENT_SCOPE)
endfunction()

# One sanitized doctest executable from `sources`, its cases registered as <prefix>.<case name>.
function(cohort_sanitized_tests target prefix env)
  cmake_parse_arguments(ARG "" "OPTIMIZE" "SOURCES;FLAGS;LIBS;DEFINITIONS" ${ARGN})
  add_executable(${target} ${CMAKE_CURRENT_SOURCE_DIR}/main.cpp ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} doctest::doctest cohort_project_options)
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_definitions(${target} PRIVATE COHORT_CPU_TARGET_ISA_ONLY COHORT_CHECK_SCRATCH=1 ${ARG_DEFINITIONS})
  # After the build type's -O: the last -O wins. -g1: line numbers in the reports.
  target_compile_options(${target} PRIVATE ${ARG_FLAGS} -O${ARG_OPTIMIZE} -g1 -fno-omit-frame-pointer)
  target_link_options(${target} PRIVATE ${ARG_FLAGS})
  cohort_precompile(${target} HEADERS <doctest/doctest.h> <cohort/cohort.hpp>)
  doctest_discover_tests(${target} TEST_PREFIX "${prefix}." PROPERTIES LABELS ${prefix} ENVIRONMENT "${env}"
                         SKIP_REGULAR_EXPRESSION "COHORT_SKIP:")
endfunction()

if(COHORT_SANITIZER_TESTS)
  set(COHORT_ASAN_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all)
  set(COHORT_TSAN_FLAGS -fsanitize=thread)
  cohort_check_sanitizer(COHORT_HAVE_ASAN "${COHORT_ASAN_FLAGS}")
  cohort_check_sanitizer(COHORT_HAVE_TSAN "${COHORT_TSAN_FLAGS}")

  if(COHORT_HAVE_ASAN)
    file(GLOB COHORT_ASAN_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/io/*.cpp
         ${CMAKE_CURRENT_SOURCE_DIR}/data/*.cpp)
    list(APPEND COHORT_ASAN_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/train/checkpoint.cpp)
    # The image decoders and the folder reader (tests/data/image_*.cpp) where cohort::image is built.
    set(asan_libs cohort::cohort)
    if(COHORT_WITH_IMAGE)
      set(asan_libs cohort::image)
    else()
      list(FILTER COHORT_ASAN_SOURCES EXCLUDE REGEX "/data/image_(decode|folder|transforms)\\.cpp$")
    endif()
    # In batches of 6 sources per unit (cohort_test_batches, as cohort_tests): without a PCH each
    # unit parses the library again (issue 32).
    cohort_test_batches(COHORT_ASAN_SOURCES asan_batches cpp 6 ${COHORT_ASAN_SOURCES})
    cohort_sanitized_tests(cohort_asan_tests asan "ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
                           OPTIMIZE g SOURCES ${COHORT_ASAN_SOURCES} FLAGS ${COHORT_ASAN_FLAGS} LIBS ${asan_libs})
  else()
    message(STATUS "cohort: ${CMAKE_CXX_COMPILER} cannot build with ${COHORT_ASAN_FLAGS}: no asan.* tests")
  endif()

  if(COHORT_HAVE_TSAN)
    # ImageFolder's decode workers (tests/data/image_folder.cpp) where cohort::image is built.
    set(tsan_sources ${CMAKE_CURRENT_SOURCE_DIR}/backend/cpu/thread_pool.cpp
                     ${CMAKE_CURRENT_SOURCE_DIR}/train/engine/threaded_replicas.cpp
                     ${CMAKE_CURRENT_SOURCE_DIR}/data/batch_prefetcher.cpp)
    set(tsan_libs cohort::cohort)
    if(COHORT_WITH_IMAGE)
      list(APPEND tsan_sources ${CMAKE_CURRENT_SOURCE_DIR}/data/image_folder.cpp)
      set(tsan_libs cohort::image)
    endif()
    cohort_sanitized_tests(cohort_tsan_tests tsan "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1"
                           OPTIMIZE 1 SOURCES ${tsan_sources} FLAGS ${COHORT_TSAN_FLAGS} LIBS ${tsan_libs})
    if(COHORT_CCCL_INCLUDE_DIR)
      cohort_sanitized_tests(cohort_tsan_device_tests tsan "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1"
                             OPTIMIZE 1 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/backend/device/replica_all_reduce.cpp
                             FLAGS ${COHORT_TSAN_FLAGS} LIBS cohort::cohort
                             DEFINITIONS THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP)
      target_include_directories(cohort_tsan_device_tests SYSTEM PRIVATE ${COHORT_CCCL_INCLUDE_DIR})
    endif()
  else()
    message(STATUS "cohort: ${CMAKE_CXX_COMPILER} cannot build with ${COHORT_TSAN_FLAGS}: no tsan.* tests")
  endif()
endif()

# libFuzzer targets (tests/fuzz/): built with Clang by the fuzz.build test (a fixture), then each
# run for COHORT_FUZZ_SECONDS from the committed corpus: the hand-made seeds and found/, the
# inputs that 4-minute runs added (tests/fuzz/grow_corpus.sh). A run starts at the coverage those
# long runs reached (libFuzzer's cov at start-up: idx 431, idx_gzip 425, image 370, safetensors
# 1644), where the 30-second runs from the seeds alone used to end below it (427, 425, 369, 1598):
# 10 s from there fuzzes past the frontier, 80 CPU-s less in all than 4 x 30 s (issue 32).
# Without Clang or libFuzzer the tests report themselves skipped ("MISSING: ..." in their
# output), never passed.
option(COHORT_FUZZ_TESTS "Build the libFuzzer targets with Clang and run each briefly (fuzz.* tests)" ON)
set(COHORT_FUZZ_SECONDS 10 CACHE STRING "How long each fuzz.* test fuzzes its target")
if(COHORT_FUZZ_TESTS)
  find_program(COHORT_FUZZ_CXX NAMES clang++-14 clang++ DOC "Clang for the libFuzzer targets (tests/fuzz/)")
  set(fuzz_cxx "")
  if(COHORT_FUZZ_CXX)
    set(fuzz_cxx ${COHORT_FUZZ_CXX})
  else()
    message(WARNING "cohort: no clang++ found: the fuzz.* tests will be reported skipped "
                    "(scripts/install-deps.sh installs clang-14 and libclang-rt-14-dev)")
  endif()
  add_test(NAME fuzz.build
           COMMAND ${CMAKE_COMMAND} -DCXX=${fuzz_cxx} -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/fuzz
                   -DBINARY=${CMAKE_CURRENT_BINARY_DIR}/fuzz -DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/build.cmake)
  set_tests_properties(fuzz.build PROPERTIES LABELS fuzz FIXTURES_SETUP cohort_fuzz SKIP_REGULAR_EXPRESSION "MISSING:"
                                             TIMEOUT 900)
  foreach(target idx idx_gzip safetensors image)
    add_test(NAME fuzz.${target}
             COMMAND ${CMAKE_COMMAND} -DEXE=${CMAKE_CURRENT_BINARY_DIR}/fuzz/fuzz_${target}
                     -DSEEDS=${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${target}
                     -DWORK=${CMAKE_CURRENT_BINARY_DIR}/fuzz/run_${target} -DSECONDS=${COHORT_FUZZ_SECONDS}
                     -P ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run.cmake)
    math(EXPR timeout "${COHORT_FUZZ_SECONDS} + 120")
    set_tests_properties(fuzz.${target} PROPERTIES LABELS fuzz FIXTURES_REQUIRED cohort_fuzz COST 11
                                                   SKIP_REGULAR_EXPRESSION "MISSING:" TIMEOUT ${timeout})
  endforeach()
endif()

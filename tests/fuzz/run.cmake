# One fuzz.<target> test: runs a libFuzzer target for SECONDS seconds from the committed seeds.
#   -DEXE=<fuzz binary> -DSEEDS=<tests/fuzz/corpus/target> -DWORK=<scratch dir> -DSECONDS=30
# New inputs go to WORK/corpus (never into the source tree), crashes to WORK/. A crash, leak,
# sanitizer report or timeout fails the test with the input's path and the command that replays
# it. If the target was not built (fuzz.build found no Clang), "MISSING:" marks the test skipped.
if(NOT EXISTS ${EXE})
  message("MISSING: ${EXE} was not built (see the fuzz.build test): not fuzzed")
  return()
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus)
execute_process(COMMAND ${EXE} -max_total_time=${SECONDS} -timeout=20 -rss_limit_mb=2048 -print_final_stats=1
                        -artifact_prefix=${WORK}/ ${WORK}/corpus ${SEEDS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" runs "${err}")
string(REGEX MATCH "DONE +cov: [0-9]+ ft: [0-9]+" coverage "${err}")
if(NOT rc EQUAL 0)
  file(GLOB artifacts ${WORK}/crash-* ${WORK}/leak-* ${WORK}/timeout-* ${WORK}/oom-* ${WORK}/slow-unit-*)
  string(LENGTH "${err}" n)
  if(n GREATER 20000) # the sanitizer's report and libFuzzer's summary are at the end
    math(EXPR from "${n} - 20000")
    string(SUBSTRING "${err}" ${from} 20000 err)
  endif()
  # STATUS, not FATAL_ERROR, for the details: CMake rewraps error text, which splits paths.
  message(STATUS "${err}")
  foreach(a ${artifacts})
    message(STATUS "failing input: ${a}\nreplay: ${EXE} ${a}")
  endforeach()
  message(FATAL_ERROR "${EXE} failed (exit ${rc}): see the report and the failing input above")
endif()
message(STATUS "${EXE}: ${SECONDS} s, ${runs}, ${coverage}, no crash")

#pragma once
// Cases that cannot run on this machine (no AMX, no AVX512-BF16, no dataset, too few devices).
// doctest has no run-time skip: such a case prints "COHORT_SKIP: <reason>" and returns before it
// checks anything, and ctest, which matches that marker (SKIP_REGULAR_EXPRESSION on the discovered
// cases, tests/CMakeLists.txt), reports it as skipped instead of passed, the reason in its output.
//
// Only before the case's first check: ctest skips on the marker whatever the exit status, so a
// marker printed after a failed check would hide the failure. The whole-binary reruns (isa.*,
// cuda.all_tests) carry no skip expression: there the marker is information and any failure
// still fails the run.
#include <doctest/doctest.h>

#include <sstream>

/// Reports the enclosing test case as skipped, with `reason` (a stream expression), and returns.
/// (Through an ostringstream: doctest would print a `const char*` variable as a pointer.)
#define COHORT_SKIP(reason)                                                                                            \
  do {                                                                                                                 \
    std::ostringstream cohort_skip_;                                                                                   \
    cohort_skip_ << reason;                                                                                            \
    MESSAGE("COHORT_SKIP: " << cohort_skip_.str());                                                                    \
    return;                                                                                                            \
  } while (0)

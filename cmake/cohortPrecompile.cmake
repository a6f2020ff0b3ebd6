# Precompiled headers for this project's own multi-unit programs (issue 32): every unit of them
# parses the library again (3-8 s: cohort.hpp, Thrust, doctest), a PCH parses it once per target.
#
#   cohort_precompile(<target> HEADERS <header>... [SKIP <source>...])
#
# HEADERS are precompiled for every unit of <target> but the SKIP sources (a doctest main, which
# includes doctest.h with DOCTEST_CONFIG_IMPLEMENT, or a unit that does not need them). The
# library's own headers are still compiled alone by cohort_header_check, so a PCH cannot hide a
# missing include there. COHORT_PRECOMPILED_HEADERS=OFF turns them all off.
option(COHORT_PRECOMPILED_HEADERS "Precompile the common headers of the project's multi-unit programs" ON)

function(cohort_precompile target)
  cmake_parse_arguments(ARG "" "" "HEADERS;SKIP" ${ARGN})
  if(NOT COHORT_PRECOMPILED_HEADERS)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE ${ARG_HEADERS})
  if(ARG_SKIP)
    set_source_files_properties(${ARG_SKIP} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # -fpch-preprocess lets ccache (scripts/test.sh) cache units that use the PCH.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fpch-preprocess>)
    # GCC 12 reports two false positives in units built with a PCH only, inside inlined library
    # code (the GEMM edge tile "maybe uninitialized" although it is stored whole, and std::string's
    # memcpy bound, reported as -Wstringop-overflow or -Warray-bounds depending on the unit); the
    # header check and the kernel library still build the same code with these warnings on. And
    # GCC 12 does not keep `#pragma GCC diagnostic` state in a PCH, so the headers' own -Wpsabi
    # silencing (64-byte vectors returned by lambdas inside AVX-512 target functions) is lost on a
    # CPU without AVX-512, where -march=native does not enable it (Zen 3: two kernel test units
    # failed under -Werror).
    if(CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized -Wno-stringop-overflow
                                               -Wno-array-bounds -Wno-psabi>)
    endif()
  endif()
endfunction()

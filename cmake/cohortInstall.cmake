# Install rules and the CMake package of cohort (included from the top-level CMakeLists.txt).
#
#   cmake --install build --prefix /opt/cohort
#   find_package(cohort 0.1 CONFIG REQUIRED [COMPONENTS mpi])   # CMAKE_PREFIX_PATH=/opt/cohort
#   target_link_libraries(app PRIVATE cohort::cohort)          # or cohort::mpi
#   find_package(cohort CONFIG REQUIRED COMPONENTS kernels)     # compiled mode (COHORT_KERNEL_LIBRARY)
#   target_link_libraries(app PRIVATE cohort::kernels)
#
# Layout (GNUInstallDirs):
#   include/cohort/...                 every header under include/cohort
#   share/cmake/cohort/                cohortConfig.cmake, cohortConfigVersion.cmake,
#                                      cohortTargets.cmake, cohort<Comp>Targets.cmake per component
#   share/doc/cohort/                  LICENSE, README.md
# The package is header-only, so its CMake files go under share/ (architecture independent);
# COHORT_INSTALL_CMAKEDIR moves them (e.g. to lib/cmake/cohort).
include(CMakePackageConfigHelpers)

set(COHORT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/cohort"
    CACHE STRING "Where cohortConfig.cmake is installed, relative to the prefix")
mark_as_advanced(COHORT_INSTALL_CMAKEDIR)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/cohort" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" "${PROJECT_SOURCE_DIR}/README.md"
        DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/cohort")

# The core target: cohortTargets.cmake, always loaded by cohortConfig.cmake.
install(TARGETS cohort EXPORT cohortTargets)
install(EXPORT cohortTargets NAMESPACE cohort:: DESTINATION "${COHORT_INSTALL_CMAKEDIR}")

# One export set per optional component, loaded only when that component is requested and its
# dependency is found, so that a consumer without MPI never sees a target linking MPI::MPI_CXX.
# A component that is in COHORT_BUILT_COMPONENTS must have a target cohort_<comp> (EXPORT_NAME
# <comp>) and a dependency block in cmake/cohortConfig.cmake.in.
foreach(comp IN LISTS COHORT_BUILT_COMPONENTS)
  string(SUBSTRING ${comp} 0 1 first)
  string(SUBSTRING ${comp} 1 -1 rest)
  string(TOUPPER ${first} first)
  install(TARGETS cohort_${comp} EXPORT cohort${first}${rest}Targets)
  install(EXPORT cohort${first}${rest}Targets NAMESPACE cohort:: DESTINATION "${COHORT_INSTALL_CMAKEDIR}")
endforeach()

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/cohortConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/cohortConfig.cmake"
                              INSTALL_DESTINATION "${COHORT_INSTALL_CMAKEDIR}")
# Header-only: the same package serves 32- and 64-bit consumers (ARCH_INDEPENDENT), unless it
# holds the compiled kernel library (component kernels), which is built for one architecture.
# SameMajorVersion: find_package(cohort 0.1) accepts any 0.y with y >= 1 (and no 1.x).
set(cohort_arch_independent ARCH_INDEPENDENT)
if("kernels" IN_LIST COHORT_BUILT_COMPONENTS)
  set(cohort_arch_independent)
endif()
write_basic_package_version_file("${PROJECT_BINARY_DIR}/cohortConfigVersion.cmake"
                                 COMPATIBILITY SameMajorVersion ${cohort_arch_independent})
install(FILES "${PROJECT_BINARY_DIR}/cohortConfig.cmake" "${PROJECT_BINARY_DIR}/cohortConfigVersion.cmake"
        DESTINATION "${COHORT_INSTALL_CMAKEDIR}")

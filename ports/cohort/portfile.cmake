# vcpkg port of cohort (header-only). An overlay port, built from the cohort checkout it lives in:
#   vcpkg install cohort[mpi] --overlay-ports=<cohort>/ports                  # classic mode
#   "overlay-ports": ["<cohort>/ports"] in vcpkg-configuration.json            # manifest mode
# For a registry, replace the SOURCE_PATH line with a pinned download:
#   vcpkg_from_github(OUT_SOURCE_PATH SOURCE_PATH REPO <owner>/cohort REF "v${VERSION}"
#                     SHA512 <sha512 of the archive> HEAD_REF main)
get_filename_component(SOURCE_PATH "${CURRENT_PORT_DIR}/../.." ABSOLUTE)
if(NOT EXISTS "${SOURCE_PATH}/include/cohort/cohort.hpp")
  message(FATAL_ERROR "cohort port: ${SOURCE_PATH} is not a cohort checkout (see the top of this portfile)")
endif()

# Header-only: one (release) configuration is all there is to install. With the kernels feature,
# the compiled kernel library is built in that one configuration too.
set(VCPKG_BUILD_TYPE release)

# Feature mpi -> -DCOHORT_WITH_MPI=ON, image -> -DCOHORT_WITH_IMAGE=ON (PNG/JPEG folders), kernels -> -DCOHORT_KERNEL_LIBRARY=ON (compiled mode),
# otherwise OFF (never picked up from the build machine).
vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
  FEATURES
    mpi COHORT_WITH_MPI
    image COHORT_WITH_IMAGE
    kernels COHORT_KERNEL_LIBRARY
)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${FEATURE_OPTIONS}
    -DCOHORT_BUILD_TESTS=OFF
    -DCOHORT_BUILD_EXAMPLES=OFF
    -DCOHORT_BUILD_BENCH=OFF
    -DCOHORT_INSTALL=ON
    # The library's kernels choose their instruction set at run time: no -march=native.
    -DCOHORT_NATIVE=OFF
    # The CMake package straight into vcpkg's place for it (cohort's default is share/cmake/cohort).
    -DCOHORT_INSTALL_CMAKEDIR=share/cohort
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME cohort CONFIG_PATH share/cohort)

# No debug tree (VCPKG_BUILD_TYPE release; removed in case); without the kernels feature nothing
# is compiled, so no lib/ either.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug")
if(NOT "kernels" IN_LIST FEATURES)
  file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/lib")
endif()
# vcpkg keeps the license as share/cohort/copyright; drop the install's share/doc/cohort copy.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/share/doc")

file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")

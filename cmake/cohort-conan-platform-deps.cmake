# Packaged by conanfile.py and included by the cohort-config.cmake that Conan's CMakeDeps
# generates (property cmake_build_modules), after cohort::cohort and the dependencies Conan
# provides are defined.
#
# Why: where a profile lists xtensor or zlib under [platform_requires] (conan/profiles/debian12),
# Conan takes them from the system, and CMakeDeps generates neither their find_package files nor
# any link from cohort::cohort to them. This finds the system's packages (Debian:
# /usr/lib/x86_64-linux-gnu/cmake/xtensor, CMake's FindZLIB) and links them, so that
# cohort::cohort is complete either way. Where Conan provides them, the targets already exist and
# linking them again changes nothing.
if(NOT TARGET xtensor)
  find_package(xtensor CONFIG REQUIRED)
endif()
if(NOT TARGET ZLIB::ZLIB)
  find_package(ZLIB REQUIRED)
endif()
if(NOT TARGET Threads::Threads)
  find_package(Threads REQUIRED)
endif()
target_link_libraries(cohort::cohort INTERFACE xtensor ZLIB::ZLIB Threads::Threads)

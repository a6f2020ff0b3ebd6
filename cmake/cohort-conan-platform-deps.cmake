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

# cohort::mpi (conanfile.py's with_mpi): the system's MPI, found when the consumer configures.
# A consumer that asked for the component gets a clear error without MPI, or without the option;
# one that did not ask is not made to need MPI.
if(TARGET cohort::mpi)
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    target_link_libraries(cohort::mpi INTERFACE MPI::MPI_CXX)
    set(cohort_mpi_FOUND TRUE)
  elseif(cohort_FIND_REQUIRED_mpi)
    message(FATAL_ERROR "cohort: the component mpi (cohort::mpi) needs an MPI installation for C++, and CMake's "
                        "FindMPI found none (Debian: apt-get install libopenmpi-dev openmpi-bin; or set MPI_HOME)")
  else()
    set(cohort_mpi_FOUND FALSE)
  endif()
else()
  set(cohort_mpi_FOUND FALSE)
  if(cohort_FIND_REQUIRED_mpi)
    message(FATAL_ERROR "cohort: the component mpi was requested, but this Conan package of cohort was created with "
                        "-o cohort/*:with_mpi=False (create it with with_mpi=True, the default)")
  endif()
endif()

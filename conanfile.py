"""Conan 2 recipe for cohort, a header-only C++20 library.

    conan create . -pr:a conan/profiles/debian12     # offline, Debian's xtensor/xtl/xsimd/zlib
    conan create . -pr:a <profile> --build=missing   # with a remote that has the dependencies

Consumers: find_package(cohort CONFIG REQUIRED) and target_link_libraries(app cohort::cohort)
through CMakeDeps. Components, as in the CMake package (cmake/cohortConfig.cmake.in):
- cohort::cohort, the header-only core (xtensor, zlib, threads);
- cohort::mpi (option with_mpi, default True): the core plus the system's MPI (found with CMake's
  FindMPI when the consumer configures; OpenMPI and MPICH are not Conan packages one can link
  across a cluster) and COHORT_WITH_MPI=1, for ProcessGroupDDP<Mpi> and <cohort/mpi.hpp>.
  find_package(cohort COMPONENTS mpi) fails with a message naming the option or the missing
  MPI. -o cohort/*:with_mpi=False leaves it out.
- cohort::kernels (option compiled_kernels, default False): compiled mode. The package then
  builds the CPU kernels of the registered networks once into libcohort_kernels.a (static, for
  the profile's compiler, architecture and build type; -DCOHORT_NATIVE=OFF: the kernels pick
  their instruction set at run time), and consumers that link cohort::kernels define
  COHORT_COMPILED_KERNELS and compile none of those kernels again. Header-only otherwise.
The CUDA/NCCL components need nvcc and are offered by the CMake package only.
"""

import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load

required_conan_version = ">=2.0"

_CMAKE_MODULE_DIR = os.path.join("share", "conan", "cohort")
_PLATFORM_DEPS_MODULE = "cohort-conan-platform-deps.cmake"


class CohortConan(ConanFile):
    name = "cohort"
    description = "Header-only C++20 library for training convolutional networks in parallel"
    license = "MIT"
    topics = ("deep-learning", "neural-networks", "header-only", "cpp20")
    package_type = "header-library"
    # Settings only to check the consumer's C++ standard and pick system libraries; the package
    # is the same for every configuration (package_id clears them).
    settings = "os", "arch", "compiler", "build_type"
    options = {"with_mpi": [True, False], "compiled_kernels": [True, False]}
    default_options = {"with_mpi": True, "compiled_kernels": False}
    exports_sources = "include/*", "src/*", "CMakeLists.txt", "cmake/*", "LICENSE", "README.md"
    no_copy_source = True

    def configure(self):
        # Compiled mode is a static library; header-only is a header library.
        if self.options.compiled_kernels:
            self.package_type = "static-library"

    def layout(self):
        if self.options.compiled_kernels:
            cmake_layout(self)

    def generate(self):
        if self.options.compiled_kernels:
            tc = CMakeToolchain(self)
            tc.cache_variables.update({"COHORT_KERNEL_LIBRARY": True, "COHORT_NATIVE": False,
                                       "COHORT_BUILD_TESTS": False, "COHORT_BUILD_EXAMPLES": False,
                                       "COHORT_BUILD_BENCH": False, "COHORT_INSTALL": True,
                                       "COHORT_WITH_MPI": False, "COHORT_WITH_IMAGE": False})
            tc.generate()

    def build(self):
        if self.options.compiled_kernels:
            cmake = CMake(self)
            cmake.configure()
            cmake.build(target="cohort_kernels")

    def set_version(self):
        # The one version of the project is in project(cohort VERSION x.y.z) of CMakeLists.txt.
        cmakelists = load(self, os.path.join(self.recipe_folder, "CMakeLists.txt"))
        self.version = re.search(r"project\(cohort\s+VERSION\s+([0-9][0-9.]*)", cmakelists).group(1)

    def requirements(self):
        # Lower bounds: the versions Debian 12 ships (conan/profiles/debian12 provides exactly
        # those as platform_requires). xtensor 0.26 moved its headers, hence its upper bound.
        # cohort includes neither xtl nor xsimd itself: they are xtensor's dependencies, named so
        # that a profile can take the whole xtensor stack from the system; their ranges are wide
        # so as not to conflict with the versions xtensor's own recipe pins.
        self.requires("xtensor/[>=0.24.3 <0.26]", transitive_headers=True)
        self.requires("xtl/[>=0.7.2 <0.8]", transitive_headers=True)
        self.requires("xsimd/[>=8.1.0 <14]", transitive_headers=True)
        self.requires("zlib/[>=1.2.13 <2]", transitive_headers=True)

    def package_id(self):
        # The headers are the same with or without MPI; the option only shapes package_info.
        # The compiled kernel library depends on the settings; the headers alone do not.
        if not self.info.options.compiled_kernels:
            self.info.clear()
        else:
            del self.info.options.with_mpi

    def validate(self):
        check_min_cppstd(self, 20)

    def package(self):
        # Header-only: nothing to build. The package is the headers, the license and the CMake
        # module that completes cohort::cohort where dependencies are platform_requires.
        copy(self, "*", os.path.join(self.source_folder, "include"), os.path.join(self.package_folder, "include"))
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        if self.options.compiled_kernels:
            copy(self, "*.a", self.build_folder, os.path.join(self.package_folder, "lib"), keep_path=False)
            copy(self, "*.lib", self.build_folder, os.path.join(self.package_folder, "lib"), keep_path=False)
        copy(self, _PLATFORM_DEPS_MODULE, os.path.join(self.source_folder, "cmake"),
             os.path.join(self.package_folder, _CMAKE_MODULE_DIR))

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "cohort")
        # With components, CMakeDeps' package-wide target links them all: it gets a name of its
        # own, and cohort::cohort is the core, as in the CMake package.
        self.cpp_info.set_property("cmake_target_name", "cohort::all")
        # Components as the CMake package names them: core -> cohort::cohort, mpi -> cohort::mpi.
        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "cohort::cohort")
        # Conan-provided dependencies (a profile without [platform_requires]); with the debian12
        # profile they are the system's, and the build module links them.
        core.requires = [f"{d.ref.name}::{d.ref.name}" for d in self.dependencies.direct_host.values()
                         if d.ref.name in ("xtensor", "xtl", "xsimd", "zlib")]
        core.bindirs = []
        core.libdirs = []
        if self.settings.os in ("Linux", "FreeBSD"):
            core.system_libs = ["pthread"]  # the CPU backend's thread pool (Threads::Threads)
        if self.options.compiled_kernels:
            kernels = self.cpp_info.components["kernels"]
            kernels.set_property("cmake_target_name", "cohort::kernels")
            kernels.requires = ["core"]
            kernels.libs = ["cohort_kernels"]
            # As the CMake package's cohort::kernels: the library holds every instruction set's
            # path, and its consumers' units must agree (backend/cpu/simd.hpp).
            kernels.defines = ["COHORT_COMPILED_KERNELS=1", "COHORT_CPU_ALL_ISAS=1"]
        if self.options.get_safe("with_mpi"):
            mpi = self.cpp_info.components["mpi"]
            mpi.set_property("cmake_target_name", "cohort::mpi")
            mpi.requires = ["core"]
            mpi.defines = ["COHORT_WITH_MPI=1"]
            mpi.bindirs = []
            mpi.libdirs = []
            # The system MPI is linked by the build module below (FindMPI), as the platform deps are.
        # CMakeDeps generates nothing for requirements a profile lists under [platform_requires]
        # (Debian's xtensor and zlib with conan/profiles/debian12), and cohort::cohort would not
        # link them: this module, included by the generated cohort-config.cmake, finds and links
        # them (see the module's comment).
        self.cpp_info.set_property("cmake_build_modules", [os.path.join(_CMAKE_MODULE_DIR, _PLATFORM_DEPS_MODULE)])
        self.cpp_info.builddirs = []

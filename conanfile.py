"""Conan 2 recipe for cohort, a header-only C++20 library.

    conan create . -pr:a conan/profiles/debian12     # offline, Debian's xtensor/xtl/xsimd/zlib
    conan create . -pr:a <profile> --build=missing   # with a remote that has the dependencies

Consumers: find_package(cohort CONFIG REQUIRED) and target_link_libraries(app cohort::cohort)
through CMakeDeps. The MPI/CUDA/NCCL components of the CMake package are not offered through
Conan yet.
"""

import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
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
    exports_sources = "include/*", "CMakeLists.txt", "cmake/*", "LICENSE", "README.md"
    no_copy_source = True

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
        self.info.clear()

    def validate(self):
        check_min_cppstd(self, 20)

    def package(self):
        # Header-only: nothing to build. The package is the headers, the license and the CMake
        # module that completes cohort::cohort where dependencies are platform_requires.
        copy(self, "*", os.path.join(self.source_folder, "include"), os.path.join(self.package_folder, "include"))
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))
        copy(self, _PLATFORM_DEPS_MODULE, os.path.join(self.source_folder, "cmake"),
             os.path.join(self.package_folder, _CMAKE_MODULE_DIR))

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "cohort")
        self.cpp_info.set_property("cmake_target_name", "cohort::cohort")
        # CMakeDeps generates nothing for requirements a profile lists under [platform_requires]
        # (Debian's xtensor and zlib with conan/profiles/debian12), and cohort::cohort would not
        # link them: this module, included by the generated cohort-config.cmake, finds and links
        # them (see the module's comment).
        self.cpp_info.set_property("cmake_build_modules", [os.path.join(_CMAKE_MODULE_DIR, _PLATFORM_DEPS_MODULE)])
        self.cpp_info.builddirs = []
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        if self.settings.os in ("Linux", "FreeBSD"):
            self.cpp_info.system_libs = ["pthread"]  # the CPU backend's thread pool (Threads::Threads)

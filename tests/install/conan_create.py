#!/usr/bin/env python3
"""packaging.conan_create: `conan create` of conanfile.py with conan/profiles/debian12, offline and
in a private CONAN_HOME under the build directory; the recipe's test_package builds and runs a
tiny network against the created package.

    tests/install/conan_create.py --source-dir . --work-dir build/tests/packaging/conan [--cmake cmake]

Exits 77 (ctest: skipped) when conan is not installed: scripts/install-python.sh puts it in .venv.
"""

import argparse
import os
import shutil
import subprocess
import sys


def find_conan(source_dir):
    venv_conan = os.path.join(source_dir, ".venv", "bin", "conan")
    if os.access(venv_conan, os.X_OK):
        return venv_conan
    return shutil.which("conan")


def run(cmd, env):
    """Runs cmd; on failure prints the command and its output and exits 1."""
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        print(f"conan_create: failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stdout}")
        sys.exit(1)
    return proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", required=True, help="cohort's source tree (holds conanfile.py)")
    parser.add_argument("--work-dir", required=True, help="scratch directory, emptied first")
    parser.add_argument("--cmake", default="cmake", help="the cmake Conan builds test_package with")
    parser.add_argument("--profile", default=None, help="default: <source-dir>/conan/profiles/debian12")
    parser.add_argument("--launcher", default="", help="compiler launcher for the builds (the tree's: ccache)")
    args = parser.parse_args()

    source_dir = os.path.abspath(args.source_dir)
    work_dir = os.path.abspath(args.work_dir)
    profile = args.profile or os.path.join(source_dir, "conan", "profiles", "debian12")

    conan = find_conan(source_dir)
    if conan is None:
        print("conan_create: conan is not installed (scripts/install-python.sh installs it into .venv); skipped")
        return 77

    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)
    env = dict(os.environ)
    env["CONAN_HOME"] = os.path.join(work_dir, "home")  # hermetic: nothing from ~/.conan2
    for var in ("CONAN_DEFAULT_PROFILE", "CONAN_DEFAULT_BUILD_PROFILE"):
        env.pop(var, None)

    print(run([conan, "--version"], env).strip())
    # A fresh home has no default profile; -pr:a makes it unnecessary, but detect one anyway so
    # that no conan command here depends on what the fresh home lacks.
    run([conan, "profile", "detect", "--exist-ok"], env)
    out = run([conan, "create", source_dir, "-pr:a", profile,
               "--no-remote",  # offline: the profile's [platform_requires] provide every dependency
               "-c", f"tools.cmake:cmake_program={args.cmake}",
               # test_package's build goes to the work directory, not into the source tree
               "-c", f"tools.cmake.cmake_layout:test_folder={os.path.join(work_dir, 'test_package')}",
               "-c", "tools.cmake.cmaketoolchain:user_presets="]
              # The tree's compiler cache, so that a warm re-run does not compile test_package
              # again (issue 32); the package is still created and test_package still built.
              + (["-c", "tools.cmake.cmaketoolchain:extra_variables="
                  f"{{'CMAKE_CXX_COMPILER_LAUNCHER': '{args.launcher}'}}"] if args.launcher else []), env)
    # test_package's own line: the network ran (it exits non-zero when the loss is not finite).
    lines = [line for line in out.splitlines() if "cohort test_package: loss" in line]
    if not lines:
        print(f"conan_create: conan create passed, but test_package did not run:\n{out}")
        return 1
    print("\n".join(lines))
    # The mpi component (with_mpi, the default): test_package links a program against cohort::mpi.
    mpi_programs = [os.path.join(root, f) for root, _, files in os.walk(os.path.join(work_dir, "test_package"))
                    for f in files if f == "test_package_mpi"]
    if not mpi_programs:
        print(f"conan_create: test_package did not build test_package_mpi against cohort::mpi:\n{out}")
        return 1
    print(f"conan_create: cohort::mpi linked ({mpi_programs[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#pragma once
// Where the PyTorch reference fixtures are (tests/reference/fixtures): $COHORT_FIXTURE_DIR when
// set, else the path CMake writes beside the test binaries (cohort_fixture_dir.txt).
//
// Not a compile definition: an absolute source path on the compiler's command line makes every
// clone's objects differ, and a second clone could not reuse the first one's compiler cache
// (issue 32).

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace cohort::test {

inline const std::string& fixture_dir() {
  static const std::string dir = [] {
    if (const char* env = std::getenv("COHORT_FIXTURE_DIR"); env && *env) return std::string(env);
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::filesystem::path file = exe.parent_path() / "cohort_fixture_dir.txt";
    std::ifstream in(file);
    std::string line;
    if (!ec && in && std::getline(in, line) && !line.empty()) return line;
    throw std::runtime_error("tests: no fixture directory: set COHORT_FIXTURE_DIR to tests/reference/fixtures, or "
                             "configure with CMake, which writes " +
                             file.string());
  }();
  return dir;
}

} // namespace cohort::test

#define COHORT_FIXTURE_DIR ::cohort::test::fixture_dir()

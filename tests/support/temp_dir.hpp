#pragma once
// A scratch directory for tests that write files.

#include <filesystem>
#include <random>
#include <string>

namespace cohort::test {

/// A fresh directory under the system's temporary one, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "cohort_test_")
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(std::random_device{}()))) {
    std::filesystem::create_directories(path);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { std::filesystem::remove_all(path); }
};

} // namespace cohort::test

#pragma once
/// \file
/// Writes a file so that readers see either the old content or the complete new one, never a
/// torn write: temp file in the same directory, write, fsync, rename over the target, fsync the
/// directory.
/// Example (compiled: tests/docs/headers.cpp, "io/atomic_file"):
///
///     const std::span<const char> parts[] = {header, payload};
///     cohort::write_file_atomically("model.safetensors", parts);

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "cohort/core/error.hpp"

namespace cohort {

namespace detail {
inline std::string errno_text() { return std::strerror(errno); }

inline void write_all(int fd, const char* data, std::size_t n, const std::filesystem::path& path,
                      const std::filesystem::path& tmp) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IoError(concat(path.string(), ": write failed (to the temporary file ", tmp.string(), "; ", path.string(),
                           " is unchanged): ", errno_text()));
    }
    data += w;
    n -= std::size_t(w);
  }
}
} // namespace detail

/// Writes the concatenation of `parts` to `path` atomically. On failure the target is untouched
/// and the temporary file removed.
inline void write_file_atomically(const std::filesystem::path& path, std::span<const std::span<const char>> parts) {
  namespace fs = std::filesystem;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::random_device rd;
  const fs::path tmp = dir / (".tmp." + path.filename().string() + "." + std::to_string(rd()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw IoError(detail::concat(path.string(), ": cannot create a temporary file in ", dir.string(), ": ",
                                 detail::errno_text()));
  try {
    for (const auto& part : parts) detail::write_all(fd, part.data(), part.size(), path, tmp);
    if (::fsync(fd) != 0)
      throw IoError(detail::concat(path.string(), ": fsync of the temporary file ", tmp.string(),
                                   " failed: ", detail::errno_text()));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const std::string why = detail::errno_text(); // before unlink can change errno
    ::unlink(tmp.c_str());
    throw IoError(detail::concat(path.string(), ": close of the temporary file ", tmp.string(), " failed: ", why));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = detail::errno_text();
    ::unlink(tmp.c_str());
    throw IoError(detail::concat(path.string(), ": cannot rename the temporary file into place: ", why));
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

} // namespace cohort

// write_file_atomically (io/atomic_file.hpp) under a real failure after the temporary file
// exists: the file-size limit (RLIMIT_FSIZE) is set below the new file's size, so write(2) fails
// with EFBIG part-way through the temporary file. The old file must survive byte for byte, no
// temporary may be left behind, and the IoError must name the path.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <cohort/io/safetensors.hpp>
#include <cohort/layers/conv2d.hpp>
#include <cohort/layers/flatten.hpp>
#include <cohort/layers/linear.hpp>
#include <cohort/layers/relu.hpp>
#include <cohort/network/parameters.hpp>
#include <cohort/optim/adam.hpp>
#include <cohort/train/checkpoint.hpp>

#include "support/safetensors_bytes.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
using test::file_bytes;
using test::TempDir;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// Limits the size of files this process writes to `bytes` while it lives; SIGXFSZ is ignored
/// so that write(2) fails with EFBIG instead of killing the process. Both are restored after.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_) == 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lower = old_;
    lower.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lower) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = SIG_DFL;
};

/// Runs `write`, which must fail with an IoError naming `path`, under a file-size limit of
/// `limit` bytes; returns the message.
template <class Write>
std::string failed_write(const fs::path& path, rlim_t limit, Write&& write) {
  std::string message;
  {
    const FileSizeLimit guard(limit);
    try {
      write();
    } catch (const IoError& e) {
      message = e.what();
    }
  }
  INFO(message);
  CHECK(message.rfind(path.string() + ": write failed (to the temporary file ", 0) == 0);
  CHECK(message.find(" is unchanged): File too large") != std::string::npos);
  CHECK(message.find("/.tmp." + path.filename().string() + ".") != std::string::npos); // it existed
  return message;
}

using TinyNet = Sequential<Input<1, 6, 6>, Conv2d<1, 4, 3>, ReLU, Flatten, Linear<64, 3>>;
} // namespace

TEST_CASE("atomic write: a write that fails after the temporary file exists leaves the old file and no temporary") {
  TempDir dir("cohort_test_atomic_");
  const fs::path p = dir.path / "ckpt.safetensors";
  const std::vector<float> small{1.f, 2.f}, large(64 * 1024, 3.f);
  SafetensorsWriter old_w;
  old_w.add<float>("x", {2}, small);
  old_w.write(p);
  const auto before = file_bytes(p);

  SafetensorsWriter new_w;
  new_w.add<float>("x", {large.size()}, large);
  // Over a page of the new file's 256 KiB gets written before the limit stops it: the temporary
  // file exists and is part-written when the error comes.
  failed_write(p, 16 * 1024, [&] { new_w.write(p); });
  CHECK(file_bytes(p) == before);
  CHECK(names_in(dir.path) == std::vector<std::string>{"ckpt.safetensors"}); // no .tmp.* left
  CHECK(SafetensorsFile::read(p).values<float>("x") == small);

  // Without the limit the same write goes through.
  new_w.write(p);
  CHECK(SafetensorsFile::read(p).values<float>("x") == large);
  CHECK(names_in(dir.path) == std::vector<std::string>{"ckpt.safetensors"});
}

TEST_CASE("atomic write: save_checkpoint onto an existing checkpoint fails cleanly under a file-size limit") {
  TempDir dir("cohort_test_atomic_");
  const fs::path p = dir.path / "run.safetensors";
  Parameters<TinyNet, float, Cpu> params;
  params.initialize(1);
  Adam<> opt({.lr = 1e-3});
  save_checkpoint(p, params, opt, TrainerState{.step = 1, .seed = 1});
  const auto before = file_bytes(p);

  params.initialize(2); // different weights, and a later position
  failed_write(p, before.size() / 2, [&] { save_checkpoint(p, params, opt, TrainerState{.step = 2, .seed = 2}); });
  CHECK(file_bytes(p) == before);
  CHECK(names_in(dir.path) == std::vector<std::string>{"run.safetensors"});
  Parameters<TinyNet, float, Cpu> loaded;
  CHECK(load_checkpoint(p, loaded, opt).step == 1); // the old checkpoint, intact and loadable

  // Still a failure at a limit just below the file's size (the last write is the one refused).
  failed_write(p, before.size() - 1, [&] { save_checkpoint(p, params, opt, TrainerState{.step = 2, .seed = 2}); });
  CHECK(file_bytes(p) == before);
  CHECK(names_in(dir.path) == std::vector<std::string>{"run.safetensors"});
}

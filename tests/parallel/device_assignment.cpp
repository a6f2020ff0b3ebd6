// Which GPU a rank of ProcessGroupDDP picks (parallel/device_assignment.hpp): mpirun's view of
// the node's GPUs, a launcher's view of one GPU per rank, and the views that fit neither.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include <cohort/parallel/device_assignment.hpp>

using namespace cohort;

namespace {
std::string message_of(const RankDeviceView& v) {
  try {
    (void)rank_device(v);
  } catch (const DeviceError& e) {
    return e.what();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}
} // namespace

TEST_CASE("rank_device: every rank sees the node's GPUs: local rank r takes first + r") {
  for (int r = 0; r < 4; ++r) CHECK(rank_device({.first = 0, .local_rank = r, .local_size = 4, .visible = 4}) == r);
  CHECK(rank_device({.first = 2, .local_rank = 1, .local_size = 2, .visible = 4}) == 3);
  CHECK(rank_device({.first = 0, .local_rank = 1, .local_size = 2, .visible = 8}) == 1);
}

TEST_CASE("rank_device: each rank sees only its own GPU (CUDA_VISIBLE_DEVICES per rank, Slurm): it takes that one") {
  // Before: device + local_rank, so ranks >= 1 asked for a device they could not see.
  for (int r = 0; r < 4; ++r) CHECK(rank_device({.first = 0, .local_rank = r, .local_size = 4, .visible = 1}) == 0);
  CHECK(rank_device({.first = 1, .local_rank = 3, .local_size = 4, .visible = 2}) == 1); // --gpus-per-task=2
}

TEST_CASE("rank_device: a backend that cannot count its devices keeps first + local rank") {
  CHECK(rank_device({.first = 1, .local_rank = 2, .local_size = 4, .visible = -1}) == 3);
}

TEST_CASE("rank_device: views that fit neither fail naming the rank, its host, what it sees and what it needs") {
  ::setenv("CUDA_VISIBLE_DEVICES", "3", 1);
  const std::string none =
      message_of({.first = 0, .local_rank = 1, .local_size = 2, .visible = 0, .rank = 5, .host = "node7"});
  CHECK(none.find("rank 5 (local rank 1 of 2 on node7) sees 0 GPUs (CUDA_VISIBLE_DEVICES=3): it needs one") !=
        std::string::npos);
  const std::string beyond =
      message_of({.first = 2, .local_rank = 0, .local_size = 2, .visible = 2, .rank = 0, .host = "node1"});
  CHECK(beyond.find("rank 0 (local rank 0 of 2 on node1) sees 2 GPUs") != std::string::npos);
  CHECK(beyond.find("device 2 (options.parallel.device) is not among them") != std::string::npos);
  CHECK(beyond.find("at least 4 here") != std::string::npos);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  CHECK(message_of({.first = 0, .local_rank = 0, .local_size = 1, .visible = 0}).find("CUDA_VISIBLE_DEVICES unset") !=
        std::string::npos);
  CHECK(message_of({.first = -1, .visible = 4}).find("must be >= 0, found -1") != std::string::npos);
}

#pragma once
/// \file
/// Which GPU a rank of ProcessGroupDDP trains on, whatever the launcher shows it:
/// Example (compiled: tests/docs/headers.cpp, "parallel/device_assignment"):
///
///     rank_device({.first = 0, .local_rank = 1, .local_size = 4, .visible = 4});  // 1: the node's GPUs, one each
///     rank_device({.first = 0, .local_rank = 1, .local_size = 4, .visible = 1});  // 0: its own GPU only
///
/// mpirun shows every rank all the GPUs of its node: rank `local_rank` takes `first + local_rank`
/// (seed 002's `rank = node * gpus + local_rank`). Slurm's --gpus-per-task, or a wrapper that
/// sets CUDA_VISIBLE_DEVICES per rank, shows each rank only its own: then every rank takes
/// `first` of what it sees. Anything else is an error naming the rank, what it sees and what it
/// would need; the engine then checks that no two ranks of a node hold the same GPU.

#include <cstdlib>
#include <string>

#include "cohort/core/error.hpp"

namespace cohort {

/// What a rank knows when it picks its GPU.
struct RankDeviceView {
  int first = 0;      // DataParallelOptions::device
  int local_rank = 0; // among the ranks of its node
  int local_size = 1; // ranks on its node
  int visible = -1;   // GPUs this process sees (-1: the backend cannot tell)
  int rank = 0;       // for messages
  std::string host{}; // for messages
};

namespace detail {
inline std::string visible_devices_variable() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? concat("CUDA_VISIBLE_DEVICES=", v) : std::string("CUDA_VISIBLE_DEVICES unset");
}
} // namespace detail

/// The device index (among the visible ones) rank `v.rank` trains on; DeviceError when it sees
/// none that fits.
inline int rank_device(const RankDeviceView& v) {
  if (v.first < 0)
    throw ValueError(detail::concat("ProcessGroupDDP: options.parallel.device must be >= 0, found ", v.first));
  if (v.visible < 0 || v.first + v.local_size <= v.visible) return v.first + v.local_rank;
  const std::string who =
      detail::concat("ProcessGroupDDP: rank ", v.rank, " (local rank ", v.local_rank, " of ", v.local_size, " on ",
                     v.host.empty() ? "?" : v.host, ") sees ", v.visible, " GPU", v.visible == 1 ? "" : "s", " (",
                     detail::visible_devices_variable(), ")");
  if (v.visible == 0) throw DeviceError(who + ": it needs one");
  if (v.first < v.visible) return v.first; // the launcher gave each rank its own GPUs
  throw DeviceError(detail::concat(who, ": device ", v.first, " (options.parallel.device) is not among them; ",
                                   "either every rank sees the node's GPUs (at least ", v.first + v.local_size,
                                   " here) or each sees its own"));
}

} // namespace cohort

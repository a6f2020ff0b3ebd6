#pragma once
/// \file
/// A count of the times cohort's CUDA code made the host wait for the GPU (stream and event
/// synchronisations): profiling's "host waits per step" (scripts/gpu-check.sh, stage profile).
/// A step should wait once, for its loss; more shows a synchronisation that stalls the queue.
/// Thrust's own blocking calls (a device_vector copy or fill through the default policy) are not
/// counted here: ncu's launch list shows those.
///
///     const auto before = cohort::gpu::host_waits();
///     trainer.fit_epoch(window);
///     double per_step = double(cohort::gpu::host_waits() - before) / steps;

#include <atomic>
#include <cstdint>

namespace cohort::gpu {

namespace detail {
inline std::atomic<std::uint64_t>& host_wait_counter() noexcept {
  static std::atomic<std::uint64_t> count{0};
  return count;
}
/// Called by every synchronisation of a stream or an event (relaxed: a statistic, not an order).
inline void count_host_wait() noexcept { host_wait_counter().fetch_add(1, std::memory_order_relaxed); }
} // namespace detail

/// Host waits so far in this process, over every device and thread.
inline std::uint64_t host_waits() noexcept { return detail::host_wait_counter().load(std::memory_order_relaxed); }

} // namespace cohort::gpu

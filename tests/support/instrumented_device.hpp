#pragma once
// `InstrumentedDevice`: the ThrustDevice kernels behind a context that behaves like the Cuda
// backend's where the engines' GPU logic can go wrong without a GPU:
//   - a current device per thread (CUDA's: device 0 until the thread selects one), and every
//     kernel launch checks that its replica's device is current (a kernel of device 1 launched
//     while device 0 is current is a wrong-device launch on a GPU);
//   - staging memory that records the device current when it was allocated (page-locked
//     memory opens a context on the current device);
//   - a visible-device count set by the test (CUDA_VISIBLE_DEVICES);
//   - ThreadedReplicas' all-reduce blocking each replica in start() until every replica has
//     started that bucket, as NCCL does (its connection set-up waits for every peer; a
//     cudaFree during backward waits for the spinning NCCL kernel), with a deadline instead of
//     a hang.
// Host-compiler builds only (tests/backend/device/).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include <cohort/backend/thrust_device.hpp>

namespace cohort::test {

/// This thread's current device (CUDA's default: 0).
inline int& current_device() {
  thread_local int device = 0;
  return device;
}

/// What the instrumented backend observed.
struct DeviceLog {
  std::atomic<int> visible{8}; // what visible_devices() reports
  std::atomic<std::size_t> wrong_device_launches{0};
  std::mutex mutex;
  std::vector<int> staging_devices; // the current device at each staging allocation
  double rendezvous_deadline_s = 5;

  static DeviceLog& get() {
    static DeviceLog log;
    return log;
  }
  void reset() {
    wrong_device_launches = 0;
    visible = 8;
    std::lock_guard<std::mutex> g(mutex);
    staging_devices.clear();
  }
};

struct InstrumentedContext : ThrustDeviceContext {
  int device = 0;
  bool allow_tf32 = false;

  void activate() const { current_device() = device; }
  /// Every kernel takes its policy from here: count launches on the wrong device.
  decltype(auto) policy() const {
    if (current_device() != device) ++DeviceLog::get().wrong_device_launches;
    return ThrustDeviceContext::policy();
  }
  static int visible_devices() { return DeviceLog::get().visible.load(); }
};

struct RecordingStagingAllocator {
  static void* allocate(std::size_t bytes) {
    {
      auto& log = DeviceLog::get();
      std::lock_guard<std::mutex> g(log.mutex);
      log.staging_devices.push_back(current_device());
    }
    return AlignedAllocator::allocate(bytes);
  }
  static void deallocate(void* p, std::size_t bytes) noexcept { AlignedAllocator::deallocate(p, bytes); }
};

struct InstrumentedDevice {
  using context = InstrumentedContext;
  template <class U>
  using buffer = DeviceBuffer<U>;
  static constexpr const char* name = "instrumented-device";
  static constexpr bool host_memory = false;
  using staging_allocator = RecordingStagingAllocator;
};

} // namespace cohort::test

namespace cohort {
template <>
struct ops::Conv2dKernels<test::InstrumentedDevice> : device::Conv2dKernels<test::InstrumentedDevice> {};
template <>
struct ops::ConvTranspose2dKernels<test::InstrumentedDevice>
    : device::ConvTranspose2dKernels<test::InstrumentedDevice> {};
template <>
struct ops::LinearKernels<test::InstrumentedDevice> : device::LinearKernels<test::InstrumentedDevice> {};
template <>
struct ops::PoolKernels<test::InstrumentedDevice> : device::PoolKernels<test::InstrumentedDevice> {};
template <>
struct ops::UpsampleKernels<test::InstrumentedDevice> : device::UpsampleKernels<test::InstrumentedDevice> {};
template <>
struct ops::GroupNormKernels<test::InstrumentedDevice> : device::GroupNormKernels<test::InstrumentedDevice> {};
template <>
struct ops::BatchNormKernels<test::InstrumentedDevice> : device::BatchNormKernels<test::InstrumentedDevice> {};
template <>
struct ops::ElementwiseKernels<test::InstrumentedDevice> : device::ElementwiseKernels<test::InstrumentedDevice> {};
template <>
struct ops::SoftmaxKernels<test::InstrumentedDevice> : device::SoftmaxKernels<test::InstrumentedDevice> {};
template <>
struct ops::ActivationKernels<test::InstrumentedDevice> : device::ActivationKernels<test::InstrumentedDevice> {};
template <>
struct ops::DepthwiseConv2dKernels<test::InstrumentedDevice>
    : device::DepthwiseConv2dKernels<test::InstrumentedDevice> {};

namespace test {
/// A tag for the non-blocking reduction the instrumented one wraps (the primary template).
struct UnblockedInstrumentedDevice {
  using context = InstrumentedContext;
};
} // namespace test

/// The replicas' all-reduce with NCCL's blocking: start(r, b) returns only once every replica
/// has called start(., b), or throws after the deadline (a deadlock on a GPU).
template <>
class device::ReplicaAllReduce<test::InstrumentedDevice> {
 public:
  ReplicaAllReduce(std::span<test::InstrumentedContext> ctx, std::vector<GradientBucket> buckets, double = 300)
      : replicas_(ctx.size()), entered_(new std::atomic<std::size_t>[buckets.size()]), next_(ctx.size(), 0),
        base_(ctx, std::move(buckets)) {}
  void begin(std::span<float* const> grads, std::uint64_t step = 0) {
    for (std::size_t b = 0; b < base_.buckets().size(); ++b) entered_[b].store(0);
    std::fill(next_.begin(), next_.end(), 0);
    base_.begin(grads, step);
  }
  void start(std::size_t r, test::InstrumentedContext& ctx, std::size_t b) {
    ++next_[r];
    entered_[b].fetch_add(1);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(test::DeviceLog::get().rendezvous_deadline_s);
    while (entered_[b].load() < replicas_) {
      if (std::chrono::steady_clock::now() > deadline)
        throw DistributedError(cohort::detail::concat("replica ", r, ": bucket ", b, " still waits for ",
                                                      replicas_ - entered_[b].load(),
                                                      " peer(s) to start it: on NCCL this step hangs"));
      std::this_thread::yield();
    }
    base_.start(r, ctx, b);
  }
  void finish(std::size_t r, test::InstrumentedContext& ctx) {
    while (next_[r] < base_.buckets().size()) start(r, ctx, next_[r]);
    base_.finish(r, ctx);
  }
  void abandon(std::size_t r) noexcept { base_.abandon(r); }
  const std::vector<GradientBucket>& buckets() const noexcept { return base_.buckets(); }

 private:
  std::size_t replicas_;
  std::unique_ptr<std::atomic<std::size_t>[]> entered_; // replicas that started each bucket
  std::vector<std::size_t> next_;                       // each replica's next bucket
  ReplicaAllReduce<test::UnblockedInstrumentedDevice> base_;
};
} // namespace cohort

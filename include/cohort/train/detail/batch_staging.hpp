#pragma once
/// \file
/// Where a Trainer's batches wait in host memory before a step reads them: 1 + `ahead` slots, so
/// that batches b + 1 .. b + ahead can be gathered (and augmented, or decoded) on a background
/// thread while the step trains on batch b (PyTorch's DataLoader worker with pin_memory and
/// prefetch_factor; TrainerOptions::prefetch_batches). Staging is the slots' allocator:
/// page-locked memory on Cuda (train/detail/staging_allocator.hpp).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "cohort/backend/ops.hpp"
#include "cohort/core/error.hpp"
#include "cohort/data/augment.hpp"
#include "cohort/data/batch_prefetcher.hpp"
#include "cohort/data/data_checks.hpp"
#include "cohort/data/joint_augment.hpp"
#include "cohort/tensor/buffer.hpp"
#include "cohort/train/trainer_options.hpp"

namespace cohort::detail {

/// Whether a Trainer gathers its next batch on a background thread (TrainerOptions::prefetch).
/// Device backends overlap every gather (and its copy) with the step. On the CPU the step keeps
/// every core busy, so a background gather only pays when it does more than copy (measured on
/// 2 cores, 3 alternating pairs: plain copies 3% slower on model C, inside the VM's noise;
/// crop + flip 2% faster on ResNet-20 in every pair).
/// A dataset that decodes its samples (SampleLoadingData) is always worth it: decoding is work.
template <class Backend, class Data = void>
bool prefetch_pays(const TrainerOptions& o) noexcept {
  if constexpr (host_memory_backend<Backend>)
    return o.prefetch && (!o.augment.empty() || SampleLoadingData<Data>);
  else
    return o.prefetch;
}

/// `PerSample`: the labels of one sample (1, or a dense network's H * W: a mask); `TargetSize`:
/// the float target values of one sample, for a dense network's regression (its output size; the
/// target slots stay empty until a dataset of target images is gathered).
template <class InputShape, class Staging, std::size_t PerSample = 1, std::size_t TargetSize = 0>
class BatchStaging {
 public:
  /// A training batch's augmentation: its transforms, keyed by (seed, epoch, sample index).
  struct Augment {
    const Augmentation* transforms = nullptr; // null or empty: none (evaluation batches)
    std::uint64_t seed = 0, epoch = 0;
    const JointAugmentation* joint = nullptr; // each image with its mask or target (null or empty: none)
  };

  /// `activate` runs before every gather, on whichever thread gathers: a device engine makes
  /// its device current there, so page-locked staging memory is allocated for its GPU, not GPU 0.
  explicit BatchStaging(std::function<void()> activate = {}) : activate_(std::move(activate)) {}

  /// The epoch's sample order (the sampler writes it; batch b is samples [b * size, ...)).
  std::vector<std::size_t>& order() noexcept { return order_; }
  const float* images(std::size_t slot) const noexcept { return x_[slot].data(); }
  const std::int32_t* labels(std::size_t slot) const noexcept { return y_[slot].data(); }
  const float* targets(std::size_t slot) const noexcept { return t_[slot].data(); }

  /// Copies the samples at `idx` into `slot` (no allocation once it is sized), then augments
  /// them, each image as the dataset sample it is (idx[i]).
  template <class Data>
  void gather(const Data& data, std::span<const std::size_t> idx, std::size_t slot, const Augment& augment = {}) {
    if (activate_) activate_();
    auto& x = x_[slot];
    x.resize(std::max(x.size(), idx.size() * InputShape::size));
    if constexpr (requires { data.target(std::size_t{}); }) // an image and its target image
      gather_pairs(data, idx, x, t_[slot], augment);
    else
      gather_labelled(data, idx, x, y_[slot], augment);
  }

  /// Batch b of the epoch (`local` samples of order(), `size` per batch) in a slot; returns the
  /// slot. With `ahead` > 0, batches up to b + ahead are then gathered, in order, into the other
  /// slots on the background thread while the caller trains on b. The slot batch b + ahead
  /// overwrites held batch b - 1, whose step has returned, and a step returns only after it has
  /// read its batch (CPU engines read host memory synchronously; a device step's batch reached
  /// the device: the loss is read back after the copy, on the same stream).
  template <class Data>
  std::size_t load(const Data& data, std::size_t b, std::size_t batches, std::size_t local, std::size_t size,
                   std::size_t ahead, const Augment& augment) {
    const auto indices = [this, local, size](std::size_t k) {
      const std::size_t first = k * size;
      return std::span<const std::size_t>(order_.data() + first, std::min(size, local - first));
    };
    if (ahead == 0) {
      gather(data, indices(b), 0, augment);
      return 0;
    }
    if (!prefetcher_ || prefetcher_->depth() != ahead) {
      stop();
      prefetcher_ = std::make_unique<BatchPrefetcher>(ahead);
    }
    const std::size_t slots = ahead + 1, slot = b % slots;
    if (x_.size() < slots) {
      x_.resize(slots);
      y_.resize(slots);
      t_.resize(slots);
    }
    if (queued_first_ == b && queued_end_ > b) {
      ++queued_first_;
      prefetcher_->wait_next();
    } else {
      stop(); // nothing queued is batch b (an epoch's first batch, or the first after resuming)
      gather(data, indices(b), slot, augment);
      queued_first_ = queued_end_ = b + 1;
    }
    for (; queued_end_ < batches && queued_end_ <= b + ahead; ++queued_end_)
      prefetcher_->submit([this, &data, indices, augment, slots, next = queued_end_] {
        gather(data, indices(next), next % slots, augment);
      });
    return slot;
  }

  /// Lets the batches being gathered finish (their errors, if any, no longer matter): the jobs
  /// read the epoch's order and training set, and write slots.
  void stop() noexcept {
    if (prefetcher_) prefetcher_->drain();
    queued_first_ = queued_end_ = no_batch;
  }
  /// stop() when an epoch ends, by an exception too.
  struct StopScope {
    BatchStaging& staging;
    ~StopScope() { staging.stop(); }
  };

 private:
  /// gather() for a labelled dataset, or one of images with masks.
  template <class Data>
  void gather_labelled(const Data& data, std::span<const std::size_t> idx, HostBuffer<float, Staging>& x,
                       HostBuffer<std::int32_t, Staging>& y, const Augment& augment) {
    y.resize(std::max(y.size(), idx.size() * PerSample));
    constexpr bool masks = requires { data.mask(std::size_t{}); }; // an image and its mask (PerSample labels)
    if constexpr (SampleLoadingData<Data> && !masks) {
      data.load_samples(idx, {x.data(), idx.size() * InputShape::size}, SampleDraw{augment.seed, augment.epoch});
      for (std::size_t i = 0; i < idx.size(); ++i) y[i] = data.label(idx[i]);
    } else {
      for (std::size_t i = 0; i < idx.size(); ++i) {
        const float* src = data.image(idx[i]);
        std::copy(src, src + InputShape::size, x.data() + i * InputShape::size);
        if constexpr (masks)
          std::copy_n(data.mask(idx[i]), PerSample, y.data() + i * PerSample);
        else
          y[i] = data.label(idx[i]);
      }
    }
    if constexpr (masks) {
      if (!augment.joint || augment.joint->empty()) return;
      constexpr ImageDims shape{InputShape::extents[0], InputShape::extents[1], InputShape::extents[2]};
      for (std::size_t i = 0; i < idx.size(); ++i)
        augment.joint->apply({x.data() + i * InputShape::size, InputShape::size}, shape,
                             {y.data() + i * PerSample, PerSample}, augment.seed, augment.epoch, idx[i]);
      return;
    }
    if (!augment.transforms || augment.transforms->empty()) return;
    if constexpr (InputShape::rank == 3) {
      constexpr ImageDims shape{InputShape::extents[0], InputShape::extents[1], InputShape::extents[2]};
      augment.transforms->apply_batch({x.data(), idx.size() * InputShape::size}, shape, idx, augment.seed,
                                      augment.epoch);
    } else {
      throw ShapeError(
          concat("Trainer: augmentation transforms images (C, H, W); the network's input is ", InputShape::str()));
    }
  }

  /// gather() for a dataset of image pairs: images and float targets, transformed together.
  template <class Data>
  void gather_pairs(const Data& data, std::span<const std::size_t> idx, HostBuffer<float, Staging>& x,
                    HostBuffer<float, Staging>& t, const Augment& augment) {
    static_assert(TargetSize > 0, "BatchStaging: image pairs need the targets' size per sample (TargetSize)");
    t.resize(std::max(t.size(), idx.size() * TargetSize));
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const float* src = data.image(idx[i]);
      std::copy(src, src + InputShape::size, x.data() + i * InputShape::size);
      std::copy_n(data.target(idx[i]), TargetSize, t.data() + i * TargetSize);
    }
    if (!augment.joint || augment.joint->empty()) return;
    constexpr ImageDims shape{InputShape::extents[0], InputShape::extents[1], InputShape::extents[2]};
    constexpr std::size_t target_channels = TargetSize / (InputShape::extents[1] * InputShape::extents[2]);
    for (std::size_t i = 0; i < idx.size(); ++i)
      augment.joint->apply({x.data() + i * InputShape::size, InputShape::size}, shape,
                           {t.data() + i * TargetSize, TargetSize}, target_channels, augment.seed, augment.epoch,
                           idx[i]);
  }

  static constexpr std::size_t no_batch = std::numeric_limits<std::size_t>::max();
  std::function<void()> activate_;
  std::vector<std::size_t> order_;
  std::vector<HostBuffer<float, Staging>> x_{1}; // slot 0 unless prefetching; 1 + ahead slots when it does
  std::vector<HostBuffer<std::int32_t, Staging>> y_{1};
  std::vector<HostBuffer<float, Staging>> t_{1}; // float targets (image pairs); empty otherwise
  std::unique_ptr<BatchPrefetcher> prefetcher_;  // after the slots: destroyed first, its jobs write them
  // The batches queued on the prefetcher: [queued_first_, queued_end_) (no_batch: none).
  std::size_t queued_first_ = no_batch, queued_end_ = no_batch;
};

} // namespace cohort::detail

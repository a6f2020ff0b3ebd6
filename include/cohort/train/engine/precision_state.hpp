#pragma once
/// \file
/// What a precision policy adds to an engine: the parameters the network computes with, the
/// factor on the loss, and what happens between backward and the optimiser.
///
/// Every engine keeps float master parameters (what the optimiser updates, what checkpoints
/// hold) and float gradients. `PrecisionState<FullPrecision, Net>` computes with the master
/// itself. `PrecisionState<MixedPrecision<H, S>, Net>` keeps a 16-bit copy of the weights for
/// forward and backward (refreshed after every optimiser step; it also holds the live running
/// statistics), and for fp16 a LossScaler: the loss is multiplied by the scale, the summed
/// gradients are checked for inf/NaN and unscaled in one pass, and the step is skipped on
/// overflow. Engines check the gradients after every replica's and rank's have been added up,
/// so all of them take the same decision.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/precision/mixed_precision.hpp"
#include "cohort/train/checkpoint.hpp"

namespace cohort::detail {

template <class Precision, class Net>
class PrecisionState;

template <class P>
inline constexpr bool is_mixed_precision = false;
template <class H, class S>
inline constexpr bool is_mixed_precision<MixedPrecision<H, S>> = true;
/// The precision policies the CPU engines implement.
template <class P>
concept known_precision = std::is_same_v<P, FullPrecision> || is_mixed_precision<P>;

/// float everywhere: the master parameters are the ones the network computes with.
template <class Net>
class PrecisionState<FullPrecision, Net> {
 public:
  using compute_type = float;
  using master_type = Parameters<Net, float, Cpu>;

  PrecisionState(master_type& master, const LossScaleOptions&) : master_(master) {}

  master_type& compute() noexcept { return master_; }
  /// The executor's master pointer (null: the compute parameters are the master).
  const float* master_values() const noexcept { return nullptr; }
  double loss_factor() const noexcept { return 1.0; }
  /// Whether the optimiser may step on `grads` (the summed gradients): always.
  bool prepare_step(ThreadPool&, std::span<float>) { return true; }
  void after_step(ThreadPool&) {}
  void before_save() {}
  void after_load(ThreadPool&) {}
  void export_state(TrainerState&) const {}
  void import_state(const TrainerState&) {}
  std::uint64_t skipped_steps() const noexcept { return 0; }
  double scale() const noexcept { return 0; }

 private:
  master_type& master_;
};

/// The loss scaling of a mixed-precision state (fp16: a LossScaler; bf16: none) and what the
/// engines save and report of it. Shared by PrecisionState and the device engines'
/// DevicePrecision (train/engine/device_precision.hpp).
template <bool Scaled>
class LossScaling {
 public:
  static constexpr bool scaled = Scaled;
  explicit LossScaling(const LossScaleOptions& o) {
    if constexpr (Scaled) scaler_ = LossScaler(o);
  }
  /// The factor on the loss (the gradients come out multiplied by it).
  double loss_factor() const noexcept {
    if constexpr (Scaled)
      return double(scaler_.scale());
    else
      return 1.0;
  }
  void export_state(TrainerState& s) const {
    if constexpr (Scaled) {
      s.loss_scale = double(scaler_.scale());
      s.scale_growth_tracker = scaler_.growth_tracker();
      s.skipped_steps = scaler_.skipped();
      s.consecutive_skips = scaler_.consecutive_skips();
    }
  }
  void import_state(const TrainerState& s) {
    if constexpr (Scaled)
      if (s.loss_scale > 0)
        scaler_.restore(float(s.loss_scale), s.scale_growth_tracker, s.skipped_steps, s.consecutive_skips);
  }
  std::uint64_t skipped_steps() const noexcept {
    if constexpr (Scaled)
      return scaler_.skipped();
    else
      return 0;
  }
  double scale() const noexcept { return Scaled ? loss_factor() : 0.0; }
  LossScaler& scaler() noexcept { return scaler_; }

 protected:
  LossScaler scaler_;
};

/// 16-bit storage for forward and backward, float master weights and gradients.
template <class Net, class H, class S>
class PrecisionState<MixedPrecision<H, S>, Net> : public LossScaling<MixedPrecision<H, S>::scales_loss> {
  using scaling = LossScaling<MixedPrecision<H, S>::scales_loss>;
  using scaling::scaler_;

 public:
  using compute_type = H;
  using master_type = Parameters<Net, float, Cpu>;
  using compute_params = Parameters<Net, H, Cpu>;
  using scaling::scaled;

  PrecisionState(master_type& master, const LossScaleOptions& o) : scaling(o), master_(master) {
    after_load(ThreadPool::global());
  }

  compute_params& compute() noexcept { return compute_; }
  const float* master_values() const noexcept { return master_.values.data(); }

  /// fp16: unscales the gradients and looks for inf/NaN in the same pass; returns false (and
  /// backs the scale off) when the step must be skipped. bf16: nothing to do.
  bool prepare_step(ThreadPool& pool, std::span<float> grads) {
    if constexpr (!scaled) {
      return true;
    } else {
      const float inv = scaler_.inverse();
      std::atomic<bool> found{false};
      pool.parallel_for(grads.size(), 64 * 1024, [&](std::size_t lo, std::size_t hi) {
        bool bad = false;
        for (std::size_t i = lo; i < hi; ++i) {
          const float g = grads[i];
          bad |= !std::isfinite(g);
          grads[i] = g * inv;
        }
        if (bad) found.store(true, std::memory_order_relaxed);
      });
      const bool inf = found.load();
      scaler_.update(inf); // may throw NumericError after too many skips in a row
      return !inf;
    }
  }
  /// The 16-bit copy follows the master weights.
  void after_step(ThreadPool& pool) {
    const float* src = master_.values.data();
    H* dst = compute_.values.data();
    const Isa isa = cpu::active_isa();
    pool.parallel_for(master_.values.size(), 64 * 1024, [&, isa](std::size_t lo, std::size_t hi) {
      cpu::store_floats(isa, src + lo, dst + lo, hi - lo);
    });
  }
  /// Running statistics live in the compute parameters: copy them into the master for saving.
  void before_save() {
    std::copy(compute_.buffers.begin(), compute_.buffers.end(), master_.buffers.begin());
    std::copy(compute_.counters.begin(), compute_.counters.end(), master_.counters.begin());
  }
  /// After the master changed wholesale (start, checkpoint, broadcast): everything follows it.
  void after_load(ThreadPool& pool) {
    std::copy(master_.buffers.begin(), master_.buffers.end(), compute_.buffers.begin());
    std::copy(master_.counters.begin(), master_.counters.end(), compute_.counters.begin());
    after_step(pool);
  }

 private:
  master_type& master_;
  compute_params compute_;
};

/// The precision hooks the Trainer calls on every engine, forwarded to the engine's
/// `precision()` state.
template <class Derived>
struct PrecisionHooks {
  /// Before a checkpoint: the live running statistics into the master parameters.
  void before_save() { self().precision().before_save(); }
  /// After the master parameters were loaded or received: the compute copy follows.
  void after_load() { self().precision().after_load(ThreadPool::global()); }
  void export_state(TrainerState& s) { self().precision().export_state(s); }
  void import_state(const TrainerState& s) { self().precision().import_state(s); }
  /// fp16: optimiser steps skipped on inf/NaN gradients so far, and the current loss scale.
  std::uint64_t skipped_steps() { return self().precision().skipped_steps(); }
  double loss_scale() { return self().precision().scale(); }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

} // namespace cohort::detail

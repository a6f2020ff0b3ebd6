#pragma once
/// \file
/// How the Trainer computes a step under a (parallel, precision) policy pair: the engine
/// protocol (TrainEngineProtocol), what an engine is built with, and the error for a pair that
/// does not exist. The pieces engines share live beside it: replica.hpp (the CPU network
/// instance), sharding.hpp (cutting a batch over replicas, chunks and ranks), default_loss.hpp.
///
/// An engine owns the parameters, the optimiser and whatever computes gradients (one network,
/// N replicas, one rank of a process group). The Trainer hands it batches:
///
///     double loss = engine.step(x, labels, {.forward_pass = f, .index = i, .count = k});
///
/// `x` holds this process's samples of the step's global batch, in global order (sample i of
/// rank r is global sample r + i * world). Micro-batches i < k-1 only accumulate gradients
/// (DDP's no_sync); the last one synchronises and runs the optimiser.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/loss/cross_entropy_options.hpp"
#include "cohort/loss/regression_choice.hpp"
#include "cohort/network/freezing.hpp"
#include "cohort/parallel/policy.hpp"
#include "cohort/precision/mixed_precision.hpp"
#include "cohort/tensor/batch.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/default_loss.hpp"
#include "cohort/train/engine/micro_step.hpp"
#include "cohort/train/engine/replica.hpp"
#include "cohort/train/engine/sharding.hpp"

namespace cohort {

/// What an engine is built with.
struct EngineOptions {
  /// Seeds initialisation and dropout (every replica and rank uses the same).
  std::uint64_t seed = 0;
  DataParallelOptions parallel{};
  /// fp16 loss scaling (MixedPrecision<fp16>).
  LossScaleOptions loss_scale{};
  /// Label smoothing and class weights of CrossEntropyLoss (a network ending in LogSoftmax,
  /// trained with NllLoss, takes neither).
  CrossEntropyOptions loss{};
  /// The label of pixels that add nothing to a dense network's loss and metrics.
  std::int32_t ignore_index = -100;
  /// A dense network's loss on float target images (CPU engines; the Trainer's
  /// TrainerOptions::regression).
  RegressionOptions regression{};
  /// The layers that do not train (network/freezing.hpp): every replica's executor skips them,
  /// DDP's buckets leave them out. (The optimiser's frozen runs come with the optimiser.)
  FrozenLayers frozen{};
  /// Evaluation runs at most this many samples per forward before training has sized the
  /// activation buffers (replica.hpp's eval_chunk; 0: no limit): the Trainer's batch_size.
  std::size_t eval_chunk = 0;
  /// Evaluation's test-time augmentation (TrainerOptions::test_time_augmentation; CPU engines).
  TestTimeAugmentation tta = TestTimeAugmentation::none;
  /// Settings every rank must share besides the network and the policies ("batch_size: 128"):
  /// ProcessGroupDDP compares them across ranks at start.
  std::vector<std::string> agreement{};
};

/// What the Trainer calls on the engine of its (Parallel, Precision) pair: every engine
/// (detail::TrainEngine's specialisations in train/engine/, or one a new policy adds) provides
/// these, and the Trainer checks it when it is instantiated, so a missing member is reported
/// with this concept's name rather than deep inside the training loop.
template <class E, class Net>
concept TrainEngineProtocol = requires(E& e, ConstBatchView<typename Net::input_shape, float> x,
                                       std::span<const std::int32_t> labels, const MicroStep& m, TrainerState& state,
                                       std::string& error, std::span<double> values, std::uint64_t seed) {
  // Training and evaluation on this process's share of a batch.
  { e.step(x, labels, m) } -> std::convertible_to<double>;
  { e.evaluate(x, labels) } -> std::convertible_to<std::pair<std::size_t, double>>;
  // What is trained, for checkpoints and the caller.
  e.parameters();
  e.optimizer();
  { e.devices() } -> std::convertible_to<std::size_t>;
  e.set_seed(seed);
  { e.skipped_steps() } -> std::convertible_to<std::uint64_t>;
  { e.loss_scale() } -> std::convertible_to<double>;
  // The process group (one process: detail::LocalCollectives).
  { e.rank() } -> std::convertible_to<std::size_t>;
  { e.world() } -> std::convertible_to<std::size_t>;
  e.barrier("what");
  e.sum(values, "what");
  e.share_from_root(error, state);
  e.sync_buffers();
  // Checkpoints: before writing, after reading, and the position in between.
  e.before_save();
  e.after_load();
  e.export_state(state);
  e.import_state(state);
};

namespace detail {

/// How one training step is computed under a (parallel, precision) policy pair. Each policy
/// adds its specialisation (train/engine/); an unsupported pair fails here, with a message.
template <class Parallel, class Precision, class Net, class Opt>
class TrainEngine {
  static_assert(dependent_false<Parallel>,
                "Trainer: this combination of parallel and precision policies is not available (policies live in "
                "cohort/parallel/ and cohort/precision/; ProcessGroupDDP<Mpi> needs #include <cohort/mpi.hpp> and "
                "the cohort::mpi CMake target)");
};

/// The collective operations of an engine whose replicas live in one process: nothing to agree
/// with. (ProcessGroupDDP's engine implements them over MPI.)
struct LocalCollectives {
  static constexpr bool distributed = false;
  std::size_t rank() const noexcept { return 0; }
  std::size_t world() const noexcept { return 1; }
  void barrier(const char*) {}
  /// Sums `values` over all processes.
  void sum(std::span<double>, const char*) {}
  /// Gives every process rank 0's `error` (empty: none) and, if none, rank 0's `state`, then the
  /// parameters, running statistics and optimiser state of rank 0.
  template <class State>
  void share_from_root(std::string&, State&) {}
  /// Gives every process rank 0's running statistics (BatchNorm), before evaluating or saving.
  void sync_buffers() {}
};

} // namespace detail
} // namespace cohort

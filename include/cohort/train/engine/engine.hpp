#pragma once
/// \file
/// How the Trainer computes a step under a (parallel, precision) policy pair: the engine
/// protocol, the pieces every engine uses, and the error for a pair that does not exist.
///
/// An engine owns the parameters, the optimiser and whatever computes gradients (one network,
/// N replicas, one rank of a process group). The Trainer hands it batches:
///
///     double loss = engine.step(x, labels, {.forward_pass = f, .index = i, .count = k});
///
/// `x` holds this process's samples of the step's global batch, in global order (sample i of
/// rank r is global sample r + i * world). Micro-batches i < k-1 only accumulate gradients
/// (DDP's no_sync); the last one synchronises and runs the optimiser.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/backend/cpu.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/core/error.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/loss/cross_entropy_loss.hpp"
#include "cohort/loss/nll_loss.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/parallel/policy.hpp"
#include "cohort/parallel/threaded_replicas.hpp"
#include "cohort/precision/mixed_precision.hpp"
#include "cohort/tensor/batch.hpp"
#include "cohort/tensor/buffer.hpp"

namespace cohort {

/// The loss a network's output calls for: NllLoss after a final LogSoftmax (seed 000),
/// CrossEntropyLoss on raw scores otherwise (seeds 001, 003); T is the network's storage type.
template <class Net, class T = float, class Backend = Cpu>
using default_loss_t = std::conditional_t<
    std::is_same_v<typename detail::at_t<Net::layer_count - 1, typename Net::layers>::layer, LogSoftmax>,
    NllLoss<T, Backend>, CrossEntropyLoss<T, Backend>>;

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
  /// Settings every rank must share besides the network and the policies ("batch_size: 128"):
  /// ProcessGroupDDP compares them across ranks at start.
  std::vector<std::string> agreement{};
};

/// One micro-batch of an optimiser step, as the Trainer hands it to an engine.
struct MicroStep {
  /// Optimiser steps taken before this one (named in distributed errors).
  std::uint64_t step = 0;
  /// Global micro-batches trained before this one: selects the dropout masks (the same on every
  /// replica and rank).
  std::uint64_t forward_pass = 0;
  /// Gradient accumulation: this micro-batch's index among the `count` that make one step.
  std::size_t index = 0, count = 1;
  bool last() const noexcept { return index + 1 == count; }
};

namespace detail {

/// The loss of an engine's replica, built with the trainer's CrossEntropyOptions: checked here,
/// so a bad option fails when the Trainer is constructed, naming the loss.
template <class Loss, std::size_t Classes>
Loss make_loss(const CrossEntropyOptions& o) {
  if constexpr (std::is_constructible_v<Loss, CrossEntropyOptions>) {
    Loss loss(o);
    check_class_weight_count("CrossEntropyLoss", o, Classes);
    return loss;
  } else {
    if (!o.plain())
      throw ValueError(concat("Trainer: label_smoothing (", o.label_smoothing, ") and class_weights (",
                              o.class_weights.size(), " given) apply to CrossEntropyLoss, but this network ends in ",
                              "LogSoftmax and trains with NllLoss: expected neither, or a network without the final ",
                              "LogSoftmax"));
    return Loss{};
  }
}

/// How a shard of a step's batch (a replica's, a chunk's, a rank's) enters the step's mean loss:
/// the shard's loss is normalised by `denominator` (0: its own sample count) and then, with its
/// gradient, multiplied by `share`. Without class weights that is the shard's mean times
/// count / n (DataParallel's); with them the shard is divided by the step's global weight total
/// `total` directly (a shard's own total may be 0, and smoothing still gives it a loss).
struct ShardNorm {
  double share = 1, denominator = 0;
};
inline ShardNorm shard_norm(std::size_t count, std::size_t n, double total) {
  if (total > 0) return {1.0, total};
  return {double(count) / double(n), 0.0};
}

/// The global weight total of a step's batch for a loss with class weights (0 without: shards
/// weigh by count). `labels` are this process's; `collectives.sum` adds the class counts of
/// every rank's (integers: the same total on every rank, for any split).
template <std::size_t Classes, class Loss, class Collectives>
double step_weight_total(const Loss& loss, std::span<const std::int32_t> labels, Collectives& collectives) {
  if constexpr (!requires { loss.weighted(); }) {
    return 0.0;
  } else {
    if (!loss.weighted()) return 0.0;
    const auto& w = loss.options().class_weights;
    check_labels("CrossEntropyLoss", labels, labels.size(), Classes);
    std::vector<double> counts(Classes + 1, 0.0); // + the sample count (for the message)
    count_classes(labels, std::span<double>(counts).first(Classes));
    counts[Classes] = double(labels.size());
    collectives.sum(counts, "the class counts of the step's labels");
    const double total = weight_total(w, std::span<const double>(counts).first(Classes));
    check_weight_total("CrossEntropyLoss", total, std::size_t(counts[Classes]));
    return total;
  }
}

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

/// Parameters initialised from `seed` (every replica and rank starts from the same values).
template <class Params>
Params initialized_parameters(std::uint64_t seed) {
  Params p;
  p.initialize(seed);
  return p;
}

/// The StepInfo of a training micro-batch: its dropout masks follow the global sample numbers
/// `offset`, `offset + stride`, ...; only `update_buffers` passes move running statistics.
inline StepInfo train_step_info(std::uint64_t seed, const MicroStep& m, std::uint64_t offset = 0,
                                std::uint64_t stride = 1, bool update_buffers = true) {
  return {.mode = Mode::train,
          .seed = seed,
          .step = m.forward_pass,
          .sample_offset = offset,
          .sample_stride = stride,
          .update_buffers = update_buffers};
}

/// Predictions that match the labels, from (n, classes) scores.
template <class Net>
std::size_t count_correct(const float* y, std::span<const std::int32_t> labels) {
  constexpr std::size_t k = Net::output_shape::size;
  std::size_t correct = 0;
  for (std::size_t n = 0; n < labels.size(); ++n) {
    const float* row = y + n * k;
    correct += std::size_t(std::max_element(row, row + k) - row) == std::size_t(labels[n]);
  }
  return correct;
}

/// A network instance without parameters of its own: an executor, a gradient store, a loss and
/// the CPU threads it computes on, with storage type T (float, or a 16-bit type under mixed
/// precision: inputs are converted, gradients stay float). Replicas share one set of
/// parameters; nothing is copied per step.
template <class Net, class T = float>
class Replica {
 public:
  using params_type = Parameters<Net, T, Cpu>;
  using grads_type = Gradients<Net, T, Cpu>;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  /// `pool`: the threads this replica's kernels run on (one replica's pool is never used by two
  /// threads at once); `loss`: CrossEntropyLoss's smoothing and class weights.
  explicit Replica(ThreadPool& pool, const CrossEntropyOptions& loss = {})
      : ctx_{&pool}, loss_(make_loss<loss_type, Net::output_shape::size>(loss)) {
    loss_.set_context(ctx_);
  }

  /// Forward, loss and backward on one (micro-)batch; parameter gradients are written into `g`
  /// (added when `accumulate`), scaled by `grad_scale` (the batch's share of the global batch,
  /// times the loss scale). `hook(layer)` runs as each layer's gradients become final.
  /// `master`: the float master weights under mixed precision. `denominator`: what the loss is
  /// normalised by (0: the batch's own count or weight total; see ShardNorm). Returns the loss.
  template <class Hook = NoHook>
  double train(params_type& p, grads_type& g, input_view x, std::span<const std::int32_t> labels, const StepInfo& info,
               double grad_scale, bool accumulate, Hook&& hook = {}, const float* master = nullptr,
               double denominator = 0) {
    const auto y = exec_.forward(ctx_, info, p, input(x), master);
    const double l = forward_loss(y, labels, grad_scale, denominator);
    exec_.backward(ctx_, p, g, loss_.backward(), {.accumulate = accumulate}, std::forward<Hook>(hook), master);
    return l;
  }

  /// (correct predictions, summed loss) in evaluation mode.
  std::pair<std::size_t, double> evaluate(params_type& p, input_view x, std::span<const std::int32_t> labels,
                                          std::uint64_t seed, const float* master = nullptr) {
    const StepInfo info{.mode = Mode::eval, .seed = seed, .update_buffers = false};
    const auto y = exec_.forward(ctx_, info, p, input(x), master);
    const double l = loss_.forward(y, labels);
    if constexpr (std::is_same_v<T, float>) {
      return {count_correct<Net>(y.data(), labels), l * double(x.batch())};
    } else {
      scores_.resize(y.size());
      cpu::load_floats(cpu::active_isa(), y.data(), scores_.data(), y.size());
      return {count_correct<Net>(scores_.data(), labels), l * double(x.batch())};
    }
  }

  grads_type& gradients() noexcept { return grads_; }
  Executor<Net, T, Cpu>& executor() noexcept { return exec_; }
  const auto& loss() const noexcept { return loss_; }
  CpuContext& context() noexcept { return ctx_; }

  /// Room for one gathered micro-batch (deterministic chunks), reused across steps.
  HostBuffer<float> chunk_x;
  std::vector<std::int32_t> chunk_labels;

 private:
  /// The batch in the network's storage type (the float images converted for 16 bits).
  ConstBatchView<typename Net::input_shape, T> input(input_view x) {
    if constexpr (std::is_same_v<T, float>) {
      return x;
    } else {
      input_.resize(std::max(input_.size(), x.size()));
      cpu::store_floats(cpu::active_isa(), x.data(), input_.data(), x.size());
      return {input_.data(), x.batch()};
    }
  }

  template <class Y>
  double forward_loss(const Y& y, std::span<const std::int32_t> labels, double grad_scale, double denominator) {
    if constexpr (requires { loss_.forward(y, labels, grad_scale, denominator); })
      return loss_.forward(y, labels, grad_scale, denominator);
    else
      return loss_.forward(y, labels, grad_scale); // NllLoss: never given a denominator (make_loss)
  }

  using loss_type = default_loss_t<Net, T>;
  CpuContext ctx_;
  Executor<Net, T, Cpu> exec_;
  grads_type grads_;
  loss_type loss_;
  HostBuffer<T> input_;      // 16-bit storage: the converted batch
  HostBuffer<float> scores_; // 16-bit storage: evaluation scores in float
};

/// Copies samples first, first + stride, ... (count of them) of a batch into `x` and `labels`:
/// deterministic mode's chunk j of a batch is its samples j, j + chunks, j + 2 * chunks, ...
template <class Shape>
std::size_t gather_strided(const float* x, std::span<const std::int32_t> labels, std::size_t first, std::size_t stride,
                           HostBuffer<float>& out_x, std::vector<std::int32_t>& out_labels) {
  const std::size_t n = labels.size() > first ? (labels.size() - first + stride - 1) / stride : 0;
  if (out_x.size() < n * Shape::size) out_x.resize(n * Shape::size);
  out_labels.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t src = first + i * stride;
    std::copy(x + src * Shape::size, x + (src + 1) * Shape::size, out_x.data() + i * Shape::size);
    out_labels[i] = labels[src];
  }
  return n;
}

/// The replica count of ThreadedReplicas<N>: N, or the run-time count for dynamic_replicas.
template <std::size_t N>
std::size_t replica_count(const DataParallelOptions& o) {
  if constexpr (N != dynamic_replicas) {
    return N;
  } else {
    if (o.replicas == 0) throw ValueError("ThreadedReplicas: replicas must be at least 1");
    return o.replicas;
  }
}

/// Samples [begin, begin + count) of a batch of n cut into `parts` contiguous shards: shard r's.
inline std::pair<std::size_t, std::size_t> contiguous_shard(std::size_t n, std::size_t parts, std::size_t r) noexcept {
  const std::size_t base = n / parts, extra = n % parts;
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

/// Checks the deterministic-mode chunk count against the number of parts (replicas or ranks)
/// that share a global batch.
inline void check_chunks(const DataParallelOptions& o, std::size_t parts, const char* what) {
  if (!o.deterministic) return;
  if (o.deterministic_chunks == 0 || o.deterministic_chunks % parts != 0)
    throw ValueError(concat("deterministic mode: deterministic_chunks (", o.deterministic_chunks,
                            ") must be a positive multiple of the ", what, " (", parts, ")"));
}

} // namespace detail
} // namespace cohort

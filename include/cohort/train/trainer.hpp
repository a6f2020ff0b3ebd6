#pragma once
/// \file
/// The training loop of the seed notebooks, with the execution policy as a template argument.
///
///     using namespace cohort;
///     Trainer<models::ModelA, Adadelta<>> trainer(Adadelta({.lr = 0.5}), {.batch_size = 128});
///     auto history = trainer.fit(train_set, /*epochs=*/2, &test_set);
///     trainer.save("model_a.safetensors");
///
/// `Trainer<Net, Optimizer, Parallel = SingleDevice<>, Precision = FullPrecision>`: the policies
/// pick at compile time how a step is computed; the loop (sampling, batching, timing, logging,
/// metrics, checkpoints) is the same for all of them. The loss follows the network: NllLoss after
/// a final LogSoftmax (seed 000), CrossEntropyLoss on raw scores otherwise (seeds 001, 003).

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cohort/backend/cpu.hpp"
#include "cohort/backend/cpu/available_cores.hpp"
#include "cohort/core/error.hpp"
#include "cohort/data/augment.hpp"
#include "cohort/data/batch_prefetcher.hpp"
#include "cohort/data/sampler.hpp"
#include "cohort/optim/lr_schedule.hpp"
#include "cohort/optim/optimizer.hpp"
#include "cohort/optim/parameter_groups.hpp"
#include "cohort/parallel/policy.hpp"
#include "cohort/parallel/single_device.hpp"
#include "cohort/parallel/threaded_replicas.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/precision/mixed_precision.hpp"
#include "cohort/tensor/buffer.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/single_device.hpp"
#include "cohort/train/engine/single_device_on_device.hpp"
#include "cohort/train/engine/threaded_replicas.hpp"
#include "cohort/train/engine/threaded_replicas_on_device.hpp"
#include "cohort/train/progress.hpp"

namespace cohort {

/// A labelled image set the trainer can draw batches from (data/dataset.hpp's ImageDataset,
/// repeated or not, or anything with the same three members).
template <class D, class InputShape>
concept ClassificationData = requires(const D& d, std::size_t i) {
  { d.size() } -> std::convertible_to<std::size_t>;
  { d.image(i) } -> std::convertible_to<const float*>;
  { d.label(i) } -> std::convertible_to<std::int32_t>;
};

/// How the trainer runs, logs and records.
struct TrainerOptions {
  std::size_t batch_size = 128;
  std::size_t eval_batch_size = 1000;
  /// CPU threads of this process: the pool every CPU kernel runs on (set_num_threads), set when
  /// the trainer is built. 0: every core the process may use, as PyTorch does
  /// (available_cores(): its affinity mask, cgroup quota and share among the MPI ranks on the
  /// node; COHORT_NUM_THREADS overrides). Results are bitwise the same for any count.
  /// ThreadedReplicas' replicas run on their own pools (parallel.threads_per_replica); device
  /// policies leave the pool alone.
  std::size_t threads = 0;
  /// Seeds initialisation, dropout and shuffling.
  std::uint64_t seed = 0;
  bool shuffle = true;
  /// Stop after this many optimiser steps in all (0: no limit); the position is kept, so a
  /// checkpoint taken then resumes exactly.
  std::uint64_t max_steps = 0;
  /// A progress line every this many steps (0: none), as the seed notebooks print (progress =
  /// lines, or automatic away from a terminal).
  std::size_t log_interval = 10;
  /// A bar redrawn in place with samples/s, loss and ETA on a terminal, lines elsewhere
  /// (train/progress.hpp).
  ProgressStyle progress = ProgressStyle::automatic;
  /// Where progress goes (nullptr: silent).
  std::ostream* log = &std::cout;
  /// Append one JSON object per epoch here (empty: no file).
  std::filesystem::path metrics{};
  /// Recorded in the metrics as seed 003 does.
  std::string model_size{};
  std::size_t n_dataset_repeat = 1;
  /// Batches whose gradients are added up before each optimiser step (DDP's no_sync: only the
  /// last one communicates). Each batch weighs 1/accumulation_steps.
  std::size_t accumulation_steps = 1;
  /// Replicas, buckets, deterministic mode, deadlines (parallel/policy.hpp).
  DataParallelOptions parallel{};
  /// fp16 loss scaling (MixedPrecision<fp16>; precision/mixed_precision.hpp).
  LossScaleOptions loss_scale{};
  /// Gather (and augment) the next training batch on a background thread while the current one
  /// trains (seed 001's DataLoader worker with pin_memory and non_blocking copies; page-locked
  /// memory on Cuda). Device policies always; CPU policies when there is augmentation to do (a
  /// plain copy is cheaper in line than on a thread competing with the step's). The batches are
  /// the same either way.
  bool prefetch = true;
  /// Transforms applied to every training image (not to evaluation), in the batch buffer, keyed
  /// by (seed, epoch, dataset sample index): the same images for every policy, replica count,
  /// world size and prefetch setting, and after a resume (data/augment.hpp). Empty: none.
  Augmentation augment{};
  /// The learning rate over training (optim/lr_schedule.hpp; empty: the optimiser's own,
  /// throughout). It is set before every optimiser step from the optimiser's rate at
  /// construction and the epochs completed, or with `schedule_per_step` the optimiser steps
  /// taken (torch: scheduler.step() after each epoch, or after each optimizer.step() as
  /// OneCycleLR is used). Both counts are in checkpoints: a resumed run gets the same rates.
  LrSchedule lr_schedule{};
  bool schedule_per_step = false;
  /// Parameter groups for the optimiser from a rule over the network's tensors
  /// (optim/parameter_groups.hpp; `no_decay_on_norms_and_biases()` is the usual one). Empty:
  /// whatever groups the optimiser was given (none by default).
  GroupRule parameter_groups{};
  /// > 0: clip the gradients to this global L2 norm before every optimiser step
  /// (clip_grad_norm_; the optimiser's set_max_grad_norm). The engines clip the gradients summed
  /// over replicas and ranks, after fp16 unscaling: every replica and rank clips alike. 0: the
  /// optimiser's own setting (off by default).
  double max_grad_norm = 0;
  /// CrossEntropyLoss's label smoothing and class weights, torch's definition
  /// (loss/cross_entropy_options.hpp); split batches are normalised by the whole step's weight
  /// total. A network ending in LogSoftmax (NllLoss) refuses them.
  CrossEntropyOptions loss{};
};

/// What one epoch (or the part of it run before max_steps) produced.
struct EpochReport {
  std::uint64_t epoch = 0;
  bool complete = true;
  std::size_t steps = 0, samples = 0;
  double seconds = 0, samples_per_s = 0, train_loss = 0;
  std::optional<double> test_accuracy, test_loss;
};

/// Accuracy (percent) and mean loss over a dataset.
struct EvalReport {
  double accuracy = 0, loss = 0;
  std::size_t samples = 0;
};

namespace detail {

/// The allocator of the host memory batches are staged in before they are copied to Backend's
/// memory: Backend::staging_allocator where it names one (page-locked memory for Cuda), aligned
/// operator new otherwise.
template <class Backend>
struct staging_allocator {
  using type = AlignedAllocator;
};
template <class Backend>
requires requires { typename Backend::staging_allocator; }
struct staging_allocator<Backend> {
  using type = typename Backend::staging_allocator;
};

/// A JSON number, or null for what is not known (NaN) or not finite.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

} // namespace detail

/// `Trainer<Net, Optimizer, Parallel = SingleDevice<>, Precision = FullPrecision>`.
template <class Net, class Opt, class Parallel = SingleDevice<>, class Precision = FullPrecision>
class Trainer {
  static_assert(NetworkDescription<Net>, "Trainer: Net must be a well-formed Sequential<Input<...>, Layers...>");
  static_assert(Optimizer<Opt>, "Trainer: Opt must be an optimiser (Sgd<>, Adam<>, Adadelta<>, ...)");
  static_assert(
      ParallelPolicy<Parallel>,
      "Trainer: Parallel must be a parallel policy (SingleDevice<>, ThreadedReplicas<N>, ProcessGroupDDP<Mpi>)");
  static_assert(PrecisionPolicy<Precision>, "Trainer: Precision must be a precision policy (FullPrecision, ...)");
  static_assert(backend_available<typename Parallel::backend>,
                "Trainer: the Cuda backend (SingleDevice<Cuda>, ThreadedReplicas<N, Cuda>, ProcessGroupDDP<Nccl, "
                "Cuda>) needs CUDA: compile with nvcc, #include <cohort/backend/cuda.cuh> and link the cohort::cuda "
                "CMake target");
  static_assert(detail::communicator_available<Parallel>,
                "Trainer: ProcessGroupDDP<Nccl, Cuda> needs CUDA and NCCL: compile with nvcc, #include "
                "<cohort/parallel/nccl.cuh> and link the cohort::nccl CMake target");
  static_assert(Net::output_shape::rank == 1, "Trainer: the network must end in a vector of class scores");

  using input_shape = typename Net::input_shape;
  using engine_type = detail::TrainEngine<Parallel, Precision, Net, Opt>;
  using staging = typename detail::staging_allocator<typename Parallel::backend>::type;

 public:
  explicit Trainer(Opt opt, TrainerOptions options = {})
      : opt_(std::move(checked(options))), threads_(use_threads(opt_)), base_lr_(schedulable_lr(opt, opt_)),
        engine_(configured(std::move(opt), opt_), engine_options(opt_)) {}

  /// The single-device network (SingleDevice policy only; use parameters() otherwise).
  auto& network() noexcept requires requires(engine_type& e) { e.network(); }
  { return engine_.network(); }
  /// The trained parameters, running statistics and counters (shared by every replica).
  auto& parameters() noexcept { return engine_.parameters(); }
  Opt& optimizer() noexcept { return engine_.optimizer(); }
  /// The learning rate of the next steps, wherever the optimiser runs: on device engines
  /// optimizer() is only the host copy, and its set_lr would not reach the devices.
  void set_lr(double lr) requires requires(Opt& x) { x.set_lr(1.0); }
  {
    if constexpr (requires(engine_type & e) { e.set_lr(lr); })
      engine_.set_lr(lr);
    else
      engine_.optimizer().set_lr(lr);
  }
  /// The momentum of the next steps (SGD's and RMSprop's momentum, Adam's beta1), wherever the
  /// optimiser runs: what a OneCycleLR schedule cycles.
  void set_momentum(double m) requires requires(Opt& x) { x.set_momentum(0.9); }
  {
    if constexpr (requires(engine_type & e) { e.set_momentum(m); })
      engine_.set_momentum(m);
    else
      engine_.optimizer().set_momentum(m);
  }
  /// The global gradient norm before clipping at the last optimiser step (NaN without
  /// clipping): clip_grad_norm_'s return value.
  double last_grad_norm() requires requires(Opt& x) { x.last_grad_norm(); }
  { return engine_.optimizer().last_grad_norm(); }
  engine_type& engine() noexcept { return engine_; }
  const TrainerOptions& options() const noexcept { return opt_; }
  /// The CPU threads this process trains with, and why (TrainerOptions::threads).
  const CoreBudget& threads() const noexcept { return threads_; }
  /// This process's rank and the number of processes (1 unless ProcessGroupDDP).
  std::size_t rank() const noexcept { return engine_.rank(); }
  std::size_t world_size() const noexcept { return engine_.world(); }
  /// Optimiser steps so far, epochs completed, and batches of the current epoch done.
  std::uint64_t step() const noexcept { return state_.step; }
  std::uint64_t epoch() const noexcept { return state_.epoch; }
  bool reached_max_steps() const noexcept { return opt_.max_steps && state_.step >= opt_.max_steps; }

  /// Trains until `epochs` epochs are complete (counting epochs done before a resume) or
  /// max_steps is reached; evaluates on `test` after each epoch if given.
  template <class Train, class Test = Train>
  requires ClassificationData<Train, input_shape> std::vector<EpochReport> fit(const Train& train, std::size_t epochs,
                                                                               const Test* test = nullptr) {
    std::vector<EpochReport> out;
    epochs_ = epochs; // for the progress bar's "epoch 2/10"
    while (state_.epoch < epochs && !reached_max_steps()) out.push_back(fit_epoch(train, test));
    return out;
  }

  /// Trains (the rest of) the current epoch. Under ProcessGroupDDP every rank draws its own
  /// share of the epoch (DistributedSampler: every rank runs the same number of steps) and
  /// `batch_size` is per rank, as in PyTorch; ThreadedReplicas splits each batch.
  template <class Train, class Test = Train>
  requires ClassificationData<Train, input_shape> EpochReport fit_epoch(const Train& train,
                                                                        const Test* test = nullptr) {
    const std::size_t n = train.size();
    if (n == 0) throw ValueError("Trainer: the training set is empty");
    const std::size_t bs = opt_.batch_size, world = engine_.world();
    if (state_.batch_in_epoch > 0 && state_.batch_size != bs)
      throw ValueError(detail::concat("Trainer: resuming in the middle of an epoch needs the checkpoint's batch size ",
                                      state_.batch_size, ", this run has ", bs));
    if (state_.batch_in_epoch > 0 && state_.world_size != world)
      throw ValueError(detail::concat("Trainer: resuming in the middle of an epoch needs the checkpoint's world size ",
                                      state_.world_size, ", this run has ", world,
                                      " (a checkpoint taken at the end of an epoch fits any world size)"));
    state_.batch_size = bs;
    state_.world_size = world;
    state_.seed = opt_.seed;
    state_.shuffle = opt_.shuffle;
    if (world > 1) {
      DistributedSampler sampler(n, int(world), int(engine_.rank()), {.shuffle = opt_.shuffle, .seed = opt_.seed});
      sampler.indices(state_.epoch, order_);
    } else {
      ShuffleSampler sampler(n, opt_.seed, opt_.shuffle);
      sampler.indices(state_.epoch, order_);
    }
    const std::size_t local = world > 1 ? order_.size() : n; // this process's samples this epoch
    const std::size_t batches = (local + bs - 1) / bs;
    const std::size_t k = opt_.accumulation_steps;

    EpochReport r;
    r.epoch = state_.epoch;
    double loss_sum = 0;
    const PrefetchScope prefetch_scope{*this}; // no batch is gathered past this epoch's end
    std::optional<detail::ProgressBar> bar;
    if (log_here() && progress_style() == ProgressStyle::bar) bar.emplace(*opt_.log);
    const std::size_t first_batch = state_.batch_in_epoch; // > 0 after a resume mid-epoch
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t b = state_.batch_in_epoch; b < batches;) {
      if (reached_max_steps()) {
        r.complete = false;
        break;
      }
      apply_lr_schedule();
      // One optimiser step: up to k batches (fewer at the end of the epoch).
      const std::size_t group = std::min(k, batches - b);
      double step_loss = 0;
      for (std::size_t i = 0; i < group; ++i, ++b) {
        const std::size_t count = std::min(bs, local - b * bs);
        const std::size_t slot = load_batch(train, b, batches, local);
        step_loss +=
            engine_.step({batch_x_[slot].data(), count}, std::span<const std::int32_t>(batch_y_[slot].data(), count),
                         {.step = state_.step, .forward_pass = state_.forward_passes, .index = i, .count = group});
        ++state_.forward_passes;
        r.samples += count * world;
      }
      const double l = step_loss / double(group);
      loss_sum += l;
      ++r.steps;
      ++state_.step;
      state_.batch_in_epoch = b;
      const std::size_t shown = b - 1;
      if (bar) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        bar->update({.epoch = state_.epoch,
                     .epochs = epochs_,
                     .done = b,
                     .total = batches,
                     .started = first_batch,
                     .samples_per_s = elapsed > 0 ? double(r.samples) / elapsed : 0,
                     .loss = loss_sum / double(r.steps),
                     .elapsed_s = elapsed});
      } else if (log_here() && progress_style() == ProgressStyle::lines && opt_.log_interval &&
                 (shown / k) % opt_.log_interval == 0) {
        char line[160];
        std::snprintf(line, sizeof line, "epoch: %llu [%zu/%zu (%.0f%%)]\ttraining loss: %.6f\n",
                      static_cast<unsigned long long>(state_.epoch), shown, batches,
                      100.0 * double(shown) / double(batches), l);
        *opt_.log << line << std::flush;
      }
    }
    if (bar) bar->finish();
    stop_prefetch(); // a batch gathered ahead past max_steps must not race evaluate's gather
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.samples_per_s = r.seconds > 0 ? double(r.samples) / r.seconds : 0;
    r.train_loss = r.steps ? loss_sum / double(r.steps) : 0;
    if (r.complete && state_.batch_in_epoch == batches) {
      ++state_.epoch;
      state_.batch_in_epoch = 0;
    } else {
      r.complete = false;
    }
    if (test) {
      const EvalReport e = evaluate(*test);
      r.test_accuracy = e.accuracy;
      r.test_loss = e.loss;
    }
    record(r);
    return r;
  }

  /// Accuracy and mean loss on `data` in evaluation mode (dropout off, running statistics).
  /// Under ProcessGroupDDP each rank evaluates a contiguous share and the counts are summed.
  template <class Data>
  requires ClassificationData<Data, input_shape> EvalReport evaluate(const Data& data) {
    engine_.sync_buffers();
    const std::size_t n = data.size(), world = engine_.world(), rank = engine_.rank();
    const std::size_t begin = n * rank / world, end = n * (rank + 1) / world;
    double correct = 0, loss = 0;
    std::vector<std::size_t> idx;
    for (std::size_t first = begin; first < end; first += opt_.eval_batch_size) {
      const std::size_t count = std::min(opt_.eval_batch_size, end - first);
      idx.resize(count);
      for (std::size_t i = 0; i < count; ++i) idx[i] = first + i;
      gather(data, idx, 0);
      const auto [c, l] =
          engine_.evaluate({batch_x_[0].data(), count}, std::span<const std::int32_t>(batch_y_[0].data(), count));
      correct += double(c);
      loss += l;
    }
    std::array<double, 2> totals{correct, loss};
    engine_.sum(totals, "the evaluation counts");
    EvalReport e;
    e.samples = n;
    e.accuracy = n ? 100.0 * totals[0] / double(n) : 0;
    e.loss = n ? totals[1] / double(n) : 0;
    return e;
  }

  /// Saves weights, optimiser state and position (atomic; resumes bitwise). Under
  /// ProcessGroupDDP rank 0 writes, between two barriers, the same file format.
  void save(const std::filesystem::path& path) {
    engine_.sync_buffers();
    engine_.before_save();
    engine_.export_state(state_);
    engine_.barrier("the barrier before saving a checkpoint");
    if (engine_.rank() == 0) save_checkpoint(path, parameters(), optimizer(), state_);
    engine_.barrier("the barrier after saving a checkpoint");
  }
  /// Continues from a checkpoint written by save(), by any policy and world size. Throws
  /// CheckpointError (changing nothing) if it does not fit this network and optimiser. Under
  /// ProcessGroupDDP rank 0 reads the file and sends everything to the other ranks.
  void resume(const std::filesystem::path& path) {
    TrainerState s;
    std::string error;
    if (engine_.rank() == 0) {
      try {
        s = load_checkpoint(path, parameters(), optimizer());
      } catch (const Error& e) {
        error = e.what();
      }
    }
    engine_.share_from_root(error, s);
    if (!error.empty()) throw CheckpointError(engine_.rank() == 0 ? error : "rank 0 could not resume: " + error);
    engine_.after_load();
    engine_.import_state(s);
    opt_.seed = s.seed;
    opt_.shuffle = s.shuffle;
    engine_.set_seed(s.seed); // the checkpoint's dropout masks
    state_ = s;
  }
  /// Starts from the weights of a file (a weights file, a checkpoint, or a PyTorch state_dict
  /// saved with safetensors); optimiser and position start fresh.
  void init_from(const std::filesystem::path& path) {
    TrainerState unused = state_;
    std::string error;
    if (engine_.rank() == 0) {
      try {
        load_weights(path, parameters());
      } catch (const Error& e) {
        error = e.what();
      }
    }
    engine_.share_from_root(error, unused);
    if (!error.empty()) throw CheckpointError(engine_.rank() == 0 ? error : "rank 0 could not load weights: " + error);
    engine_.after_load();
  }

  const TrainerState& state() const noexcept { return state_; }

 private:
  /// The optimiser's rate at construction, the base of opt_.lr_schedule (0 when none is set).
  static double schedulable_lr(const Opt& opt, const TrainerOptions& o) {
    if (o.lr_schedule.empty()) return 0.0;
    if constexpr (requires(Opt & x) {
                    x.set_lr(1.0);
                    { x.lr() } -> std::convertible_to<double>;
                  })
      return double(opt.lr());
    else
      throw ValueError("Trainer: a learning-rate schedule needs an optimiser with set_lr() and lr() (Sgd, Adam, "
                       "Adadelta, OptimizerVariant)");
  }
  /// `opt` with the options' parameter groups and gradient clipping (engines copy them to every
  /// replica and device).
  static Opt configured(Opt opt, const TrainerOptions& o) {
    if constexpr (requires(Opt & x) {
                    x.set_parameter_groups(std::vector<ParameterGroup>{});
                    x.set_max_grad_norm(1.0);
                  }) {
      if (o.parameter_groups) opt.set_parameter_groups(parameter_groups<Net>(o.parameter_groups));
      if (o.max_grad_norm != 0) opt.set_max_grad_norm(o.max_grad_norm);
    } else if (o.parameter_groups || o.max_grad_norm != 0) {
      throw ValueError("Trainer: parameter_groups and max_grad_norm need an optimiser with set_parameter_groups() and "
                       "set_max_grad_norm() (cohort's optimisers derive them from detail::OptimizerBase)");
    }
    // A schedule that cycles the momentum sets it now, as torch's OneCycleLR does when built:
    // an optimiser without one fails here, before any data is read.
    if (const auto m = o.lr_schedule.momentum(0)) {
      if constexpr (requires(Opt & x) { x.set_momentum(0.9); })
        opt.set_momentum(*m);
      else
        throw ValueError(detail::concat("Trainer: the learning-rate schedule cycles the momentum, and ",
                                        optimizer_name(opt),
                                        " has none (torch's OneCycleLR refuses it too): add cycle_momentum=0"));
    }
    return opt;
  }
  /// Sets the scheduled rate for the coming optimiser step (on every replica and device).
  void apply_lr_schedule() {
    // (Without set_lr, a schedule was refused at construction: schedulable_lr.)
    if constexpr (requires(Opt & x) { x.set_lr(1.0); })
      if (!opt_.lr_schedule.empty()) {
        const std::uint64_t t = opt_.schedule_per_step ? state_.step : state_.epoch;
        set_lr(opt_.lr_schedule.lr(base_lr_, t));
        // (A momentum schedule without set_momentum was refused at construction: configured.)
        if constexpr (requires(Opt & x) { x.set_momentum(0.9); })
          if (const auto m = opt_.lr_schedule.momentum(t)) set_momentum(*m);
      }
  }

  /// Sizes the process's CPU pool from o.threads (the policies that train on it).
  static CoreBudget use_threads(const TrainerOptions& o) {
    if constexpr (!host_memory_backend<typename Parallel::backend>) {
      return {num_threads(), "a device policy: the CPU pool is left as it was"};
    } else if constexpr (Parallel::name == std::string_view("ThreadedReplicas")) {
      return {o.parallel.threads_per_replica, "per replica (parallel.threads_per_replica)"};
    } else {
      const CoreBudget b = o.threads ? CoreBudget{o.threads, "TrainerOptions::threads"} : available_cores();
      set_num_threads(b.threads);
      return b;
    }
  }
  static TrainerOptions&& checked(TrainerOptions& o) {
    if (o.batch_size == 0) throw ValueError("Trainer: batch_size must be at least 1");
    if (o.eval_batch_size == 0) throw ValueError("Trainer: eval_batch_size must be at least 1");
    if (o.accumulation_steps == 0) throw ValueError("Trainer: accumulation_steps must be at least 1");
    return std::move(o);
  }
  /// What the engine is built with; the settings every rank must share.
  static EngineOptions engine_options(const TrainerOptions& o) {
    EngineOptions e{.seed = o.seed, .parallel = o.parallel, .loss_scale = o.loss_scale, .loss = o.loss};
    e.agreement = {
        detail::concat("batch_size: ", o.batch_size),
        detail::concat("accumulation_steps: ", o.accumulation_steps),
        detail::concat("seed: ", o.seed),
        detail::concat("shuffle: ", o.shuffle),
        detail::concat("max_steps: ", o.max_steps),
        detail::concat("max_grad_norm: ", detail::exact_text(o.max_grad_norm)),
        detail::concat("parameter_groups: ", o.parameter_groups ? parameter_groups<Net>(o.parameter_groups).size() : 0),
        detail::concat("label_smoothing: ", detail::exact_text(o.loss.label_smoothing)),
        detail::concat("class_weights: ", detail::class_weights_text(o.loss.class_weights))};
    return e;
  }
  /// Progress and metrics come from rank 0 only.
  bool log_here() const noexcept { return opt_.log && engine_.rank() == 0; }
  /// opt_.progress with `automatic` resolved: a bar only on a terminal.
  ProgressStyle progress_style() const {
    if (opt_.progress != ProgressStyle::automatic) return opt_.progress;
    return opt_.log && detail::is_terminal(*opt_.log) ? ProgressStyle::bar : ProgressStyle::lines;
  }

  /// Copies the samples at `idx` into the batch buffers of `slot` (no allocation once they are
  /// sized). A training batch (`epoch` given) then goes through opt_.augment, each image as the
  /// dataset sample it is (idx[i]) in that epoch.
  template <class Data>
  void gather(const Data& data, std::span<const std::size_t> idx, std::size_t slot,
              std::optional<std::uint64_t> epoch = std::nullopt) {
    // On the prefetch thread as on the caller's: the staging memory (page-locked on Cuda) is
    // allocated with the engine's device current, not GPU 0 by default.
    if constexpr (requires { engine_.activate(); }) engine_.activate();
    auto& x = batch_x_[slot];
    auto& y = batch_y_[slot];
    x.resize(std::max(x.size(), idx.size() * input_shape::size));
    y.resize(std::max(y.size(), idx.size()));
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const float* src = data.image(idx[i]);
      std::copy(src, src + input_shape::size, x.data() + i * input_shape::size);
      y[i] = data.label(idx[i]);
    }
    if (!epoch || opt_.augment.empty()) return;
    if constexpr (input_shape::rank == 3) {
      constexpr ImageDims shape{input_shape::extents[0], input_shape::extents[1], input_shape::extents[2]};
      opt_.augment.apply_batch({x.data(), idx.size() * input_shape::size}, shape, idx, opt_.seed, *epoch);
    } else {
      throw ShapeError(detail::concat("Trainer: augmentation transforms images (C, H, W); the network's input is ",
                                      input_shape::str()));
    }
  }

  /// Device backends overlap every gather (and its copy) with the step. On the CPU the step
  /// keeps every core busy, so a background gather only pays when it does more than copy
  /// (measured on 2 cores, 3 alternating pairs: plain copies 3% slower on model C, inside the
  /// VM's noise; crop + flip 2% faster on ResNet-20 in every pair).
  bool prefetching() const noexcept {
    if constexpr (host_memory_backend<typename Parallel::backend>)
      return opt_.prefetch && !opt_.augment.empty();
    else
      return opt_.prefetch;
  }

  /// Batch b of this epoch (this process's `local` samples in order_) in a staging slot; returns
  /// the slot. When prefetching, batch b + 1 is then gathered into the other slot on the
  /// background thread while the caller trains on b. The slot it overwrites held batch b - 1,
  /// whose step has returned, and a step returns only after it has read its batch (CPU engines
  /// read host memory synchronously; a device step's batch reached the device: the loss is read
  /// back after the copy, on the same stream).
  template <class Data>
  std::size_t load_batch(const Data& data, std::size_t b, std::size_t batches, std::size_t local) {
    const auto indices = [this, local](std::size_t k) {
      const std::size_t first = k * opt_.batch_size;
      return std::span<const std::size_t>(order_.data() + first, std::min(opt_.batch_size, local - first));
    };
    const std::uint64_t epoch = state_.epoch; // the augmentation's; constant while the epoch's batches load
    if (!prefetching()) {
      gather(data, indices(b), 0, epoch);
      return 0;
    }
    const std::size_t slot = b % 2;
    if (prefetched_ == b)
      prefetcher_.wait();
    else
      gather(data, indices(b), slot, epoch); // the epoch's first batch (or the first after resuming)
    prefetched_ = no_batch;
    if (b + 1 < batches) {
      prefetcher_.submit([this, &data, indices, epoch, next = b + 1] { gather(data, indices(next), next % 2, epoch); });
      prefetched_ = b + 1;
    }
    return slot;
  }

  /// Lets the batch being gathered finish (its error, if any, no longer matters): the job reads
  /// the epoch's order and training set, and writes a staging slot.
  void stop_prefetch() noexcept {
    prefetcher_.drain();
    prefetched_ = no_batch;
  }
  /// stop_prefetch() when an epoch ends by an exception too.
  struct PrefetchScope {
    Trainer& t;
    ~PrefetchScope() { t.stop_prefetch(); }
  };

  void record(const EpochReport& r) {
    if (r.complete) epoch_seconds_.push_back(r.seconds);
    if (engine_.rank() != 0) return;
    if (opt_.log) {
      char line[200];
      std::snprintf(line, sizeof line, "epoch %llu%s: %.2f s, %.0f samples/s, mean training loss %.6f",
                    static_cast<unsigned long long>(r.epoch), r.complete ? "" : " (partial)", r.seconds,
                    r.samples_per_s, r.train_loss);
      *opt_.log << line;
      if (r.test_accuracy) {
        std::snprintf(line, sizeof line, ", test accuracy %.2f%%", *r.test_accuracy);
        *opt_.log << line;
      }
      *opt_.log << std::endl;
    }
    if (opt_.metrics.empty()) return;
    std::ofstream out(opt_.metrics, std::ios::app);
    if (!out) throw IoError(detail::concat(opt_.metrics.string(), ": cannot open the metrics file for appending"));
    constexpr double unknown = std::numeric_limits<double>::quiet_NaN();
    const double first = epoch_seconds_.size() > 0 ? epoch_seconds_[0] : unknown;
    const double second = epoch_seconds_.size() > 1 ? epoch_seconds_[1] : unknown;
    out << "{\"epoch\": " << r.epoch << ", \"complete\": " << (r.complete ? "true" : "false")
        << ", \"n_dataset_repeat\": " << opt_.n_dataset_repeat << ", \"batch_size\": " << opt_.batch_size
        << ", \"n_devices\": " << engine_.devices()
        << ", \"parallel\": " << detail::json_quote(std::string(Parallel::name))
        << ", \"model_size\": " << detail::json_quote(opt_.model_size)
        << ", \"first epoch time\": " << detail::json_number(first)
        << ", \"second epoch time\": " << detail::json_number(second)
        << ", \"epoch time\": " << detail::json_number(r.seconds) << ", \"steps\": " << r.steps
        << ", \"train_loss\": " << detail::json_number(r.train_loss)
        << ", \"test_accuracy\": " << detail::json_number(r.test_accuracy.value_or(unknown))
        << ", \"test_loss\": " << detail::json_number(r.test_loss.value_or(unknown))
        << ", \"samples_per_s\": " << detail::json_number(r.samples_per_s)
        << ", \"precision\": " << detail::json_quote(std::string(Precision::name))
        << ", \"skipped_steps\": " << engine_.skipped_steps() << ", \"loss_scale\": "
        << (engine_.loss_scale() > 0 ? detail::json_number(engine_.loss_scale()) : std::string("null")) << "}\n";
    if (!out) throw IoError(detail::concat(opt_.metrics.string(), ": writing the metrics failed"));
  }

  TrainerOptions opt_;
  CoreBudget threads_;
  double base_lr_ = 0; // the optimiser's rate at construction: what the schedule scales
  engine_type engine_;
  TrainerState state_{};
  std::vector<std::size_t> order_;
  static constexpr std::size_t no_batch = std::numeric_limits<std::size_t>::max();
  std::array<HostBuffer<float, staging>, 2> batch_x_; // staging slots: [0] unless prefetching
  std::array<HostBuffer<std::int32_t, staging>, 2> batch_y_;
  BatchPrefetcher prefetcher_;        // its thread starts with the first prefetch
  std::size_t prefetched_ = no_batch; // the batch the prefetcher gathers (no_batch: none)
  std::vector<double> epoch_seconds_;
  std::uint64_t epochs_ = 0; // fit()'s target, for the progress bar (0: fit_epoch called alone)
};

} // namespace cohort

#pragma once
/// \file
/// The training loop of the seed notebooks, with the execution policy as a template argument.
/// Example (compiled: tests/docs/headers.cpp, "train/trainer"):
///
///     using namespace cohort;
///     Trainer<models::ModelA, Adadelta<>> trainer(Adadelta({.lr = 0.5}), {.batch_size = 128});
///     auto history = trainer.fit(train_set, /*epochs=*/2, &test_set);
///     trainer.save("model_a.safetensors");
///
/// `Trainer<Net, Optimizer, Parallel = SingleDevice<>, Precision = FullPrecision>`: the policies pick
/// at compile time how a step is computed; the loop (sampling, batching, logging, checkpoints) is
/// the same for all. The loss follows the network: NllLoss after a LogSoftmax, else CrossEntropyLoss;
/// a network with a class per pixel (output (C, H, W)) trains on masks (SegmentationData) with
/// PixelCrossEntropyLoss and is evaluated by pixel accuracy and mean IoU, or on target images
/// (RegressionData) with TrainerOptions::regression's loss (MSELoss by default), evaluated by
/// that loss.

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/data/data_checks.hpp"
#include "cohort/data/sampler.hpp"
#include "cohort/network/predict.hpp"
#include "cohort/optim/optimizer.hpp"
#include "cohort/optim/weight_average.hpp"
#include "cohort/parallel/policy.hpp"
#include "cohort/parallel/single_device.hpp"
#include "cohort/parallel/threaded_replicas.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/train/checkpoint.hpp"
#include "cohort/train/detail/batch_staging.hpp"
#include "cohort/train/detail/staging_allocator.hpp"
#include "cohort/train/detail/trainer_setup.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/single_device.hpp"
#include "cohort/train/engine/single_device_on_device.hpp"
#include "cohort/train/engine/threaded_replicas.hpp"
#include "cohort/train/engine/threaded_replicas_on_device.hpp"
#include "cohort/train/metrics.hpp"
#include "cohort/train/progress.hpp"
#include "cohort/train/segmentation_metrics.hpp"
#include "cohort/train/trainer_options.hpp"

namespace cohort {

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
  static_assert(!backend_available<typename Parallel::backend> || BackendProtocol<typename Parallel::backend>,
                "Trainer: the policy's backend does not satisfy cohort::BackendProtocol (backend/ops.hpp)");
  static_assert(detail::communicator_available<Parallel>,
                "Trainer: ProcessGroupDDP<Nccl, Cuda> needs CUDA and NCCL: compile with nvcc, #include "
                "<cohort/parallel/nccl.cuh> and link the cohort::nccl CMake target");
  static_assert(Net::output_shape::rank == 1 || Net::output_shape::rank == 3,
                "Trainer: the network must end in a vector of class scores (classification) or in (C, H, W) scores, "
                "a class per pixel (segmentation)");
  using input_shape = typename Net::input_shape;
  static constexpr bool dense = detail::dense_output<Net>;                  // a class per pixel: masks, not labels
  static constexpr std::size_t outputs = detail::classes_of<Net>;           // class scores: labels are 0 .. outputs - 1
  static constexpr std::size_t per_sample = detail::labels_per_sample<Net>; // 1, or a mask's H * W
  static constexpr std::size_t target_size = dense ? Net::output_shape::size : 0; // a target image's values
  /// A dense network's dataset of target images (regression) rather than masks.
  template <class D>
  static constexpr bool regresses = dense&& RegressionData<D, input_shape> && !SegmentationData<D, input_shape>;
  /// What this trainer's fit and evaluate take: labelled images, or images with masks or target
  /// images when the network predicts per pixel.
  template <class D>
  static constexpr bool trains_on =
      dense ? SegmentationData<D, input_shape> || regresses<D> : ClassificationData<D, input_shape>;
  /// Image-to-image regression computes its loss on the host (loss/regression_loss.hpp): CPU
  /// policies only, for now.
  template <class D>
  static constexpr bool data_fits_backend = !regresses<D> || host_memory_backend<typename Parallel::backend>;
  using engine_type = detail::TrainEngine<Parallel, Precision, Net, Opt>;
  static_assert(TrainEngineProtocol<engine_type, Net>,
                "Trainer: the engine of this (Parallel, Precision) pair does "
                "not satisfy cohort::TrainEngineProtocol (train/engine/engine.hpp)");
  using staging = typename detail::staging_allocator<typename Parallel::backend>::type;

 public:
  explicit Trainer(Opt opt, TrainerOptions options = {})
      : options_(std::move(detail::checked<Parallel>(options))), threads_(detail::use_threads<Parallel>(options_)),
        base_lr_(detail::schedulable_lr(opt, options_)),
        engine_(detail::configured<Net>(std::move(opt), options_), detail::engine_options<Net>(options_)) {
    // The run's seed and shuffle flag live in state_ from here on (a checkpoint carries them).
    state_.seed = options_.seed;
    state_.shuffle = options_.shuffle;
    if (dense && !options_.augment.empty())
      throw ValueError(detail::concat("Trainer: TrainerOptions::augment (", options_.augment.names(),
                                      ") would move the images and not their masks or target images (this network "
                                      "predicts per pixel): give the transforms as TrainerOptions::joint_augment"));
    if (!dense && !options_.regression.plain())
      throw ValueError(detail::concat("Trainer: TrainerOptions::regression (",
                                      detail::regression_loss_name(options_.regression.loss),
                                      ") is the loss of a network predicting per pixel on target images; this "
                                      "network ends in one vector of class scores, ",
                                      Net::output_shape::str()));
    if (!dense && !options_.joint_augment.empty())
      throw ValueError(detail::concat("Trainer: TrainerOptions::joint_augment (", options_.joint_augment.names(),
                                      ") transforms images with their masks, and this network predicts one class per "
                                      "image: give the transforms as TrainerOptions::augment"));
    if (options_.ema) {
      if constexpr (ema_supported)
        ema_.emplace(*options_.ema);
      else
        throw ValueError(detail::concat("Trainer: TrainerOptions::ema is kept for full-precision CPU policies "
                                        "(SingleDevice<>, ThreadedReplicas<N>); this trainer (",
                                        Parallel::name, ", ", Precision::name,
                                        ") keeps its parameters on a device, in 16 bits or in several processes"));
    }
  }

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
  /// The momentum (SGD's, RMSprop's; Adam's beta1) of the next steps, wherever the optimiser runs.
  void set_momentum(double m) requires requires(Opt& x) { x.set_momentum(0.9); }
  {
    if constexpr (requires(engine_type & e) { e.set_momentum(m); })
      engine_.set_momentum(m);
    else
      engine_.optimizer().set_momentum(m);
  }
  /// The gradient norm before clipping at the last step (NaN without): clip_grad_norm_'s value.
  double last_grad_norm() requires requires(Opt& x) { x.last_grad_norm(); }
  { return engine_.optimizer().last_grad_norm(); }
  engine_type& engine() noexcept { return engine_; }
  /// The options as given to the constructor (seed() and shuffle() below are the run's).
  const TrainerOptions& options() const noexcept { return options_; }
  /// The seed of initialisation, dropout, shuffling and augmentation, and whether each epoch is
  /// shuffled: the constructor's options, or after resume() the checkpoint's.
  std::uint64_t seed() const noexcept { return state_.seed; }
  bool shuffle() const noexcept { return state_.shuffle; }
  /// The CPU threads this process trains with, and why (TrainerOptions::threads).
  const CoreBudget& threads() const noexcept { return threads_; }
  /// This process's rank and the number of processes (1 unless ProcessGroupDDP).
  std::size_t rank() const noexcept { return engine_.rank(); }
  std::size_t world_size() const noexcept { return engine_.world(); }
  /// Optimiser steps so far, epochs completed, and batches of the current epoch done.
  std::uint64_t step() const noexcept { return state_.step; }
  std::uint64_t epoch() const noexcept { return state_.epoch; }
  bool reached_max_steps() const noexcept { return options_.max_steps && state_.step >= options_.max_steps; }
  /// Whether epoch report `r`'s test accuracy is at or above TrainerOptions::target_accuracy.
  bool reached_target(const EpochReport& r) const noexcept {
    return options_.target_accuracy && r.test_accuracy && *r.test_accuracy >= *options_.target_accuracy;
  }

  /// Trains until `epochs` epochs are complete (counting epochs done before a resume),
  /// max_steps is reached or an evaluation reaches target_accuracy; evaluates on `test` after
  /// each epoch if given.
  template <class Train, class Test = Train>
  requires(trains_on<Train>) std::vector<EpochReport> fit(const Train& train, std::size_t epochs,
                                                          const Test* test = nullptr) {
    static_assert(detail::dataset_type_fits<Train, input_shape>());
    static_assert(detail::dataset_type_fits<Test, input_shape>());
    static_assert(regresses<Train> == regresses<Test>,
                  "Trainer::fit: the training and test sets must both be masks or both target images");
    if (regresses<Train> && options_.target_accuracy)
      throw ValueError(detail::concat("Trainer::fit: target_accuracy ", *options_.target_accuracy,
                                      "% is a test accuracy, and a network regressing target images reports only its "
                                      "loss: expected no target_accuracy"));
    detail::check_class_list(train, state_, class_names_, "Trainer::fit");
    if (test) detail::check_class_list(*test, state_, class_names_, "Trainer::fit (test set)");
    // Both sets checked before the first step: a bad test set would otherwise surface only
    // after an epoch of training (fit_epoch checks the training set again, cheaply).
    if (test) check_data(*test, "Trainer::fit (test set)");
    std::vector<EpochReport> out;
    epochs_ = epochs; // for the progress bar's "epoch 2/10"
    if (options_.target_accuracy && !test)
      throw ValueError(detail::concat("Trainer::fit: target_accuracy ", *options_.target_accuracy,
                                      "% needs a test set to evaluate on (fit's third argument is null)"));
    while (state_.epoch < epochs && !reached_max_steps()) {
      out.push_back(fit_epoch(train, test));
      if (reached_target(out.back())) break;
    }
    return out;
  }

  /// Trains (the rest of) the current epoch. Under ProcessGroupDDP every rank draws its own
  /// share of the epoch (DistributedSampler: every rank runs the same number of steps) and
  /// `batch_size` is per rank, as in PyTorch; ThreadedReplicas splits each batch.
  template <class Train, class Test = Train>
  requires(trains_on<Train>) EpochReport fit_epoch(const Train& train, const Test* test = nullptr) {
    static_assert(detail::dataset_type_fits<Train, input_shape>());
    static_assert(data_fits_backend<Train>,
                  "Trainer::fit: image-to-image regression (a dataset of target images) trains on CPU policies "
                  "(SingleDevice<>, ThreadedReplicas<N>, ProcessGroupDDP<Mpi>); device policies take masks or labels");
    check_data(train, "Trainer::fit");
    detail::check_class_list(train, state_, class_names_, "Trainer::fit");
    const EpochPlan plan = plan_epoch(train.size());
    EpochReport r;
    r.epoch = state_.epoch;
    if constexpr (requires { train.skipped().size(); }) r.skipped_files = train.skipped().size();
    double loss_sum = 0;
    const typename decltype(batches_)::StopScope stop_prefetch{batches_}; // nothing gathered past the epoch
    std::optional<detail::ProgressBar> bar;
    if (log_here() && progress_style() == ProgressStyle::bar) bar.emplace(*options_.log);
    const std::size_t first_batch = state_.batch_in_epoch; // > 0 after a resume mid-epoch
    const auto t0 = std::chrono::steady_clock::now();
    while (state_.batch_in_epoch < plan.batches) {
      if (reached_max_steps()) {
        r.complete = false;
        break;
      }
      const double loss = optimiser_step(train, plan, r);
      if (ema_ && state_.step % ema_->options().every == 0) update_average();
      loss_sum += loss;
      ++r.steps;
      if (bar) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        bar->update({.epoch = state_.epoch,
                     .epochs = epochs_,
                     .done = state_.batch_in_epoch,
                     .total = plan.batches,
                     .started = first_batch,
                     .samples_per_s = elapsed > 0 ? double(r.samples) / elapsed : 0,
                     .loss = loss_sum / double(r.steps),
                     .elapsed_s = elapsed});
      } else {
        log_step_line(plan, loss);
      }
    }
    if (bar) bar->finish();
    batches_.stop(); // a batch gathered ahead past max_steps must not race evaluate's gather
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.samples_per_s = r.seconds > 0 ? double(r.samples) / r.seconds : 0;
    r.train_loss = r.steps ? loss_sum / double(r.steps) : 0;
    finish_epoch(r, plan);
    if (test) {
      const bool average = ema_ && ema_->options().evaluate && ema_->n_averaged() > 0;
      const EvalReport e = average ? evaluate_ema(*test) : evaluate(*test);
      if constexpr (!regresses<Test>) r.test_accuracy = e.accuracy;
      r.test_loss = e.loss;
      r.test_mean_iou = e.mean_iou;
    }
    record(r);
    return r;
  }

  /// Accuracy and mean loss on `data` in evaluation mode (dropout off, running statistics).
  /// Under ProcessGroupDDP each rank evaluates a contiguous share and the counts are summed.
  /// A dense network's are over pixels, with the intersection over union (EvalReport); on target
  /// images the loss is the mean over every target element, and accuracy is 0.
  template <class Data>
  requires(trains_on<Data>) EvalReport evaluate(const Data& data) {
    static_assert(detail::dataset_type_fits<Data, input_shape>());
    static_assert(data_fits_backend<Data>,
                  "Trainer::evaluate: image-to-image regression (a dataset of target images) trains and evaluates "
                  "on CPU policies (SingleDevice<>, ThreadedReplicas<N>, ProcessGroupDDP<Mpi>); device policies "
                  "take masks or labels");
    if (data.size() == 0) throw ValueError("Trainer::evaluate: the dataset is empty (no accuracy to report)");
    check_data(data, "Trainer::evaluate");
    detail::check_class_list(data, state_, class_names_, "Trainer::evaluate");
    engine_.sync_buffers();
    const std::size_t n = data.size(), world = engine_.world(), rank = engine_.rank();
    const std::size_t begin = n * rank / world, end = n * (rank + 1) / world;
    double correct = 0, loss = 0;
    std::optional<SegmentationMetrics> pixels;
    if constexpr (dense && !regresses<Data>) pixels.emplace(outputs, options_.ignore_index);
    std::vector<std::size_t> idx;
    for (std::size_t first = begin; first < end; first += options_.eval_batch_size) {
      const std::size_t count = std::min(options_.eval_batch_size, end - first);
      idx.resize(count);
      for (std::size_t i = 0; i < count; ++i) idx[i] = first + i;
      batches_.gather(data, idx, 0);
      const std::span<const std::int32_t> labels(batches_.labels(0), count * per_sample);
      const auto [c, l] = [&] {
        if constexpr (regresses<Data>)
          return engine_.evaluate({batches_.images(0), count},
                                  std::span<const float>(batches_.targets(0), count * target_size));
        else if constexpr (dense)
          return engine_.evaluate({batches_.images(0), count}, labels, &*pixels);
        else
          return engine_.evaluate({batches_.images(0), count}, labels);
      }();
      correct += double(c);
      loss += l;
    }
    if constexpr (dense && !regresses<Data>) {
      return dense_report(*pixels, loss, n);
    } else {
      std::array<double, 2> totals{correct, loss};
      engine_.sum(totals, "the evaluation counts");
      EvalReport e;
      e.samples = n;
      e.accuracy = n ? 100.0 * totals[0] / double(n) : 0;
      e.loss = n ? totals[1] / double(n) : 0;
      return e;
    }
  }

  /// The weight average (TrainerOptions::ema), or nullptr when this trainer keeps none.
  const WeightAverage<Net>* ema() const noexcept { return ema_ ? &*ema_ : nullptr; }

  /// evaluate() with the weight average's weights, running statistics and counters in place of
  /// the trained ones (swapped in for the evaluation and back, also on an exception). ValueError
  /// without TrainerOptions::ema or before its first update.
  template <class Data>
  requires(trains_on<Data>) EvalReport evaluate_ema(const Data& data) {
    if (!ema_) throw ValueError("Trainer::evaluate_ema: this trainer keeps no weight average (TrainerOptions::ema)");
    if (ema_->n_averaged() == 0)
      throw ValueError("Trainer::evaluate_ema: the weight average has no update yet (it starts after the first step)");
    if constexpr (ema_supported) {
      struct Swapped {
        Trainer& t;
        explicit Swapped(Trainer& trainer) : t(trainer) { t.swap_in_average(); }
        ~Swapped() { t.swap_in_average(); }
      } swapped(*this);
      return evaluate(data);
    } else {
      return {};
    }
  }

  /// predict() (network/predict.hpp) with this trainer's weights and running statistics, in
  /// chunks of eval_batch_size (at most batch_size): scores or probabilities for N samples (N * input size floats),
  /// N * classes floats. Runs on a CPU copy of the network: float trainers whose parameters are
  /// in host memory (every CPU policy).
  std::vector<float> predict(std::span<const float> images, Prediction what = Prediction::scores) requires
      requires(Trainer& t) {
    { t.parameters().state_dict() } -> std::same_as<std::vector<TensorRef>>;
  } && std::is_same_v < typename std::remove_cvref_t<decltype(std::declval<Trainer&>().parameters())>::value_type,
  float > {
    engine_.sync_buffers();
    Network<Net> net(state_.seed);
    const auto from = parameters().state_dict();
    const auto to = net.parameters().state_dict();
    for (std::size_t k = 0; k < to.size(); ++k) std::memcpy(to[k].data, from[k].data, to[k].bytes());
    // No larger than a training batch: predicting allocates no more activation memory than training.
    return cohort::predict(net, images, what, std::min(options_.eval_batch_size, options_.batch_size),
                           options_.test_time_augmentation);
  }

  /// Saves weights, optimiser state and position (atomic; resumes bitwise). Under
  /// ProcessGroupDDP rank 0 writes, between two barriers, the same file format.
  void save(const std::filesystem::path& path) {
    engine_.sync_buffers();
    engine_.before_save();
    engine_.export_state(state_);
    const ErrorFeedbackState ef = detail::gathered_error_feedback(engine_); // ProcessGroupDDP's, at rank 0
    engine_.barrier("the barrier before saving a checkpoint");
    if (engine_.rank() == 0)
      save_checkpoint(path, parameters(), optimizer(), state_, &ef, class_names_, ema_ ? &*ema_ : nullptr);
    engine_.barrier("the barrier after saving a checkpoint");
  }
  /// Continues from a checkpoint written by save(), by any policy and world size. Throws
  /// CheckpointError (changing nothing) if it does not fit this network and optimiser. Under
  /// ProcessGroupDDP rank 0 reads the file and sends everything to the other ranks.
  void resume(const std::filesystem::path& path) {
    TrainerState s;
    ErrorFeedbackState ef;
    std::vector<std::string> names; // rank 0's (the others check the class list by its fingerprint)
    std::string error;
    if (engine_.rank() == 0) {
      try {
        const SafetensorsFile f = SafetensorsFile::read(path);
        s = load_checkpoint(f, parameters(), optimizer(), &ef, ema_ ? &*ema_ : nullptr);
        names = checkpoint_class_names(f);
      } catch (const Error& e) {
        error = e.what();
      }
    }
    engine_.share_from_root(error, s);
    if (!error.empty()) throw CheckpointError(engine_.rank() == 0 ? error : "rank 0 could not resume: " + error);
    engine_.after_load();
    engine_.import_state(s);
    detail::restore_error_feedback(engine_, ef);
    engine_.set_seed(s.seed); // the checkpoint's dropout masks
    state_ = s;               // its position, seed and shuffle flag
    class_names_ = std::move(names);
  }
  /// The class names of the data this model trains on, when its dataset names them (ImageFolder):
  /// recorded by the first fit, saved with checkpoints and restored by resume (on rank 0).
  const std::vector<std::string>& class_names() const noexcept { return class_names_; }
  /// Starts from the weights of a file (a weights file, a checkpoint, or a PyTorch state_dict
  /// saved with safetensors); optimiser and position start fresh. `o` renames the file's tensors
  /// and allows a non-strict load (train/weight_names.hpp); the report (rank 0's; empty on the
  /// other ranks, which receive the weights) says what was missing, unexpected or converted.
  LoadReport init_from(const std::filesystem::path& path, const LoadOptions& o = {}) {
    TrainerState unused = state_;
    std::string error;
    LoadReport report;
    if (engine_.rank() == 0) {
      try {
        report = load_weights(path, parameters(), o);
      } catch (const Error& e) {
        error = e.what();
      }
    }
    engine_.share_from_root(error, unused);
    if (!error.empty()) throw CheckpointError(engine_.rank() == 0 ? error : "rank 0 could not load weights: " + error);
    engine_.after_load();
    return report;
  }

  const TrainerState& state() const noexcept { return state_; }

 private:
  /// The seam between a dataset and the network, checked before any step: the labels (and a
  /// run-time-shaped dataset's extents), or the masks' shape (at compile time), classes,
  /// ignore_index and every value.
  template <class D>
  void check_data(const D& d, const char* who) const {
    if constexpr (regresses<D>) {
      using Out = typename Net::output_shape;
      static_assert(detail::target_shape_matches_network_output<typename D::target_shape, Out>::value);
      const RegressionLoss loss = options_.regression.loss;
      detail::check_target_dataset(
          d, Out::size, Out::extents[1], Out::extents[2],
          [loss](float v) { return detail::regression_accepts(loss, v); }, detail::regression_loss_name(loss),
          detail::regression_range(loss), who);
    } else if constexpr (dense) {
      using Out = typename Net::output_shape;
      static_assert(detail::mask_shape_matches_network_output<typename D::mask_shape,
                                                              Shape<Out::extents[1], Out::extents[2]>>::value);
      detail::check_mask_dataset(d, outputs, Out::extents[2], per_sample, options_.ignore_index, who);
    } else {
      detail::check_dataset<input_shape>(d, outputs, who);
    }
  }
  /// A dense evaluation's report from this process's confusion counts and summed loss: both
  /// summed over the ranks (integers, exact in double), the loss divided by the counted pixels'
  /// weight total (the confusion matrix's rows are the pixels' true classes).
  EvalReport dense_report(const SegmentationMetrics& local, double loss, std::size_t samples) {
    const auto counts = local.confusion();
    std::vector<double> totals(counts.size() + 1);
    std::copy(counts.begin(), counts.end(), totals.begin());
    totals.back() = loss;
    engine_.sum(totals, "the evaluation counts");
    std::vector<std::uint64_t> summed(counts.size());
    for (std::size_t i = 0; i < summed.size(); ++i) summed[i] = std::uint64_t(totals[i]);
    SegmentationMetrics all(outputs, options_.ignore_index);
    all.add_confusion(summed);
    if (all.pixels() == 0)
      throw ValueError(detail::concat("Trainer::evaluate: every pixel of the dataset's masks is the ignore_index ",
                                      options_.ignore_index, ": no accuracy to report"));
    std::vector<double> truth(outputs, 0.0);
    for (std::size_t t = 0; t < outputs; ++t)
      for (std::size_t p = 0; p < outputs; ++p) truth[t] += double(all.count(t, p));
    const double weight = detail::weight_total(options_.loss.class_weights, truth);
    EvalReport e;
    e.samples = samples;
    e.accuracy = 100.0 * all.pixel_accuracy();
    e.loss = weight > 0 ? totals.back() / weight : 0;
    e.mean_iou = all.mean_iou();
    e.iou = all.iou();
    return e;
  }

  /// Sets the scheduled rate for the coming optimiser step (on every replica and device).
  void apply_lr_schedule() {
    // (Without set_lr, a schedule was refused at construction: detail::schedulable_lr.)
    if constexpr (requires(Opt & x) { x.set_lr(1.0); })
      if (!options_.lr_schedule.empty()) {
        const std::uint64_t t = options_.schedule_per_step ? state_.step : state_.epoch;
        set_lr(options_.lr_schedule.lr(base_lr_, t));
        // (A momentum schedule without set_momentum was refused at construction: detail::configured.)
        if constexpr (requires(Opt & x) { x.set_momentum(0.9); })
          if (const auto m = options_.lr_schedule.momentum(t)) set_momentum(*m);
      }
  }

  // ProcessGroupDDP is left out until the average travels with rank 0's checkpoint to the other
  // ranks (resume) and is updated from synchronised running statistics.
  static constexpr bool ema_supported = host_memory_backend<typename Parallel::backend> &&
                                        std::is_same_v<Precision, FullPrecision> &&
                                        Parallel::name != std::string_view("ProcessGroupDDP");
  /// The weight average's update after an optimiser step (TrainerOptions::ema).
  void update_average() {
    if constexpr (ema_supported) ema_->update(parameters());
  }
  /// Exchanges the trained and the averaged weights, statistics and counters (twice: back).
  void swap_in_average() {
    if constexpr (ema_supported) {
      auto& p = parameters();
      auto& a = ema_->parameters();
      std::swap_ranges(p.values.data(), p.values.data() + p.values.size(), a.values.data());
      std::swap_ranges(p.buffers.data(), p.buffers.data() + p.buffers.size(), a.buffers.data());
      std::swap_ranges(p.counters.data(), p.counters.data() + p.counters.size(), a.counters.data());
    }
  }

  /// Progress and metrics come from rank 0 only.
  bool log_here() const noexcept { return options_.log && engine_.rank() == 0; }
  /// options_.progress with `automatic` resolved: a bar only on a terminal.
  ProgressStyle progress_style() const {
    if (options_.progress != ProgressStyle::automatic) return options_.progress;
    return options_.log && detail::is_terminal(*options_.log) ? ProgressStyle::bar : ProgressStyle::lines;
  }

  /// This process's share of an epoch: its samples (batches_.order() holds their indices) and batches.
  struct EpochPlan {
    std::size_t local = 0, batches = 0;
  };
  /// Checks that a resume mid-epoch continues with the checkpoint's batch and world size, and
  /// draws this epoch's sample order (the same on every policy for one seed).
  EpochPlan plan_epoch(std::size_t n) {
    if (n == 0) throw ValueError("Trainer: the training set is empty");
    const std::size_t bs = options_.batch_size, world = engine_.world();
    if (state_.batch_in_epoch > 0 && state_.batch_size != bs)
      throw ValueError(detail::concat("Trainer: resuming in the middle of an epoch needs the checkpoint's batch size ",
                                      state_.batch_size, ", this run has ", bs));
    if (state_.batch_in_epoch > 0 && state_.world_size != world)
      throw ValueError(detail::concat("Trainer: resuming in the middle of an epoch needs the checkpoint's world size ",
                                      state_.world_size, ", this run has ", world,
                                      " (a checkpoint taken at the end of an epoch fits any world size)"));
    state_.batch_size = bs;
    state_.world_size = world;
    if (world > 1) {
      DistributedSampler sampler(n, int(world), int(engine_.rank()), {.shuffle = state_.shuffle, .seed = state_.seed});
      sampler.indices(state_.epoch, batches_.order());
    } else {
      ShuffleSampler sampler(n, state_.seed, state_.shuffle);
      sampler.indices(state_.epoch, batches_.order());
    }
    const std::size_t local = world > 1 ? batches_.order().size() : n;
    return {local, (local + bs - 1) / bs};
  }
  /// One optimiser step from the next accumulation_steps batches (fewer at the epoch's end);
  /// returns its mean loss and advances the position.
  template <class Train>
  double optimiser_step(const Train& train, const EpochPlan& plan, EpochReport& r) {
    apply_lr_schedule();
    const std::size_t bs = options_.batch_size, world = engine_.world();
    std::size_t b = state_.batch_in_epoch;
    const std::size_t group = std::min(options_.accumulation_steps, plan.batches - b);
    double loss = 0;
    for (std::size_t i = 0; i < group; ++i, ++b) {
      const std::size_t count = std::min(bs, plan.local - b * bs);
      const std::size_t ahead =
          detail::prefetch_pays<typename Parallel::backend, Train>(options_) ? options_.prefetch_batches : 0;
      const std::size_t slot = batches_.load(train, b, plan.batches, plan.local, bs, ahead,
                                             {&options_.augment, state_.seed, state_.epoch, &options_.joint_augment});
      const MicroStep m{.step = state_.step, .forward_pass = state_.forward_passes, .index = i, .count = group};
      if constexpr (regresses<Train>)
        loss += engine_.step({batches_.images(slot), count},
                             std::span<const float>(batches_.targets(slot), count * target_size), m);
      else
        loss += engine_.step({batches_.images(slot), count},
                             std::span<const std::int32_t>(batches_.labels(slot), count * per_sample), m);
      ++state_.forward_passes;
      r.samples += count * world;
    }
    ++state_.step;
    state_.batch_in_epoch = b;
    return loss / double(group);
  }
  /// The seed notebooks' progress line, every log_interval optimiser steps (progress = lines).
  void log_step_line(const EpochPlan& plan, double loss) const {
    const std::size_t shown = state_.batch_in_epoch - 1;
    if (log_here() && progress_style() == ProgressStyle::lines && options_.log_interval &&
        (shown / options_.accumulation_steps) % options_.log_interval == 0)
      detail::print_step_line(*options_.log, state_.epoch, shown, plan.batches, loss);
  }
  /// Moves the position to the next epoch when this one ran to its end (not when max_steps
  /// stopped it: a later run continues from the same batch).
  void finish_epoch(EpochReport& r, const EpochPlan& plan) {
    if (r.complete && state_.batch_in_epoch == plan.batches) {
      ++state_.epoch;
      state_.batch_in_epoch = 0;
    } else {
      r.complete = false;
    }
  }

  void record(const EpochReport& r) {
    if (r.complete) epoch_seconds_.push_back(r.seconds);
    if (engine_.rank() != 0) return;
    if (options_.log) print_epoch_line(*options_.log, r);
    if (options_.metrics.empty()) return;
    const auto seconds = [this](std::size_t i) {
      return epoch_seconds_.size() > i ? std::optional<double>(epoch_seconds_[i]) : std::nullopt;
    };
    append_metrics(options_.metrics, {.epoch = r.epoch,
                                      .complete = r.complete,
                                      .n_dataset_repeat = options_.n_dataset_repeat,
                                      .batch_size = options_.batch_size,
                                      .n_devices = engine_.devices(),
                                      .steps = r.steps,
                                      .parallel = std::string(Parallel::name),
                                      .model_size = options_.model_size,
                                      .precision = std::string(Precision::name),
                                      .first_epoch_seconds = seconds(0),
                                      .second_epoch_seconds = seconds(1),
                                      .epoch_seconds = r.seconds,
                                      .train_loss = r.train_loss,
                                      .samples_per_s = r.samples_per_s,
                                      .test_accuracy = r.test_accuracy,
                                      .test_loss = r.test_loss,
                                      .test_mean_iou = r.test_mean_iou,
                                      .skipped_steps = engine_.skipped_steps(),
                                      .skipped_files = r.skipped_files,
                                      .loss_scale = engine_.loss_scale()});
  }

  TrainerOptions options_;
  CoreBudget threads_;
  double base_lr_ = 0; // the optimiser's rate at construction: what the schedule scales
  engine_type engine_;
  TrainerState state_{};
  std::vector<std::string> class_names_;  // see class_names()
  std::optional<WeightAverage<Net>> ema_; // TrainerOptions::ema
  // Staging memory is allocated on the thread that gathers, with the engine's device current.
  detail::BatchStaging<input_shape, staging, per_sample, target_size> batches_{[this] {
    if constexpr (requires { engine_.activate(); }) engine_.activate();
  }};
  std::vector<double> epoch_seconds_;
  std::uint64_t epochs_ = 0; // fit()'s target, for the progress bar (0: fit_epoch called alone)
};

} // namespace cohort

#pragma once
// The body of train_mnist for one model: load Fashion-MNIST (or any MNIST-format directory),
// build the trainer with the requested optimiser, train, evaluate, save.

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include <cohort/cohort.hpp>
#include <cohort/data/dataset.hpp>
#include <cohort/data/idx.hpp>
#include <cohort/io/onnx.hpp>
#include <cohort/optim/lookahead.hpp>
#include <cohort/optim/optimizer_variant.hpp>
#include <cohort/precision/mixed_precision.hpp>
#include <cohort/train/trainer.hpp>
#if COHORT_WITH_MPI
#include <cohort/mpi.hpp>
#endif

#include "options.hpp"

namespace train_mnist {

/// The seed notebooks' recipes: A Adadelta(0.5) batch 128; B SGD(1e-4) batch 100; C, D
/// Adam(1e-3, eps 1e-7) batch 128; resnet (ResNet-20, no seed notebook) as C and D.
inline std::string default_optimizer(const std::string& model) {
  return model == "A" ? "adadelta" : model == "B" ? "sgd" : "adam";
}
inline double default_lr(const std::string& model) { return model == "A" ? 0.5 : model == "B" ? 1e-4 : 1e-3; }

/// The closing summary: what was trained, how fast, how well, and where the results went.
inline void print_summary(const TrainMnistOptions& o, const std::vector<cohort::EpochReport>& history,
                          const cohort::EvalReport& e) {
  double seconds = 0;
  std::size_t samples = 0;
  for (const auto& r : history) {
    seconds += r.seconds;
    samples += r.samples;
  }
  std::printf("\nsummary: model %s, %zu epoch(s) this run, %s samples in %.1f s (%s samples/s), test accuracy %.2f%%\n",
              o.model.c_str(), history.size(), cohort::detail::grouped(samples).c_str(), seconds,
              cohort::detail::grouped(std::uint64_t(seconds > 0 ? double(samples) / seconds + 0.5 : 0)).c_str(),
              e.accuracy);
  if (!o.save.empty()) std::printf("  checkpoint: %s (continue with --resume %s)\n", o.save.c_str(), o.save.c_str());
  if (!o.metrics.empty())
    std::printf("  metrics:    %s (draw them: scripts/plot_metrics.py %s -o curves.png)\n", o.metrics.c_str(),
                o.metrics.c_str());
  if (!o.export_onnx.empty()) std::printf("  ONNX model: %s (eval mode)\n", o.export_onnx.c_str());
  if (o.save.empty() && o.metrics.empty() && o.export_onnx.empty())
    std::printf("  nothing saved: add --save FILE, --metrics FILE or --export-onnx FILE\n");
}

template <class Net, class Parallel, class Precision, class Opt>
int train(const TrainMnistOptions& o, Opt opt) {
  using namespace cohort;
  using Data = ImageDataset<typename Net::input_shape>;
  // Normalise with the training set's own statistics (for MNIST these are seed 000's 0.1307/0.3081).
  const IdxFiles train_files = find_idx_files(o.data_dir, Split::train);
  const IdxFiles test_files = find_idx_files(o.data_dir, Split::test);
  const IdxArray train_images = read_idx(train_files.images, idx_images_magic);
  const Normalization norm = Normalization::of(train_images);
  const Data train_set = Data::from_idx(train_images, read_idx(train_files.labels, idx_labels_magic), 10, norm);
  const Data test_set = Data::load(test_files, 10, norm);

  TrainerOptions to;
  to.threads = o.threads; // 0: the Trainer takes every available core
  to.batch_size = o.batch_size ? o.batch_size : (o.model == "B" ? 100 : 128);
  to.eval_batch_size = o.eval_batch_size;
  to.seed = o.seed;
  to.shuffle = !o.no_shuffle;
  to.prefetch = !o.no_prefetch;
  to.log_interval = o.log_interval;
  to.max_steps = o.max_steps;
  to.metrics = o.metrics;
  to.model_size = o.model;
  to.n_dataset_repeat = o.repeat;
  to.accumulation_steps = o.accumulation;
  to.parallel.replicas = o.replicas;
  to.parallel.threads_per_replica = o.threads; // 0: every core shared among the replicas
  to.parallel.deterministic = o.deterministic;
  to.parallel.deterministic_chunks = o.chunks;
  to.parallel.bucket_kib = o.bucket_kib;
  to.parallel.timeout_s = o.timeout;
  to.parallel.compression = parse_compression(o.compress);
  to.parallel.error_feedback = o.error_feedback;
  to.lr_schedule = LrSchedule::parse(o.lr_schedule);
  to.schedule_per_step = o.schedule_per_step;
  to.loss = {.label_smoothing = o.label_smoothing, .class_weights = parse_class_weights(o.class_weights)};
  if (o.no_decay_on_norms) to.parameter_groups = no_decay_on_norms_and_biases();
  if (o.bn_bias_lr_scale != 1)
    to.parameter_groups =
        combine(std::move(to.parameter_groups), for_batch_norm_biases({.lr_scale = o.bn_bias_lr_scale}));
  if (o.target_accuracy > 0) to.target_accuracy = o.target_accuracy;
  to.max_grad_norm = o.clip_grad_norm;
  to.freeze = Freeze::parse(o.freeze);
  if (o.ema > 0) to.ema = EmaOptions{.decay = o.ema, .every = o.ema_every};
  to.test_time_augmentation = o.tta == "flip" ? TestTimeAugmentation::flip : TestTimeAugmentation::none;
  // Padding is a raw 0 pixel, normalised as the images are (data/augment.hpp).
  to.augment = parse_augmentation(o.augment, Net::input_shape::extents[2], norm);
  Trainer<Net, Opt, Parallel, Precision> trainer(std::move(opt), to);
  const bool root = trainer.rank() == 0; // only rank 0 talks
  if (root)
    std::printf("data: %zu training and %zu test images from %s (mean %.4f, std %.4f), repeated %zux\n",
                train_set.size(), test_set.size(), o.data_dir.c_str(), double(norm.mean), double(norm.std), o.repeat);
  if (root && !to.augment.empty()) std::printf("augmentation: %s\n", to.augment.names().c_str());
  if (root && to.test_time_augmentation != TestTimeAugmentation::none)
    std::printf("test-time augmentation: %s (evaluation averages each image's scores with its mirror's)\n",
                std::string(to_string(to.test_time_augmentation)).c_str());
  if (!o.init_from.empty()) trainer.init_from(o.init_from);
  if (!o.resume.empty()) {
    trainer.resume(o.resume);
    if (root)
      std::printf("resumed from %s at epoch %llu, step %llu\n", o.resume.c_str(),
                  static_cast<unsigned long long>(trainer.epoch()), static_cast<unsigned long long>(trainer.step()));
  }
  if (root)
    std::printf("model %s (%zu parameters), %s, batch %zu, %s x %zu, %zu thread(s) each (%s), %s%s%s\n",
                o.model.c_str(), Net::parameter_count, std::string(cohort::optimizer_name(trainer.optimizer())).c_str(),
                to.batch_size, std::string(Parallel::name).c_str(), trainer.engine().devices(),
                trainer.threads().threads, o.threads ? "--threads" : trainer.threads().why.c_str(),
                std::string(Precision::name).c_str(), o.deterministic ? ", deterministic" : "",
                o.compress == "none" ? ""
                : o.error_feedback   ? (", " + o.compress + " gradients with error feedback").c_str()
                                     : (", " + o.compress + " gradients").c_str());

  const auto start = std::chrono::steady_clock::now();
  std::vector<EpochReport> history;
  if (o.repeat > 1)
    history = trainer.fit(train_set.repeated(o.repeat), o.epochs, &test_set);
  else
    history = trainer.fit(train_set, o.epochs, &test_set);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (root && to.target_accuracy) {
    const bool reached = !history.empty() && trainer.reached_target(history.back());
    if (reached)
      std::printf("target %.2f%% reached after epoch %llu (%.2f%%), %.2f s after the start of training\n",
                  *to.target_accuracy, static_cast<unsigned long long>(history.back().epoch + 1),
                  *history.back().test_accuracy, total);
    else
      std::printf("target %.2f%% not reached in %zu epoch(s)\n", *to.target_accuracy, history.size());
  }
  if (root)
    for (const auto& r : history)
      std::printf("epoch %llu time: %.2f s%s\n", static_cast<unsigned long long>(r.epoch), r.seconds,
                  r.complete ? "" : " (stopped at --max-steps)");
  if (!o.save.empty()) {
    trainer.save(o.save);
    if (root) std::printf("saved %s\n", o.save.c_str());
  }
  // fit's last evaluation was of these very weights (nothing has stepped since), unless it
  // evaluated the weight average: reuse it rather than classify the test set a second time
  // (2.5 s of a short run on model B). The choice is the same on every rank (same history).
  EvalReport e;
  if (!history.empty() && history.back().test_accuracy && !to.ema) {
    e = {.accuracy = *history.back().test_accuracy, .loss = *history.back().test_loss, .samples = test_set.size()};
  } else {
    e = trainer.evaluate(test_set); // (also brings every rank's BatchNorm statistics to rank 0's)
  }
  if (!o.export_onnx.empty() && root) {
    export_onnx(trainer.parameters(), o.export_onnx);
    std::printf("exported %s (ONNX, eval mode)\n", o.export_onnx.c_str());
  }
  if (root) {
    if (trainer.engine().loss_scale() > 0)
      std::printf("loss scale %g, %llu step(s) skipped on inf/NaN gradients\n", trainer.engine().loss_scale(),
                  static_cast<unsigned long long>(trainer.engine().skipped_steps()));
    std::printf("Finished training in %.2f s\nTest accuracy: %.2f%% (%zu images)\n", total, e.accuracy, e.samples);
    print_summary(o, history, e);
  }
  return 0;
}

/// The parallel policy from --parallel.
template <class Net, class Precision, class Opt>
int train_with(const TrainMnistOptions& o, Opt opt) {
  using namespace cohort;
  if (o.parallel == "threads") return train<Net, ThreadedReplicas<dynamic_replicas>, Precision>(o, std::move(opt));
  if (o.parallel == "ddp") {
#if COHORT_WITH_MPI
    return train<Net, ProcessGroupDDP<Mpi>, Precision>(o, std::move(opt));
#else
    throw ValueError("--parallel ddp: this train_mnist was built without MPI (configure with -DCOHORT_WITH_MPI=ON)");
#endif
  }
  return train<Net, SingleDevice<>, Precision>(o, std::move(opt));
}

using AnyOptimizer =
    cohort::OptimizerVariant<cohort::Sgd<>, cohort::Adam<>, cohort::AdamW<>, cohort::RmsProp<>, cohort::Adadelta<>,
                             cohort::Lookahead<cohort::Sgd<>>, cohort::Lookahead<cohort::Adam<>>>;

/// `base`, or Lookahead around it with --lookahead.
template <class Base>
AnyOptimizer maybe_lookahead(const TrainMnistOptions& o, Base base) {
  if (o.lookahead_k == 0) return AnyOptimizer(std::move(base));
  return AnyOptimizer(cohort::Lookahead<Base>(std::move(base), {.k = o.lookahead_k, .alpha = o.lookahead_alpha}));
}

template <class Net, class Precision>
int run(const TrainMnistOptions& o) {
  using namespace cohort;
  const std::string name = o.optimizer.empty() ? default_optimizer(o.model) : o.optimizer;
  const double lr = o.lr >= 0 ? o.lr : (o.optimizer.empty() ? default_lr(o.model) : -1);
  const double weight_decay = std::max(o.weight_decay, 0.0); // AdamW alone has another default
  // One Trainer per (parallel, precision) pair holds whichever optimiser the flag names: a
  // Trainer per optimiser as well would make each model's translation unit 1.6x slower to build.
  if (o.lookahead_k && name != "sgd" && name != "adam")
    throw cohort::ValueError("--lookahead wraps sgd or adam, and --optimizer is " + name);
  if (name == "sgd")
    return train_with<Net, Precision>(o, maybe_lookahead(o, Sgd({.lr = lr >= 0 ? lr : 1e-3,
                                                                 .momentum = o.momentum,
                                                                 .weight_decay = weight_decay,
                                                                 .nesterov = o.nesterov})));
  if (name == "adam")
    return train_with<Net, Precision>(
        o, maybe_lookahead(o, Adam({.lr = lr >= 0 ? lr : 1e-3, .eps = 1e-7, .weight_decay = weight_decay})));
  if (name == "adamw") // torch's default decay (0.01) unless --weight-decay is given
    return train_with<Net, Precision>(
        o,
        AnyOptimizer(AdamW({.lr = lr >= 0 ? lr : 1e-3, .weight_decay = o.weight_decay >= 0 ? o.weight_decay : 1e-2})));
  if (name == "rmsprop")
    return train_with<Net, Precision>(
        o, AnyOptimizer(RmsProp({.lr = lr >= 0 ? lr : 1e-2, .weight_decay = weight_decay, .momentum = o.momentum})));
  return train_with<Net, Precision>(o,
                                    AnyOptimizer(Adadelta({.lr = lr >= 0 ? lr : 1.0, .weight_decay = weight_decay})));
}

} // namespace train_mnist

#pragma once
/// \file
/// What a Trainer is told (TrainerOptions) and what it reports (EpochReport, EvalReport), and
/// what it accepts as data (ClassificationData): the parts of train/trainer.hpp a caller fills in
/// or reads, without the loop.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cohort/data/augment.hpp"
#include "cohort/data/data_checks.hpp"
#include "cohort/data/joint_augment.hpp"
#include "cohort/loss/cross_entropy_options.hpp"
#include "cohort/loss/regression_choice.hpp"
#include "cohort/network/freezing.hpp"
#include "cohort/network/test_time_augmentation.hpp"
#include "cohort/optim/ema_options.hpp"
#include "cohort/optim/lr_schedule.hpp"
#include "cohort/optim/parameter_groups.hpp"
#include "cohort/parallel/policy.hpp"
#include "cohort/precision/mixed_precision.hpp"
#include "cohort/train/progress.hpp"

namespace cohort {

/// A labelled image set the trainer can draw batches from (data/dataset.hpp's ImageDataset,
/// repeated or not, data/image_view.hpp's ImageView over the caller's memory, or anything with
/// the same three members), or one that writes a batch's samples itself (SampleLoadingData:
/// data/image_folder.hpp's ImageFolder decodes them). It must also state its sample shape, which fit and evaluate check
/// with its labels before any step (data/data_checks.hpp).
template <class D, class InputShape>
concept ClassificationData = requires(const D& d, std::size_t i) {
  { d.size() } -> std::convertible_to<std::size_t>;
  { d.label(i) } -> std::convertible_to<std::int32_t>;
}
&&(SampleLoadingData<D> || requires(const D& d, std::size_t i) {
  { d.image(i) } -> std::convertible_to<const float*>;
});

/// A set of images with a class per pixel that a Trainer of a dense network (output (C, H, W))
/// trains on: data/dense_dataset.hpp's MaskDataset, or anything with the same members. Its
/// `mask_shape` (Shape<H, W>) is checked against the network's output at compile time, its
/// classes and every mask value before any step.
template <class D, class InputShape>
concept SegmentationData = requires(const D& d, std::size_t i) {
  typename D::mask_shape;
  { d.size() } -> std::convertible_to<std::size_t>;
  { d.image(i) } -> std::convertible_to<const float*>;
  { d.mask(i) } -> std::convertible_to<const std::int32_t*>;
  { d.num_classes() } -> std::convertible_to<std::size_t>;
  { d.ignore_index() } -> std::convertible_to<std::int32_t>;
};

/// A set of images with a target image each that a Trainer of a dense network trains on by
/// regression (TrainerOptions::regression's loss): data/dense_dataset.hpp's ImagePairDataset,
/// or anything with the same members. Its `target_shape` must be the network's output shape
/// (checked at compile time), and every target value one the loss accepts (checked before any
/// step).
template <class D, class InputShape>
concept RegressionData = requires(const D& d, std::size_t i) {
  typename D::target_shape;
  { d.size() } -> std::convertible_to<std::size_t>;
  { d.image(i) } -> std::convertible_to<const float*>;
  { d.target(i) } -> std::convertible_to<const float*>;
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
  /// How many batches the background thread may prepare ahead of the step (PyTorch's
  /// prefetch_factor): a bounded queue that absorbs batches slower to decode than others (large
  /// JPEGs). Each costs one batch of host memory; 0 is prefetch = false.
  std::size_t prefetch_batches = 2;
  /// Keep an exponential moving average of the weights, running statistics and counters (torch's
  /// AveragedModel with get_ema_multi_avg_fn, use_buffers=True; optim/weight_average.hpp),
  /// updated after every ema->every-th optimiser step, saved in checkpoints, evaluated by
  /// evaluate_ema() and, with ema->evaluate, by fit. Full-precision CPU policies.
  std::optional<EmaOptions> ema{};
  /// Evaluation (evaluate, evaluate_ema, fit's test accuracy) and predict score each image and its
  /// horizontal mirror and average the two (network/test_time_augmentation.hpp): accuracy, loss
  /// and a dense network's metrics are those of the averaged scores. Costs a second forward pass
  /// per evaluated image. CPU policies; (C, H, W) inputs.
  TestTimeAugmentation test_time_augmentation = TestTimeAugmentation::none;
  /// Transforms applied to every training image (not to evaluation), in the batch buffer, keyed
  /// by (seed, epoch, dataset sample index): the same images for every policy, replica count,
  /// world size and prefetch setting, and after a resume (data/augment.hpp). Empty: none.
  Augmentation augment{};
  /// A dense network's (segmentation's) transforms: each training image with its mask, the
  /// same crop and flip for both (data/joint_augment.hpp), keyed as `augment` is. `augment`
  /// would move the images under their masks, so a dense trainer refuses it.
  JointAugmentation joint_augment{};
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
  /// A dense network's (PixelCrossEntropyLoss's, mean IoU's) label of pixels that count for
  /// nothing: the training and test sets must mark them so (MaskDataset::ignore_index, e.g.
  /// VOC's 255).
  std::int32_t ignore_index = -100;
  /// A dense network's loss when it trains on target images (RegressionData) rather than
  /// masks: MSELoss by default (loss/regression_choice.hpp). Evaluation then reports that loss,
  /// the mean over every target element, and no accuracy.
  RegressionOptions regression{};
  /// Layers that do not train: a fine-tune's backbone (network/freezing.hpp; torch's
  /// requires_grad_(False) with .eval() on them). Under every policy and precision their
  /// parameters, optimiser state and (in eval mode) running statistics stay as loaded, backward
  /// stops below the lowest trainable layer, and ProcessGroupDDP sends nothing for them. Empty:
  /// everything trains.
  Freeze freeze{};
  /// fit stops after the first evaluation on its test set at or above this test accuracy (in %,
  /// (0, 100]), as a time-to-accuracy run does (bench/time_to_accuracy.py); the schedule is the
  /// one planned for all of fit's epochs. Empty: fit trains every epoch it is asked for.
  std::optional<double> target_accuracy{};
};

/// What one epoch (or the part of it run before max_steps) produced.
struct EpochReport {
  std::uint64_t epoch = 0;
  bool complete = true;
  std::size_t steps = 0, samples = 0;
  double seconds = 0, samples_per_s = 0, train_loss = 0;
  std::optional<double> test_accuracy, test_loss;
  /// A dense network's mean IoU on the test set (EvalReport::mean_iou); test_accuracy is then
  /// the pixel accuracy.
  std::optional<double> test_mean_iou;
  /// The training set's files left out when it was opened (ImageFolder's BadFiles::skip: its
  /// skipped() list); empty for data sets that cannot skip.
  std::optional<std::size_t> skipped_files;
};

/// The line a Trainer prints after each epoch: "epoch 0: 12.34 s, 4860 samples/s, mean
/// training loss 0.512345, test accuracy 86.68%" (" (partial)" after the epoch number when
/// max_steps stopped it; ", 3 bad file(s) skipped" when the training set left files out).
inline void print_epoch_line(std::ostream& out, const EpochReport& r) {
  char line[200];
  std::snprintf(line, sizeof line, "epoch %llu%s: %.2f s, %.0f samples/s, mean training loss %.6f",
                static_cast<unsigned long long>(r.epoch), r.complete ? "" : " (partial)", r.seconds, r.samples_per_s,
                r.train_loss);
  out << line;
  if (r.test_accuracy) {
    std::snprintf(line, sizeof line, r.test_mean_iou ? ", test pixel accuracy %.2f%%" : ", test accuracy %.2f%%",
                  *r.test_accuracy);
    out << line;
  }
  if (r.test_loss && !r.test_accuracy) { // regression: a loss is all there is to report
    std::snprintf(line, sizeof line, ", test loss %.6f", *r.test_loss);
    out << line;
  }
  if (r.test_mean_iou) {
    std::snprintf(line, sizeof line, ", mean IoU %.4f", *r.test_mean_iou);
    out << line;
  }
  if (r.skipped_files.value_or(0) > 0) out << ", " << *r.skipped_files << " bad file(s) skipped";
  out << std::endl;
}

/// Accuracy (percent) and mean loss over a dataset. A dense network's accuracy is over pixels
/// (those not ignored), its loss the mean over them (weighted with class weights), and the
/// intersection over union is reported (train/segmentation_metrics.hpp's definitions).
struct EvalReport {
  double accuracy = 0, loss = 0;
  std::size_t samples = 0;
  std::optional<double> mean_iou{};
  std::vector<double> iou{}; // per class; -1 for a class absent from labels and predictions
};

} // namespace cohort

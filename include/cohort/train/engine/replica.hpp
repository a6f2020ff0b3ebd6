#pragma once
/// \file
/// A Replica: one network instance on the CPU without parameters of its own (executor, gradient
/// store, loss, thread pool), which every CPU engine trains and evaluates through; and the
/// helpers around it (initial parameters, a micro-batch's StepInfo, correct predictions).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cohort/backend/cpu.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/loss/regression_choice.hpp"
#include "cohort/network/executor.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/network/test_time_augmentation.hpp"
#include "cohort/tensor/batch.hpp"
#include "cohort/tensor/buffer.hpp"
#include "cohort/train/engine/default_loss.hpp"
#include "cohort/train/engine/micro_step.hpp"
#include "cohort/train/segmentation_metrics.hpp"

namespace cohort::detail {

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

/// How many samples evaluation runs through the network at once: no more than training made room
/// for (`capacity`), or before any training `limit` (the training batch: EngineOptions::eval_chunk;
/// 0: no limit), so evaluating at a larger batch (eval_batch_size 1000, training at 128)
/// allocates no activation memory beyond training's. Per-sample results do not depend on it
/// (predict's chunking, network/predict.hpp, relies on the same).
inline std::size_t eval_chunk(std::size_t capacity, std::size_t batch, std::size_t limit) noexcept {
  const std::size_t most = capacity ? capacity : limit ? limit : batch;
  return std::min(most, batch);
}

namespace detail {
/// (correct predictions, summed loss) over `x` in chunks of at most `chunk` samples:
/// `chunk_result(part, part_labels)` gives one chunk's (correct, mean loss). The one chunking
/// loop of the CPU and device replicas.
/// (A dense network's chunk result on masks is (correct pixels, summed loss): its loss is not
/// weighed by the sample count. L: the targets' element type, class labels or float values.)
template <class Net, class View, TargetElement L, class F>
std::pair<std::size_t, double> evaluate_in_chunks(View x, std::span<const L> labels, std::size_t chunk,
                                                  F&& chunk_result) {
  constexpr std::size_t per = targets_per_sample<Net, L>;
  std::pair<std::size_t, double> total{0, 0.0};
  for (std::size_t at = 0; at < x.batch(); at += chunk) {
    const std::size_t n = std::min(chunk, x.batch() - at);
    const auto [correct, loss] =
        chunk_result(View{x.data() + at * Net::input_shape::size, n}, labels.subspan(at * per, n * per));
    total.first += correct;
    total.second += per_pixel_classes<Net, L> ? loss : loss * double(n);
  }
  return total;
}

/// A dense network's chunk result for evaluate_in_chunks: the chunk's predictions added to
/// `metrics` (required; `who` names the caller otherwise), and (its correct pixels, its mean
/// loss times the denominator the loss divided by: the loss summed over the counted pixels).
/// The one such step of the CPU and device replicas.
template <ShapeType S, class T>
std::pair<std::size_t, double> dense_chunk_result(SegmentationMetrics* metrics, ConstBatchView<S, T> scores,
                                                  std::span<const std::int32_t> labels, double mean_loss,
                                                  double denominator, const char* who) {
  if (!metrics) throw ValueError(concat(who, ": a per-pixel network's evaluation needs SegmentationMetrics"));
  const std::uint64_t before = metrics->correct();
  metrics->add(scores, labels);
  return {std::size_t(metrics->correct() - before), mean_loss * denominator};
}
} // namespace detail

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
/// parameters; nothing is copied per step. A dense network's replica also holds the regression
/// loss it trains with on float targets (TrainerOptions::regression): train and evaluate take
/// int32 labels or masks, or float target values, by the span's element type.
template <class Net, class T = float>
class Replica {
 public:
  using params_type = Parameters<Net, T, Cpu>;
  using grads_type = Gradients<Net, T, Cpu>;
  using input_view = ConstBatchView<typename Net::input_shape, float>;

  /// `pool`: the threads this replica's kernels run on (one replica's pool is never used by two
  /// threads at once); `loss`: CrossEntropyLoss's smoothing and class weights; `frozen`: the
  /// layers that do not train (network/freezing.hpp); `eval_limit`: eval_chunk's limit.
  /// `ignore_index`: the label of pixels that add nothing (a dense network's PixelCrossEntropyLoss).
  /// `regression`: a dense network's loss on target images. `tta`: evaluation's scores are the
  /// average over each image and its mirror (network/test_time_augmentation.hpp).
  explicit Replica(ThreadPool& pool, const CrossEntropyOptions& loss = {}, const FrozenLayers& frozen = {},
                   std::size_t eval_limit = 0, std::int32_t ignore_index = -100,
                   const RegressionOptions& regression = {}, TestTimeAugmentation tta = TestTimeAugmentation::none)
      : ctx_{&pool}, loss_(make_loss<loss_type, classes_of<Net>>(loss, ignore_index)),
        regression_(make_regression(regression)), eval_limit_(eval_limit), tta_(tta) {
    check_test_time_augmentation<typename Net::input_shape>(tta, "Replica");
    if constexpr (requires { loss_.set_context(ctx_); }) loss_.set_context(ctx_);
    exec_.set_frozen(frozen);
  }

  /// Forward, loss and backward on one (micro-)batch; parameter gradients are written into `g`
  /// (added when `accumulate`), scaled by `grad_scale` (the batch's share of the global batch,
  /// times the loss scale). `hook(layer)` runs as each layer's gradients become final.
  /// `master`: the float master weights under mixed precision. `denominator`: what the loss is
  /// normalised by (0: the batch's own count or weight total; see ShardNorm). Returns the loss.
  template <TargetElement L, class Hook = NoHook>
  double train(params_type& p, grads_type& g, input_view x, std::span<const L> labels, const StepInfo& info,
               double grad_scale, bool accumulate, Hook&& hook = {}, const float* master = nullptr,
               double denominator = 0) {
    const auto y = exec_.forward(ctx_, info, p, input(x), master);
    if constexpr (std::is_same_v<L, float>) {
      static_assert(dense_output<Net>, "Replica: float targets are a dense network's regression targets");
      const double l = regression_.forward(y, labels, grad_scale);
      exec_.backward(ctx_, p, g, regression_.backward(), {.accumulate = accumulate}, std::forward<Hook>(hook), master);
      return l;
    } else {
      const double l = forward_loss(y, labels, grad_scale, denominator);
      exec_.backward(ctx_, p, g, loss_.backward(), {.accumulate = accumulate}, std::forward<Hook>(hook), master);
      return l;
    }
  }

  /// (correct predictions, summed loss) in evaluation mode, in chunks of at most what training
  /// allocated for (eval_chunk). A dense network's are (correct pixels, the loss summed over the
  /// counted pixels, weighted), its predictions added to `metrics` (required); on float
  /// targets (0, the regression loss summed over samples).
  template <TargetElement L>
  std::pair<std::size_t, double> evaluate(params_type& p, input_view x, std::span<const L> labels, std::uint64_t seed,
                                          const float* master = nullptr, SegmentationMetrics* metrics = nullptr) {
    const StepInfo info{.mode = Mode::eval, .seed = seed, .update_buffers = false};
    const std::size_t chunk = eval_chunk(exec_.capacity(), x.batch(), eval_limit_);
    return detail::evaluate_in_chunks<Net>(x, labels, chunk, [&](input_view part, std::span<const L> part_labels) {
      const auto scored = [&](const auto& y) {
        if constexpr (std::is_same_v<L, float>)
          return std::pair<std::size_t, double>{0, regression_.forward(y, part_labels)};
        else
          return chunk_result(y, part_labels, metrics);
      };
      const auto y = exec_.forward(ctx_, info, p, input(part), master);
      if (tta_ == TestTimeAugmentation::none) return scored(y);
      return scored(mirror_averaged(info, p, part, y, master));
    });
  }

  grads_type& gradients() noexcept { return grads_; }
  Executor<Net, T, Cpu>& executor() noexcept { return exec_; }
  const auto& loss() const noexcept { return loss_; }
  /// A dense network's regression loss (std::monostate for other networks).
  const auto& regression_loss() const noexcept { return regression_; }
  CpuContext& context() noexcept { return ctx_; }

  /// Room for one gathered micro-batch (deterministic chunks), reused across steps: labels or
  /// masks, or float targets (chunk_targets_of<L>() picks by the element type).
  HostBuffer<float> chunk_x;
  std::vector<std::int32_t> chunk_labels;
  std::vector<float> chunk_targets;
  template <TargetElement L>
  std::vector<L>& chunk_targets_of() noexcept {
    if constexpr (std::is_same_v<L, float>)
      return chunk_targets;
    else
      return chunk_labels;
  }

 private:
  /// A chunk's (correct predictions, mean loss) on labels, or a dense network's on masks (see
  /// dense_chunk_result).
  template <class Y>
  std::pair<std::size_t, double> chunk_result(const Y& y, std::span<const std::int32_t> part_labels,
                                              SegmentationMetrics* metrics) {
    const double l = loss_.forward(y, part_labels);
    if constexpr (dense_output<Net>) {
      return detail::dense_chunk_result(metrics, ConstBatchView<typename Net::output_shape, T>(y), part_labels, l,
                                        loss_.denominator(), "Replica::evaluate");
    } else if constexpr (std::is_same_v<T, float>) {
      return std::pair{count_correct<Net>(y.data(), part_labels), l};
    } else {
      scores_.resize(y.size());
      cpu::load_floats(cpu::active_isa(), y.data(), scores_.data(), y.size());
      return std::pair{count_correct<Net>(scores_.data(), part_labels), l};
    }
  }

  /// TestTimeAugmentation::flip: `y` (the chunk's scores) averaged with the mirrored chunk's
  /// (network/test_time_augmentation.hpp), in float and rounded once to T.
  template <class Y>
  ConstBatchView<typename Net::output_shape, T> mirror_averaged(const StepInfo& info, params_type& p, input_view part,
                                                                const Y& y, const float* master) {
    using In = typename Net::input_shape;
    using Out = typename Net::output_shape;
    const std::size_t n = part.batch(), size = n * Out::size;
    if constexpr (In::rank != 3) {
      throw ValueError(
          "Replica::evaluate: test-time augmentation needs (C, H, W) images"); // the constructor refused it
    } else {
      tta_scores_.resize(size);
      float* avg = tta_scores_.data();
      if constexpr (std::is_same_v<T, float>)
        std::copy(y.data(), y.data() + size, avg);
      else
        cpu::load_floats(cpu::active_isa(), y.data(), avg, size); // before the next forward overwrites y
      tta_images_.resize(part.size());
      mirror_width<In>(part.data(), tta_images_.data(), n);
      const auto ym = exec_.forward(ctx_, info, p, input(input_view(tta_images_.data(), n)), master);
      if constexpr (std::is_same_v<T, float>) {
        average_mirrored_scores<Out>(avg, ym.data(), n);
        return {avg, n};
      } else {
        scores_.resize(size);
        cpu::load_floats(cpu::active_isa(), ym.data(), scores_.data(), size);
        average_mirrored_scores<Out>(avg, scores_.data(), n);
        tta_stored_.resize(size);
        cpu::store_floats(cpu::active_isa(), avg, tta_stored_.data(), size);
        return {tta_stored_.data(), n};
      }
    }
  }

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
  using regression_type =
      std::conditional_t<dense_output<Net>, ChosenRegressionLoss<T, typename Net::output_shape>, std::monostate>;
  static regression_type make_regression(const RegressionOptions& o) {
    if constexpr (dense_output<Net>)
      return regression_type(o);
    else
      return {};
  }

  CpuContext ctx_;
  Executor<Net, T, Cpu> exec_;
  grads_type grads_;
  loss_type loss_;
  regression_type regression_;
  HostBuffer<T> input_;      // 16-bit storage: the converted batch
  HostBuffer<float> scores_; // 16-bit storage: evaluation scores in float
  std::size_t eval_limit_;
  TestTimeAugmentation tta_;
  HostBuffer<float> tta_images_; // flip: the chunk's images mirrored
  HostBuffer<float> tta_scores_; // flip: the averaged scores, in float
  HostBuffer<T> tta_stored_;     // flip, 16-bit storage: the average rounded to T
};

} // namespace cohort::detail

#pragma once
/// \file
/// The loss an engine trains with: the one the network's output calls for (default_loss_t), built
/// from the Trainer's CrossEntropyOptions and checked when the Trainer is constructed.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cohort/backend/cpu.hpp"
#include "cohort/core/error.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/loss/cross_entropy_loss.hpp"
#include "cohort/loss/nll_loss.hpp"
#include "cohort/loss/pixel_cross_entropy_loss.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort {

namespace detail {
/// Whether a network predicts per pixel: its output is (C, H, W) scores, a class map per sample
/// (segmentation), not one vector of class scores.
template <class Net>
inline constexpr bool dense_output = Net::output_shape::rank == 3;

/// The classes a network scores (C of a (C, H, W) output), and the labels of one sample: one,
/// or one per pixel (H * W, row-major) for a dense output.
template <class Net>
inline constexpr std::size_t classes_of = dense_output<Net> ? Net::output_shape::extents[0] : Net::output_shape::size;
template <class Net>
inline constexpr std::size_t labels_per_sample = Net::output_shape::size / classes_of<Net>;

/// What a sample's targets are, by their element type L: int32 class labels (one, or a mask's
/// H * W), or float target values (a dense network's regression: one per output element).
template <class L>
concept TargetElement = std::same_as<L, std::int32_t> || std::same_as<L, float>;
template <class Net, TargetElement L>
inline constexpr std::size_t targets_per_sample =
    std::is_same_v<L, float> ? Net::output_shape::size : labels_per_sample<Net>;
/// Whether targets of type L are a class per pixel (a mask), whose loss sums over the counted
/// pixels rather than averaging over samples.
template <class Net, TargetElement L>
inline constexpr bool per_pixel_classes = dense_output<Net>&& std::is_same_v<L, std::int32_t>;
} // namespace detail

/// The loss a network's output calls for: NllLoss after a final LogSoftmax (seed 000),
/// CrossEntropyLoss on raw scores otherwise (seeds 001, 003), PixelCrossEntropyLoss on (C, H, W)
/// scores per pixel; T is the network's storage type.
template <class Net, class T = float, class Backend = Cpu>
using default_loss_t = std::conditional_t<
    detail::dense_output<Net>, PixelCrossEntropyLoss<T, Backend>,
    std::conditional_t<
        std::is_same_v<typename detail::at_t<Net::layer_count - 1, typename Net::layers>::layer, LogSoftmax>,
        NllLoss<T, Backend>, CrossEntropyLoss<T, Backend>>>;

namespace detail {

/// The loss of an engine's replica, built with the trainer's CrossEntropyOptions (and, per
/// pixel, the label of ignored pixels): checked here, so a bad option fails when the Trainer is
/// constructed, naming the loss.
template <class Loss, std::size_t Classes>
Loss make_loss(const CrossEntropyOptions& o, std::int32_t ignore_index = -100) {
  if constexpr (std::is_constructible_v<Loss, PixelCrossEntropyOptions>) {
    Loss loss({.ignore_index = ignore_index, .label_smoothing = o.label_smoothing, .class_weights = o.class_weights});
    check_class_weight_count("PixelCrossEntropyLoss", o, Classes);
    return loss;
  } else if constexpr (std::is_constructible_v<Loss, CrossEntropyOptions>) {
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

} // namespace detail
} // namespace cohort

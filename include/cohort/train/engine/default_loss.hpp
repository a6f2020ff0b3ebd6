#pragma once
/// \file
/// The loss an engine trains with: the one the network's output calls for (default_loss_t), built
/// from the Trainer's CrossEntropyOptions and checked when the Trainer is constructed.

#include <cstddef>
#include <type_traits>

#include "cohort/backend/cpu.hpp"
#include "cohort/core/error.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/loss/cross_entropy_loss.hpp"
#include "cohort/loss/nll_loss.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort {

/// The loss a network's output calls for: NllLoss after a final LogSoftmax (seed 000),
/// CrossEntropyLoss on raw scores otherwise (seeds 001, 003); T is the network's storage type.
template <class Net, class T = float, class Backend = Cpu>
using default_loss_t = std::conditional_t<
    std::is_same_v<typename detail::at_t<Net::layer_count - 1, typename Net::layers>::layer, LogSoftmax>,
    NllLoss<T, Backend>, CrossEntropyLoss<T, Backend>>;

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

} // namespace detail
} // namespace cohort

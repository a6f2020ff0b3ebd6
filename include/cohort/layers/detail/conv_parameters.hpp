#pragma once
/// \file
/// The parameters every convolution layer has (Conv2d, grouped, depthwise, transposed): a
/// "weight" and, with Bias, a "bias" of one value per output channel, both drawn from torch's
/// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with the weight's fan_in; and where the bias sits.

#include <array>
#include <cstddef>

#include "cohort/layers/layer.hpp"

namespace cohort::detail {

/// {weight} or {weight, bias}: the bias has `out_channels` values and the weight's fan_in.
template <bool Bias>
constexpr auto weight_and_bias(const TensorSpec& weight, std::size_t out_channels) {
  if constexpr (Bias)
    return std::array<TensorSpec, 2>{{weight, {"bias", 1, {out_channels}, Init::uniform_fan_in, weight.fan_in}}};
  else
    return std::array<TensorSpec, 1>{{weight}};
}

/// The bias (or its gradient) in a parameter (or gradient) slice laid out by weight_and_bias,
/// whose offsets are `offsets`; null without one, which the kernels take as "no bias".
template <bool Bias, class P, std::size_t N>
constexpr P* bias_in(P* slice, const std::array<std::size_t, N>& offsets) {
  if constexpr (Bias)
    return slice + offsets[1];
  else
    return nullptr;
}

} // namespace cohort::detail

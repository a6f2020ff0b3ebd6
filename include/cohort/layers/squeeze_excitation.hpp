#pragma once
/// \file
/// Squeeze-and-excitation (Hu et al.), as torchvision.ops.SqueezeExcitation: global average
/// pooling, a 1x1 convolution from C to Squeeze channels, an activation, a 1x1 convolution back to
/// C, a scale activation, the result multiplying the input channel by channel (layers/gated.hpp).
/// Example (compiled: tests/docs/headers.cpp, "layers/squeeze_excitation"):
///
///     using Net = Sequential<Input<32, 14, 14>, Conv2d<32, 32, 3, 1, 1, false>, BatchNorm2d<32>, ReLU,
///                            SqueezeExcitation<32, 8>>;                            // torchvision's defaults
///     using V3 = SqueezeExcitation<32, 8, ReLU, Hardsigmoid>;                     // MobileNetV3's
///
/// Tensors: "gate.1.weight" / "gate.1.bias" (torchvision's fc1) and "gate.3.*" (fc2).

#include <cstddef>

#include "cohort/layers/adaptive_avg_pool2d.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/gated.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/layers/sigmoid.hpp"

namespace cohort {

/// `SqueezeExcitation<Channels, Squeeze, Activation = ReLU, Scale = Sigmoid>`.
template <std::size_t Channels, std::size_t Squeeze, class Activation = ReLU, class Scale = Sigmoid>
using SqueezeExcitation =
    Gated<Branch<AdaptiveAvgPool2d<1>, Conv2d<Channels, Squeeze, 1>, Activation, Conv2d<Squeeze, Channels, 1>, Scale>>;

} // namespace cohort

#pragma once
/// \file
/// The record network of bench/time_to_accuracy.py (issue 36): the shortest time from nothing to
/// 93% on Fashion-MNIST on two CPU cores. It has the layout of the fast-training ResNet-9 (Page's
/// DAWNBench net, airbench's ancestor) at reduced width and depth for 28x28 images: a 3x3 stem,
/// then two stages that each widen, halve the image with a max-pool and add one residual block of
/// two 3x3 convolutions, and a global max-pool before the linear head. Every convolution is
/// followed by BatchNorm and ReLU (conv -> BN -> ReLU -> pool, which cohort's CPU backend fuses).
/// Example (compiled: tests/docs/headers.cpp, "models/fast_resnet"):
///
///     cohort::Network<cohort::models::FastResNet> net(/*seed=*/0); // or a Trainer<FastResNet, Sgd<>>
///
/// The PyTorch twin (same state_dict names) is fast_resnet() in tests/reference/cohort_modules.py.

#include <cstddef>

#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/flatten.hpp"
#include "cohort/layers/linear.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/layers/residual.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort::models {

/// conv3x3 (no bias) -> BatchNorm -> ReLU twice, added to its input (the ReLUs sit inside the
/// body, as in ResNet-9: the sum is not rectified again).
template <std::size_t C>
using FastResidual = Residual<Branch<Conv2d<C, C, 3, 1, 1, false>, BatchNorm2d<C>, ReLU, //
                                     Conv2d<C, C, 3, 1, 1, false>, BatchNorm2d<C>, ReLU>>;

/// The record network for C x S x S images (S divisible by 4) at width W: stem W channels at
/// S x S; stage 1 2W channels at S/2 x S/2; stage 2 4W channels at S/4 x S/4; global max-pool.
template <std::size_t C, std::size_t S, std::size_t W, std::size_t Classes = 10>
using FastResNetOf = Sequential<Input<C, S, S>,                                                   //
                                Conv2d<C, W, 3, 1, 1, false>, BatchNorm2d<W>, ReLU, MaxPool2d<2>, // 0..3
                                Conv2d<W, 2 * W, 3, 1, 1, false>, BatchNorm2d<2 * W>, ReLU,       // 4..6
                                FastResidual<2 * W>, MaxPool2d<2>,                                // 7..8
                                Conv2d<2 * W, 4 * W, 3, 1, 1, false>, BatchNorm2d<4 * W>, ReLU,   // 9..11
                                FastResidual<4 * W>, MaxPool2d<S / 4>,                            // 12..13
                                Flatten, Linear<4 * W, Classes>>;                                 // 14..15

/// The record network for 1x28x28 inputs (Fashion-MNIST) at width 24: 261,298 parameters.
using FastResNet = FastResNetOf<1, 28, 24>;

} // namespace cohort::models

// Compiled mode: its executors come from the kernel library (network/compiled_executor.hpp).
#if defined(COHORT_COMPILED_KERNELS)
#include "cohort/network/compiled_executor.hpp"
COHORT_DETAIL_COMPILED_NETWORK(extern, cohort::models::FastResNet)
#endif

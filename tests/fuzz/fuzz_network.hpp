#pragma once
// The network and optimiser the checkpoint fuzz target loads into, and the seed generator writes.
// Clang 14 cannot compile BatchNorm2d (a float template parameter), so the fuzzed network has
// only convolution, ReLU, flatten and linear layers; Adam gives it two optimiser slots.

#include <cohort/layers/conv2d.hpp>
#include <cohort/layers/flatten.hpp>
#include <cohort/layers/linear.hpp>
#include <cohort/layers/relu.hpp>
#include <cohort/network/parameters.hpp>
#include <cohort/optim/adam.hpp>
#include <cohort/train/checkpoint.hpp>

namespace cohort::fuzz {

using FuzzNet = Sequential<Input<1, 4, 4>, Conv2d<1, 2, 3>, ReLU, Flatten, Linear<8, 3>>;
using FuzzParams = Parameters<FuzzNet, float, Cpu>;

} // namespace cohort::fuzz

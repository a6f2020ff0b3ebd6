#pragma once
/// \file
/// The networks of the seed notebooks, shared by examples, tests and benchmarks.
/// Example (compiled: tests/docs/headers.cpp, "models/seed_models"):
///
///     cohort::Network<cohort::models::ModelA> net;
///
/// Each is the torch.nn.Sequential equivalent of the notebook's model, so state_dict names
/// match a PyTorch Sequential built from the same layers.

#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/dropout.hpp"
#include "cohort/layers/flatten.hpp"
#include "cohort/layers/linear.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/layers/relu.hpp"
#include <type_traits>

#include "cohort/network/sequential.hpp"

namespace cohort::models {

/// Seed 000's ConvNet (trained with Adadelta lr 0.5 and NLL loss).
using ModelA = Sequential<Input<1, 28, 28>,                                       //
                          Conv2d<1, 16, 3>, ReLU, Conv2d<16, 32, 3>, ReLU,        // 0..3
                          MaxPool2d<2>, Dropout2d<0.10f>, Flatten,                // 4..6
                          Linear<4608, 64>, ReLU, Dropout<0.25f>, Linear<64, 10>, // 7..10
                          LogSoftmax>;                                            // 11

/// Seed 001's ConvNet: two [Conv 5x5 pad 2, BatchNorm, ReLU, MaxPool 2] blocks and a linear
/// head (trained with SGD and cross-entropy on raw scores).
using ModelB = Sequential<Input<1, 28, 28>,                                                //
                          Conv2d<1, 16, 5, 1, 2>, BatchNorm2d<16>, ReLU, MaxPool2d<2, 2>,  // 0..3
                          Conv2d<16, 32, 5, 1, 2>, BatchNorm2d<32>, ReLU, MaxPool2d<2, 2>, // 4..7
                          Flatten, Linear<1568, 10>>;                                      // 8..9

/// Seed 003's small model (Adam, cross-entropy).
using ModelC = Sequential<Input<1, 28, 28>,                                 //
                          Conv2d<1, 32, 3, 1, 1>, ReLU, MaxPool2d<2>,       // 0..2
                          Flatten, Linear<6272, 64>, ReLU, Linear<64, 10>>; // 3..6

/// Seed 003's large model (Adam, cross-entropy).
using ModelD = Sequential<Input<1, 28, 28>,                              //
                          Conv2d<1, 128, 3, 1, 1>, ReLU, MaxPool2d<2>,   // 0..2
                          Conv2d<128, 256, 3, 1, 1>, ReLU, MaxPool2d<2>, // 3..5
                          Conv2d<256, 512, 3, 1, 1>, ReLU, MaxPool2d<2>, // 6..8
                          Flatten, Linear<4608, 512>, ReLU,              // 9..11
                          Linear<512, 512>, ReLU, Linear<512, 10>>;      // 12..15

// (Their parameter counts are static_asserted in tests/models/seed_models.cpp, not here: instantiating
// the networks' types costs every unit that includes this header, issue 32.)

} // namespace cohort::models

// Compiled mode: their executors come from the kernel library (network/compiled_executor.hpp).
#if defined(COHORT_COMPILED_KERNELS)
#include "cohort/network/compiled_executor.hpp"
COHORT_DETAIL_COMPILED_NETWORK(extern, cohort::models::ModelA)
COHORT_DETAIL_COMPILED_NETWORK(extern, cohort::models::ModelB)
COHORT_DETAIL_COMPILED_NETWORK(extern, cohort::models::ModelC)
COHORT_DETAIL_COMPILED_NETWORK(extern, cohort::models::ModelD)
#endif

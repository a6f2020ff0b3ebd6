#pragma once
/// \file
/// Residual networks for small images (1x28x28 Fashion-MNIST, 3x32x32 CIFAR), He et al.'s CIFAR family: a 3x3 stem,
/// three stages of basic blocks at 16, 32 and 64 channels (the second and third halve the image
/// with a strided block and a projection shortcut), global average pooling and a linear head.
/// Example (compiled: tests/docs/headers.cpp, "models/resnet"):
///
///     cohort::Trainer<cohort::models::ResNet20, cohort::Sgd<>> trainer(sgd, options);
///
/// `BasicBlock` and `Bottleneck` are the blocks of torchvision's ResNets, written with
/// layers/residual.hpp; every convolution before a BatchNorm has no bias (torch's bias=False).
/// The PyTorch twins (same state_dict names) are in tests/reference/cohort_modules.py.

#include <cstddef>
#include <type_traits>

#include "cohort/layers/adaptive_avg_pool2d.hpp"
#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/flatten.hpp"
#include "cohort/layers/linear.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/layers/residual.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort::models {

/// The shortcut of a block from In to Out channels at Stride: the identity when nothing changes,
/// else a projection (1x1 convolution at the stride, then BatchNorm).
template <std::size_t In, std::size_t Out, std::size_t Stride>
using ShortcutOf = std::conditional_t<In == Out && Stride == 1, Identity,
                                      Branch<Conv2d<In, Out, 1, Stride, 0, false>, BatchNorm2d<Out>>>;

/// torchvision's BasicBlock without its final ReLU (put a ReLU after the block: it is applied
/// inside the sum): conv3x3(stride) BN ReLU conv3x3 BN, plus the shortcut.
template <std::size_t In, std::size_t Out, std::size_t Stride = 1>
using BasicBlock = Residual<Branch<Conv2d<In, Out, 3, Stride, 1, false>, BatchNorm2d<Out>, ReLU,
                                   Conv2d<Out, Out, 3, 1, 1, false>, BatchNorm2d<Out>>,
                            ShortcutOf<In, Out, Stride>>;

/// torchvision's Bottleneck (v1.5: the stride on the 3x3) without its final ReLU: conv1x1 BN ReLU
/// conv3x3(stride) BN ReLU conv1x1 (Width -> 4 * Width) BN, plus the shortcut.
template <std::size_t In, std::size_t Width, std::size_t Stride = 1>
using Bottleneck = Residual<
    Branch<Conv2d<In, Width, 1, 1, 0, false>, BatchNorm2d<Width>, ReLU, Conv2d<Width, Width, 3, Stride, 1, false>,
           BatchNorm2d<Width>, ReLU, Conv2d<Width, 4 * Width, 1, 1, 0, false>, BatchNorm2d<4 * Width>>,
    ShortcutOf<In, 4 * Width, Stride>>;

/// He et al.'s ResNet-20 for C x S x S images (S divisible by 4): 19 convolutions and a linear
/// layer. Stages: S x S x16, S/2 x S/2 x32, S/4 x S/4 x64.
template <std::size_t C, std::size_t S, std::size_t Classes = 10>
using ResNet20Of = Sequential<Input<C, S, S>,                                                                  //
                              Conv2d<C, 16, 3, 1, 1, false>, BatchNorm2d<16>, ReLU,                            // 0..2
                              BasicBlock<16, 16>, ReLU, BasicBlock<16, 16>, ReLU, BasicBlock<16, 16>, ReLU,    // 3..8
                              BasicBlock<16, 32, 2>, ReLU, BasicBlock<32, 32>, ReLU, BasicBlock<32, 32>, ReLU, // 9..14
                              BasicBlock<32, 64, 2>, ReLU, BasicBlock<64, 64>, ReLU, BasicBlock<64, 64>, ReLU, // 15..20
                              AdaptiveAvgPool2d<1>, Flatten, Linear<64, Classes>>;                             // 21..23

/// ResNet-20 for 1x28x28 inputs (Fashion-MNIST): 272,186 parameters.
using ResNet20 = ResNet20Of<1, 28>;

/// The CIFAR-10 ResNet-20 of the paper, for 3x32x32 inputs: 272,474 parameters.
using CifarResNet20 = ResNet20Of<3, 32>;
// (The parameter counts are static_asserted in tests/models/resnet.cpp, not here: instantiating
// the networks' types costs every unit that includes this header, 0.9 s for all models, issue 32.)

} // namespace cohort::models

// Compiled mode: its executors come from the kernel library (network/compiled_executor.hpp).
#if defined(COHORT_COMPILED_KERNELS)
#include "cohort/network/compiled_executor.hpp"
COHORT_DETAIL_COMPILED_NETWORK(extern, cohort::models::ResNet20)
#endif

#pragma once
/// \file
/// U-Nets (Ronneberger et al.) for dense prediction: an encoder that halves the image and doubles
/// the channels Depth times, a decoder that upsamples (bilinear) and concatenates each level's
/// encoder features onto what the level below made of them, and a 1x1 convolution to one score
/// per class and pixel. Written with layers/concat.hpp, one level being the block below.
/// Example (not compiled: a sketch, DoubleConv<A, B> standing for conv-BatchNorm-ReLU twice):
///
///     Concat<Identity, Branch<MaxPool2d<2>, DoubleConv<C, 2C>..., inner level, DoubleConv<6C, 2C>...,
///                             Upsample<2, UpsampleMode::bilinear>>>          // C + 2C channels out
///
/// Example (compiled: tests/docs/headers.cpp, "models/unet"):
///
///     using Net = cohort::models::UNet<cohort::Shape<1, 28, 28>, 11>;   // -> Shape<11, 28, 28>
///     using Deeper = cohort::models::UNet<cohort::Shape<3, 64, 64>, 2, 32, 4>;
///
/// Every 3x3 convolution is followed by BatchNorm and ReLU and has no bias (torch's bias=False),
/// the decoder's as the encoder's; H and W must be divisible by 2^Depth. The PyTorch twin with the
/// same state_dict names is `unet(...)` in tests/reference/cohort_modules.py.

#include <cstddef>

#include "cohort/core/shape.hpp"
#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/concat.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/layers/upsample.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort::models {

namespace detail {

/// A level of C input channels, Depth levels deep (Depth >= 1): C + 2C channels out, same image.
template <std::size_t C, std::size_t Depth>
struct unet_level {
  using inner = typename unet_level<2 * C, Depth - 1>::type;
  using type = Concat<Identity, Branch<MaxPool2d<2>,                                                   //
                                       Conv2d<C, 2 * C, 3, 1, 1, false>, BatchNorm2d<2 * C>, ReLU,     // encoder
                                       Conv2d<2 * C, 2 * C, 3, 1, 1, false>, BatchNorm2d<2 * C>, ReLU, //
                                       inner,                                                          // 6C channels
                                       Conv2d<6 * C, 2 * C, 3, 1, 1, false>, BatchNorm2d<2 * C>, ReLU, // decoder
                                       Conv2d<2 * C, 2 * C, 3, 1, 1, false>, BatchNorm2d<2 * C>, ReLU, //
                                       Upsample<2, UpsampleMode::bilinear>>>;
};
template <std::size_t C>
struct unet_level<C, 1> {
  using type = Concat<Identity, Branch<MaxPool2d<2>,                                                   //
                                       Conv2d<C, 2 * C, 3, 1, 1, false>, BatchNorm2d<2 * C>, ReLU,     // bottom
                                       Conv2d<2 * C, 2 * C, 3, 1, 1, false>, BatchNorm2d<2 * C>, ReLU, //
                                       Upsample<2, UpsampleMode::bilinear>>>;
};

template <class In, std::size_t Classes, std::size_t Width, std::size_t Depth>
struct unet {
  static_assert(ImageShape<In>, "models::UNet: the input must be an image shape, Shape<C, H, W>");
  static_assert(Classes >= 1 && Width >= 1 && Depth >= 1, "models::UNet: Classes, Width and Depth must be positive");
  static constexpr std::size_t c = In::extents[0], h = In::extents[1], w = In::extents[2];
  static_assert(h % (std::size_t(1) << Depth) == 0 && w % (std::size_t(1) << Depth) == 0,
                "models::UNet: the image's height and width must be divisible by 2^Depth (each level halves "
                "them and the decoder doubles them back); pad or crop the images, or use fewer levels");
  using type = Sequential<Input<c, h, w>,                                                     //
                          Conv2d<c, Width, 3, 1, 1, false>, BatchNorm2d<Width>, ReLU,         // 0..2
                          Conv2d<Width, Width, 3, 1, 1, false>, BatchNorm2d<Width>, ReLU,     // 3..5
                          typename unet_level<Width, Depth>::type,                            // 6: 3 * Width channels
                          Conv2d<3 * Width, Width, 3, 1, 1, false>, BatchNorm2d<Width>, ReLU, // 7..9
                          Conv2d<Width, Width, 3, 1, 1, false>, BatchNorm2d<Width>, ReLU,     // 10..12
                          Conv2d<Width, Classes, 1>>;                                         // 13: scores
};

} // namespace detail

/// One U-Net level of C input channels and Depth levels (a layer: C + 2C channels out).
template <std::size_t C, std::size_t Depth>
using UNetLevel = typename detail::unet_level<C, Depth>::type;

/// `UNet<Shape<C, H, W>, Classes, Width = 16, Depth = 2>`: (C, H, W) images to (Classes, H, W)
/// scores; Width channels at full resolution, Width * 2^Depth at the bottom.
template <class In, std::size_t Classes, std::size_t Width = 16, std::size_t Depth = 2>
using UNet = typename detail::unet<In, Classes, Width, Depth>::type;

} // namespace cohort::models

#pragma once
/// \file
/// U-Nets (Ronneberger et al.) for dense prediction: an encoder that halves the image and doubles
/// the channels Depth times, a decoder that upsamples (bilinear, or a transposed convolution) and
/// concatenates each level's encoder features onto what the level below made of them, and a 1x1
/// convolution to one score per class and pixel. Written with layers/concat.hpp, one level being
/// the block below.
/// Example (not compiled: a sketch, DoubleConv<A, B> standing for conv-BatchNorm-ReLU twice):
///
///     Concat<Identity, Branch<MaxPool2d<2>, DoubleConv<C, 2C>..., inner level, DoubleConv<6C, 2C>...,
///                             Upsample<2, UpsampleMode::bilinear>>>          // C + 2C channels out
///
/// Example (compiled: tests/docs/headers.cpp, "models/unet"):
///
///     using Net = cohort::models::UNet<cohort::Shape<1, 28, 28>, 11>;   // -> Shape<11, 28, 28>
///     using Deeper = cohort::models::UNet<cohort::Shape<3, 64, 64>, 2, 32, 4>;
///     using Paper = cohort::models::UNet<cohort::Shape<1, 64, 64>, 2, 16, 3,             //
///                                        cohort::models::UNetUpsampling::transposed,   //
///                                        cohort::models::UNetNorm::group>;
///
/// Every 3x3 convolution is followed by a normalisation and ReLU and has no bias (torch's
/// bias=False), the decoder's as the encoder's; H and W must be divisible by 2^Depth. Two choices
/// the literature argues over are the last template arguments (`Paper` above takes both):
/// - `UNetUpsampling::bilinear` (default): Upsample<2, bilinear>, no parameters;
///   `transposed`: ConvTranspose2d<2C, 2C, 2, 2> (with bias), the original paper's up-convolution,
///   with the same channel counts, so both variants have the same shape everywhere.
/// - `UNetNorm::batch` (default): BatchNorm2d; `group`: GroupNorm<gcd(C, 8), C>, statistics per
///   sample, for the small batches segmentation often trains with (8 groups whenever C allows).
///
/// The PyTorch twin with the same state_dict names is `unet(...)` in tests/reference/cohort_modules.py.

#include <cstddef>
#include <numeric>

#include "cohort/core/shape.hpp"
#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/concat.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/conv_transpose2d.hpp"
#include "cohort/layers/group_norm.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/layers/relu.hpp"
#include "cohort/layers/upsample.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort::models {

/// How a U-Net's decoder doubles the image: bilinear upsampling or a learned 2x2 stride-2
/// transposed convolution.
enum class UNetUpsampling { bilinear, transposed };
/// The normalisation after each of a U-Net's 3x3 convolutions.
enum class UNetNorm { batch, group };

namespace detail {

template <std::size_t C, UNetNorm Norm>
struct unet_norm {
  using type = BatchNorm2d<C>;
};
template <std::size_t C>
struct unet_norm<C, UNetNorm::group> {
  using type = GroupNorm<std::gcd(C, std::size_t(8)), C>;
};
template <std::size_t C, UNetUpsampling Up>
struct unet_up {
  using type = Upsample<2, UpsampleMode::bilinear>;
};
template <std::size_t C>
struct unet_up<C, UNetUpsampling::transposed> {
  using type = ConvTranspose2d<C, C, 2, 2>;
};

/// A level of C input channels, Depth levels deep (Depth >= 1): C + 2C channels out, same image.
template <std::size_t C, std::size_t Depth, UNetUpsampling Up, UNetNorm Norm>
struct unet_level {
  using inner = typename unet_level<2 * C, Depth - 1, Up, Norm>::type;
  using norm = typename unet_norm<2 * C, Norm>::type;
  using type = Concat<Identity, Branch<MaxPool2d<2>,                                     //
                                       Conv2d<C, 2 * C, 3, 1, 1, false>, norm, ReLU,     // encoder
                                       Conv2d<2 * C, 2 * C, 3, 1, 1, false>, norm, ReLU, //
                                       inner,                                            // 6C channels
                                       Conv2d<6 * C, 2 * C, 3, 1, 1, false>, norm, ReLU, // decoder
                                       Conv2d<2 * C, 2 * C, 3, 1, 1, false>, norm, ReLU, //
                                       typename unet_up<2 * C, Up>::type>>;
};
template <std::size_t C, UNetUpsampling Up, UNetNorm Norm>
struct unet_level<C, 1, Up, Norm> {
  using norm = typename unet_norm<2 * C, Norm>::type;
  using type = Concat<Identity, Branch<MaxPool2d<2>,                                     //
                                       Conv2d<C, 2 * C, 3, 1, 1, false>, norm, ReLU,     // bottom
                                       Conv2d<2 * C, 2 * C, 3, 1, 1, false>, norm, ReLU, //
                                       typename unet_up<2 * C, Up>::type>>;
};

template <class In, std::size_t Classes, std::size_t Width, std::size_t Depth, UNetUpsampling Up, UNetNorm Norm>
struct unet {
  static_assert(ImageShape<In>, "models::UNet: the input must be an image shape, Shape<C, H, W>");
  static_assert(Classes >= 1 && Width >= 1 && Depth >= 1, "models::UNet: Classes, Width and Depth must be positive");
  static constexpr std::size_t c = In::extents[0], h = In::extents[1], w = In::extents[2];
  static_assert(h % (std::size_t(1) << Depth) == 0 && w % (std::size_t(1) << Depth) == 0,
                "models::UNet: the image's height and width must be divisible by 2^Depth (each level halves "
                "them and the decoder doubles them back); pad or crop the images, or use fewer levels");
  using norm = typename unet_norm<Width, Norm>::type;
  using type = Sequential<Input<c, h, w>,                                       //
                          Conv2d<c, Width, 3, 1, 1, false>, norm, ReLU,         // 0..2
                          Conv2d<Width, Width, 3, 1, 1, false>, norm, ReLU,     // 3..5
                          typename unet_level<Width, Depth, Up, Norm>::type,    // 6: 3 * Width channels
                          Conv2d<3 * Width, Width, 3, 1, 1, false>, norm, ReLU, // 7..9
                          Conv2d<Width, Width, 3, 1, 1, false>, norm, ReLU,     // 10..12
                          Conv2d<Width, Classes, 1>>;                           // 13: scores
};

} // namespace detail

/// One U-Net level of C input channels and Depth levels (a layer: C + 2C channels out).
template <std::size_t C, std::size_t Depth, UNetUpsampling Up = UNetUpsampling::bilinear,
          UNetNorm Norm = UNetNorm::batch>
using UNetLevel = typename detail::unet_level<C, Depth, Up, Norm>::type;

/// `UNet<Shape<C, H, W>, Classes, Width = 16, Depth = 2, Up = bilinear, Norm = batch>`: (C, H, W)
/// images to (Classes, H, W) scores; Width channels at full resolution, Width * 2^Depth at the
/// bottom.
template <class In, std::size_t Classes, std::size_t Width = 16, std::size_t Depth = 2,
          UNetUpsampling Up = UNetUpsampling::bilinear, UNetNorm Norm = UNetNorm::batch>
using UNet = typename detail::unet<In, Classes, Width, Depth, Up, Norm>::type;

} // namespace cohort::models

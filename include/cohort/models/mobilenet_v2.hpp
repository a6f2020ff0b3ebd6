#pragma once
/// \file
/// MobileNetV2 (Sandler et al.): inverted residual blocks (1x1 expansion, 3x3 depthwise, 1x1
/// linear projection, the shortcut only where the shapes match), ReLU6, a width multiplier.
/// torchvision's network for 3x224x224 images, with the name map between its state_dict names and
/// cohort's, and a small variant for 1x28x28 / 3x32x32 images.
/// Example (compiled: tests/docs/headers.cpp, "models/mobilenet_v2"):
///
///     // torchvision.models.mobilenet_v2().state_dict(), saved with safetensors, loaded strictly:
///     cohort::Network<cohort::models::MobileNetV2<>> net;
///     cohort::load_weights("mobilenet_v2.safetensors", net.parameters(),
///                          {.rename = cohort::models::mobilenet_v2_names<cohort::models::MobileNetV2<>>()});
///     // Fashion-MNIST: train_mnist --model mobilenet
///     cohort::Trainer<cohort::models::MobileNetV2Small<>, cohort::Sgd<>> trainer(sgd, options);
///
/// The networks are generated from a table of stages as torchvision's is (expansion t, channels c,
/// repeats n, stride s), so a block without a shortcut is its eight layers in the Sequential and a
/// block with one is a single `Residual` layer; mobilenet_v2_names walks the same table.

#include <algorithm>
#include <array>
#include <cstddef>
#include <ratio>
#include <string>
#include <type_traits>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/detail/type_list.hpp"
#include "cohort/layers/adaptive_avg_pool2d.hpp"
#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/conv2d.hpp"
#include "cohort/layers/depthwise_conv2d.hpp"
#include "cohort/layers/dropout.hpp"
#include "cohort/layers/flatten.hpp"
#include "cohort/layers/linear.hpp"
#include "cohort/layers/relu6.hpp"
#include "cohort/layers/residual.hpp"
#include "cohort/network/sequential.hpp"
#include "cohort/train/weight_names.hpp" // RenameRule: a plain struct, no dependency upwards

namespace cohort::models {

/// One row of torchvision's `inverted_residual_setting`: expansion t, output channels c (before
/// the width multiplier), repeats n, stride s of the first repeat.
struct InvertedResidualStage {
  std::size_t expansion, channels, repeats, stride;
};

namespace detail {
/// The lists' elements, in order, as one list (a block's layers spliced into the network's).
template <class... Lists>
struct type_list_concat {
  using type = cohort::detail::type_list<>;
};
template <class... Ts>
struct type_list_concat<cohort::detail::type_list<Ts...>> {
  using type = cohort::detail::type_list<Ts...>;
};
template <class... Ts, class... Us, class... Rest>
struct type_list_concat<cohort::detail::type_list<Ts...>, cohort::detail::type_list<Us...>, Rest...> {
  using type = typename type_list_concat<cohort::detail::type_list<Ts..., Us...>, Rest...>::type;
};
} // namespace detail

/// torchvision's `_make_divisible(v, 8)`: the nearest multiple of `divisor`, at least `divisor`,
/// never more than 10% below v.
constexpr std::size_t make_divisible(double v, std::size_t divisor = 8) {
  std::size_t n = std::size_t(v + double(divisor) / 2) / divisor * divisor;
  if (n < divisor) n = divisor;
  if (double(n) < 0.9 * v) n += divisor;
  return n;
}

/// The layers of one inverted residual block as a list: [1x1 In -> In*T, BatchNorm, ReLU6,] 3x3
/// depthwise at Stride, BatchNorm, ReLU6, 1x1 -> Out, BatchNorm (the projection is linear: no
/// activation). Expansion 1 has no expanding convolution (torchvision's first block).
template <std::size_t In, std::size_t Out, std::size_t Stride, std::size_t Expansion>
struct inverted_residual_layers {
  static constexpr std::size_t hidden = In * Expansion;
  using depthwise_and_projection =
      cohort::detail::type_list<DepthwiseConv2d<hidden, 3, Stride, 1, false>, BatchNorm2d<hidden>, ReLU6,
                                Conv2d<hidden, Out, 1, 1, 0, false>, BatchNorm2d<Out>>;
  using type =
      std::conditional_t<Expansion == 1, depthwise_and_projection,
                         typename detail::type_list_concat<
                             cohort::detail::type_list<Conv2d<In, hidden, 1, 1, 0, false>, BatchNorm2d<hidden>, ReLU6>,
                             depthwise_and_projection>::type>;
};

template <class List>
struct branch_of;
template <class... Ls>
struct branch_of<cohort::detail::type_list<Ls...>> {
  using type = Residual<Branch<Ls...>>;
};

/// torchvision's InvertedResidual(In, Out, Stride, Expansion) as a list of layers of a Sequential:
/// one Residual when Stride is 1 and In == Out (torchvision's use_res_connect), else the block's
/// layers themselves.
template <std::size_t In, std::size_t Out, std::size_t Stride, std::size_t Expansion>
using InvertedResidualLayers =
    std::conditional_t<Stride == 1 && In == Out,
                       cohort::detail::type_list<typename branch_of<
                           typename inverted_residual_layers<In, Out, Stride, Expansion>::type>::type>,
                       typename inverted_residual_layers<In, Out, Stride, Expansion>::type>;

/// The inverted residual block with a shortcut (Stride 1, In == Out channels): one layer.
template <std::size_t Channels, std::size_t Expansion>
using InvertedResidual =
    typename branch_of<typename inverted_residual_layers<Channels, Channels, 1, Expansion>::type>::type;

/// Conv (no bias) + BatchNorm + ReLU6, torchvision's Conv2dNormActivation(activation_layer=ReLU6).
template <std::size_t In, std::size_t Out, std::size_t Kernel, std::size_t Stride>
using ConvBNReLU6 =
    cohort::detail::type_list<Conv2d<In, Out, Kernel, Stride, (Kernel - 1) / 2, false>, BatchNorm2d<Out>, ReLU6>;

/// A MobileNetV2 family member: image channels and size, the stem's stride, the stage table, the
/// width multiplier, the last convolution's width, the classifier's dropout and the classes. Any struct with these
/// members describes one (see the two below).
template <class C>
concept MobileNetV2Config = requires {
  { C::image_channels } -> std::convertible_to<std::size_t>;
  { C::image_size } -> std::convertible_to<std::size_t>;
  { C::stem_stride } -> std::convertible_to<std::size_t>;
  { C::stem_channels } -> std::convertible_to<std::size_t>;
  { C::last_channels } -> std::convertible_to<std::size_t>;
  { C::classes } -> std::convertible_to<std::size_t>;
  { C::width } -> std::convertible_to<double>;
  { C::dropout } -> std::convertible_to<float>;
  C::stages.size();
};

namespace detail {

/// The layers of the stages from (Stage, Repeat) on, the block's input having In channels.
template <class Cfg, std::size_t Stage, std::size_t Repeat, std::size_t In>
struct stage_layers {
  static constexpr InvertedResidualStage row = Cfg::stages[Stage];
  static constexpr std::size_t out = make_divisible(double(row.channels) * Cfg::width);
  using block = InvertedResidualLayers<In, out, Repeat == 0 ? row.stride : 1, row.expansion>;
  static constexpr bool stage_ends = Repeat + 1 == row.repeats;
  static constexpr bool last = stage_ends && Stage + 1 == Cfg::stages.size();
  template <bool Last, class = void>
  struct rest {
    using type = typename stage_layers<Cfg, stage_ends ? Stage + 1 : Stage, stage_ends ? 0 : Repeat + 1, out>::type;
  };
  template <class V>
  struct rest<true, V> {
    using type = cohort::detail::type_list<>;
  };
  using type = typename detail::type_list_concat<block, typename rest<last>::type>::type;
  /// The channels the last stage ends with.
  static constexpr std::size_t final_channels = [] {
    if constexpr (last)
      return out;
    else
      return stage_layers < Cfg, stage_ends ? Stage + 1 : Stage, stage_ends ? 0 : Repeat + 1, out > ::final_channels;
  }();
};

template <class Input, class List>
struct sequential_of;
template <class Input, class... Ls>
struct sequential_of<Input, cohort::detail::type_list<Ls...>> {
  using type = Sequential<Input, Ls...>;
};

template <class Cfg>
struct mobilenet_v2 {
  static_assert(MobileNetV2Config<Cfg>, "MobileNetV2Of: Cfg lacks a member of MobileNetV2Config");
  using stages = stage_layers<Cfg, 0, 0, Cfg::stem_channels>;
  using layers =
      typename detail::type_list_concat<ConvBNReLU6<Cfg::image_channels, Cfg::stem_channels, 3, Cfg::stem_stride>,
                                        typename stages::type,
                                        ConvBNReLU6<stages::final_channels, Cfg::last_channels, 1, 1>,
                                        cohort::detail::type_list<AdaptiveAvgPool2d<1>, Flatten, Dropout<Cfg::dropout>,
                                                                  Linear<Cfg::last_channels, Cfg::classes>>>::type;
  using type = typename sequential_of<Input<Cfg::image_channels, Cfg::image_size, Cfg::image_size>, layers>::type;
};

template <class Width>
constexpr double ratio_value() {
  static_assert(Width::num > 0, "MobileNetV2: the width multiplier (a std::ratio) must be positive");
  return double(Width::num) / double(Width::den);
}

} // namespace detail

/// The network a MobileNetV2Config describes: stem (3x3 conv, BatchNorm, ReLU6), the stages'
/// inverted residual blocks, a 1x1 conv + BatchNorm + ReLU6 to last_channels, global average
/// pooling, flatten, Dropout(Cfg::dropout), Linear (torchvision's `features` then `classifier`).
template <class Cfg>
using MobileNetV2Of = typename detail::mobilenet_v2<Cfg>::type;

/// torchvision.models.mobilenet_v2(num_classes=Classes, width_mult=Width) for 3x224x224 images.
template <std::size_t Classes = 1000, class Width = std::ratio<1>>
struct TorchvisionMobileNetV2Config {
  static constexpr std::size_t image_channels = 3, image_size = 224, stem_stride = 2, classes = Classes;
  static constexpr double width = detail::ratio_value<Width>();
  static constexpr float dropout = 0.2f;
  static constexpr std::size_t stem_channels = make_divisible(32 * width);
  static constexpr std::size_t last_channels = make_divisible(1280 * std::max(1.0, width));
  static constexpr std::array<InvertedResidualStage, 7> stages{
      {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}}};
};

/// torchvision's MobileNetV2 (3,504,872 parameters at 1000 classes and width 1).
template <std::size_t Classes = 1000, class Width = std::ratio<1>>
using MobileNetV2 = MobileNetV2Of<TorchvisionMobileNetV2Config<Classes, Width>>;

/// The small variant for C x S x S images (S = 28 or 32): the stem at stride 1, torchvision's first
/// five stages (16, 24, 32, 64, 96 channels; the three halvings take 28 to 4), three repeats at
/// most, a 1x1 convolution to 512. Built for Fashion-MNIST / CIFAR on a CPU: about 17 M
/// multiply-adds per 28x28 image.
template <std::size_t C = 1, std::size_t S = 28, std::size_t Classes = 10, class Width = std::ratio<1>>
struct SmallMobileNetV2Config {
  static constexpr std::size_t image_channels = C, image_size = S, stem_stride = 1, classes = Classes;
  static constexpr double width = detail::ratio_value<Width>();
  static constexpr float dropout = 0.2f;
  static constexpr std::size_t stem_channels = make_divisible(32 * width);
  static constexpr std::size_t last_channels = make_divisible(512 * std::max(1.0, width));
  static constexpr std::array<InvertedResidualStage, 5> stages{
      {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 3, 2}, {6, 96, 2, 1}}};
};

/// MobileNetV2-small for 1x28x28 (Fashion-MNIST) by default; `MobileNetV2Small<3, 32>` for CIFAR.
template <std::size_t C = 1, std::size_t S = 28, std::size_t Classes = 10, class Width = std::ratio<1>>
using MobileNetV2Small = MobileNetV2Of<SmallMobileNetV2Config<C, S, Classes, Width>>;

namespace detail {
/// The "weight" of layer `layer` of Net (or of its body layer `body`, npos: the layer's own): its
/// rank and dims, rank 0 when it has none.
template <class Net>
TensorSpec weight_of(std::size_t layer, std::size_t body = std::size_t(-1)) {
  const std::string name =
      body == std::size_t(-1) ? std::string("weight") : cohort::detail::concat("body.", body, ".weight");
  for (const LayoutEntry& e : Net::layout.entries)
    if (e.layer == layer && e.kind == TensorKind::parameter && e.spec.name == name) return e.spec;
  return {};
}
constexpr bool is_depthwise(const TensorSpec& w) { return w.rank == 4 && w.dims[1] == 1 && w.dims[2] == 3; }
} // namespace detail

/// Rules from torchvision's state_dict names to Net's (load_weights' LoadOptions::rename; their
/// inverse saves under torchvision's names), for any MobileNetV2Of<Cfg>: "features.0.0." -> "0.",
/// "features.2.conv.1.0." -> "6.", "features.3.conv.0.0." -> "11.body.0.", "classifier.1." -> the
/// Linear. Read from the network's layout: a Residual is one of torchvision's blocks, a depthwise
/// convolution (C, 1, 3, 3) marks the others. `head = false` leaves the classifier out (a
/// fine-tune's start: the file's classifier is then reported unexpected, the new head missing).
template <NetworkDescription Net>
std::vector<RenameRule> mobilenet_v2_names(bool head = true) {
  using cohort::detail::concat;
  // torchvision's names of a block's convolutions and BatchNorms in order, and the positions of
  // those layers among the block's (the ReLU6s between them have no tensors).
  static const std::vector<std::string> expanded_names{"conv.0.0.", "conv.0.1.", "conv.1.0.",
                                                       "conv.1.1.", "conv.2.",   "conv.3."};
  static const std::vector<std::string> plain_names{"conv.0.0.", "conv.0.1.", "conv.1.", "conv.2."};
  static const std::vector<std::size_t> expanded_layers{0, 1, 3, 4, 6, 7}, plain_layers{0, 1, 3, 4};

  std::vector<RenameRule> out{RenameRule::prefix("features.0.0.", "0."), RenameRule::prefix("features.0.1.", "1.")};
  std::size_t position = 3, feature = 1;
  while (position < Net::layer_count) {
    const TensorSpec own = detail::weight_of<Net>(position);
    const TensorSpec body = detail::weight_of<Net>(position, 0);
    if (body.rank == 4) { // a block with its shortcut
      const bool plain = detail::is_depthwise(body);
      const auto& names = plain ? plain_names : expanded_names;
      const auto& layers = plain ? plain_layers : expanded_layers;
      for (std::size_t k = 0; k < names.size(); ++k)
        out.push_back(RenameRule::prefix(concat("features.", feature, ".", names[k]),
                                         concat(position, ".body.", layers[k], ".")));
      ++position;
    } else if (own.rank == 4) {
      const bool plain = detail::is_depthwise(own);
      const bool expanded = !plain && detail::is_depthwise(detail::weight_of<Net>(position + 3));
      if (!plain && !expanded) { // the last 1x1 convolution, BatchNorm, ReLU6
        out.push_back(RenameRule::prefix(concat("features.", feature, ".0."), concat(position, ".")));
        out.push_back(RenameRule::prefix(concat("features.", feature, ".1."), concat(position + 1, ".")));
        position += 3;
        continue;
      }
      const auto& names = plain ? plain_names : expanded_names;
      const auto& layers = plain ? plain_layers : expanded_layers;
      for (std::size_t k = 0; k < names.size(); ++k)
        out.push_back(
            RenameRule::prefix(concat("features.", feature, ".", names[k]), concat(position + layers[k], ".")));
      position += layers.back() + 1;
    } else {
      if (head && own.rank == 2) out.push_back(RenameRule::prefix("classifier.1.", concat(position, ".")));
      ++position;
      continue;
    }
    ++feature;
  }
  return out;
}

} // namespace cohort::models

// Compiled mode: MobileNetV2-small's executors come from the kernel library (network/compiled_executor.hpp).
#if defined(COHORT_COMPILED_KERNELS)
#include "cohort/network/compiled_executor.hpp"
COHORT_DETAIL_COMPILED_NETWORK(extern, cohort::models::MobileNetV2Small<>)
#endif

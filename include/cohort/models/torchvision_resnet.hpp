#pragma once
/// \file
/// torchvision's ImageNet ResNets for 3x224x224 images (ResNet-18 and ResNet-34: a 7x7/2 stem,
/// a 3x3/2 max-pool with padding 1, four stages of basic blocks at 64, 128, 256 and 512
/// channels, global average pooling, a linear head), and the name map between torchvision's
/// state_dict names and cohort's.
/// Example (compiled: tests/docs/headers.cpp, "models/torchvision_resnet"):
///
///     // torchvision.models.resnet18().state_dict(), saved with safetensors, loaded strictly:
///     cohort::Network<cohort::models::ResNet18<>> net;
///     cohort::load_weights("resnet18.safetensors", net.parameters(),
///                          {.rename = cohort::models::torchvision_names<cohort::models::ResNet18<>>()});
///     // and back under torchvision's names:
///     cohort::save_weights("out.safetensors", net.parameters(),
///                          cohort::inverted(cohort::models::torchvision_names<cohort::models::ResNet18<>>()));
///
/// cohort's names are positional ("4.body.0.weight"); torchvision's follow its attributes
/// ("layer1.0.conv1.weight"). torchvision_names<Net>() derives the map from the network's own
/// layout, so any torchvision-style ResNet (basic or bottleneck blocks) gets one.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/layers/max_pool2d.hpp"
#include "cohort/models/resnet.hpp"
#include "cohort/network/sequential.hpp"
#include "cohort/train/weight_names.hpp" // RenameRule: a plain struct, no dependency upwards

namespace cohort::models {

/// torchvision's stem: conv 7x7/2 (no bias), BatchNorm, ReLU, max-pool 3x3/2 padding 1.
#define COHORT_TORCHVISION_STEM Conv2d<3, 64, 7, 2, 3, false>, BatchNorm2d<64>, ReLU, MaxPool2d<3, 2, 1>

/// torchvision.models.resnet18(num_classes=Classes): 11,689,512 parameters at 1000 classes.
template <std::size_t Classes = 1000>
using ResNet18 = Sequential<Input<3, 224, 224>, COHORT_TORCHVISION_STEM,               // 0..3
                            BasicBlock<64, 64>, ReLU, BasicBlock<64, 64>, ReLU,        // layer1
                            BasicBlock<64, 128, 2>, ReLU, BasicBlock<128, 128>, ReLU,  // layer2
                            BasicBlock<128, 256, 2>, ReLU, BasicBlock<256, 256>, ReLU, // layer3
                            BasicBlock<256, 512, 2>, ReLU, BasicBlock<512, 512>, ReLU, // layer4
                            AdaptiveAvgPool2d<1>, Flatten, Linear<512, Classes>>;      // 20..22

/// torchvision.models.resnet34(num_classes=Classes): 21,797,672 parameters at 1000 classes.
template <std::size_t Classes = 1000>
using ResNet34 =
    Sequential<Input<3, 224, 224>, COHORT_TORCHVISION_STEM,                                           // 0..3
               BasicBlock<64, 64>, ReLU, BasicBlock<64, 64>, ReLU, BasicBlock<64, 64>, ReLU,          // layer1
               BasicBlock<64, 128, 2>, ReLU, BasicBlock<128, 128>, ReLU, BasicBlock<128, 128>, ReLU,  // layer2
               BasicBlock<128, 128>, ReLU,                                                            //
               BasicBlock<128, 256, 2>, ReLU, BasicBlock<256, 256>, ReLU, BasicBlock<256, 256>, ReLU, // layer3
               BasicBlock<256, 256>, ReLU, BasicBlock<256, 256>, ReLU, BasicBlock<256, 256>, ReLU,    //
               BasicBlock<256, 512, 2>, ReLU, BasicBlock<512, 512>, ReLU, BasicBlock<512, 512>, ReLU, // layer4
               AdaptiveAvgPool2d<1>, Flatten, Linear<512, Classes>>;

#undef COHORT_TORCHVISION_STEM
// (The parameter counts are static_asserted in tests/models/resnet.cpp: issue 32, as resnet.hpp.)

namespace detail {
/// The number after `prefix` in `name` ("body.3.weight", "body." -> 3), or npos.
inline std::size_t index_after(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::string::npos;
  std::size_t v = 0, i = prefix.size();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return std::string::npos;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) v = v * 10 + std::size_t(name[i] - '0');
  return v;
}
} // namespace detail

/// Rules from torchvision's state_dict names to Net's (load_weights' LoadOptions::rename; their
/// inverse saves under torchvision's names). Net is a torchvision-style ResNet: a convolution and
/// a BatchNorm first ("conv1", "bn1"), residual blocks whose body is conv/BatchNorm pairs
/// ("layerS.B.convK", "layerS.B.bnK"; a stage ends where the blocks' width changes) with a
/// projection shortcut ("downsample"), and a Linear last ("fc"). `head = false` leaves "fc" out:
/// loading a 1000-class file into a network with a new head, non-strictly, reports fc.* as
/// unexpected and the new head as missing (a fine-tune's start).
template <NetworkDescription Net>
std::vector<RenameRule> torchvision_names(bool head = true) {
  std::vector<RenameRule> out{RenameRule::prefix("conv1.", "0."), RenameRule::prefix("bn1.", "1.")};
  std::size_t stage = 0, block = 0, width = 0, linear = Net::layer_count;
  for (std::size_t i = 2; i < Net::layer_count; ++i) {
    std::vector<RenameRule> rules;
    std::size_t convs = 0, last_width = 0;
    std::vector<std::size_t> seen; // body layers already mapped (their buffers come later)
    bool residual = false;
    for (const auto& e : Net::layout.entries) {
      if (e.layer != i) continue;
      const std::string_view t = e.spec.name;
      if (t == "weight" && e.spec.rank == 2) linear = i;
      const std::size_t j = detail::index_after(t, "body.");
      if (j != std::string::npos && std::find(seen.begin(), seen.end(), j) == seen.end()) {
        seen.push_back(j); // a new body layer: a convolution, or the BatchNorm after one
        residual = true;
        const bool conv = t == cohort::detail::concat("body.", j, ".weight") && e.spec.rank == 4;
        if (conv) last_width = e.spec.dims[0];
        convs += conv;
        rules.push_back(RenameRule::prefix(cohort::detail::concat(conv ? "conv" : "bn", convs, "."),
                                           cohort::detail::concat(i, ".body.", j, ".")));
      }
      const std::size_t k = detail::index_after(t, "shortcut.");
      if (k != std::string::npos && t.ends_with(".weight"))
        rules.push_back(RenameRule::prefix(cohort::detail::concat("downsample.", k, "."),
                                           cohort::detail::concat(i, ".shortcut.", k, ".")));
    }
    if (!residual) continue;
    if (last_width != width) {
      ++stage;
      block = 0;
      width = last_width;
    }
    for (auto& r : rules)
      out.push_back(RenameRule::prefix(cohort::detail::concat("layer", stage, ".", block, ".", r.from), r.to));
    ++block;
  }
  if (head && linear < Net::layer_count) out.push_back(RenameRule::prefix("fc.", cohort::detail::concat(linear, ".")));
  return out;
}

} // namespace cohort::models

// Helper of tests/reference/torchvision_mobilenet.py: torchvision's MobileNetV2 in cohort, by
// torchvision's names (models/mobilenet_v2.hpp).
//
//   torchvision_mobilenet logits WEIGHTS X OUT
//       models::MobileNetV2<> loaded strictly from a torchvision state_dict through
//       mobilenet_v2_names; eval-mode logits of X (N x 3 x 224 x 224) written to OUT ("y")
//   torchvision_mobilenet logits-small WEIGHTS X OUT
//       the same with models::MobileNetV2Small<> (X: N x 1 x 28 x 28)
//   torchvision_mobilenet train WEIGHTS X LABELS STEPS OUT
//       MobileNetV2Small<> without dropout (the one random layer: torch's and cohort's streams
//       differ) in double precision (WEIGHTS: an F64 file), STEPS SGD steps (lr 0.01, momentum
//       0.9, weight decay 4e-5, train mode) on the batch; OUT: the weights under torchvision's
//       names, OUT.loss: the losses ("loss")
//   torchvision_mobilenet onnx WEIGHTS OUT
//       models::MobileNetV2Small<> loaded strictly, exported to ONNX (eval mode) at OUT
//   torchvision_mobilenet se X OUT
//       a network with squeeze-and-excitation blocks (layers/gated.hpp; seed 0): eval-mode
//       output of X (N x 8 x 10 x 10) to OUT ("y"), the network exported to OUT.onnx

#include <cstdio>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/io/onnx.hpp>
#include <cohort/models/mobilenet_v2.hpp>

#include "support/torchvision_reference.hpp"

using namespace cohort;

namespace {

/// MobileNetV2-small with Dropout(0): what torch computes with classifier[0].p = 0.
struct SmallWithoutDropout : models::SmallMobileNetV2Config<> {
  static constexpr float dropout = 0.f;
};

template <class Net>
int logits(char** argv) {
  test::write_eval_output(*test::loaded_network<Net>(argv[2], models::mobilenet_v2_names<Net>()), argv[3], argv[4]);
  return 0;
}

int train(char** argv) {
  using Net = models::MobileNetV2Of<SmallWithoutDropout>;
  const auto xf = SafetensorsFile::read(argv[3]).values<float>("x");
  const std::vector<double> x(xf.begin(), xf.end());
  auto net = test::loaded_network<Net, double>(argv[2], models::mobilenet_v2_names<Net>());
  test::train_and_save(*net, x, test::labels_of(argv[4]), std::stoul(argv[5]),
                       {.lr = 0.01, .momentum = 0.9, .weight_decay = 4e-5}, models::mobilenet_v2_names<Net>(), argv[6]);
  return 0;
}

/// Squeeze-and-excitation in MobileNetV3's form (Hardsigmoid) inside an inverted residual, and
/// torchvision's (Sigmoid) on the main path: ONNX's Mul broadcasting and GlobalAveragePool.
using SENet = Sequential<
    Input<8, 10, 10>,
    Residual<Branch<Conv2d<8, 24, 1, 1, 0, false>, BatchNorm2d<24>, Hardswish, DepthwiseConv2d<24, 3, 1, 1, false>,
                    BatchNorm2d<24>, Hardswish, SqueezeExcitation<24, 8, ReLU, Hardsigmoid>,
                    Conv2d<24, 8, 1, 1, 0, false>, BatchNorm2d<8>>>,
    SqueezeExcitation<8, 4>, AdaptiveAvgPool2d<1>, Flatten, Linear<8, 5>>;

int se(char** argv) {
  const auto x = SafetensorsFile::read(argv[2]).values<float>("x");
  auto net = std::make_unique<Network<SENet>>(/*seed=*/0);
  net->eval();
  const auto y = net->forward(ConstBatchView<SENet::input_shape, float>(x.data(), x.size() / SENet::input_shape::size));
  SafetensorsWriter w;
  w.add<float>("y", {y.batch(), SENet::output_shape::size}, y.span());
  w.write(argv[3]);
  export_onnx(*net, std::string(argv[3]) + ".onnx");
  return 0;
}

int onnx(char** argv) {
  using Net = models::MobileNetV2Small<>;
  export_onnx(*test::loaded_network<Net>(argv[2], models::mobilenet_v2_names<Net>()), argv[3]);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "logits" && argc == 5) return logits<models::MobileNetV2<>>(argv);
    if (mode == "logits-small" && argc == 5) return logits<models::MobileNetV2Small<>>(argv);
    if (mode == "train" && argc == 7) return train(argv);
    if (mode == "onnx" && argc == 4) return onnx(argv);
    if (mode == "se" && argc == 4) return se(argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "torchvision_mobilenet: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: torchvision_mobilenet logits|logits-small WEIGHTS X OUT | train WEIGHTS X LABELS STEPS "
                       "OUT | onnx WEIGHTS OUT | se X OUT\n");
  return 2;
}

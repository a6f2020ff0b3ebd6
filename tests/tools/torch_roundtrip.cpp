// Helper of tests/reference/torch_roundtrip.py: writes cohort weights for PyTorch to load, and
// checks weights PyTorch wrote.
//
//   torch_roundtrip MODEL export OUT.safetensors INPUT.safetensors OUTPUT.safetensors
//       MODEL: B, resnet20, cifar20 (the CIFAR ResNet-20, 3x32x32), unet (models::UNet<1x16x16,
//       3 classes, width 4, depth 2>) or unet_paper (the same with transposed up-convolutions and
//       GroupNorm, width 8) (seed 11, one training step so BatchNorm statistics are not the
//       defaults) saved with save_weights; its eval-mode output on the input batch written beside it
//   torch_roundtrip MODEL check WEIGHTS.safetensors INPUT.safetensors EXPECTED.safetensors
//       loads PyTorch-written weights (strict), runs eval mode, compares with PyTorch's output

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/loss/pixel_cross_entropy_loss.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/models/unet.hpp>

using namespace cohort;

namespace {
template <class Net>
int run(char** argv) {
  using In = typename Net::input_shape;
  using Out = typename Net::output_shape;
  const std::string mode = argv[1];
  const auto input = SafetensorsFile::read(argv[3]).values<float>("x");
  const std::size_t batch = input.size() / In::size;
  Network<Net> net(11);
  if (mode == "export") {
    if constexpr (ImageShape<Out>) { // a dense model: a class per pixel
      PixelCrossEntropyLoss<float> ce;
      constexpr std::size_t classes = Out::extents[0], pixels = Out::extents[1] * Out::extents[2];
      std::vector<std::int32_t> labels(batch * pixels);
      for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = std::int32_t(i * 7 % 5 % classes);
      ce.forward(net.forward(ConstBatchView<In, float>(input.data(), batch)), labels);
      net.backward(ce.backward());
    } else {
      CrossEntropyLoss ce;
      std::vector<std::int32_t> labels(batch);
      for (std::size_t i = 0; i < batch; ++i) labels[i] = std::int32_t(i % 10);
      ce.forward(net.forward(ConstBatchView<In, float>(input.data(), batch)), labels);
      net.backward(ce.backward());
    }
    Sgd({.lr = 0.1}).step(net);
    save_weights(argv[2], net.parameters());
    net.eval();
    auto y = net.forward(ConstBatchView<In, float>(input.data(), batch));
    SafetensorsWriter w;
    w.add<float>("y", {batch, Out::size}, y.span());
    w.write(argv[4]);
    return 0;
  }
  load_weights(argv[2], net.parameters());
  net.eval();
  auto y = net.forward(ConstBatchView<In, float>(input.data(), batch));
  const auto expected = SafetensorsFile::read(argv[4]).values<float>("y");
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, double(std::abs(y.data()[i] - expected[i])));
    scale = std::max(scale, double(std::abs(expected[i])));
  }
  std::printf("cohort vs PyTorch on PyTorch-written weights: worst difference %.3g of max %.3g\n", worst, scale);
  return worst <= 1e-5 * scale ? 0 : 1;
}
} // namespace

int main(int argc, char** argv) {
  const std::string model = argc == 6 ? argv[1] : "";
  if (model == "B") return run<models::ModelB>(argv + 1);
  if (model == "resnet20") return run<models::ResNet20>(argv + 1);
  if (model == "cifar20") return run<models::CifarResNet20>(argv + 1);
  if (model == "unet") return run<models::UNet<Shape<1, 16, 16>, 3, 4, 2>>(argv + 1);
  if (model == "unet_paper")
    return run<models::UNet<Shape<1, 16, 16>, 3, 8, 2, models::UNetUpsampling::transposed, models::UNetNorm::group>>(
        argv + 1);
  std::fprintf(stderr, "usage: torch_roundtrip B|resnet20|cifar20|unet|unet_paper export|check WEIGHTS INPUT OUTPUT\n");
  return 2;
}

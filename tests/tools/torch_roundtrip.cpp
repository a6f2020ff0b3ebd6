// Helper of tests/reference/torch_roundtrip.py: writes cohort weights for PyTorch to load, and
// checks weights PyTorch wrote.
//
//   torch_roundtrip export OUT.safetensors INPUT.safetensors OUTPUT.safetensors
//       model B (seed 11, one training step so BatchNorm statistics are not the defaults) saved
//       with save_weights; its eval-mode output on the input batch written beside it
//   torch_roundtrip check WEIGHTS.safetensors INPUT.safetensors EXPECTED.safetensors
//       loads PyTorch-written weights (strict), runs eval mode, compares with PyTorch's output

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

using namespace cohort;
using Net = models::ModelB;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: torch_roundtrip export|check WEIGHTS INPUT OUTPUT\n");
    return 2;
  }
  const std::string mode = argv[1];
  const auto input = SafetensorsFile::read(argv[3]).values<float>("x");
  const std::size_t batch = input.size() / Net::input_shape::size;
  Network<Net> net(11);
  if (mode == "export") {
    CrossEntropyLoss ce;
    std::vector<std::int32_t> labels(batch);
    for (std::size_t i = 0; i < batch; ++i) labels[i] = std::int32_t(i % 10);
    ce.forward(net.forward(ConstBatchView<Net::input_shape, float>(input.data(), batch)), labels);
    net.backward(ce.backward());
    Sgd({.lr = 0.1}).step(net);
    save_weights(argv[2], net.parameters());
    net.eval();
    auto y = net.forward(ConstBatchView<Net::input_shape, float>(input.data(), batch));
    SafetensorsWriter w;
    w.add<float>("y", {batch, Net::output_shape::size}, y.span());
    w.write(argv[4]);
    return 0;
  }
  load_weights(argv[2], net.parameters());
  net.eval();
  auto y = net.forward(ConstBatchView<Net::input_shape, float>(input.data(), batch));
  const auto expected = SafetensorsFile::read(argv[4]).values<float>("y");
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, double(std::abs(y.data()[i] - expected[i])));
    scale = std::max(scale, double(std::abs(expected[i])));
  }
  std::printf("cohort vs PyTorch on PyTorch-written weights: worst difference %.3g of max %.3g\n", worst, scale);
  return worst <= 1e-5 * scale ? 0 : 1;
}

// Helper of tests/reference/onnx_runtime.py: writes a cohort model as ONNX, with an input batch
// and cohort's eval-mode output on it, for onnxruntime to reproduce.
//
//   onnx_export MODEL OUT_DIR [BATCH]
//       MODEL: A, B, C, D, resnet20, or mixed (the other layer kinds: GELU, SiLU, LeakyReLU,
//       AvgPool2d, BatchNorm1d, padded MaxPool2d, a Bottleneck block, a block inside a branch), or
//       efficient (grouped and depthwise convolutions, ReLU6, Hardswish, Hardsigmoid, Tanh, Sigmoid),
//       or dense (Concat blocks, Upsample nearest and bilinear with and without align_corners,
//       ConvTranspose2d, GroupNorm).
//       Builds Network<MODEL>(seed 11), takes one SGD step on a deterministic batch, then (models
//       with BatchNorm) 20 more training-mode forward passes, so that the running statistics are
//       those of the data rather than their defaults (which after one step would shrink every
//       activation and make the output insensitive to most export mistakes). Then, in eval mode,
//       it writes OUT_DIR/model.onnx, and OUT_DIR/io_BATCH.safetensors with "x" (BATCH, input...)
//       and "y" (BATCH, output...), BATCH (default 5) samples.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/io/onnx.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>

using namespace cohort;

namespace {
// The layer kinds the seed models and ResNet-20 leave out, in one network. Each activation
// follows a Conv2d, BatchNorm or block output, so that it sees negative inputs too.
using Mixed = Sequential<Input<3, 16, 16>,                                                          //
                         Conv2d<3, 8, 3, 1, 1>, BatchNorm2d<8, 1e-2f, 0.3f>, LeakyReLU<0.2f>,       // 0..2
                         MaxPool2d<3, 2, 1>, Conv2d<8, 8, 3, 1, 1>, GELU, AvgPool2d<3, 1, 1>,       // 3..6
                         models::Bottleneck<8, 4, 2>, Dropout2d<0.2f>,                              // 7..8
                         Residual<Branch<models::BasicBlock<16, 16>, SiLU, Conv2d<16, 16, 1>>>,     // 9
                         AvgPool2d<2>, Flatten, Linear<64, 32>, BatchNorm1d<32, 1e-3f, 0.5f>, SiLU, // 10..14
                         Dropout<0.5f>, Linear<32, 10>, LeakyReLU<>, LogSoftmax>;                   // 15..18

// The efficient networks' layers (issue 37): grouped and depthwise convolutions (Conv with group)
// and ReLU6 (Clip), Hardswish, Hardsigmoid, Tanh and Sigmoid, each activation after a convolution
// or Linear so that it sees both signs and its clamps.
using Efficient =
    Sequential<Input<3, 16, 16>,                                                                   //
               Conv2d<3, 8, 3, 1, 1>, BatchNorm2d<8>, ReLU6,                                       // 0..2
               Conv2d<8, 8, 3, 2, 1, Groups{2}, false>, BatchNorm2d<8>, Hardswish,                 // 3..5
               DepthwiseConv2d<8, 3, 1, 1>, Hardsigmoid, DepthwiseConv2d<8, 5, 2, 2, false>, Tanh, // 6..9
               Conv2d<8, 8, 1, 1, 0, Groups{4}>, AvgPool2d<2>, Flatten, Linear<32, 10>, Sigmoid>;  // 10..14

// Dense prediction's layers (issue 38): Concat blocks (an Identity branch, two real branches, one
// nested in the other), Upsample in its three modes (Resize), GroupNorm and ConvTranspose2d with
// output_padding, ending in a classifier so that the helper's training step applies.
using Dense =
    Sequential<Input<3, 16, 16>,                            //
               Conv2d<3, 8, 3, 1, 1>, BatchNorm2d<8>, ReLU, // 0..2
               Concat<Identity,                             // 3
                      Branch<MaxPool2d<2>, Conv2d<8, 8, 3, 1, 1>, ReLU,
                             Concat<Branch<Conv2d<8, 4, 1>>, Branch<MaxPool2d<2>, Conv2d<8, 4, 3, 1, 1>, Tanh,
                                                                    Upsample<2, UpsampleMode::bilinear, true>>>,
                             Upsample<2, UpsampleMode::bilinear>>>,
               Conv2d<16, 4, 3, 1, 1>, GroupNorm<2, 4>, Upsample<2>,                       // 4..6
               ConvTranspose2d<4, 4, 3, 2, 1, 1>, AvgPool2d<8>, Flatten, Linear<256, 10>>; // 7..10

// A deterministic batch with values of both signs, about unit scale.
std::vector<float> batch_of(std::size_t n, std::size_t size, std::uint64_t salt) {
  std::vector<float> x(n * size);
  const RandomStream rng{salt, 7};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 2.f * rng.uniform(i) - 1.f;
  return x;
}

template <class Net>
int run(const std::filesystem::path& dir, std::size_t batch) {
  using In = typename Net::input_shape;
  using Out = typename Net::output_shape;
  Network<Net> net(11);
  {
    const std::size_t n = 8;
    const auto x = batch_of(n, In::size, 1);
    std::vector<std::int32_t> labels(n);
    for (std::size_t i = 0; i < n; ++i) labels[i] = std::int32_t(i % 10);
    CrossEntropyLoss ce;
    ce.forward(net.forward(ConstBatchView<In, float>(x.data(), n)), labels);
    net.backward(ce.backward());
    Sgd({.lr = 0.1}).step(net);
    if constexpr (Net::buffer_store_size > 0)
      for (std::uint64_t salt = 3; salt < 23; ++salt) {
        const auto more = batch_of(n, In::size, salt);
        net.forward(ConstBatchView<In, float>(more.data(), n));
      }
  }
  net.eval();
  std::filesystem::create_directories(dir);
  export_onnx(net, dir / "model.onnx");

  const auto x = batch_of(batch, In::size, 2);
  const auto y = net.forward(ConstBatchView<In, float>(x.data(), batch));
  std::vector<std::size_t> x_shape{batch}, y_shape{batch};
  for (std::size_t e : In::extents) x_shape.push_back(e);
  for (std::size_t e : Out::extents) y_shape.push_back(e);
  SafetensorsWriter w;
  w.add<float>("x", x_shape, x);
  w.add<float>("y", y_shape, y.span());
  w.write(dir / ("io_" + std::to_string(batch) + ".safetensors"));
  return 0;
}
} // namespace

int main(int argc, char** argv) {
  if (argc == 3 || argc == 4) {
    const std::string model = argv[1];
    const std::filesystem::path dir = argv[2];
    const std::size_t batch = argc == 4 ? std::stoul(argv[3]) : 5;
    try {
      if (model == "A") return run<models::ModelA>(dir, batch);
      if (model == "B") return run<models::ModelB>(dir, batch);
      if (model == "C") return run<models::ModelC>(dir, batch);
      if (model == "D") return run<models::ModelD>(dir, batch);
      if (model == "resnet20") return run<models::ResNet20>(dir, batch);
      if (model == "mixed") return run<Mixed>(dir, batch);
      if (model == "efficient") return run<Efficient>(dir, batch);
      if (model == "dense") return run<Dense>(dir, batch);
    } catch (const Error& e) {
      std::fprintf(stderr, "onnx_export: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "usage: onnx_export A|B|C|D|resnet20|mixed|efficient|dense OUT_DIR [BATCH]\n");
  return 2;
}

// The usage examples in the public headers' opening comments, compiled as part of cohort_tests:
// each region between two "//! [name]" lines is quoted verbatim by a header comment line
// 'Example (compiled: tests/docs/headers.cpp, "name"):', and tests/docs/check_snippets.py --headers
// (ctest docs.header_snippets) fails when the two differ, when a public header's first example
// has no such line (or a "not compiled" reason), or when a region is quoted by no header. Type
// examples live at namespace scope with static_asserts of what their comments claim; statement
// examples are the bodies of functions nobody calls, their free names (net, opt, x...) given as
// parameters or declared before the region.
#include <doctest/doctest.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <cohort/cohort.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/optim/optimizer_variant.hpp>

using namespace cohort;

// clang-format off

namespace example_layers_adaptive_avg_pool2d {
//! [layers/adaptive_avg_pool2d]
using Head = Sequential<Input<512, 7, 7>, AdaptiveAvgPool2d<1>, Flatten, Linear<512, 10>>;
//! [layers/adaptive_avg_pool2d]
} // namespace example_layers_adaptive_avg_pool2d

namespace example_layers_avg_pool2d {
//! [layers/avg_pool2d]
using Net = Sequential<Input<16, 26, 26>, AvgPool2d<2>>;          // -> Shape<16, 13, 13>
using Same = Sequential<Input<16, 8, 8>, AvgPool2d<3, 1, 1>>;     // -> Shape<16, 8, 8>
//! [layers/avg_pool2d]
static_assert(std::is_same_v<Net::output_shape, Shape<16, 13, 13>>);
static_assert(std::is_same_v<Same::output_shape, Shape<16, 8, 8>>);
} // namespace example_layers_avg_pool2d

namespace example_layers_batch_norm1d {
//! [layers/batch_norm1d]
using Head = Sequential<Input<64, 4, 4>, Flatten, Linear<1024, 128>, BatchNorm1d<128>, ReLU>;
//! [layers/batch_norm1d]
} // namespace example_layers_batch_norm1d

namespace example_layers_batch_norm2d {
//! [layers/batch_norm2d]
using Block = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 5, 1, 2>, BatchNorm2d<16>, ReLU>;
//! [layers/batch_norm2d]
} // namespace example_layers_batch_norm2d

namespace example_layers_conv2d {
//! [layers/conv2d]
using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3>, ReLU>;   // -> Shape<16, 26, 26>
using Stem = Sequential<Input<3, 32, 32>, Conv2d<3, 16, 3, 1, 1, false>, BatchNorm2d<16>>;  // bias=False
//! [layers/conv2d]
static_assert(std::is_same_v<Net::output_shape, Shape<16, 26, 26>>);
static_assert(Stem::parameter_count == 3 * 16 * 9 + 2 * 16);
} // namespace example_layers_conv2d

namespace example_layers_dropout {
//! [layers/dropout]
using Head = Sequential<Input<64>, Dropout<0.25f>, Linear<64, 10>>;
//! [layers/dropout]
} // namespace example_layers_dropout

namespace example_layers_flatten {
//! [layers/flatten]
using Net = Sequential<Input<32, 12, 12>, Flatten, Linear<4608, 10>>;
//! [layers/flatten]
static_assert(std::is_same_v<Net::output_shape, Shape<10>>);
} // namespace example_layers_flatten

namespace example_layers_gelu {
//! [layers/gelu]
using Head = Sequential<Input<256>, Linear<256, 256>, GELU, Linear<256, 10>>;
//! [layers/gelu]
} // namespace example_layers_gelu

namespace example_layers_leaky_relu {
//! [layers/leaky_relu]
using Net = Sequential<Input<16, 8, 8>, BatchNorm2d<16>, LeakyReLU<>>;      // slope 0.01
using Steep = Sequential<Input<10>, Linear<10, 10>, LeakyReLU<0.2f>>;
//! [layers/leaky_relu]
} // namespace example_layers_leaky_relu

namespace example_layers_linear {
//! [layers/linear]
using Head = Sequential<Input<64>, Linear<64, 10>>;
//! [layers/linear]
} // namespace example_layers_linear

namespace example_layers_log_softmax {
//! [layers/log_softmax]
using Net = Sequential<Input<64>, Linear<64, 10>, LogSoftmax>;
//! [layers/log_softmax]
} // namespace example_layers_log_softmax

namespace example_layers_max_pool2d {
//! [layers/max_pool2d]
using Net = Sequential<Input<16, 26, 26>, MaxPool2d<2>>;   // -> Shape<16, 13, 13>
//! [layers/max_pool2d]
static_assert(std::is_same_v<Net::output_shape, Shape<16, 13, 13>>);
} // namespace example_layers_max_pool2d

namespace example_layers_relu {
//! [layers/relu]
using Net = Sequential<Input<10>, Linear<10, 10>, ReLU>;
//! [layers/relu]
} // namespace example_layers_relu

namespace example_layers_residual {
//! [layers/residual]
using Basic = Residual<Branch<Conv2d<16, 16, 3, 1, 1, false>, BatchNorm2d<16>, ReLU,
                              Conv2d<16, 16, 3, 1, 1, false>, BatchNorm2d<16>>>;    // identity shortcut
using Down = Residual<Branch<Conv2d<16, 32, 3, 2, 1, false>, BatchNorm2d<32>, ReLU,
                             Conv2d<32, 32, 3, 1, 1, false>, BatchNorm2d<32>>,
                      Branch<Conv2d<16, 32, 1, 2, 0, false>, BatchNorm2d<32>>>;     // projection
using Net = Sequential<Input<16, 28, 28>, Basic, ReLU, Down, ReLU>;
//! [layers/residual]
static_assert(std::is_same_v<Net::output_shape, Shape<32, 14, 14>>);
} // namespace example_layers_residual

namespace example_layers_silu {
//! [layers/silu]
using Net = Sequential<Input<16, 8, 8>, Conv2d<16, 16, 3, 1, 1, false>, BatchNorm2d<16>, SiLU>;
//! [layers/silu]
} // namespace example_layers_silu

[[maybe_unused]] void example_loss_cross_entropy_loss(Network<models::ModelA>& net, const xt::xtensor<float, 4>& x, const std::vector<std::int32_t>& labels) {
  //! [loss/cross_entropy_loss]
  cohort::CrossEntropyLoss ce;                     // or ce({.label_smoothing = 0.1, .class_weights = w})
  double l = ce.forward(net.forward(x), labels);
  net.backward(ce.backward());
  //! [loss/cross_entropy_loss]
  (void)l;
}

[[maybe_unused]] void example_loss_cross_entropy_options() {
  //! [loss/cross_entropy_options]
  cohort::CrossEntropyLoss ce({.label_smoothing = 0.1, .class_weights = {1, 2, 1, 1, 1, 1, 1, 1, 1, 1}});
  //! [loss/cross_entropy_options]
  (void)ce;
}

[[maybe_unused]] void example_loss_loss(Network<models::ModelA>& net, const xt::xtensor<float, 4>& x, const std::vector<std::int32_t>& labels) {
  CrossEntropyLoss loss;
  const auto logits = net.forward(x);
  //! [loss/loss]
  double l = loss.forward(logits, labels);   // mean over the batch
  net.backward(loss.backward());             // d loss / d logits, typed like the logits
  //! [loss/loss]
  (void)l;
}

[[maybe_unused]] void example_loss_nll_loss(Network<models::ModelA>& net, const xt::xtensor<float, 4>& x, const std::vector<std::int32_t>& labels) {
  //! [loss/nll_loss]
  cohort::NllLoss nll;
  double l = nll.forward(net.forward(x), labels);   // after a LogSoftmax layer
  net.backward(nll.backward());
  //! [loss/nll_loss]
  (void)l;
}

[[maybe_unused]] void example_models_resnet(const Sgd<>& sgd, const TrainerOptions& options) {
  //! [models/resnet]
  cohort::Trainer<cohort::models::ResNet20, cohort::Sgd<>> trainer(sgd, options);
  //! [models/resnet]
}

[[maybe_unused]] void example_models_seed_models() {
  //! [models/seed_models]
  cohort::Network<cohort::models::ModelA> net;
  //! [models/seed_models]
}

[[maybe_unused]] void example_network_network(const xt::xtensor<float, 4>& images, const std::vector<std::int32_t>& labels) {
  using models::ModelA;
  NllLoss nll;
  Adadelta<> opt({.lr = 0.5});
  //! [network/network]
  cohort::Network<ModelA> net(/*seed=*/0);     // CPU, float, PyTorch's default init
  auto logp = net.forward(images);              // images: xt::xtensor<float, 4> (N,1,28,28)
  float loss = nll.forward(logp, labels);
  net.backward(nll.backward());
  opt.step(net);
  //! [network/network]
  (void)loss;
}

[[maybe_unused]] void example_network_parameters() {
  using Net = models::ModelB;
  //! [network/parameters]
  cohort::Parameters<Net, float, cohort::Cpu> p;   // parameters, running statistics, counters
  p.initialize(/*seed=*/0);                        // PyTorch's default initialisation, seeded
  for (auto& t : p.state_dict()) std::cout << t.name << '\n';   // "0.weight", "0.bias", ...
  //! [network/parameters]
}

namespace example_network_sequential {
//! [network/sequential]
using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3>, ReLU, MaxPool2d<2>, Flatten,
                       Linear<2704, 10>, LogSoftmax>;
static_assert(std::is_same_v<Net::output_shape, Shape<10>>);
static_assert(Net::parameter_count == 27'210);
//! [network/sequential]
} // namespace example_network_sequential

[[maybe_unused]] void example_optim_adadelta() {
  //! [optim/adadelta]
  cohort::Adadelta opt({.lr = 0.5});
  //! [optim/adadelta]
  (void)opt;
}

[[maybe_unused]] void example_optim_adam() {
  //! [optim/adam]
  cohort::Adam opt({.lr = 1e-3, .eps = 1e-7});   // seed 003's settings
  cohort::AdamW w({.lr = 1e-3, .weight_decay = 0.05});
  //! [optim/adam]
  (void)opt, (void)w;
}

[[maybe_unused]] void example_optim_clip_grad_norm(Network<models::ModelA>& net, Sgd<>& opt) {
  //! [optim/clip_grad_norm]
  double norm = cohort::clip_grad_norm(net.gradients().values.span(), /*max_norm=*/1.0);
  opt.step(net);
  //! [optim/clip_grad_norm]
  (void)norm;
}

[[maybe_unused]] void example_optim_lr_schedule(Sgd<>& opt) {
  //! [optim/lr_schedule]
  auto sched = cohort::LrSchedule::parse("step,step_size=1,gamma=0.7"); // pytorch/examples' mnist
  for (std::uint64_t epoch = 0; epoch < 14; ++epoch) {
    opt.set_lr(sched.lr(1.0, epoch));   // the rate torch uses after `epoch` scheduler.step() calls
    // ... train one epoch ...
  }
  //! [optim/lr_schedule]
}

[[maybe_unused]] void example_optim_optimizer(Network<models::ModelA>& net) {
  //! [optim/optimizer]
  cohort::Adam opt({.lr = 1e-3});
  opt.step(net);          // or opt.step(params_span, grads_span)
  //! [optim/optimizer]
}

[[maybe_unused]] void example_optim_optimizer_variant(const std::string& flag) {
  using Net = models::ModelC;
  //! [optim/optimizer_variant]
  using AnyOpt = cohort::OptimizerVariant<cohort::Sgd<>, cohort::Adam<>, cohort::Adadelta<>>;
  AnyOpt opt = flag == "adam" ? AnyOpt(cohort::Adam({.lr = 1e-3})) : AnyOpt(cohort::Sgd({.lr = 0.1}));
  cohort::Trainer<Net, AnyOpt> trainer(std::move(opt));
  //! [optim/optimizer_variant]
}

[[maybe_unused]] void example_optim_parameter_groups(AdamW<>& opt) {
  using Net = models::ResNet20;
  //! [optim/parameter_groups]
  // The usual CNN recipe: no weight decay on BatchNorm parameters and biases.
  opt.set_parameter_groups(cohort::parameter_groups<Net>(cohort::no_decay_on_norms_and_biases()));
  // or through the Trainer: TrainerOptions{.parameter_groups = cohort::no_decay_on_norms_and_biases()}
  //! [optim/parameter_groups]
}

[[maybe_unused]] void example_optim_rmsprop() {
  //! [optim/rmsprop]
  cohort::RmsProp opt({.lr = 1e-3, .momentum = 0.9, .centered = true});
  //! [optim/rmsprop]
  (void)opt;
}

[[maybe_unused]] void example_optim_sgd(Network<models::ModelA>& net) {
  //! [optim/sgd]
  cohort::Sgd opt({.lr = 0.01, .momentum = 0.9, .nesterov = true});
  opt.step(net);
  //! [optim/sgd]
}

[[maybe_unused]] void example_precision_full_precision(const Sgd<>& opt) {
  using Net = models::ModelA;
  //! [precision/full_precision]
  cohort::Trainer<Net, cohort::Sgd<>, cohort::SingleDevice<>, cohort::FullPrecision> trainer(opt);
  //! [precision/full_precision]
}

[[maybe_unused]] void example_precision_half() {
  //! [precision/half]
  cohort::half h(0.1f);            // rounded to nearest, ties to even
  float f = float(h);              // exact
  //! [precision/half]
  (void)f;
}

// clang-format on

TEST_CASE("header examples: the half example rounds as its comment says") {
  //  (the other examples are compiled, not run)
  CHECK(float(half(0.1f)) == 0.0999755859375f);
}

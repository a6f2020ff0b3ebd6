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
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <cohort/cohort.hpp>
#include <cohort/data/dense_dataset.hpp>
#include <cohort/data/image_transforms.hpp>
#include <cohort/loss/bce_with_logits_loss.hpp>
#include <cohort/loss/dice_loss.hpp>
#include <cohort/loss/pixel_cross_entropy_loss.hpp>
#include <cohort/loss/regression_choice.hpp>
#include <cohort/loss/regression_loss.hpp>
#include <cohort/models/fast_resnet.hpp>
#include <cohort/models/mobilenet_v2.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/models/torchvision_resnet.hpp>
#include <cohort/models/unet.hpp>
#include <cohort/network/init.hpp>
#include <cohort/network/predict.hpp>
#include <cohort/network/test_time_augmentation.hpp>
#include <cohort/optim/lookahead.hpp>
#include <cohort/optim/optimizer_variant.hpp>
#include <cohort/optim/weight_average.hpp>
#include <cohort/parallel/device_assignment.hpp>
#include <cohort/parallel/signature.hpp>
#include <cohort/tensor/xtensor.hpp> // xtensor containers and views
#include <cohort/train/segmentation_metrics.hpp>
#if defined(COHORT_WITH_IMAGE) // the image component (cohort::image): libpng, libjpeg
#include <cohort/data/image_decode.hpp>
#include <cohort/data/image_folder.hpp>
#include <cohort/data/image_pair_folder.hpp>
#include <cohort/data/mask_folder.hpp>
#endif

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
using Grouped = Sequential<Input<32, 14, 14>, Conv2d<32, 64, 3, 1, 1, Groups{4}, false>>; // groups=4
//! [layers/conv2d]
static_assert(std::is_same_v<Net::output_shape, Shape<16, 26, 26>>);
static_assert(Stem::parameter_count == 3 * 16 * 9 + 2 * 16);
static_assert(Grouped::parameter_count == 64 * 8 * 9);
} // namespace example_layers_conv2d

namespace example_layers_depthwise_conv2d {
//! [layers/depthwise_conv2d]
using Block = Sequential<Input<32, 14, 14>, DepthwiseConv2d<32, 3, 1, 1, false>, BatchNorm2d<32>, ReLU6>;
//! [layers/depthwise_conv2d]
} // namespace example_layers_depthwise_conv2d

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

namespace example_layers_hardsigmoid {
//! [layers/hardsigmoid]
using Gate = Sequential<Input<16>, Linear<16, 16>, Hardsigmoid>;
//! [layers/hardsigmoid]
} // namespace example_layers_hardsigmoid

namespace example_layers_hardswish {
//! [layers/hardswish]
using Block = Sequential<Input<16, 8, 8>, Conv2d<16, 16, 3, 1, 1, false>, BatchNorm2d<16>, Hardswish>;
//! [layers/hardswish]
} // namespace example_layers_hardswish

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

namespace example_layers_relu6 {
//! [layers/relu6]
using Block = Sequential<Input<16, 8, 8>, Conv2d<16, 32, 1, 1, 0, false>, BatchNorm2d<32>, ReLU6>;
//! [layers/relu6]
} // namespace example_layers_relu6

namespace example_layers_gated {
//! [layers/gated]
using SE = Gated<Branch<AdaptiveAvgPool2d<1>, Conv2d<32, 8, 1>, ReLU, Conv2d<8, 32, 1>, Hardsigmoid>>;
using Net = Sequential<Input<32, 14, 14>, Conv2d<32, 32, 3, 1, 1, false>, BatchNorm2d<32>, ReLU, SE>;
//! [layers/gated]
static_assert(std::is_same_v<Net::output_shape, Shape<32, 14, 14>>);
} // namespace example_layers_gated

namespace example_layers_upsample {
//! [layers/upsample]
using Net = Sequential<Input<16, 7, 7>, Upsample<2>>;                                // -> Shape<16, 14, 14>
using Smooth = Sequential<Input<16, 7, 7>, Upsample<2, UpsampleMode::bilinear>>;     // half-pixel centres
using Corners = Sequential<Input<16, 7, 7>, Upsample<2, UpsampleMode::bilinear, true>>;
//! [layers/upsample]
static_assert(std::is_same_v<Net::output_shape, Shape<16, 14, 14>>);
static_assert(std::is_same_v<Corners::output_shape, Shape<16, 14, 14>>);
} // namespace example_layers_upsample

namespace example_layers_conv_transpose2d {
//! [layers/conv_transpose2d]
using Up = Sequential<Input<32, 7, 7>, ConvTranspose2d<32, 16, 2, 2>>;         // -> Shape<16, 14, 14>
using Odd = Sequential<Input<8, 7, 7>, ConvTranspose2d<8, 4, 3, 2, 1, 1>>;     // output_padding 1: 14 x 14
using NoBias = Sequential<Input<8, 5, 5>, ConvTranspose2d<8, 8, 3, 1, 1, 0, false>>;
//! [layers/conv_transpose2d]
static_assert(std::is_same_v<Up::output_shape, Shape<16, 14, 14>>);
static_assert(std::is_same_v<Odd::output_shape, Shape<4, 14, 14>>);
static_assert(std::is_same_v<NoBias::output_shape, Shape<8, 5, 5>>);
} // namespace example_layers_conv_transpose2d

namespace example_layers_group_norm {
//! [layers/group_norm]
using Block = Sequential<Input<3, 64, 64>, Conv2d<3, 32, 3, 1, 1, false>, GroupNorm<8, 32>, ReLU>;
//! [layers/group_norm]
static_assert(Block::parameter_count == 3 * 32 * 9 + 2 * 32);
} // namespace example_layers_group_norm

namespace example_layers_concat {
//! [layers/concat]
using Level = Concat<Identity, Branch<MaxPool2d<2>, Conv2d<8, 16, 3, 1, 1>, ReLU, Upsample<2>>>;
using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 8, 3, 1, 1>, ReLU, Level,  // -> (8 + 16, 28, 28)
                       Conv2d<24, 8, 3, 1, 1>>;
//! [layers/concat]
static_assert(std::is_same_v<Net::output_shape, Shape<8, 28, 28>>);
} // namespace example_layers_concat

namespace example_models_unet {
//! [models/unet]
using Net = cohort::models::UNet<cohort::Shape<1, 28, 28>, 11>;   // -> Shape<11, 28, 28>
using Deeper = cohort::models::UNet<cohort::Shape<3, 64, 64>, 2, 32, 4>;
using Paper = cohort::models::UNet<cohort::Shape<1, 64, 64>, 2, 16, 3,             //
                                   cohort::models::UNetUpsampling::transposed,   //
                                   cohort::models::UNetNorm::group>;
//! [models/unet]
static_assert(std::is_same_v<Paper::output_shape, Shape<2, 64, 64>>);
static_assert(std::is_same_v<Net::output_shape, Shape<11, 28, 28>>);
} // namespace example_models_unet

namespace example_layers_squeeze_excitation {
//! [layers/squeeze_excitation]
using Net = Sequential<Input<32, 14, 14>, Conv2d<32, 32, 3, 1, 1, false>, BatchNorm2d<32>, ReLU,
                       SqueezeExcitation<32, 8>>;                            // torchvision's defaults
using V3 = SqueezeExcitation<32, 8, ReLU, Hardsigmoid>;                     // MobileNetV3's
//! [layers/squeeze_excitation]
static_assert(Net::parameter_count == 32 * 32 * 9 + 64 + 32 * 8 + 8 + 8 * 32 + 32);
} // namespace example_layers_squeeze_excitation

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

namespace example_layers_sigmoid {
//! [layers/sigmoid]
using Gate = Sequential<Input<16>, Linear<16, 16>, Sigmoid>;
//! [layers/sigmoid]
} // namespace example_layers_sigmoid

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

[[maybe_unused]] void example_loss_pixel_cross_entropy_loss(Network<models::UNet<Shape<1, 28, 28>, 11>>& net,
                                                             const xt::xtensor<float, 4>& x,
                                                             const std::vector<std::int32_t>& masks) {
  //! [loss/pixel_cross_entropy_loss]
  cohort::PixelCrossEntropyLoss ce({.ignore_index = 255});   // e.g. VOC's border label
  double l = ce.forward(net.forward(x), masks);             // masks: N * H * W class indices
  net.backward(ce.backward());
  //! [loss/pixel_cross_entropy_loss]
  (void)l;
}

[[maybe_unused]] void example_loss_dice_loss(Network<models::UNet<Shape<1, 28, 28>, 11>>& net,
                                            const xt::xtensor<float, 4>& x, const std::vector<std::int32_t>& masks) {
  //! [loss/dice_loss]
  cohort::DiceLoss dice({.smooth = 1.0, .ignore_index = 255});
  double l = dice.forward(net.forward(x), masks);            // masks: N * H * W class indices
  net.backward(dice.backward());
  //! [loss/dice_loss]
  (void)l;
}

[[maybe_unused]] void example_loss_regression_loss(Network<models::UNet<Shape<1, 28, 28>, 1>>& net,
                                                   const xt::xtensor<float, 4>& noisy, const std::vector<float>& clean) {
  //! [loss/regression_loss]
  cohort::MSELoss mse;                                       // torch.nn.MSELoss()
  double l = mse.forward(net.forward(noisy), clean);         // clean: N * C * H * W floats
  net.backward(mse.backward());
  cohort::HuberLoss huber({.delta = 0.5});                   // torch.nn.HuberLoss(delta=0.5)
  //! [loss/regression_loss]
  (void)l, (void)huber;
}

[[maybe_unused]] void example_loss_regression_choice(const ImagePairDataset<Shape<1, 28, 28>>& pairs,
                                                     const ImagePairDataset<Shape<1, 28, 28>>& test_pairs) {
  //! [loss/regression_choice]
  using Denoiser = cohort::models::UNet<cohort::Shape<1, 28, 28>, 1>;   // one output channel
  cohort::TrainerOptions o{.regression = {.loss = cohort::RegressionLoss::huber, .delta = 0.5}};
  cohort::Trainer<Denoiser, cohort::Adam<>> trainer(cohort::Adam({.lr = 1e-3}), o);
  trainer.fit(pairs, /*epochs=*/5, &test_pairs);   // ImagePairDataset<Shape<1, 28, 28>>
  //! [loss/regression_choice]
}

[[maybe_unused]] void example_loss_bce_with_logits_loss(Network<models::UNet<Shape<1, 28, 28>, 1>>& net,
                                                        const xt::xtensor<float, 4>& x,
                                                        const std::vector<float>& masks) {
  //! [loss/bce_with_logits_loss]
  cohort::BCEWithLogitsLoss bce({.pos_weight = {3.0f}});    // one mask channel, positives 3x
  double l = bce.forward(net.forward(x), masks);             // masks: N * 1 * H * W in [0, 1]
  net.backward(bce.backward());
  //! [loss/bce_with_logits_loss]
  (void)l;
}

[[maybe_unused]] void example_train_segmentation_metrics(Network<models::UNet<Shape<1, 28, 28>, 11>>& net,
                                                         const xt::xtensor<float, 4>& x,
                                                         const std::vector<std::int32_t>& masks) {
  //! [train/segmentation_metrics]
  cohort::SegmentationMetrics m(11);                 // 11 classes
  m.add(net.forward(x), masks);                      // any number of batches
  double miou = m.mean_iou(), acc = m.pixel_accuracy();
  //! [train/segmentation_metrics]
  (void)miou;
  (void)acc;
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

[[maybe_unused]] void example_models_fast_resnet() {
  //! [models/fast_resnet]
  cohort::Network<cohort::models::FastResNet> net(/*seed=*/0); // or a Trainer<FastResNet, Sgd<>>
  //! [models/fast_resnet]
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

namespace example_layers_tanh {
//! [layers/tanh]
using Net = Sequential<Input<10>, Linear<10, 10>, Tanh>;
//! [layers/tanh]
} // namespace example_layers_tanh

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
  // The fast-training recipes' BatchNorm biases at 64x the learning rate:
  opt.set_parameter_groups(cohort::parameter_groups<Net>(cohort::for_batch_norm_biases({.lr_scale = 64})));
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

[[maybe_unused]] void example_data_augment(const CifarData& cifar, std::span<float> image) {
  //! [data/augment]
  const Normalization norm = cifar.statistics();
  Augmentation aug{RandomCrop(32, 4, norm), RandomHorizontalFlip()};
  aug.apply(image, {3, 32, 32}, /*seed=*/1, /*epoch=*/0, /*sample=*/17);   // in place
  //! [data/augment]
}

[[maybe_unused]] void example_data_joint_augment(const Normalization& norm, std::span<float> image,
                                                  std::span<std::int32_t> mask) {
  //! [data/joint_augment]
  JointAugmentation aug{JointRandomCrop(28, 2, norm), JointRandomHorizontalFlip()};
  aug.apply(image, {1, 28, 28}, mask, /*seed=*/1, /*epoch=*/0, /*sample=*/17);   // both in place
  //! [data/joint_augment]
}

[[maybe_unused]] void example_data_dense_dataset(const Normalization& norm, std::span<const std::size_t> indices,
                                                 std::span<float> x, std::span<std::int32_t> masks,
                                                 const JointAugmentation& aug, std::uint64_t seed,
                                                 std::uint64_t epoch) {
  using Net = cohort::models::UNet<cohort::Shape<1, 28, 28>, 11>;
  //! [data/dense_dataset]
  using Data = cohort::MaskDataset<cohort::Shape<1, 28, 28>>;
  auto train = Data::load("images-idx3-ubyte", "masks-idx3-ubyte", /*classes=*/11, norm);
  cohort::check_dense_data<Net>(train, "train");        // shapes at compile time, classes now
  train.load_batch(indices, x, masks, aug, {seed, epoch});   // gathered, jointly augmented
  //! [data/dense_dataset]
}

[[maybe_unused]] void example_data_cifar() {
  //! [data/cifar]
  const auto train = cohort::read_cifar("cifar-10-batches-bin", cohort::CifarVariant::cifar10,
                                        cohort::Split::train);
  const auto norm = train.statistics();          // per-channel mean and std
  auto train_set = train.dataset(norm);          // ImageDataset<Shape<3, 32, 32>>
  auto test_set = cohort::load_cifar("cifar-10-batches-bin", cohort::CifarVariant::cifar10,
                                     cohort::Split::test, norm);
  //! [data/cifar]
}

[[maybe_unused]] void example_data_dataset() {
  //! [data/dataset]
  using Data = cohort::ImageDataset<cohort::Shape<1, 28, 28>>;
  const auto files = cohort::find_idx_files(cohort::default_data_dir, cohort::Split::train);
  auto train = Data::load(files, 10, cohort::Normalization{0.2860f, 0.3530f});
  auto epoch = train.repeated(4);   // 240000 samples, no copy (sample i is sample i % 60000)
  //! [data/dataset]
  (void)epoch;
}

[[maybe_unused]] void example_data_image_view() {
  //! [data/image_view]
  std::vector<float> pixels(100 * 784);          // the caller's pipeline fills these
  std::vector<std::int32_t> classes(100);
  cohort::ImageView<cohort::Shape<1, 28, 28>> view(pixels, classes, 10);
  const float* first = view.image(0);             // == pixels.data(): no copy
  //! [data/image_view]
  (void)first;
}

[[maybe_unused]] void example_data_image_transforms() {
  //! [data/image_transforms]
  cohort::Image8 img(64, 48, 3);                          // width, height, channels (RGB)
  img = cohort::resize_shorter_side(img, 32);             // 42x32, as Resize(32) gives
  img = cohort::center_crop(img, 32, 32);
  std::vector<float> x(3 * 32 * 32);
  cohort::to_normalized_chw(img, cohort::Normalization{}, x);
  //! [data/image_transforms]
}

#if defined(COHORT_WITH_IMAGE)
[[maybe_unused]] void example_data_mask_folder(const Normalization& norm) {
  //! [data/mask_folder]
  auto train = cohort::read_mask_folders<cohort::Shape<3, 64, 64>>(
      "data/images", "data/masks", /*classes=*/21, norm, /*ignore_index=*/255);
  //! [data/mask_folder]
  (void)train;
}

[[maybe_unused]] void example_data_image_pair_folder(const Normalization& norm) {
  //! [data/image_pair_folder]
  auto train = cohort::read_image_pair_folders<cohort::Shape<1, 28, 28>>(
      "data/noisy", "data/clean", norm, /*target_norm=*/{});   // targets in [0, 1]
  //! [data/image_pair_folder]
  (void)train;
}

[[maybe_unused]] void example_data_image_decode() {
  //! [data/image_decode]
  cohort::Image8 rgb = cohort::read_image("cat.jpg", 3);    // 3 channels: convert("RGB")
  std::vector<std::uint8_t> bytes = cohort::read_file("dog.png");
  cohort::ImageInfo info = cohort::read_image_info(bytes, "dog.png");   // the header only
  //! [data/image_decode]
  (void)rgb;
  (void)info;
}

template <class Trainer>
[[maybe_unused]] void example_data_image_folder(Trainer& trainer) {
  //! [data/image_folder]
  using Input = cohort::Shape<3, 32, 32>;                      // the network's input
  auto train = cohort::ImageFolder<Input>::open("data/train", {
      .crop = cohort::FolderCrop::random_resized, .horizontal_flip = true,
      .normalization = cohort::Normalization::per_channel({0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f})});
  auto test = cohort::ImageFolder<Input>::open("data/val", {.resize = 36});   // + center crop
  trainer.fit(train, 10, &test);                                // decoded on 2 worker threads
  //! [data/image_folder]
}
#endif

template <class Net>
[[maybe_unused]] void example_train_weight_names(Net& net) {
  //! [train/weight_names]
  cohort::LoadOptions o{.rename = {cohort::RenameRule::prefix("backbone.", ""),  // backbone.0.weight: 0.weight
                                   cohort::RenameRule::exact("fc.weight", "9.weight")},
                        .strict = false};
  cohort::LoadReport r = cohort::load_weights("model.safetensors", net.parameters(), o);
  // r.missing: the network's tensors the file lacks (left as they were); r.unexpected: the
  // file's tensors (by their own names) that no tensor of the network takes
  //! [train/weight_names]
  (void)r;
}
template void example_train_weight_names(cohort::Network<cohort::models::ModelB>&);

[[maybe_unused]] void example_network_freezing(cohort::Network<cohort::models::ResNet20>& net) {
  //! [network/freezing]
  net.freeze(cohort::Freeze::below(21));            // layers 0..20 fixed: only the head trains
  net.freeze(cohort::Freeze::names({"0", "1."}));    // by state_dict name (prefixes)
  cohort::TrainerOptions o{.freeze = cohort::Freeze::below(21)};   // the same for any policy
  //! [network/freezing]
  (void)o;
}

// A template never instantiated: the example's names and types are checked here, its kernels are
// not compiled (tests/tools/torchvision_mobilenet.cpp runs the same calls, issue 32's build time).
template <class Unused = void>
[[maybe_unused]] void example_models_mobilenet_v2(const cohort::Sgd<>& sgd, const cohort::TrainerOptions& options) {
  //! [models/mobilenet_v2]
  // torchvision.models.mobilenet_v2().state_dict(), saved with safetensors, loaded strictly:
  cohort::Network<cohort::models::MobileNetV2<>> net;
  cohort::load_weights("mobilenet_v2.safetensors", net.parameters(),
                       {.rename = cohort::models::mobilenet_v2_names<cohort::models::MobileNetV2<>>()});
  // Fashion-MNIST: train_mnist --model mobilenet
  cohort::Trainer<cohort::models::MobileNetV2Small<>, cohort::Sgd<>> trainer(sgd, options);
  //! [models/mobilenet_v2]
}

[[maybe_unused]] void example_models_torchvision_resnet() {
  //! [models/torchvision_resnet]
  // torchvision.models.resnet18().state_dict(), saved with safetensors, loaded strictly:
  cohort::Network<cohort::models::ResNet18<>> net;
  cohort::load_weights("resnet18.safetensors", net.parameters(),
                       {.rename = cohort::models::torchvision_names<cohort::models::ResNet18<>>()});
  // and back under torchvision's names:
  cohort::save_weights("out.safetensors", net.parameters(),
                       cohort::inverted(cohort::models::torchvision_names<cohort::models::ResNet18<>>()));
  //! [models/torchvision_resnet]
}

namespace example_network_init {
using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 8, 2>, ReLU, Conv2d<8, 8, 3, 1, 1>, ReLU, Flatten, Linear<5832, 10>>;
[[maybe_unused]] void example(cohort::Network<Net>& net, std::span<const float> images) {
  //! [network/init]
  // using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 8, 2>, ReLU, Conv2d<8, 8, 3, 1, 1>, ...>;
  auto& p = net.parameters();                         // a Network<Net>'s, or a CPU Trainer's
  cohort::init::whitening(p.find("0.weight"), images, {1, 28, 28});   // 8 = 2 x (1 x 2 x 2)
  cohort::init::dirac(p.find("2.weight"));            // a 3x3 convolution that passes its input on
  //! [network/init]
}
} // namespace example_network_init

namespace example_optim_weight_average {
using Net = models::ModelB;
[[maybe_unused]] void example() {
  //! [optim/weight_average]
  cohort::Network<Net> net(0);
  cohort::WeightAverage<Net> ema({.decay = 0.99});
  // ... after each optimiser step:
  ema.update(net.parameters());
  // ema.parameters(): the averaged state_dict, to evaluate, predict with or save
  //! [optim/weight_average]
}
} // namespace example_optim_weight_average

[[maybe_unused]] void example_optim_ema_options() {
  //! [optim/ema_options]
  cohort::TrainerOptions o{.ema = cohort::EmaOptions{.decay = 0.99, .every = 5}};
  //! [optim/ema_options]
  (void)o;
}

[[maybe_unused]] void example_network_test_time_augmentation(cohort::Network<cohort::models::ModelA>& net,
                                                              const std::vector<float>& images) {
  //! [network/test_time_augmentation]
  auto p = cohort::predict(net, images, cohort::Prediction::scores, 256, cohort::TestTimeAugmentation::flip);
  //! [network/test_time_augmentation]
  (void)p;
}

namespace example_optim_lookahead {
using Net = models::ModelB;
[[maybe_unused]] void example() {
  //! [optim/lookahead]
  cohort::Lookahead<cohort::Sgd<>> opt(cohort::Sgd({.lr = 0.1, .momentum = 0.9}), {.k = 5, .alpha = 0.5});
  cohort::Trainer<Net, decltype(opt)> trainer(std::move(opt));
  //! [optim/lookahead]
}
} // namespace example_optim_lookahead

[[maybe_unused]] void example_network_predict(cohort::Network<cohort::models::ModelA>& net,
                                               const std::vector<float>& images) {
  //! [network/predict]
  std::vector<float> p = cohort::predict(net, images, cohort::Prediction::probabilities);
  // p[i * 10 + k]: sample i's probability of class k (images: N * 784 floats, normalised)
  std::vector<std::size_t> k = cohort::predicted_classes<10>(p);   // argmax per sample
  //! [network/predict]
  (void)k;
}

[[maybe_unused]] void example_data_idx() {
  //! [data/idx]
  auto images = cohort::read_idx("train-images-idx3-ubyte.gz", cohort::idx_images_magic);
  // images.dims == {60000, 28, 28}, images.values.size() == 47040000
  //! [data/idx]
  (void)images;
}

[[maybe_unused]] void example_data_sampler(std::uint64_t epoch) {
  //! [data/sampler]
  cohort::ShuffleSampler s(60000, /*seed=*/1);
  std::vector<std::size_t> order;
  s.indices(epoch, order);   // a permutation of 0..59999 that depends only on (seed, epoch)

  cohort::DistributedSampler d(60000, /*num_replicas=*/4, /*rank=*/1);
  d.indices(epoch, order);   // this rank's 15000 indices, torch DistributedSampler's split
  //! [data/sampler]
}

[[maybe_unused]] void example_io_atomic_file(std::span<const char> header, std::span<const char> payload) {
  //! [io/atomic_file]
  const std::span<const char> parts[] = {header, payload};
  cohort::write_file_atomically("model.safetensors", parts);
  //! [io/atomic_file]
}

[[maybe_unused]] void example_io_crc32c(const std::string& bytes, const std::string& more) {
  //! [io/crc32c]
  std::uint32_t c = cohort::crc32c(bytes.data(), bytes.size());   // crc32c("123456789") == 0xE3069283
  c = cohort::crc32c(more.data(), more.size(), c);                 // continues: CRC of bytes + more
  //! [io/crc32c]
  (void)c;
}

[[maybe_unused]] void example_io_safetensors(const float* data, std::size_t bytes) {
  //! [io/safetensors]
  auto f = cohort::SafetensorsFile::read("model.safetensors");   // validates everything
  std::vector<float> w = f.values<float>("0.weight");

  cohort::SafetensorsWriter out;
  out.add("0.weight", cohort::DType::f32, {16, 1, 3, 3}, data, bytes);
  out.write("model.safetensors");   // atomic
  //! [io/safetensors]
}

[[maybe_unused]] void example_train_checkpoint(Network<models::ModelA>& net, Adadelta<>& opt, const TrainerState& state) {
  //! [train/checkpoint]
  cohort::save_weights("model.safetensors", net.parameters());          // loadable by torch
  cohort::load_weights("model.safetensors", net.parameters());          // strict, by name
  cohort::save_checkpoint("ckpt.safetensors", net.parameters(), opt, state);
  TrainerState resumed = cohort::load_checkpoint("ckpt.safetensors", net.parameters(), opt);
  //! [train/checkpoint]
  (void)resumed;
}

[[maybe_unused]] void example_train_trainer(const ImageDataset<Shape<1, 28, 28>>& train_set, const ImageDataset<Shape<1, 28, 28>>& test_set) {
  //! [train/trainer]
  using namespace cohort;
  Trainer<models::ModelA, Adadelta<>> trainer(Adadelta({.lr = 0.5}), {.batch_size = 128});
  auto history = trainer.fit(train_set, /*epochs=*/2, &test_set);
  trainer.save("model_a.safetensors");
  //! [train/trainer]
  (void)history;
}

[[maybe_unused]] void example_parallel_device_assignment() {
  //! [parallel/device_assignment]
  rank_device({.first = 0, .local_rank = 1, .local_size = 4, .visible = 4});  // 1: the node's GPUs, one each
  rank_device({.first = 0, .local_rank = 1, .local_size = 4, .visible = 1});  // 0: its own GPU only
  //! [parallel/device_assignment]
}

[[maybe_unused]] void example_parallel_gradient_buckets() {
  using Net = models::ModelC;
  //! [parallel/gradient_buckets]
  auto buckets = cohort::plan_buckets<Net>(1 << 20);   // about 1 MiB each
  //! [parallel/gradient_buckets]
  (void)buckets;
}

[[maybe_unused]] void example_parallel_gradient_compression() {
  //! [parallel/gradient_compression]
  TrainerOptions o;
  o.parallel.compression = cohort::GradientCompression::bf16;   // or fp16
  o.parallel.error_feedback = true;                             // carry the rounding over
  //! [parallel/gradient_compression]
  (void)o;
}

[[maybe_unused]] void example_parallel_policy() {
  //! [parallel/policy]
  cohort::TrainerOptions o;
  o.parallel.deterministic = true;   // bitwise the same weights for any replica count / world size
  //! [parallel/policy]
  (void)o;
}

[[maybe_unused]] void example_parallel_signature(const std::string& mine, const std::string& theirs) {
  using Net = models::ModelC;
  //! [parallel/signature]
  auto lines = cohort::network_signature<Net>();          // "layer 3: Conv2d<16,32,3,1,0> ..."
  std::string why = cohort::signature_difference(mine, theirs, 0, 2);
  //! [parallel/signature]
  (void)lines, (void)why;
}

[[maybe_unused]] void example_parallel_single_device(const Adam<>& opt) {
  using Net = models::ModelC;
  //! [parallel/single_device]
  cohort::Trainer<Net, cohort::Adam<>, cohort::SingleDevice<>> trainer(opt);   // the default
  //! [parallel/single_device]
}

[[maybe_unused]] void example_parallel_threaded_replicas(const Sgd<>& opt) {
  using Net = models::ModelC;
  //! [parallel/threaded_replicas]
  cohort::Trainer<Net, cohort::Sgd<>, cohort::ThreadedReplicas<2>> trainer(opt, {.batch_size = 128});
  //! [parallel/threaded_replicas]
}

namespace example_core_dtype {
//! [core/dtype]
static_assert(cohort::dtype_of<float> == cohort::DType::f32);
//! [core/dtype]
} // namespace example_core_dtype

[[maybe_unused]] void example_core_error(Network<models::ModelA>& net, const xt::xtensor<float, 4>& x) {
  //! [core/error]
  try { net.forward(x); } catch (const cohort::ShapeError& e) { std::cerr << e.what(); }
  //! [core/error]
}

[[maybe_unused]] void example_core_random() {
  //! [core/random]
  cohort::RandomStream s{/*seed=*/42, /*stream=*/7};
  float u = s.uniform(123);   // the 123rd number of that stream, in [0, 1)
  //! [core/random]
  (void)u;
}

namespace example_core_shape {
//! [core/shape]
using Image = cohort::Shape<1, 28, 28>;   // C, H, W
static_assert(Image::size == 784);
//! [core/shape]
} // namespace example_core_shape

[[maybe_unused]] void example_tensor_batch() {
  //! [tensor/batch]
  xt::xtensor<float, 4> images({128, 1, 28, 28});
  auto x = cohort::as_batch<cohort::Shape<1, 28, 28>>(images);   // checks the shape
  x.batch();          // 128
  x.tensor()(0, 0, 3, 4) = 1.f;   // an xtensor adaptor (<cohort/tensor/xtensor.hpp>)
  //! [tensor/batch]
}

using XtensorExampleNet = cohort::Sequential<cohort::Input<1, 28, 28>, cohort::Conv2d<1, 8, 3>, cohort::ReLU,
                                             cohort::Flatten, cohort::Linear<5408, 10>>;
[[maybe_unused]] void example_tensor_xtensor(cohort::Network<XtensorExampleNet>& net,
                                             xt::xtensor<float, 4>& images) {
  //! [tensor/xtensor]
  auto w = net.parameters().view<0, "weight">();   // xt::xfixed_adaptor, shape (8, 1, 3, 3)
  auto x = cohort::as_batch<cohort::Shape<1, 28, 28>>(images);
  x.tensor()(0, 0, 3, 4) = 1.f;                     // writes into `images`
  //! [tensor/xtensor]
  static_assert(std::is_same_v<decltype(w)::shape_type, xt::fixed_shape<8, 1, 3, 3>>);
}

[[maybe_unused]] void example_tensor_buffer() {
  //! [tensor/buffer]
  cohort::HostBuffer<float> b;
  b.resize(1024);   // allocates
  b.resize(512);    // no allocation: capacity is kept, so a short last batch costs nothing
  b.resize(1024);   // still no allocation
  //! [tensor/buffer]
}

// clang-format on

TEST_CASE("header examples: the half example rounds as its comment says") {
  //  (the other examples are compiled, not run)
  CHECK(float(half(0.1f)) == 0.0999755859375f);
}

#pragma once
// Trainer<..., SingleDevice<Dev>> (train/engine/single_device_on_device.hpp) on the device backend
// `Dev` (chosen by the including file): it follows the CPU trainer (host-compiler builds), resumes
// exactly from its own checkpoints, and learns.
#include <doctest/doctest.h>

#include <algorithm>

#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/models/unet.hpp>

#include "support/bands.hpp"
#include "support/device_harness.hpp"
#include "support/mask_bands.hpp"
#include "support/schedule_check.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
template <class Net, class Opt>
void check_device_trainer(Opt opt, std::uint64_t total, std::uint64_t half, double bound = 5e-5) {
  const Bands data(100, 1); // 5 batches per epoch (the last one short): runs cross epochs
  TempDir dir("cohort_device_trainer_");
  const auto straight = trained_weights<Net, SingleDevice<Dev>>(opt, data, total);
  // The batches gathered ahead on the prefetch thread are the ones gathered in place without it.
  CHECK(straight == trained_weights<Net, SingleDevice<Dev>>(opt, data, total, {}, {}, /*prefetch=*/false));
#if !defined(__CUDACC__) // CPU networks stay out of .cu files (layers_cases.hpp says why)
  const auto cpu = trained_weights<Net, SingleDevice<>>(opt, data, total);
  // Same data order, initialisation and dropout masks; sums in other orders. Tensor by tensor
  // (a bias next to a large weight): measured at most 8.1e-6 of a tensor's largest value (model
  // B's 1.bias after 12 SGD steps; model A 3.4e-7), bounded by 5e-5 (margin 6x). Deeper nets get
  // their own bound (the caller says why).
  COHORT_CHECK_TENSORS_CLOSE(Net, straight, cpu, bound, "device-trained weights vs CPU-trained");
#endif
  trained_weights<Net, SingleDevice<Dev>>(opt, data, half, dir.path / "half.safetensors");
  const auto resumed = trained_weights<Net, SingleDevice<Dev>>(opt, data, total, {}, dir.path / "half.safetensors");
  CHECK(straight == resumed); // bitwise: parameters, statistics and optimiser state went through the checkpoint
}
} // namespace

TEST_CASE("device trainer: follows the CPU trainer and resumes exactly (BatchNorm statistics, SGD momentum)") {
  check_device_trainer<models::ModelB>(Sgd({.lr = 0.05, .momentum = 0.9}), 12, 5);
}
TEST_CASE("device trainer: follows the CPU trainer and resumes exactly (dropout, Adadelta)") {
  // A trajectory can jump where a sum rounded another way flips a discrete choice (a max-pool
  // window's argmax, a ReLU at zero): on Zen 4's AVX-512 path at -O1 (no FMA contraction) one
  // element of 2.weight is 1.8e-7 of the tensor's largest value off after 4 steps and 4.5e-5 after
  // 6 (5.1e-5 after 8), every other tensor below 3e-6. Bound 2e-4 (4x that).
  check_device_trainer<models::ModelA>(Adadelta({.lr = 0.5}), 8, 3, 2e-4);
}
TEST_CASE(
    "device trainer: follows the CPU trainer and resumes exactly (a residual network: basic blocks, projection)") {
  using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 8, 3, 2, 1, false>, BatchNorm2d<8>, ReLU, models::BasicBlock<8, 8>,
                         ReLU, models::BasicBlock<8, 16, 2>, ReLU, AdaptiveAvgPool2d<1>, Flatten, Linear<16, 10>>;
  // Eight BatchNorms deep, the rounding differences grow faster than in model B: measured 2.1e-4 of
  // 0.weight's largest value after 8 SGD steps (the stem, which every gradient flows into), 1e-3 the bound.
  check_device_trainer<Net>(Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4}), 8, 3, 1e-3);
}
TEST_CASE("device trainer: a learning-rate schedule reaches the device optimiser (the rates set by hand give the "
          "same weights)") {
  check_schedule_by_hand<SingleDevice<Dev>, FullPrecision>(); // Trainer::set_lr reaches the device's optimiser
}
TEST_CASE("device trainer: parameter groups and gradient clipping reach the device optimiser") {
  using Net = models::ModelB; // BatchNorm and biases: groups without decay
  const Bands data(100, 1);
  const auto run = [&]<class Policy>(std::type_identity<Policy>, bool recipe) {
    TrainerOptions o{.batch_size = 24, .seed = 5, .max_steps = 8, .log = nullptr};
    if (recipe) {
      o.parameter_groups = for_norms_and_biases({.lr_scale = 0.5, .weight_decay = 0.0});
      o.max_grad_norm = 0.5; // below the gradients' norm: every step clips
    }
    Trainer<Net, Sgd<>, Policy> t(Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}), o);
    t.fit(data, 10);
    return std::pair{std::vector<float>(t.parameters().values.begin(), t.parameters().values.end()),
                     t.last_grad_norm()};
  };
  const auto [device, device_norm] = run(std::type_identity<SingleDevice<Dev>>{}, true);
  const auto [plain, plain_norm] = run(std::type_identity<SingleDevice<Dev>>{}, false);
  CHECK(device != plain);
  CHECK(std::isnan(plain_norm));
  CHECK(device_norm > 0.5);
#if !defined(__CUDACC__) // CPU networks stay out of .cu files (layers_cases.hpp says why)
  const auto [cpu, cpu_norm] = run(std::type_identity<SingleDevice<>>{}, true);
  // As check_device_trainer's bound for model B (5e-5 of a tensor's largest value).
  COHORT_CHECK_TENSORS_CLOSE(Net, device, cpu, 5e-5, "device-trained weights vs CPU-trained, groups and clipping");
  CHECK(device_norm == doctest::Approx(cpu_norm).epsilon(1e-4));
#endif
}
TEST_CASE("device trainer: a frozen backbone stays as initialised, and the head follows the CPU trainer") {
  using Net = models::ModelB; // layers 0..7 the backbone (two conv + BatchNorm), 9 the head
  const Bands data(100, 1);
  const auto run = [&]<class Policy>(std::type_identity<Policy>) {
    TrainerOptions o{.batch_size = 24, .seed = 5, .max_steps = 8, .log = nullptr};
    o.freeze = Freeze::below(8);
    Trainer<Net, Sgd<>, Policy> t(Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}), o);
    t.fit(data, 10);
    auto& p = t.parameters();
    std::vector<float> all(p.values.begin(), p.values.end());
    all.insert(all.end(), p.buffers.span().begin(), p.buffers.span().end());
    return all;
  };
  const auto device = run(std::type_identity<SingleDevice<Dev>>{});
  Parameters<Net, float, Cpu> init;
  init.initialize(5);
  constexpr std::size_t backbone = Net::layout.param_base[8], store = Net::parameter_store_size;
  CHECK(std::equal(device.begin(), device.begin() + backbone, init.values.begin()));
  CHECK(std::equal(device.begin() + store, device.end(), init.buffers.span().begin())); // statistics kept (eval)
  CHECK_FALSE(std::equal(device.begin() + backbone, device.begin() + store, init.values.begin() + backbone));
#if !defined(__CUDACC__) // CPU networks stay out of .cu files (layers_cases.hpp says why)
  const auto cpu = run(std::type_identity<SingleDevice<>>{});
  // As check_device_trainer's bound for model B (5e-5 of a tensor's largest value).
  COHORT_CHECK_TENSORS_CLOSE(Net, std::vector<float>(device.begin(), device.begin() + store),
                             std::vector<float>(cpu.begin(), cpu.begin() + store), 5e-5,
                             "device-trained head vs CPU-trained, backbone frozen");
#endif
}
TEST_CASE("device trainer: OneCycleLR's momentum reaches the device optimiser") {
  using Net = models::ModelB;
  const Bands data(100, 1);
  const auto run = [&]<class Policy>(std::type_identity<Policy>, const char* schedule) {
    TrainerOptions o{.batch_size = 24, .seed = 5, .max_steps = 10, .log = nullptr};
    o.lr_schedule = LrSchedule::parse(schedule);
    o.schedule_per_step = true;
    Trainer<Net, Sgd<>, Policy> t(Sgd({.lr = 0.05, .momentum = 0.9}), o);
    t.fit(data, 10);
    return std::vector<float>(t.parameters().values.begin(), t.parameters().values.end());
  };
  constexpr const char* cycling = "onecycle,max_lr=0.1,total_steps=10,base_momentum=0.5,max_momentum=0.95";
  const auto device = run(std::type_identity<SingleDevice<Dev>>{}, cycling);
  CHECK(device != run(std::type_identity<SingleDevice<Dev>>{},
                      "onecycle,max_lr=0.1,total_steps=10,cycle_momentum=0")); // the momentum matters
#if !defined(__CUDACC__) // CPU networks stay out of .cu files (layers_cases.hpp says why)
  // As check_device_trainer's bound for model B (5e-5 of a tensor's largest value).
  COHORT_CHECK_TENSORS_CLOSE(Net, device, run(std::type_identity<SingleDevice<>>{}, cycling), 5e-5,
                             "device-trained weights vs CPU-trained, momentum cycled");
#endif
}
TEST_CASE("device trainer: learns and evaluates (model C, Adam)") {
  const Bands train(600, 2), test(200, 3);
  Trainer<models::ModelC, Adam<>, SingleDevice<Dev>> t(Adam({.lr = 1e-3, .eps = 1e-7}),
                                                       {.batch_size = 50, .log = nullptr});
  const auto history = t.fit(train, 2, &test);
  REQUIRE(history.size() == 2);
  CHECK(history[1].test_accuracy.value() > 90.0);
  CHECK(t.step() == 24);
}

namespace {
// The dense (per-pixel) trainer's networks, as tests/train/dense_trainer.cpp's: GroupNorm
// normalises each sample alone, so a batch split between replicas computes what the whole does.
using DenseUNet = models::UNet<Shape<1, 8, 8>, 3, 4, 1>; // BatchNorm, bilinear upsampling
using GroupDenseUNet = models::UNet<Shape<1, 8, 8>, 3, 4, 1, models::UNetUpsampling::bilinear, models::UNetNorm::group>;

TrainerOptions dense_device_options(std::size_t batch) {
  TrainerOptions o{.batch_size = batch, .seed = 5, .log = nullptr};
  o.loss = {.label_smoothing = 0.05, .class_weights = {1.f, 2.f, 0.5f}};
  return o;
}
template <class T>
std::vector<float> values_of(T& trainer) {
  return {trainer.parameters().values.begin(), trainer.parameters().values.end()};
}
} // namespace

TEST_CASE("device trainer on masks: a U-Net learns, follows the CPU trainer, and evaluates pixels and mean IoU") {
  const auto train = mask_bands(96, 1), test = mask_bands(48, 2);
  const TrainerOptions o = dense_device_options(16);
  Trainer<DenseUNet, Adam<>, SingleDevice<Dev>> dev(Adam({.lr = 1e-2}), o);
  const EvalReport before = dev.evaluate(test);
  const auto history = dev.fit(train, 10, &test);
  const EvalReport e = dev.evaluate(test);
  REQUIRE(e.mean_iou);
  REQUIRE(history.back().test_mean_iou);
  MESSAGE("device U-Net: mean IoU ", *before.mean_iou, " -> ", *e.mean_iou, ", pixel accuracy ", e.accuracy, "%");
  CHECK(history.back().train_loss < 0.7 * history.front().train_loss);
  CHECK(*e.mean_iou > *before.mean_iou + 0.1);
  CHECK(*history.back().test_mean_iou == *e.mean_iou);
#if !defined(__CUDACC__) // CPU networks stay out of .cu files (layers_cases.hpp says why)
  Trainer<DenseUNet, Adam<>> cpu(Adam({.lr = 1e-2}), o);
  cpu.fit(train, 10, &test);
  // The same batches, initialisation and loss (class weights, smoothing, ignored pixels), sums in
  // other orders: measured 5.7e-7 of a tensor's largest value after 60 Adam steps (Sapphire
  // Rapids, -O1); 1e-4 leaves room for a trajectory that jumps where a rounding flips a ReLU or
  // a max-pool's argmax, as model A's case above does on Zen 4.
  COHORT_CHECK_TENSORS_CLOSE(DenseUNet, values_of(dev), values_of(cpu), 1e-4, "device-trained U-Net vs CPU-trained");
  const EvalReport c = cpu.evaluate(test);
  CHECK(e.loss == doctest::Approx(c.loss).epsilon(1e-4));
  CHECK(e.accuracy == doctest::Approx(c.accuracy).epsilon(1e-3));
  CHECK(*e.mean_iou == doctest::Approx(*c.mean_iou).epsilon(1e-3));
#endif
}

TEST_CASE("device ThreadedReplicas on masks: a step's loss is the whole batch's mean over its counted pixels") {
  COHORT_REQUIRE_DEVICES(2);
  // Samples 0, 3, 6, ... have 48 of their 64 pixels ignored: the shards count different numbers
  // of pixels, and each must divide by the whole batch's weight total.
  const auto train = mask_bands(32, 3);
  TrainerOptions o = dense_device_options(32);
  o.max_steps = 1;
  Trainer<GroupDenseUNet, Sgd<>, SingleDevice<Dev>> one(Sgd({.lr = 0.1}), o);
  Trainer<GroupDenseUNet, Sgd<>, ThreadedReplicas<2, Dev>> two(Sgd({.lr = 0.1}), o);
  const double l1 = one.fit(train, 1).back().train_loss;
  const double l2 = two.fit(train, 1).back().train_loss;
  CHECK(l2 == doctest::Approx(l1).epsilon(1e-6));
  COHORT_CHECK_TENSORS_CLOSE(GroupDenseUNet, values_of(two), values_of(one), 1e-5, "two replicas vs one, one step");
  const EvalReport e1 = one.evaluate(train), e2 = two.evaluate(train);
  CHECK(e2.accuracy == doctest::Approx(e1.accuracy).epsilon(1e-12));
  CHECK(*e2.mean_iou == doctest::Approx(*e1.mean_iou).epsilon(1e-12));
  CHECK(e2.loss == doctest::Approx(e1.loss).epsilon(1e-6));
}

TEST_CASE("device trainer on masks: bf16 mixed precision trains the U-Net") {
  const auto train = mask_bands(96, 1), test = mask_bands(48, 2);
  Trainer<GroupDenseUNet, Adam<>, SingleDevice<Dev>, MixedPrecision<bf16>> t(Adam({.lr = 1e-2}),
                                                                             dense_device_options(16));
  const EvalReport before = t.evaluate(test);
  const auto history = t.fit(train, 10, &test);
  REQUIRE(history.back().test_mean_iou);
  MESSAGE("device bf16 U-Net: mean IoU ", *before.mean_iou, " -> ", *history.back().test_mean_iou);
  CHECK(std::isfinite(history.back().train_loss));
  CHECK(history.back().train_loss < 0.7 * history.front().train_loss);
  CHECK(*history.back().test_mean_iou > *before.mean_iou + 0.1);
}

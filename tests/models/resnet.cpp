// ResNet-20 (models/resnet.hpp) against PyTorch's cohort_modules.resnet20 from the same
// cohort-initialised weights (fixture model_resnet20, float64, make_reference.py's make_resnet):
// the float network's first step (output, input gradient, every parameter gradient), and the
// double network over 3 SGD steps (Nesterov momentum, weight decay, BatchNorm in training mode).
// Why the 3 steps run in double: float trajectories of deep ReLU networks part wherever a
// pre-activation rounds to the other side of zero (make_resnet's docstring has the measurement).

#include <doctest/doctest.h>

#include <cohort/models/resnet.hpp>
#include <cohort/models/torchvision_resnet.hpp>
#include <cohort/precision/mixed_precision.hpp>

#include "support/bands.hpp"
#include "support/model_harness.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
using namespace cohort::test;
using Net = models::ResNet20;
using test::Bands;

// The parameter counts of PyTorch's modules (sum(p.numel() for p in model.parameters())).
static_assert(models::ResNet20::parameter_count == 272'186);
static_assert(std::is_same_v<models::ResNet20::output_shape, Shape<10>>);
static_assert(models::CifarResNet20::parameter_count == 272'474);
static_assert(models::ResNet18<>::parameter_count == 11'689'512); // torchvision.models.resnet18()
static_assert(models::ResNet34<>::parameter_count == 21'797'672); // torchvision.models.resnet34()
using test::TempDir;
using test::trained_weights;

namespace {
/// Fixture tensor `key` (or its every-7th-element sample, for tensors of more than 4096) against
/// `actual`, to `rtol` of the tensor's largest magnitude.
template <class T>
void check_sampled(const SafetensorsFile& f, const std::string& key, std::span<const T> actual, double rtol) {
  if (f.find(key)) {
    if (f.at(key).dtype == DType::i64) {
      CHECK(double(actual[0]) == double(f.values<std::int64_t>(key)[0]));
      return;
    }
    COHORT_CHECK_CLOSE(actual, std::span<const double>(f.values<double>(key)), rtol, key);
    if (report_measurements()) MESSAGE(key << ": " << relative_difference(actual, f.values<double>(key)));
    return;
  }
  REQUIRE_MESSAGE(f.find(key + ".every7"), "fixture has neither " << key << " nor " << key << ".every7");
  std::vector<T> picked;
  for (std::size_t i = 0; i < actual.size(); i += 7) picked.push_back(actual[i]);
  COHORT_CHECK_CLOSE(std::span<const T>(picked), std::span<const double>(f.values<double>(key + ".every7")), rtol,
                     key + " (every 7th element)");
}

/// Every tensor of `net` of `kind` (or its gradient, `grads`) against the fixture's `prefix` tensors.
template <class T>
void check_all(const SafetensorsFile& f, Network<Net, T>& net, const std::string& prefix, bool grads, TensorKind kind,
               double rtol) {
  for (const TensorRef& t : net.state_dict()) {
    if (t.kind != kind) continue;
    if (grads) {
      const auto g = gradient_of(net, t.name);
      check_sampled(f, prefix + t.name, std::span<const T>(g.data(), g.size()), rtol);
    } else {
      const auto v = tensor_values(net, t.name);
      check_sampled(f, prefix + t.name, std::span<const double>(v), rtol);
    }
  }
}
} // namespace

TEST_CASE("ResNet-20 (float): the first step matches PyTorch (output, input and parameter gradients)") {
  const auto f = fixture("model_resnet20");
  Network<Net> net(0);
  for (const TensorRef& t : net.state_dict()) {
    const auto v = tensor_values(net, t.name);
    if (t.dtype == DType::i64) continue;
    const auto head = f.values<double>("init_head." + t.name);
    for (std::size_t i = 0; i < head.size(); ++i)
      REQUIRE_MESSAGE(v[i] == head[i], "initial " << t.name << "[" << i << "] differs from the mirror");
  }
  const auto x = f.values<float>("x0");
  const auto labels = f.values<std::int32_t>("labels0");
  CrossEntropyLoss<> loss;
  const auto y = net.forward(ConstBatchView<Shape<1, 28, 28>, float>(x.data(), labels.size()));
  CHECK(loss.forward(y, labels) == doctest::Approx(f.values<double>("loss0")[0]).epsilon(1e-6));
  const auto dx = net.backward(loss.backward(), {.input_grad = true});
  // Measured against PyTorch in float64: cohort 2.4e-6 of a tensor's largest value at worst,
  // PyTorch's own float32 3.1e-6 (0.weight); bound 1e-5 as every layer and model on the
  // baseline path. With Winograd F(4x4) on the 64-channel stage (AVX2 and AVX-512; AVX2 also on
  // the 16-channel stage) up to 1.22e-5: bound 2e-5 there (float_parity_rtol).
  const double rtol = float_parity_rtol();
  COHORT_CHECK_CLOSE(y.span(), std::span<const double>(f.values<double>("y0")), rtol, "y0");
  COHORT_CHECK_CLOSE(dx.span(), std::span<const double>(f.values<double>("dx0")), rtol, "dx0");
  check_all(f, net, "g0.", true, TensorKind::parameter, rtol);
}

TEST_CASE("ResNet-20 (double): 3 SGD steps match PyTorch in float64 (losses, parameters, statistics)") {
  const auto f = fixture("model_resnet20");
  Network<Net> init(0); // cohort's float initialisation, as the mirror's, then exact in double
  Network<Net, double> net;
  std::copy(init.parameters().values.begin(), init.parameters().values.end(), net.parameters().values.begin());
  std::copy(init.parameters().buffers.begin(), init.parameters().buffers.end(), net.parameters().buffers.begin());
  CrossEntropyLoss<double> loss;
  Sgd<double> opt({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  for (int s = 0; s < 3; ++s) {
    const auto xf = f.values<float>("x" + std::to_string(s));
    const std::vector<double> x(xf.begin(), xf.end());
    const auto labels = f.values<std::int32_t>("labels" + std::to_string(s));
    const double l =
        loss.forward(net.forward(ConstBatchView<Shape<1, 28, 28>, double>(x.data(), labels.size())), labels);
    CHECK(l == doctest::Approx(f.values<double>("loss" + std::to_string(s))[0]).epsilon(1e-12));
    net.backward(loss.backward());
    opt.step(net);
  }
  // Parameters: measured 5.6e-12 of a tensor's largest value at worst (summation order alone);
  // bound 1e-9. Running statistics: BatchNorm2d's momentum is a float template argument (0.1f,
  // 1.5e-8 above 0.1), which moves them by 1.3e-8 of their largest value; bound 1e-7.
  check_all(f, net, "after.", false, TensorKind::parameter, 1e-9);
  check_all(f, net, "after.", false, TensorKind::buffer, 1e-7);
  check_all(f, net, "after.", false, TensorKind::counter, 0);
}

TEST_CASE("ResNet-20: 272,186 parameters under PyTorch's names, blocks nested as cohort_modules.Residual") {
  static_assert(Net::parameter_count == 272'186);
  Network<Net> net(0);
  const auto sd = net.state_dict();
  const auto has = [&](const std::string& name) {
    return std::any_of(sd.begin(), sd.end(), [&](const TensorRef& t) { return t.name == name; });
  };
  CHECK(has("0.weight"));
  CHECK(!has("0.bias")); // no bias before a BatchNorm
  CHECK(has("3.body.0.weight"));
  CHECK(!has("3.shortcut.0.weight")); // identity shortcut
  CHECK(has("9.shortcut.0.weight"));  // projection: 16 -> 32 channels at stride 2
  CHECK(has("15.shortcut.1.num_batches_tracked"));
  CHECK(has("23.weight"));
}

TEST_CASE("ResNet-20: training resumes bit for bit (nested tensor names and BatchNorm counters in the checkpoint)") {
  const Bands data(100, 1); // 5 batches of 24 per epoch: the resume crosses an epoch
  TempDir dir("cohort_resnet_");
  const auto sgd = Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
  const auto straight = trained_weights<Net, SingleDevice<>>(sgd, data, 7);
  trained_weights<Net, SingleDevice<>>(sgd, data, 3, dir.path / "half.safetensors");
  const auto resumed = trained_weights<Net, SingleDevice<>>(sgd, data, 7, {}, dir.path / "half.safetensors");
  CHECK(straight == resumed);
}

namespace {
template <class Policy, class Precision = FullPrecision>
double resnet_accuracy(int epochs = 2) {
  // 2 epochs of 15 steps of 16 (the same 30 steps as batches of 32 took, half the time: the
  // test is a quarter of the ISA re-runs' time, issue 32). Measured 100% for all four runs on
  // the AVX-512, AVX2 and baseline paths; with 8 to 16 steps of 32 (fewer images or one epoch)
  // some runs ended between 12% and 94%, and 30 steps of 8 between 49% and 91%.
  const Bands train(240, 2), test(100, 3);
  Trainer<Net, Sgd<>, Policy, Precision> t(Sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true}),
                                           {.batch_size = 16, .log = nullptr});
  const double accuracy = t.fit(train, epochs, &test).back().test_accuracy.value();
  if (report_measurements()) MESSAGE(Policy::name << " " << Precision::name << ": " << accuracy << "%");
  return accuracy;
}
} // namespace

TEST_CASE("ResNet-20 learns under SingleDevice, ThreadedReplicas, and fp16 and bf16 mixed precision") {
  // The toy bands are learnt to 100% by every policy in 2 epochs of 15 steps; measured 100%.
  CHECK(resnet_accuracy<SingleDevice<>>() > 95.0);
  // ThreadedReplicas runs SingleDevice's kernels on each replica. The ISA re-runs (COHORT_ISA set)
  // keep the three runs whose kernels differ per instruction set; ThreadedReplicas is checked by
  // the native run here and on every path by the replica cases (bitwise 1/2/4 replicas). Its run
  // was 15 of the baseline re-run's 61 s (issue 32).
  if (!cpu::isa_request().set) CHECK(resnet_accuracy<ThreadedReplicas<2>>() > 95.0);
  CHECK(resnet_accuracy<SingleDevice<>, MixedPrecision<fp16>>() > 95.0);
  // bf16 on AVX2 without a bf16 dot engine (float kernels on bf16 values, Winograd F(4x4) on the
  // 16- and 64-channel stages) ended the 2 epochs at 89%: a third epoch for bf16 everywhere.
  CHECK(resnet_accuracy<SingleDevice<>, MixedPrecision<bf16>>(3) > 95.0);
}

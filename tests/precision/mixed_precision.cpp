// MixedPrecision: 16-bit networks against float ones, GradScaler's semantics, overflow handling
// in every engine that runs in one process, exact resume, and training that learns.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/precision/mixed_precision.hpp>
#include <cohort/train/trainer.hpp>

#include "support/bands.hpp"
#include "support/compare.hpp"
#include "support/engine_harness.hpp"
#include "support/overflow_cases.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
namespace fs = std::filesystem;
using test::Bands;
using test::relative_difference;

namespace {

/// ||a - b|| / ||b||: a few flipped ReLU masks or max-pool choices (inputs within rounding of
/// a kink) move single gradient entries a lot but the whole gradient little.
template <class A, class B>
double relative_norm(const A& a, const B& b) {
  double diff = 0, norm = 1e-60;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    norm += double(b[i]) * double(b[i]);
  }
  return std::sqrt(diff / norm);
}

template <class H>
std::vector<float> rounded_to(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = float(H(v[i]));
  return r;
}

/// One training-mode forward and backward in storage type H, weights from a float network:
/// (output, parameter gradients, input gradient) in float.
template <class Net, class H>
std::tuple<std::vector<float>, std::vector<float>, std::vector<float>>
run(const Parameters<Net, float, Cpu>& master, const std::vector<float>& x, const std::vector<float>& dy_f,
    std::size_t batch, bool fusion) {
  Parameters<Net, H, Cpu> p;
  for (std::size_t i = 0; i < p.values.size(); ++i) p.values[i] = H(master.values[i]);
  std::copy(master.buffers.begin(), master.buffers.end(), p.buffers.begin());
  Gradients<Net, H, Cpu> g;
  Executor<Net, H, Cpu> e;
  e.set_fusion(fusion);
  CpuContext ctx;
  std::vector<H> xh(x.size()), dy(dy_f.size());
  for (std::size_t i = 0; i < x.size(); ++i) xh[i] = H(x[i]);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = H(dy_f[i]);
  const StepInfo info{.seed = 1};
  const auto y =
      e.forward(ctx, info, p, ConstBatchView<typename Net::input_shape, H>(xh.data(), batch), master.values.data());
  std::vector<float> out(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) out[i] = float(y.data()[i]);
  const auto dx = e.backward(ctx, p, g, ConstBatchView<typename Net::output_shape, H>(dy.data(), batch),
                             {.input_grad = true}, NoHook{}, master.values.data());
  std::vector<float> dxf(x.size());
  for (std::size_t i = 0; i < dxf.size(); ++i) dxf[i] = float(dx.data()[i]);
  return {out, std::vector<float>(g.values.begin(), g.values.end()), dxf};
}

template <class Net>
struct Case {
  Parameters<Net, float, Cpu> master;
  std::vector<float> x, dy;
  std::size_t batch = 6;
  explicit Case(unsigned seed) {
    master.initialize(seed);
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    x.resize(batch * Net::input_shape::size);
    for (auto& v : x) v = u(gen);
    dy.resize(batch * Net::output_shape::size);
    for (auto& v : dy) v = 0.1f * u(gen);
  }
};

/// A layer without kinks in 16 bits against the same layer in float on the same 16-bit inputs
/// and weights: the only difference is the rounding of the result (float inside).
/// `dx_roundings`: how many roundings the input gradient may carry. Layers whose backward reads
/// their 16-bit *output* (Sigmoid, Tanh: dy (1 - y) y and dy (1 - y^2), as torch's) carry y's
/// rounding as well as their own: measured 1.34x one rounding (Sigmoid, half and bfloat16) and
/// 1.07x (Tanh, bfloat16), so 2.
template <class Net>
void check_layer(const std::string& name, double dx_roundings = 1) {
  CAPTURE(name);
  Case<Net> c(3);
  auto check = [&]<class H>(double tol) {
    Parameters<Net, float, Cpu> rounded = c.master;
    for (auto& v : rounded.values) v = float(H(v));
    const auto x = rounded_to<H>(c.x), dy = rounded_to<H>(c.dy);
    const auto [yf, gf, dxf] = run<Net, float>(rounded, x, dy, c.batch, true);
    const auto [yh, gh, dxh] = run<Net, H>(rounded, x, dy, c.batch, true);
    CHECK(relative_difference(yh, yf) < tol);
    // Tensor by tensor: one rounding of each gradient relative to that tensor's own scale (a
    // bias gradient next to a larger weight gradient included).
    if (!gf.empty()) CHECK(test::worst_tensor_difference<Net>(gh, gf).first < tol);
    CHECK(relative_difference(dxh, dxf) < dx_roundings * tol);
  };
  // One rounding of a float result: half 2^-11, bfloat16 2^-8 of the largest value at most.
  check.template operator()<half>(std::ldexp(1.0, -11));
  check.template operator()<bfloat16>(std::ldexp(1.0, -8));
}

/// Whole models in 16 bits against float on the same (unrounded) data, as a user compares.
/// Outputs and the whole gradient store by relative norm (`tol_half`, `tol_bf16`; outputs to a
/// tenth of it), and each gradient tensor on its own, so that a wrong small tensor (a bias) cannot
/// vanish in the norm of the store. Per tensor the first convolution's weight gradient moves most
/// (its one input channel gives every ReLU or max-pool choice that flips a share of its sum):
/// measured at most 0.055 (half, model D), 0.147 (bfloat16, model B) and 0.035 (unfused vs fused
/// half, model D); bounded by 0.1 and 0.3 (margins 1.8x, 2x and 2.9x).
template <class Net>
void check_against_float(const std::string& name, double tol_half, double tol_bf16) {
  CAPTURE(name);
  constexpr double tensor_half = 0.1, tensor_bf16 = 0.3;
  Case<Net> c(3);
  const auto [yf, gf, dxf] = run<Net, float>(c.master, c.x, c.dy, c.batch, true);
  const auto [yh, gh, dxh] = run<Net, half>(c.master, c.x, c.dy, c.batch, true);
  const auto [yb, gb, dxb] = run<Net, bfloat16>(c.master, c.x, c.dy, c.batch, true);
  // ||a - b|| / ||b|| of one tensor, with ||b|| at least 1e-3 of the float store's norm. Model B's
  // convolution biases before BatchNorm have analytically zero gradients (float: 2e-8 of the
  // store's norm) that 16-bit rounding leaves at up to 7e-6 (half) and 8e-5 (bfloat16) of it:
  // relative to their own noise they would differ by 100%. Every real tensor of models A-D is
  // above 7e-3 of the store's norm, so the floor changes nothing else.
  double store_norm = 0;
  for (float v : gf) store_norm += double(v) * double(v);
  const double floor = 1e-3 * std::sqrt(store_norm);
  const auto per_tensor = [floor](const auto& a, const auto& b) {
    return test::worst_tensor<Net>(a, b, [floor](auto x, auto y) {
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < y.size(); ++i) {
        diff += (double(x[i]) - double(y[i])) * (double(x[i]) - double(y[i]));
        norm += double(y[i]) * double(y[i]);
      }
      return std::sqrt(diff) / std::max(std::sqrt(norm), floor);
    });
  };
  const auto gh_f = per_tensor(gh, gf), gb_f = per_tensor(gb, gf);
  if (test::report_measurements())
    MESSAGE(name << ": output half " << relative_norm(yh, yf) << ", bf16 " << relative_norm(yb, yf)
                 << "; gradients half " << relative_norm(gh, gf) << ", bf16 " << relative_norm(gb, gf)
                 << "; worst gradient tensor half " << gh_f.first << " (" << gh_f.second << "), bf16 " << gb_f.first
                 << " (" << gb_f.second << ")");
  CHECK(relative_norm(yh, yf) < tol_half / 10);
  CHECK(relative_norm(gh, gf) < tol_half);
  CHECK_MESSAGE(gh_f.first < tensor_half, "half gradient " << gh_f.second << ": " << gh_f.first);
  CHECK(relative_norm(yb, yf) < tol_bf16 / 10);
  CHECK(relative_norm(gb, gf) < tol_bf16);
  CHECK_MESSAGE(gb_f.first < tensor_bf16, "bf16 gradient " << gb_f.second << ": " << gb_f.first);
  // Fusion rounds at other points (a fused ReLU/max-pool sees float, not 16-bit, inputs): close,
  // not identical.
  const auto [yh2, gh2, dxh2] = run<Net, half>(c.master, c.x, c.dy, c.batch, false);
  const auto fused = per_tensor(gh2, gh);
  if (test::report_measurements())
    MESSAGE(name << ": unfused vs fused half, output " << relative_norm(yh2, yh) << ", gradients "
                 << relative_norm(gh2, gh) << ", worst gradient tensor " << fused.first << " (" << fused.second << ")");
  CHECK(relative_norm(yh2, yh) < tol_half / 10);
  CHECK(relative_norm(gh2, gh) < tol_half);
  CHECK_MESSAGE(fused.first < tensor_half, "unfused half gradient " << fused.second << ": " << fused.first);
}

using test::EngineOf;

} // namespace

TEST_CASE("MixedPrecision: every kernel in 16 bits is the float kernel plus one rounding") {
  check_layer<Sequential<Input<1, 28, 28>, Conv2d<1, 16, 3>>>("Conv2d 1->16");
  check_layer<Sequential<Input<16, 13, 13>, Conv2d<16, 32, 3, 1, 1>>>("Conv2d 16->32 pad 1");
  check_layer<Sequential<Input<4, 12, 12>, Conv2d<4, 8, 5, 1, 2>>>("Conv2d 4->8 5x5");
  check_layer<Sequential<Input<64>, Linear<64, 10>>>("Linear");
  check_layer<Sequential<Input<4, 8, 8>, Flatten, Linear<256, 10>>>("Flatten, Linear");
  check_layer<Sequential<Input<4, 8, 8>, BatchNorm2d<4>>>("BatchNorm2d");
  check_layer<Sequential<Input<10>, LogSoftmax>>("LogSoftmax");
}

TEST_CASE("MixedPrecision: the residual networks' layers in 16 bits are the float kernels plus one rounding") {
  check_layer<Sequential<Input<4, 9, 8>, Conv2d<4, 8, 3, 1, 1, false>>>("Conv2d without bias, direct");
  check_layer<Sequential<Input<4, 9, 8>, Conv2d<4, 8, 3, 2, 1, false>>>("Conv2d without bias, stride 2");
  check_layer<Sequential<Input<4, 9, 8>, AvgPool2d<3, 2, 1>>>("AvgPool2d");
  check_layer<Sequential<Input<4, 7, 7>, AdaptiveAvgPool2d<1>>>("AdaptiveAvgPool2d");
  check_layer<Sequential<Input<70>, BatchNorm1d<70>>>("BatchNorm1d");
  check_layer<Sequential<Input<4, 8, 8>, SiLU>>("SiLU");
  check_layer<Sequential<Input<4, 8, 8>, GELU>>("GELU");
  check_layer<Sequential<Input<4, 8, 8>, LeakyReLU<0.1f>>>("LeakyReLU");
  check_layer<Sequential<Input<4, 9, 8>, DepthwiseConv2d<4, 3, 1, 1>>>("DepthwiseConv2d");
  check_layer<Sequential<Input<4, 9, 8>, DepthwiseConv2d<4, 3, 2, 1, false>>>("DepthwiseConv2d, stride 2");
  check_layer<Sequential<Input<4, 9, 8>, Conv2d<4, 8, 3, 1, 1, Groups{2}>>>("Conv2d, 2 groups");
  check_layer<Sequential<Input<4, 9, 8>, Conv2d<4, 4, 3, 2, 1, Groups{4}, false>>>("Conv2d, groups = channels");
  check_layer<Sequential<Input<4, 8, 8>, ReLU6>>("ReLU6");
  check_layer<Sequential<Input<4, 8, 8>, Hardsigmoid>>("Hardsigmoid");
  check_layer<Sequential<Input<4, 8, 8>, Hardswish>>("Hardswish");
  check_layer<Sequential<Input<4, 8, 8>, Sigmoid>>("Sigmoid", 2);
  check_layer<Sequential<Input<4, 8, 8>, Tanh>>("Tanh", 2);
  check_layer<Sequential<Input<4, 5, 6>, Upsample<2>>>("Upsample nearest");
  check_layer<Sequential<Input<4, 5, 6>, Upsample<2, UpsampleMode::bilinear>>>("Upsample bilinear");
  check_layer<Sequential<Input<4, 5, 6>, Upsample<3, UpsampleMode::bilinear, true>>>("Upsample bilinear, corners");
  check_layer<Sequential<Input<4, 5, 6>, ConvTranspose2d<4, 6, 2, 2, 0, 0, false>>>("ConvTranspose2d 2x2 stride 2");
  check_layer<Sequential<Input<4, 5, 6>, ConvTranspose2d<4, 4, 3, 1, 1, 0, false>>>("ConvTranspose2d 3x3");
  check_layer<Sequential<Input<4, 5, 6>, ConvTranspose2d<4, 6, 3, 2, 1, 1>>>("ConvTranspose2d with bias");
  check_layer<Sequential<Input<4, 5, 6>, GroupNorm<2, 4>>>("GroupNorm");
  check_layer<Sequential<Input<6, 3, 3>, GroupNorm<1, 6>>>("GroupNorm, one group");
}

TEST_CASE("MixedPrecision: squeeze-and-excitation (Gated) in 16 bits agrees with float") {
  // Several roundings in a row (the gate's convolutions, its sigmoid, the product), so compared
  // as the models are, not as one kernel: measured output 7.5e-4 (half) and 4.5e-3 (bfloat16),
  // worst gradient tensor 0.015 (half).
  check_against_float<Sequential<Input<6, 7, 7>, SqueezeExcitation<6, 3>>>("squeeze-and-excitation", 3e-2, 2e-1);
}

TEST_CASE(
    "MixedPrecision: a U-Net level (Concat of the identity and pool-conv-upsample) in 16 bits agrees with float") {
  // As squeeze-and-excitation: several roundings in a row (convolution, BatchNorm, ReLU,
  // upsampling, the concatenation's copies), compared as the models are. No bias before the BatchNorm (as
  // in models::UNet): its gradient is zero analytically and 16-bit noise relative to itself.
  check_against_float<
      Sequential<Input<4, 8, 8>, Concat<Identity, Branch<MaxPool2d<2>, Conv2d<4, 6, 3, 1, 1, false>, BatchNorm2d<6>,
                                                         ReLU, Upsample<2, UpsampleMode::bilinear>>>>>("U-Net level",
                                                                                                       3e-2, 2e-1);
}

TEST_CASE("MixedPrecision: 16-bit models agree with float ones (models A-D, fused and unfused)") {
  // Gradients move more than outputs: ReLU masks and max-pool choices of inputs within a
  // rounding of a kink flip (bfloat16 rounds 8x coarser than half, so 8x as many flip).
  check_against_float<models::ModelA>("model A", 3e-2, 2e-1);
  check_against_float<models::ModelB>("model B", 3e-2, 2e-1);
  check_against_float<models::ModelC>("model C", 3e-2, 2e-1);
  check_against_float<models::ModelD>("model D", 3e-2, 2e-1);
}

TEST_CASE("LossScaler: GradScaler's defaults and updates, plus the floor and the consecutive-skip error") {
  LossScaler s(LossScaleOptions{});
  CHECK(s.scale() == 65536.f);
  CHECK(s.inverse() == float(1.0 / 65536.0));
  for (int i = 0; i < 1999; ++i) s.update(false);
  CHECK(s.scale() == 65536.f);
  s.update(false); // the 2000th clean step in a row
  CHECK(s.scale() == 131072.f);
  CHECK(s.growth_tracker() == 0);
  for (int i = 0; i < 1000; ++i) s.update(false);
  s.update(true); // an overflow halves the scale and restarts the count
  CHECK(s.scale() == 65536.f);
  CHECK(s.growth_tracker() == 0);
  CHECK(s.skipped() == 1);
  for (int i = 0; i < 1999; ++i) s.update(false);
  CHECK(s.scale() == 65536.f);
  s.update(false);
  CHECK(s.scale() == 131072.f);

  LossScaler f(LossScaleOptions{.init_scale = 8, .min_scale = 2, .max_consecutive_skips = 5});
  f.update(true);
  f.update(true);
  CHECK(f.scale() == 2.f);
  f.update(true); // the floor holds
  CHECK(f.scale() == 2.f);
  f.update(true);
  CHECK(f.consecutive_skips() == 4);
  CHECK_THROWS_WITH_AS(f.update(true), doctest::Contains("5 steps in a row had inf/NaN gradients"), NumericError);
  LossScaler g(LossScaleOptions{.max_consecutive_skips = 2});
  g.update(true);
  g.update(false); // a clean step resets the run
  g.update(true);
  CHECK(g.consecutive_skips() == 1);
  CHECK_THROWS_AS(LossScaler(LossScaleOptions{.backoff_factor = 1.5}), ValueError);
}

TEST_CASE("MixedPrecision<fp16>: a step with inf gradients is skipped (weights and optimiser untouched)") {
  SUBCASE("SingleDevice") {
    test::check_overflow_skips_step<EngineOf<SingleDevice<>, models::ModelC, Adam<>, MixedPrecision<fp16>>>();
  }
  SUBCASE("ThreadedReplicas<2>: the overflow in one replica's shard stops both") {
    test::check_overflow_in_one_shard_skips_all<
        EngineOf<ThreadedReplicas<2>, models::ModelC, Adam<>, MixedPrecision<fp16>>>();
  }
}

TEST_CASE("MixedPrecision<fp16>: too many skipped steps in a row is an error naming the cause") {
  const Bands data(32, 2);
  EngineOptions o{.seed = 2};
  o.loss_scale.min_scale = 16384;
  o.loss_scale.max_consecutive_skips = 3;
  EngineOf<SingleDevice<>, models::ModelC, Sgd<>, MixedPrecision<fp16>> e(Sgd({.lr = 0.1}), o);
  std::vector<float> poisoned(data.x.begin(), data.x.begin() + 8 * 784);
  poisoned[0] = 1e6f;
  const std::span<const std::int32_t> labels(data.y.data(), 8);
  e.step({poisoned.data(), 8}, labels, {});
  e.step({poisoned.data(), 8}, labels, {});
  CHECK(e.loss_scale() == 16384.0); // 65536 -> 32768 -> 16384, the floor
  CHECK_THROWS_AS(e.step({poisoned.data(), 8}, labels, {}), NumericError);
}

TEST_CASE("MixedPrecision: fp16 and bf16 trainers learn, and fp16 resumes bit for bit with the scaler state") {
  const Bands train_set(480, 3), test_set(200, 4);
  for (int precision = 0; precision < 2; ++precision) {
    TrainerOptions o{.batch_size = 32, .seed = 1, .log = nullptr};
    if (precision == 0) {
      Trainer<models::ModelC, Adam<>, SingleDevice<>, MixedPrecision<fp16>> t(Adam({.lr = 2e-3}), o);
      const auto h = t.fit(train_set, 2, &test_set);
      CHECK(*h.back().test_accuracy > 90.0);
    } else {
      Trainer<models::ModelB, Sgd<>, SingleDevice<>, MixedPrecision<bf16>> t(Sgd({.lr = 0.05, .momentum = 0.9}), o);
      const auto h = t.fit(train_set, 2, &test_set);
      CHECK(*h.back().test_accuracy > 90.0);
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("cohort_mixed_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  using T16 = Trainer<models::ModelA, Adadelta<>, SingleDevice<>, MixedPrecision<fp16>>;
  TrainerOptions o{.batch_size = 48, .seed = 4, .max_steps = 14, .log = nullptr};
  o.loss_scale.growth_interval = 4; // the scale moves during the run
  T16 straight(Adadelta({.lr = 0.5}), o);
  straight.fit(train_set, 5);
  TrainerOptions half_way = o;
  half_way.max_steps = 7;
  T16 first(Adadelta({.lr = 0.5}), half_way);
  first.fit(train_set, 5);
  first.save(dir / "ckpt.safetensors");
  // Another seed: the checkpoint must restore it, the position and the scaler's state.
  TrainerOptions other_seed = o;
  other_seed.seed = test::resume_seed;
  T16 second(Adadelta({.lr = 0.5}), other_seed);
  REQUIRE(test::checkpoint_position(dir / "ckpt.safetensors").loss_scale != LossScaleOptions{}.init_scale);
  test::resume_checked(second, dir / "ckpt.safetensors");
  second.fit(train_set, 5);
  CHECK(std::equal(straight.parameters().values.begin(), straight.parameters().values.end(),
                   second.parameters().values.begin()));
  CHECK(straight.engine().loss_scale() == second.engine().loss_scale());
  CHECK(straight.engine().loss_scale() > 65536.0);
  // The fp16 checkpoint is an ordinary one: a float trainer loads it.
  Trainer<models::ModelA, Adadelta<>> fp32(Adadelta({.lr = 0.5}), {.log = nullptr});
  fp32.resume(dir / "ckpt.safetensors");
  CHECK(
      std::equal(fp32.parameters().values.begin(), fp32.parameters().values.end(), first.parameters().values.begin()));
  fs::remove_all(dir);
}

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "support/compare.hpp"
#include "support/fixtures.hpp"
#include "support/optimizer_state.hpp"

#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/optim/adadelta.hpp>
#include <cohort/optim/adam.hpp>
#include <cohort/optim/clip_grad_norm.hpp>
#include <cohort/optim/parameter_groups.hpp>
#include <cohort/optim/rmsprop.hpp>
#include <cohort/optim/sgd.hpp>

using namespace cohort;
using namespace cohort::test;

static_assert(Optimizer<Sgd<float>> && Optimizer<Adam<float>> && Optimizer<Adadelta<float>> &&
              Optimizer<AdamW<float>> && Optimizer<RmsProp<float>>);

namespace {
// Optimiser updates are a handful of float operations per element: 1e-6 of each tensor's largest
// value, parameters and state alike (measured at most 3.4e-7: Adadelta's acc_delta after step 1).
constexpr double optim_rtol = 1e-6;

template <class Opt>
void check_steps(Opt opt, const std::string& name) {
  const auto f = fixture("optim_" + name);
  auto p = f.values<float>("p0");
  for (int s = 1; s <= 3; ++s) {
    const std::string at = name + " step " + std::to_string(s);
    const auto g = f.values<float>("g" + std::to_string(s));
    opt.step(std::span<float>(p), std::span<const float>(g));
    COHORT_CHECK_CLOSE(std::span<const float>(p), std::span<const float>(f.values<float>("p" + std::to_string(s))),
                       optim_rtol, at);
    // The state carried to the next step is torch's, slot by slot, under torch's names.
    check_optimizer_state(
        f, s, opt.slots(p.size()), [](const auto& slot) { return std::span<const float>(slot.values); }, optim_rtol,
        at);
    if (f.find("state" + std::to_string(s) + ".step"))
      CHECK(opt.steps() == std::uint64_t(f.values<std::int64_t>("state" + std::to_string(s) + ".step")[0]));
  }
  CHECK(opt.steps() == 3);
}
} // namespace

TEST_CASE("SGD: matches torch.optim.SGD over 3 steps") {
  check_steps(Sgd({.lr = 0.1}), "sgd_plain");
  check_steps(Sgd({.lr = 0.1, .momentum = 0.9}), "sgd_momentum");
  check_steps(Sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01}), "sgd_dampening_wd");
  check_steps(Sgd({.lr = 0.1, .dampening = 0.5, .weight_decay = 0.01}), "sgd_dampening_no_momentum");
  check_steps(Sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.001, .nesterov = true}), "sgd_nesterov");
}
TEST_CASE("Adam: matches torch.optim.Adam over 3 steps, AMSGrad and weight decay included") {
  check_steps(Adam({.lr = 1e-3}), "adam_default");
  check_steps(Adam({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.1, .amsgrad = true}),
              "adam_amsgrad_wd");
}
TEST_CASE("Adadelta: matches torch.optim.Adadelta over 3 steps") {
  check_steps(Adadelta(), "adadelta_default");
  check_steps(Adadelta({.lr = 0.5, .rho = 0.95, .eps = 1e-5, .weight_decay = 0.05}), "adadelta_custom");
}

TEST_CASE("AdamW: matches torch.optim.AdamW over 3 steps (decoupled weight decay), AMSGrad included") {
  check_steps(AdamW(), "adamw_default");
  check_steps(AdamW({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.1, .amsgrad = true}),
              "adamw_amsgrad");
}
TEST_CASE("RMSprop: matches torch.optim.RMSprop over 3 steps, centred and momentum included") {
  check_steps(RmsProp(), "rmsprop_default");
  check_steps(RmsProp({.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.05, .momentum = 0.9}),
              "rmsprop_momentum_wd");
  check_steps(RmsProp({.lr = 0.01, .centered = true}), "rmsprop_centered");
  check_steps(RmsProp({.lr = 0.005, .alpha = 0.95, .weight_decay = 0.01, .momentum = 0.8, .centered = true}),
              "rmsprop_centered_momentum");
}

namespace {
// The fixture's groups: [0, 20) and [30, 37) with the optimiser's settings, [20, 30) without
// weight decay at lr_scale times the rate; clip_grad_norm_(max_norm) before every step.
template <class Opt>
void check_groups_and_clipping(Opt opt, const std::string& name, double lr_scale, double max_norm) {
  const auto f = fixture("optim_" + name);
  opt.set_parameter_groups({{0, 20, {}}, {20, 10, {.lr_scale = lr_scale, .weight_decay = 0.0}}, {30, 7, {}}});
  opt.set_max_grad_norm(max_norm);
  auto p = f.values<float>("p0");
  for (int s = 1; s <= 3; ++s) {
    const std::string at = name + " step " + std::to_string(s);
    const auto g = f.values<float>("g" + std::to_string(s));
    opt.step(std::span<float>(p), std::span<const float>(g));
    // The norm: torch sums per-tensor float norms, cohort squares in double: 1e-6 relative
    // (measured 5.6e-8).
    CHECK_MESSAGE(
        opt.last_grad_norm() == doctest::Approx(f.values<double>("norm" + std::to_string(s))[0]).epsilon(1e-6), at);
    COHORT_CHECK_CLOSE(std::span<const float>(p), std::span<const float>(f.values<float>("p" + std::to_string(s))),
                       optim_rtol, at);
    // The stand-alone function clips the same gradients to torch's clipped ones.
    auto clipped = g;
    const double norm = clip_grad_norm(std::span<float>(clipped), max_norm);
    CHECK(norm == opt.last_grad_norm());
    COHORT_CHECK_CLOSE(std::span<const float>(clipped),
                       std::span<const float>(f.values<float>("clipped" + std::to_string(s))), optim_rtol, at);
  }
}
} // namespace

TEST_CASE("Parameter groups and gradient clipping: match torch's param_groups and clip_grad_norm_ over 3 steps") {
  check_groups_and_clipping(Sgd({.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true}),
                            "sgd_groups_clip", 0.5, 4.0);
  check_groups_and_clipping(AdamW({.lr = 0.01, .weight_decay = 0.05}), "adamw_groups_clip", 2.0, 3.0);
  check_groups_and_clipping(RmsProp({.lr = 0.01, .weight_decay = 0.01, .momentum = 0.9}), "rmsprop_groups_clip", 0.25,
                            5.0);
}

TEST_CASE("Gradient clipping: a norm under max_norm leaves the gradients alone, the norm is the L2 norm") {
  std::vector<float> g{3.f, 4.f, 0.f};
  CHECK(clip_grad_norm(std::span<float>(g), 10.0) == 5.0);
  CHECK(g == std::vector<float>{3.f, 4.f, 0.f});
  CHECK(clip_grad_norm(std::span<float>(g), 1.0) == 5.0);
  CHECK(g[0] == doctest::Approx(0.6).epsilon(1e-6));
  CHECK(g[1] == doctest::Approx(0.8).epsilon(1e-6));
  CHECK_THROWS_WITH_AS(clip_grad_norm(std::span<float>(g), 0.0),
                       "clip_grad_norm: invalid max_norm: 0 (expected a finite value > 0)", ValueError);
  Sgd opt({.lr = 0.1});
  CHECK(std::isnan(opt.last_grad_norm())); // clipping off: no norm computed
  CHECK_THROWS_WITH_AS(opt.set_max_grad_norm(-1), "SGD: invalid max_grad_norm: -1 (expected a finite value >= 0)",
                       ValueError);
}

TEST_CASE("Gradient clipping: the norm does not depend on the thread count") {
  std::vector<float> g(100000);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = float(std::sin(double(i)) * 1e-3 * double(i % 97));
  ThreadPool one(1), three(3);
  CpuContext on_one{&one}, on_three{&three};
  const double a = ops::ElementwiseKernels<Cpu>::sum_of_squares(on_one, g.data(), g.size());
  const double b = ops::ElementwiseKernels<Cpu>::sum_of_squares(on_three, g.data(), g.size());
  CHECK(a == b);
}

TEST_CASE("Parameter groups: no decay on norms and biases, from a network's layout") {
  using Net = models::ResNet20;
  const auto groups = parameter_groups<Net>(no_decay_on_norms_and_biases());
  // They cover the store, in consecutive runs, alternating: a conv/linear weight keeps the
  // optimiser's decay, the BatchNorm weight and bias after it have none.
  REQUIRE(!groups.empty());
  CHECK(groups.front().offset == 0);
  CHECK(groups.back().offset + groups.back().size == Net::parameter_store_size);
  for (std::size_t i = 1; i < groups.size(); ++i) {
    CHECK(groups[i].offset == groups[i - 1].offset + groups[i - 1].size);
    CHECK(groups[i].settings != groups[i - 1].settings);
  }
  // Every tensor's group is the one the rule gives it.
  std::size_t decayed = 0, not_decayed = 0;
  for (const auto& e : Net::layout.entries) {
    if (e.kind != TensorKind::parameter) continue;
    const auto it = std::find_if(groups.begin(), groups.end(), [&](const ParameterGroup& g) {
      return g.offset <= e.offset && e.offset < g.offset + g.size;
    });
    REQUIRE(it != groups.end());
    const bool norm_or_bias = e.spec.rank == 1;
    CHECK_MESSAGE(it->settings.weight_decay == (norm_or_bias ? std::optional<double>(0.0) : std::nullopt), e.name());
    (norm_or_bias ? not_decayed : decayed) += 1;
  }
  CHECK(decayed == 22); // the stem, 18 block convolutions, 2 projection shortcuts, the Linear weight
  CHECK(not_decayed > decayed);
  // A multiplier for norms and biases; bad settings are typed errors naming the tensor.
  const auto scaled = parameter_groups<Net>(for_norms_and_biases({.lr_scale = 2.0}));
  CHECK(scaled.size() == groups.size());
  CHECK_THROWS_WITH_AS(parameter_groups<Net>([](const ParameterInfo&) { return GroupSettings{.lr_scale = -1}; }),
                       "parameter groups: tensor 0.weight got lr_scale -1 (expected a finite value >= 0)", ValueError);
  Sgd opt({.lr = 0.1});
  CHECK_THROWS_AS(opt.set_parameter_groups({{0, 10, {}}, {11, 5, {}}}), ValueError); // a gap
  opt.set_parameter_groups({{0, 10, {}}});
  std::vector<float> p(12), g(12);
  CHECK_THROWS_WITH_AS(opt.step(std::span<float>(p), std::span<const float>(g)),
                       "SGD: parameter groups cover 10 parameters, step() got 12 (groups built for another network?)",
                       ShapeError);
}

TEST_CASE("Parameter groups: a learning-rate scale for BatchNorm biases only") {
  // Model B: conv biases (0.bias, 4.bias) and the Linear's (9.bias) are not BatchNorm biases;
  // 1.bias and 5.bias are. In ResNet-20 they sit inside blocks (3.body.1.bias).
  const auto scale_of = []<class Net>(std::type_identity<Net>, const std::string& name) {
    const auto groups = parameter_groups<Net>(for_batch_norm_biases({.lr_scale = 64}));
    for (const auto& e : Net::layout.entries)
      if (e.kind == TensorKind::parameter && e.name() == name)
        for (const ParameterGroup& g : groups)
          if (g.offset <= e.offset && e.offset < g.offset + g.size) return g.settings.lr_scale;
    return -1.0;
  };
  const std::type_identity<models::ModelB> b;
  CHECK(scale_of(b, "1.bias") == 64);
  CHECK(scale_of(b, "5.bias") == 64);
  CHECK(scale_of(b, "1.weight") == 1);
  CHECK(scale_of(b, "0.bias") == 1);
  CHECK(scale_of(b, "4.bias") == 1);
  CHECK(scale_of(b, "9.bias") == 1);
  CHECK(scale_of(b, "0.weight") == 1);
  const std::type_identity<models::ResNet20> r;
  std::size_t scaled = 0, batch_norms = 0;
  for (const auto& e : models::ResNet20::layout.entries) {
    if (e.kind != TensorKind::parameter) continue;
    const std::string n = e.name();
    const bool bn_bias = n.ends_with(".bias") && scale_of(r, n) == 64;
    scaled += bn_bias;
    if (n.ends_with(".weight") && e.spec.rank == 1) ++batch_norms;
    if (!n.ends_with(".bias")) CHECK_MESSAGE(scale_of(r, n) == 1, n);
  }
  CHECK(scaled == batch_norms);       // one bias per BatchNorm
  CHECK(scaled == 21);                // the stem's, two per block, and the two projection shortcuts'
  CHECK(scale_of(r, "0.bias") == -1); // the stem convolution has no bias: not a tensor at all
  // Inside one block, a biased convolution beside a BatchNorm: only the BatchNorm's bias scales.
  using Block = Sequential<Input<4, 6, 6>, Residual<Branch<Conv2d<4, 4, 3, 1, 1>, BatchNorm2d<4>>>>;
  const std::type_identity<Block> k;
  CHECK(scale_of(k, "0.body.0.bias") == 1);
  CHECK(scale_of(k, "0.body.1.bias") == 64);
  CHECK(scale_of(k, "0.body.1.weight") == 1);
  CHECK_THROWS_WITH_AS(for_batch_norm_biases({.lr_scale = -2}),
                       "parameter groups: invalid lr_scale -2 (expected a finite value >= 0)", ValueError);
}

TEST_CASE("Parameter groups: combine() applies both rules (scales multiply, the second's decay wins)") {
  // The fast recipe's pair on model B: no decay on BatchNorm parameters and biases, and the
  // BatchNorm biases at 64x the rate.
  const auto settings_of = [](const GroupRule& rule, const std::string& name) {
    const auto groups = parameter_groups<models::ModelB>(rule);
    for (const auto& e : models::ModelB::layout.entries)
      if (e.kind == TensorKind::parameter && e.name() == name)
        for (const ParameterGroup& g : groups)
          if (g.offset <= e.offset && e.offset < g.offset + g.size) return g.settings;
    return GroupSettings{.lr_scale = -1};
  };
  const GroupRule both = combine(no_decay_on_norms_and_biases(), for_batch_norm_biases({.lr_scale = 64}));
  CHECK(settings_of(both, "1.bias") == GroupSettings{.lr_scale = 64, .weight_decay = 0.0});
  CHECK(settings_of(both, "1.weight") == GroupSettings{.lr_scale = 1, .weight_decay = 0.0});
  CHECK(settings_of(both, "0.bias") == GroupSettings{.lr_scale = 1, .weight_decay = 0.0});
  CHECK(settings_of(both, "0.weight") == GroupSettings{});
  // Scales multiply; the second rule's decay replaces the first's only where it sets one.
  const GroupRule scaled = combine(for_norms_and_biases({.lr_scale = 2, .weight_decay = 0.5}),
                                   for_batch_norm_biases({.lr_scale = 3, .weight_decay = 0.25}));
  CHECK(settings_of(scaled, "1.bias") == GroupSettings{.lr_scale = 6, .weight_decay = 0.25});
  CHECK(settings_of(scaled, "1.weight") == GroupSettings{.lr_scale = 2, .weight_decay = 0.5});
  // An empty rule is the optimiser's settings, on either side.
  CHECK(settings_of(combine({}, for_batch_norm_biases({.lr_scale = 8})), "5.bias") == GroupSettings{.lr_scale = 8});
  CHECK(settings_of(combine(for_batch_norm_biases({.lr_scale = 8}), {}), "5.bias") == GroupSettings{.lr_scale = 8});
  CHECK(settings_of(combine({}, {}), "5.bias") == GroupSettings{});
}

TEST_CASE("Optimisers: defaults are PyTorch's") {
  CHECK(SgdOptions{}.lr == 1e-3);
  CHECK(AdamOptions{}.beta1 == 0.9);
  CHECK(AdamOptions{}.beta2 == 0.999);
  CHECK(AdamOptions{}.eps == 1e-8);
  CHECK(AdadeltaOptions{}.lr == 1.0);
  CHECK(AdadeltaOptions{}.rho == 0.9);
  CHECK(AdadeltaOptions{}.eps == 1e-6);
  CHECK(AdamWOptions{}.weight_decay == 1e-2);
  CHECK(RmsPropOptions{}.lr == 1e-2);
  CHECK(RmsPropOptions{}.alpha == 0.99);
}

TEST_CASE("Optimisers: invalid hyperparameters are typed errors") {
  CHECK_THROWS_WITH_AS(Sgd({.lr = -1}), "SGD: invalid lr: -1 (expected >= 0)", ValueError);
  CHECK_THROWS_AS(Sgd({.lr = 0.1, .nesterov = true}), ValueError); // nesterov needs momentum
  CHECK_THROWS_AS(Sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .nesterov = true}), ValueError);
  CHECK_THROWS_AS(Adam({.beta1 = 1.0}), ValueError);
  CHECK_THROWS_AS(Adam({.eps = -1}), ValueError);
  CHECK_THROWS_AS(Adadelta({.rho = 1.5}), ValueError);
  Adam<float> opt;
  std::vector<float> p(4), g(3);
  CHECK_THROWS_AS(opt.step(std::span<float>(p), std::span<const float>(g)), ShapeError);
}

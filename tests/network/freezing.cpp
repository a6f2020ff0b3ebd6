// Freezing (network/freezing.hpp) on a Network: which layers a Freeze selects and the errors for
// bad ones; a frozen layer's gradient is zero and its running statistics stay; the trainable
// layers' gradients are those of the same network run with the frozen part in eval mode;
// backward never visits the layers below the lowest trainable one; opt.step(net) leaves frozen
// parameters and their optimiser state alone.

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/resnet.hpp>
#include <cohort/models/seed_models.hpp>

using namespace cohort;

namespace {
std::vector<float> noise(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> x(n);
  for (auto& v : x) v = u(g);
  return x;
}
std::vector<std::int32_t> labels_of(std::size_t n) {
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t((i * 7) % 10);
  return y;
}
template <class Net>
std::vector<float> layer_slice(std::span<const float> store, std::size_t layer) {
  return {store.begin() + std::ptrdiff_t(Net::layout.param_base[layer]),
          store.begin() + std::ptrdiff_t(Net::layout.param_base[layer + 1])};
}
template <class Net>
bool all_zero(std::span<const float> store, std::size_t layer) {
  for (float v : layer_slice<Net>(store, layer))
    if (v != 0.f) return false;
  return true;
}
std::string message_of(const auto& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "(no ValueError)";
}
} // namespace

TEST_CASE("Freeze: ranges and name prefixes select whole layers, bad ones are named") {
  using Net = models::ResNet20; // 0 conv, 1 bn, 2 relu, 3..20 blocks and ReLUs, 21 pool, 22 flatten, 23 linear
  const FrozenLayers below = frozen_layers<Net>(Freeze::below(21));
  REQUIRE(below.layer.size() == 24);
  for (std::size_t i = 0; i < 24; ++i) CHECK(below[i] == (i < 21));
  CHECK(below.text() == "0-20 (eval mode)");

  // "1" is layer 1 (BatchNorm), never layer 10..19; "3." a whole block; "4" a ReLU by its name.
  const FrozenLayers named = frozen_layers<Net>(Freeze::names({"1", "3.", "4"}, false));
  CHECK(named.text() == "1,3-4 (train mode)");
  CHECK_FALSE(named[10]);
  CHECK(frozen_layers<Net>(Freeze{}).layer.empty());

  // The union of a range and prefixes.
  CHECK(frozen_layers<Net>({.first = 0, .last = 2, .prefixes = {"23"}, .eval_mode = true}).text() ==
        "0-1,23 (eval mode)");

  CHECK(message_of([] { frozen_layers<Net>(Freeze::names({"9.body"})); }) ==
        "Freeze: prefix '9.body' selects 12 of the 18 tensors of layer 9 (Residual): freezing works on whole layers "
        "of the Sequential; use '9' for the whole layer");
  CHECK(message_of([] { frozen_layers<Net>(Freeze::names({"fc"})); }) ==
        "Freeze: prefix 'fc' matches no layer of the network (its 24 layers are named 0 to 23, their tensors "
        "'<layer>.<name>' such as '0.weight')");
  CHECK(message_of([] { frozen_layers<Net>(Freeze::layers(20, 25)); }) ==
        "Freeze: layers [20, 25) but the network has 24 layers (0 to 23)");
  CHECK(message_of([] { frozen_layers<Net>(Freeze::below(24)); }) ==
        "Freeze: layers 0-23 (eval mode) are frozen, which leaves no parameter to train (torch: no tensor requires "
        "grad)");

  // The optimiser's view: one merged run for the backbone.
  const auto ranges = frozen_parameter_ranges<Net>(below);
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0] == ParameterRange{0, Net::layout.param_base[21]});
}

TEST_CASE("Freeze: a frozen backbone gets no gradient, keeps its statistics, and backward skips it") {
  using Net = models::ModelB; // 0 conv 1 bn 2 relu 3 pool 4 conv 5 bn 6 relu 7 pool 8 flatten 9 linear
  constexpr std::size_t batch = 16;
  const auto x = noise(batch * 784, 3);
  const auto y = labels_of(batch);
  const ConstBatchView<Net::input_shape, float> xb(x.data(), batch);

  Network<Net> frozen(5), twin(5);
  frozen.freeze(Freeze::below(8));
  twin.eval(); // what the frozen part computes: evaluation mode
  LayerProfile profile;
  frozen.executor().set_profile(&profile);
  const std::vector<float> buffers_before(frozen.parameters().buffers.span().begin(),
                                          frozen.parameters().buffers.span().end());

  CrossEntropyLoss loss_f, loss_t;
  const double lf = loss_f.forward(frozen.forward(xb), y);
  const double lt = loss_t.forward(twin.forward(xb), y);
  CHECK(lf == lt); // the frozen part runs in eval mode, bit for bit
  frozen.backward(loss_f.backward());
  twin.backward(loss_t.backward());

  const auto gf = frozen.gradient_span(), gt = twin.gradient_span();
  for (std::size_t l : {0, 1, 4, 5}) {
    CAPTURE(l);
    CHECK(all_zero<Net>(gf, l));
    CHECK_FALSE(all_zero<Net>(gt, l));
  }
  CHECK(layer_slice<Net>(gf, 9) == layer_slice<Net>(gt, 9));
  // Backward never ran below the head; forward ran everywhere.
  for (std::size_t l = 0; l < 9; ++l) {
    CAPTURE(l);
    CHECK(profile.backward[l] == 0.0);
  }
  CHECK(profile.backward[9] > 0.0);
  CHECK(profile.forward[0] > 0.0);
  // Training mode, and yet BatchNorm kept its running statistics.
  CHECK(frozen.training());
  const auto buffers_after = frozen.parameters().buffers.span();
  CHECK(std::equal(buffers_after.begin(), buffers_after.end(), buffers_before.begin()));

  // The optimiser moves the head only, and keeps no state for the backbone.
  const std::vector<float> before(frozen.parameter_span().begin(), frozen.parameter_span().end());
  Sgd opt({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  opt.step(frozen);
  const auto after = frozen.parameter_span();
  for (std::size_t l : {0, 1, 4, 5}) CHECK(layer_slice<Net>(after, l) == layer_slice<Net>(before, l));
  CHECK(layer_slice<Net>(after, 9) != layer_slice<Net>(before, 9));
  const auto momentum = opt.slots()[0].values;
  CHECK(all_zero<Net>(momentum, 0));
  CHECK(all_zero<Net>(momentum, 5));
  CHECK_FALSE(all_zero<Net>(momentum, 9));

  // Unfrozen, the same network trains everything again.
  frozen.unfreeze();
  frozen.executor().set_profile(nullptr);
  CrossEntropyLoss loss_u;
  loss_u.forward(frozen.forward(xb), y);
  frozen.backward(loss_u.backward());
  CHECK_FALSE(all_zero<Net>(frozen.gradient_span(), 0));
}

TEST_CASE("Freeze: a frozen middle passes gradients through, and input gradients still flow") {
  // A frozen BatchNorm in eval mode between trainable layers: the same gradients as the whole
  // network in eval mode (no other layer here depends on the mode).
  using Small = Sequential<Input<1, 8, 8>, Conv2d<1, 4, 3>, BatchNorm2d<4>, ReLU, Flatten, Linear<144, 10>>;
  {
    constexpr std::size_t batch = 6;
    const auto x = noise(batch * 64, 7);
    const auto y = labels_of(batch);
    const ConstBatchView<Small::input_shape, float> xb(x.data(), batch);
    Network<Small> frozen(2), twin(2);
    frozen.freeze(Freeze::layers(1, 2));
    twin.eval();
    CrossEntropyLoss lf, lt;
    CHECK(lf.forward(frozen.forward(xb), y) == lt.forward(twin.forward(xb), y));
    const auto dxf = frozen.backward(lf.backward(), {.input_grad = true});
    const auto dxt = twin.backward(lt.backward(), {.input_grad = true});
    CHECK(std::vector<float>(dxf.data(), dxf.data() + dxf.size()) ==
          std::vector<float>(dxt.data(), dxt.data() + dxt.size()));
    const auto gf = frozen.gradient_span(), gt = twin.gradient_span();
    CHECK(all_zero<Small>(gf, 1));
    CHECK_FALSE(all_zero<Small>(gt, 1));
    for (std::size_t l : {0, 4}) CHECK(layer_slice<Small>(gf, l) == layer_slice<Small>(gt, l));
  }
  // Frozen in train mode (requires_grad_(False) alone): the same gradients as the unfrozen
  // network wherever something trains, bit for bit, and the statistics still move.
  {
    using Net = models::ModelB;
    constexpr std::size_t batch = 8;
    const auto x = noise(batch * 784, 4);
    const auto y = labels_of(batch);
    const ConstBatchView<Net::input_shape, float> xb(x.data(), batch);
    Network<Net> frozen(6), twin(6);
    frozen.freeze(Freeze::layers(4, 6, /*eval_mode=*/false));
    CrossEntropyLoss lf, lt;
    CHECK(lf.forward(frozen.forward(xb), y) == lt.forward(twin.forward(xb), y));
    const auto dxf = frozen.backward(lf.backward(), {.input_grad = true});
    const auto dxt = twin.backward(lt.backward(), {.input_grad = true});
    CHECK(std::vector<float>(dxf.data(), dxf.data() + dxf.size()) ==
          std::vector<float>(dxt.data(), dxt.data() + dxt.size()));
    const auto gf = frozen.gradient_span(), gt = twin.gradient_span();
    for (std::size_t l : {4, 5}) CHECK(all_zero<Net>(gf, l));
    for (std::size_t l : {0, 1, 9}) CHECK(layer_slice<Net>(gf, l) == layer_slice<Net>(gt, l));
    const auto bf = frozen.parameters().buffers.span(), bt = twin.parameters().buffers.span();
    CHECK(std::equal(bf.begin(), bf.end(), bt.begin()));
  }
}

TEST_CASE("Freeze::parse: below:N and name prefixes from a command line") {
  const Freeze f = Freeze::parse("below:3,9,23");
  CHECK(f.first == 0);
  CHECK(f.last == 3);
  CHECK(f.prefixes == std::vector<std::string>{"9", "23"});
  CHECK(frozen_layers<models::ResNet20>(f).text() == "0-2,9,23 (eval mode)");
  CHECK(Freeze::parse("").empty());
  CHECK(message_of([] { Freeze::parse("below:x"); }) ==
        "Freeze: 'below:x': expected below:N with N a layer count >= 1");
  CHECK(message_of([] { Freeze::parse("0,,1"); }) == "Freeze: an empty item in the list (expected below:N or a name "
                                                     "prefix)");
}

// Flip test-time augmentation (network/test_time_augmentation.hpp) against torch's
// 0.5 * net(x) + 0.5 * net(x.flip(-1)) (fixtures tta, tta_dense: tests/reference/make_reference.py):
// predict's scores, a per-pixel network's (the mirrored pass mirrored back), and the Trainer's
// evaluation, whose accuracy and loss are those of the averaged scores, for every CPU policy.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/network/predict.hpp>
#include <cohort/network/test_time_augmentation.hpp>

#include "support/compare.hpp"
#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using TtaInput = Shape<1, 5, 6>; // width 6 against height 5: a transposed mirror would not match
using TtaClassifier = Sequential<Input<1, 5, 6>, Conv2d<1, 3, 3>, BatchNorm2d<3>, ReLU, Flatten, Linear<36, 4>>;
using TtaPerPixel = Sequential<Input<1, 5, 6>, Conv2d<1, 2, 3, 1, 1>, ReLU, Conv2d<2, 3, 1>>;
// Eval-mode forwards of networks this small: float sums of at most 36 terms, 1e-6 of each
// tensor's largest value (measured 1.2e-7).
constexpr double tta_rtol = 1e-6;

/// The fixture's "p." tensors into a parameter store (every tensor of its state_dict).
template <class Params>
void load_tta_fixture(Params& p, const SafetensorsFile& f) {
  for (const TensorRef& t : p.state_dict()) {
    const auto& e = f.at("p." + t.name);
    REQUIRE(e.elements() == t.size);
    const auto bytes = f.bytes(e);
    REQUIRE(bytes.size() == t.bytes());
    std::memcpy(t.data, bytes.data(), bytes.size());
  }
}

template <class Parallel>
void check_trainer_evaluation(const SafetensorsFile& f, const std::string& who) {
  CAPTURE(who);
  const auto x = f.values<float>("x");
  const auto labels = f.values<std::int32_t>("labels");
  const auto test = ImageDataset<TtaInput>::copy_of(x, labels, 4);
  TrainerOptions o{.batch_size = 4, .eval_batch_size = 4, .log = nullptr}; // 9 samples: a short last chunk
  if constexpr (Parallel::name == std::string_view("ThreadedReplicas")) o.parallel.deterministic = true;
  o.test_time_augmentation = TestTimeAugmentation::flip;
  Trainer<TtaClassifier, Sgd<>, Parallel> flipped(Sgd({.lr = 0.1}), o);
  load_tta_fixture(flipped.parameters(), f);
  const EvalReport e = flipped.evaluate(test);
  CHECK(e.accuracy == doctest::Approx(100.0 * double(f.values<std::int64_t>("correct")[0]) / 9.0));
  CHECK(e.loss == doctest::Approx(f.values<double>("loss")[0]).epsilon(1e-6));
  o.test_time_augmentation = TestTimeAugmentation::none;
  Trainer<TtaClassifier, Sgd<>, Parallel> plain(Sgd({.lr = 0.1}), o);
  load_tta_fixture(plain.parameters(), f);
  const EvalReport p = plain.evaluate(test);
  CHECK(p.accuracy == doctest::Approx(100.0 * double(f.values<std::int64_t>("plain_correct")[0]) / 9.0));
  CHECK(p.loss == doctest::Approx(f.values<double>("plain_loss")[0]).epsilon(1e-6));
  CHECK(p.loss != e.loss);
  // Trainer::predict averages too.
  COHORT_CHECK_CLOSE(std::span<const float>(flipped.predict(x)), f.values<float>("averaged"), tta_rtol,
                     who + " predict");
}
} // namespace

TEST_CASE("predict with TestTimeAugmentation::flip: torch's 0.5 * net(x) + 0.5 * net(x.flip(-1))") {
  const auto f = fixture("tta");
  Network<TtaClassifier> net(0);
  load_tta_fixture(net.parameters(), f);
  const auto x = f.values<float>("x");
  for (const std::size_t chunk : {2, 9}) {
    CAPTURE(chunk);
    COHORT_CHECK_CLOSE(std::span<const float>(predict(net, x, Prediction::scores, chunk, TestTimeAugmentation::flip)),
                       f.values<float>("averaged"), tta_rtol, "flip");
    COHORT_CHECK_CLOSE(std::span<const float>(predict(net, x, Prediction::scores, chunk)), f.values<float>("plain"),
                       tta_rtol, "none");
  }
}

TEST_CASE("predict with TestTimeAugmentation::flip: a per-pixel network's mirrored pass is mirrored back") {
  const auto f = fixture("tta_dense");
  Network<TtaPerPixel> net(0);
  load_tta_fixture(net.parameters(), f);
  COHORT_CHECK_CLOSE(
      std::span<const float>(predict(net, f.values<float>("x"), Prediction::scores, 4, TestTimeAugmentation::flip)),
      f.values<float>("averaged"), tta_rtol, "dense flip");
}

TEST_CASE("Trainer evaluation with test_time_augmentation = flip: accuracy and loss of the averaged scores") {
  const auto f = fixture("tta");
  check_trainer_evaluation<SingleDevice<>>(f, "SingleDevice");
  check_trainer_evaluation<ThreadedReplicas<2>>(f, "ThreadedReplicas<2>");
}

TEST_CASE("test_time_augmentation = flip on a network whose input is not an image is a ValueError") {
  using Flat = Sequential<Input<12>, Linear<12, 3>>;
  Network<Flat> net(0);
  const std::vector<float> x(24, 0.5f);
  CHECK_THROWS_WITH_AS(predict(net, x, Prediction::scores, 4, TestTimeAugmentation::flip),
                       doctest::Contains("mirrors images (C, H, W) and the network's input is"), ValueError);
  CHECK_THROWS_WITH_AS(
      (Trainer<Flat, Sgd<>>(Sgd({.lr = 0.1}), {.log = nullptr, .test_time_augmentation = TestTimeAugmentation::flip})),
      doctest::Contains("expected TestTimeAugmentation::none"), ValueError);
}

TEST_CASE(
    "Trainer evaluation with test_time_augmentation = flip under MixedPrecision<bf16>: the bf16 scores averaged") {
  const auto f = fixture("tta");
  const auto x = f.values<float>("x");
  const auto labels = f.values<std::int32_t>("labels");
  const auto test = ImageDataset<TtaInput>::copy_of(x, labels, 4);
  // The weights go in through a file: a 16-bit trainer's compute copy follows its float
  // parameters at load (init_from) and after each step, not on a write to parameters().
  TempDir dir;
  Network<TtaClassifier> net(0);
  load_tta_fixture(net.parameters(), f);
  save_weights(dir.path / "tta.safetensors", net.parameters());
  TrainerOptions o{.batch_size = 4, .eval_batch_size = 4, .log = nullptr};
  o.test_time_augmentation = TestTimeAugmentation::flip;
  Trainer<TtaClassifier, Sgd<>, SingleDevice<>, MixedPrecision<bf16>> flipped(Sgd({.lr = 0.1}), o);
  flipped.init_from(dir.path / "tta.safetensors");
  o.test_time_augmentation = TestTimeAugmentation::none;
  Trainer<TtaClassifier, Sgd<>, SingleDevice<>, MixedPrecision<bf16>> plain(Sgd({.lr = 0.1}), o);
  plain.init_from(dir.path / "tta.safetensors");
  const double want = f.values<double>("loss")[0], want_plain = f.values<double>("plain_loss")[0];
  const double got = flipped.evaluate(test).loss, got_plain = plain.evaluate(test).loss;
  // bf16 weights and activations: measured 0.08% (flip) and 0.11% (plain) from torch's float
  // losses; bound 0.3%, below the 0.9% between the averaged and the plain loss, so a bf16
  // evaluation that skipped the mirror would fail.
  REQUIRE(std::abs(want - want_plain) > 0.006 * want);
  CHECK(got == doctest::Approx(want).epsilon(0.003));
  CHECK(got_plain == doctest::Approx(want_plain).epsilon(0.003));
}

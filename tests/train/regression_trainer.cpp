// The Trainer on a dense network with target images (image-to-image regression: an
// ImagePairDataset, TrainerOptions::regression): each loss is the hand-written loop's, bitwise;
// the step's mean over every target element whatever the split (replicas, deterministic chunks);
// evaluation as the loss alone; joint augmentation moving the targets; exact resume; mixed
// precision; and the typed errors of a bad seam. Ranks: tests/mpi/ddp_check.cpp's `regress` case.

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/unet.hpp>

#include "support/noisy_bands.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;

namespace {
using test::noisy_bands;
using test::TempDir;

// One output channel: the denoised image. GroupNorm normalises every sample alone, so a batch
// split between replicas computes what the whole batch does.
using GroupDenoiser = models::UNet<Shape<1, 8, 8>, 1, 4, 1, models::UNetUpsampling::bilinear, models::UNetNorm::group>;
using BatchDenoiser = models::UNet<Shape<1, 8, 8>, 1, 4, 1>;
using PairSet = ImagePairDataset<Shape<1, 8, 8>>;
// Two target channels (the image and its negative): targets of another size than a mask's.
using GroupDenoiser2 = models::UNet<Shape<1, 8, 8>, 2, 4, 1, models::UNetUpsampling::bilinear, models::UNetNorm::group>;
using BatchDenoiser2 = models::UNet<Shape<1, 8, 8>, 2, 4, 1>;
using PairSet2 = ImagePairDataset<Shape<1, 8, 8>, Shape<2, 8, 8>>;
using PairShape = Shape<1, 8, 8>;

TrainerOptions pair_options(std::size_t batch = 16) {
  TrainerOptions o{.batch_size = batch, .seed = 5, .log = nullptr};
  return o;
}

template <class P>
std::vector<float> trained_values(P& p) {
  return {p.values.data(), p.values.data() + p.values.size()};
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

/// A dataset of target images that does not check its values (a user's own type): the Trainer must.
struct UncheckedPairs {
  using shape = Shape<1, 8, 8>;
  using target_shape = Shape<1, 8, 8>;
  std::vector<float> x = std::vector<float>(4 * 64, 0.f);
  std::vector<float> t = std::vector<float>(4 * 64, 0.5f);
  std::size_t size() const { return 4; }
  const float* image(std::size_t i) const { return x.data() + i * 64; }
  const float* target(std::size_t i) const { return t.data() + i * 64; }
};

/// The Trainer's weights after `epochs` unshuffled epochs with `ro`, and the hand-written loop's
/// with `loss` (the same network seed, batches and optimiser).
template <class Loss>
std::pair<std::vector<float>, std::vector<float>> trainer_and_loop(const RegressionOptions& ro, Loss loss) {
  const PairSet train = noisy_bands(48, 9);
  constexpr std::size_t batch = 16, epochs = 2;
  TrainerOptions o = pair_options(batch);
  o.shuffle = false;
  o.regression = ro;
  Trainer<BatchDenoiser, Adam<>> t(Adam({.lr = 1e-2}), o);
  t.fit(train, epochs);

  Network<BatchDenoiser> net(o.seed);
  Adam opt({.lr = 1e-2});
  std::vector<std::size_t> idx(batch);
  std::vector<float> x(batch * 64), y(batch * 64);
  net.train();
  for (std::size_t e = 0; e < epochs; ++e)
    for (std::size_t b = 0; b < train.size(); b += batch) {
      for (std::size_t i = 0; i < batch; ++i) idx[i] = b + i;
      train.load_batch(idx, x, y);
      loss.forward(net.forward(ConstBatchView<PairShape, float>(x.data(), batch)), y);
      net.backward(loss.backward());
      opt.step(net);
    }
  auto tw = trained_values(t.parameters());
  auto nw = trained_values(net.parameters());
  const auto& tb = t.parameters().buffers;
  const auto& nb = net.parameters().buffers;
  tw.insert(tw.end(), tb.data(), tb.data() + tb.size()); // the running statistics too
  nw.insert(nw.end(), nb.data(), nb.data() + nb.size());
  return {tw, nw};
}
} // namespace

TEST_CASE("Trainer on target images: the U-Net learns to denoise and evaluate's loss is MSELoss over predict()'s") {
  const PairSet train = noisy_bands(96, 1), test = noisy_bands(48, 2);
  TempDir dir("cohort_regression_trainer_");
  TrainerOptions o = pair_options();
  o.metrics = dir.path / "metrics.jsonl";
  Trainer<GroupDenoiser, Adam<>> t(Adam({.lr = 1e-2}), o);
  const EvalReport before = t.evaluate(test);
  const auto history = t.fit(train, 15, &test);
  const EvalReport e = t.evaluate(test);
  // The noise alone (input - target, uniform in [-0.5, 0.5]) has a mean square of 1/12 = 0.083.
  MESSAGE("test MSE ", before.loss, " -> ", e.loss);
  CHECK(history.back().train_loss < 0.2 * history.front().train_loss);
  CHECK(e.loss < 0.02); // measured 0.0041 after 15 epochs (0.43 untrained)
  CHECK(!e.mean_iou);
  CHECK(e.accuracy == 0);
  CHECK(e.samples == test.size());
  REQUIRE(history.back().test_loss);
  CHECK(*history.back().test_loss == e.loss);
  CHECK(!history.back().test_accuracy);
  CHECK(!history.back().test_mean_iou);

  // The same loss from the predictions: MSELoss over predict()'s outputs for the whole test set.
  const auto out = t.predict(test.images());
  MSELoss<> mse;
  CHECK(e.loss ==
        doctest::Approx(mse.forward(ConstBatchView<PairShape, float>(out.data(), test.size()), test.targets()))
            .epsilon(1e-6));

  // The metrics file has the test loss and no accuracy; the epoch line prints the loss.
  std::ifstream in(o.metrics);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  CHECK(last.find("\"test_accuracy\": null") != std::string::npos);
  CHECK(last.find("\"test_loss\": 0.") != std::string::npos);
  std::ostringstream printed;
  print_epoch_line(printed, history.back());
  CHECK(printed.str().find(", test loss 0.") != std::string::npos);
  CHECK(printed.str().find("accuracy") == std::string::npos);
}

TEST_CASE("Trainer on target images: each regression loss is the hand-written loop's, bitwise (BatchNorm, Adam)") {
  // The Trainer starts from Network<Net>(seed)'s weights and takes the samples in order: the loss
  // it chose (TrainerOptions::regression) is all that can differ from the loop's.
  SUBCASE("MSELoss (the default)") {
    const auto [trainer, loop] = trainer_and_loop({}, MSELoss<>{});
    CHECK(trainer == loop);
  }
  SUBCASE("L1Loss") {
    const auto [trainer, loop] = trainer_and_loop({.loss = RegressionLoss::l1}, L1Loss<>{});
    CHECK(trainer == loop);
  }
  SUBCASE("SmoothL1Loss") {
    const auto [trainer, loop] =
        trainer_and_loop({.loss = RegressionLoss::smooth_l1, .beta = 0.25}, SmoothL1Loss<>({.beta = 0.25}));
    CHECK(trainer == loop);
  }
  SUBCASE("HuberLoss") {
    const auto [trainer, loop] =
        trainer_and_loop({.loss = RegressionLoss::huber, .delta = 0.25}, HuberLoss<>({.delta = 0.25}));
    CHECK(trainer == loop);
  }
  SUBCASE("BCEWithLogitsLoss") {
    const auto [trainer, loop] = trainer_and_loop({.loss = RegressionLoss::bce_with_logits, .pos_weight = {2.f}},
                                                  BCEWithLogitsLoss<>({.pos_weight = {2.f}}));
    CHECK(trainer == loop);
  }
  SUBCASE("another loss than the loop's is not bitwise the loop's (the check can fail)") {
    const auto [trainer, loop] =
        trainer_and_loop({.loss = RegressionLoss::huber, .delta = 0.25}, SmoothL1Loss<>({.beta = 0.25}));
    CHECK(trainer != loop);
  }
}

TEST_CASE("Trainer on target images: a step's loss is the whole batch's mean, however it is split") {
  const PairSet2 train = noisy_bands<2>(30, 3); // the last step's 14 samples: shards of 7 and 7, the first 8 and 8
  TrainerOptions o = pair_options(16);
  o.regression = {.loss = RegressionLoss::l1};
  Trainer<GroupDenoiser2, Sgd<>> one(Sgd({.lr = 0.1}), o);
  Trainer<GroupDenoiser2, Sgd<>, ThreadedReplicas<2>> two(Sgd({.lr = 0.1}), o);
  const auto h1 = one.fit(train, 1);
  const auto h2 = two.fit(train, 1);
  CHECK(h2.back().train_loss == doctest::Approx(h1.back().train_loss).epsilon(1e-6));
  const double d = largest_difference(trained_values(one.parameters()), trained_values(two.parameters()));
  MESSAGE("loss ", h1.back().train_loss, " vs ", h2.back().train_loss, ", weights differ by ", d);
  CHECK(d < 1e-6); // measured 3e-8 (float sums in another order)
  const EvalReport e1 = one.evaluate(train), e2 = two.evaluate(train);
  CHECK(e2.loss == doctest::Approx(e1.loss).epsilon(1e-6));
}

TEST_CASE("Trainer on target images: deterministic chunks give the same weights for 1, 2 and 4 replicas, bitwise") {
  // BatchNorm (statistics per chunk), Huber, a joint crop and flip of images and targets.
  const PairSet2 train = noisy_bands<2>(40, 4);
  const auto trained = [&](std::size_t replicas) {
    TrainerOptions o = pair_options(16);
    o.parallel.deterministic = true;
    o.parallel.deterministic_chunks = 4;
    o.parallel.replicas = replicas;
    o.regression = {.loss = RegressionLoss::huber, .delta = 0.3};
    o.joint_augment = JointAugmentation{JointRandomCrop(8, 1), JointRandomHorizontalFlip()};
    Trainer<BatchDenoiser2, Adam<>, ThreadedReplicas<dynamic_replicas>> t(Adam({.lr = 1e-2}), o);
    t.fit(train, 2);
    auto w = trained_values(t.parameters());
    const auto& b = t.parameters().buffers;
    w.insert(w.end(), b.data(), b.data() + b.size());
    return w;
  };
  const auto w1 = trained(1);
  CHECK(trained(2) == w1);
  CHECK(trained(4) == w1);
}

TEST_CASE("Trainer on target images: each training image is cropped and flipped with its target") {
  const PairSet2 train = noisy_bands<2>(24, 8);
  const JointAugmentation aug{JointRandomCrop(8, 2), JointRandomHorizontalFlip()};
  TrainerOptions o = pair_options(24);
  o.max_steps = 1;
  o.shuffle = false; // the batch is samples 0 .. 23 in order
  o.joint_augment = aug;
  Trainer<GroupDenoiser2, Sgd<>> t(Sgd({.lr = 0.1}), o);
  const double trained = t.fit(train, 1).back().train_loss;
  // The untrained network's loss on the batch ImagePairDataset::load_batch makes with the same draw.
  std::vector<std::size_t> idx(train.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::vector<float> x(train.size() * 64), y(train.size() * 2 * 64);
  train.load_batch(idx, x, y, aug, {.seed = o.seed, .epoch = 0});
  Network<GroupDenoiser2> net(o.seed);
  MSELoss<> mse;
  const auto out = net.forward(ConstBatchView<PairShape, float>(x.data(), train.size()));
  CHECK(trained == doctest::Approx(mse.forward(out, y)).epsilon(1e-6));
  // The targets left in place (the images alone moved) give another loss.
  const std::vector<float> unmoved(train.targets().begin(), train.targets().end());
  CHECK(std::abs(mse.forward(net.forward(ConstBatchView<PairShape, float>(x.data(), train.size())), unmoved) -
                 trained) > 1e-3);
}

TEST_CASE("Trainer on target images: resuming mid-epoch into a trainer of another seed is bitwise exact") {
  const PairSet train = noisy_bands(40, 6);
  TempDir dir("cohort_regression_resume_");
  const auto options = [](std::uint64_t seed, std::uint64_t max_steps) {
    TrainerOptions o = pair_options(16);
    o.seed = seed;
    o.max_steps = max_steps;
    o.regression = {.loss = RegressionLoss::smooth_l1, .beta = 0.5};
    o.joint_augment = JointAugmentation{JointRandomCrop(8, 2), JointRandomHorizontalFlip()};
    return o;
  };
  Trainer<BatchDenoiser, Adam<>> straight(Adam({.lr = 1e-2}), options(5, 7)); // 3 batches per epoch: ends mid-epoch 2
  straight.fit(train, 3);
  Trainer<BatchDenoiser, Adam<>> first(Adam({.lr = 1e-2}), options(5, 4));
  first.fit(train, 3);
  first.save(dir.path / "half.safetensors");
  Trainer<BatchDenoiser, Adam<>> second(Adam({.lr = 1e-2}), options(99, 7));
  second.resume(dir.path / "half.safetensors");
  second.fit(train, 3);
  CHECK(second.step() == 7);
  CHECK(trained_values(second.parameters()) == trained_values(straight.parameters()));
}

TEST_CASE("Trainer on target images: bf16 and fp16 mixed precision train the U-Net") {
  const PairSet train = noisy_bands(96, 1), test = noisy_bands(48, 2);
  const auto check = [](const std::vector<EpochReport>& h, const char* name) {
    REQUIRE(h.back().test_loss);
    MESSAGE(std::string(name), ": test MSE ", *h.back().test_loss);
    CHECK(std::isfinite(h.back().train_loss));
    CHECK(h.back().train_loss < 0.2 * h.front().train_loss);
    CHECK(*h.back().test_loss < 0.02); // measured 0.0035 (bf16) and 0.0037 (fp16, 2 replicas); float: 0.0041
  };
  Trainer<GroupDenoiser, Adam<>, SingleDevice<>, MixedPrecision<bf16>> b(Adam({.lr = 1e-2}), pair_options());
  check(b.fit(train, 15, &test), "bf16");
  Trainer<GroupDenoiser, Adam<>, ThreadedReplicas<2>, MixedPrecision<fp16>> h(Adam({.lr = 1e-2}), pair_options());
  check(h.fit(train, 15, &test), "fp16, 2 replicas");
}

TEST_CASE("Trainer on target images: a bad seam is a typed error before any step") {
  SUBCASE("a target that is not finite, in the caller's own dataset type") {
    UncheckedPairs bad;
    bad.t[2 * 64 + 8 * 5 + 3] = std::numeric_limits<float>::quiet_NaN();
    Trainer<GroupDenoiser, Sgd<>> t(Sgd({.lr = 0.1}), pair_options());
    const auto w = trained_values(t.parameters());
    CHECK_THROWS_WITH_AS(t.fit(bad, 1),
                         doctest::Contains("Trainer::fit: sample 2's target is nan at channel 0, pixel (5, 3); MSELoss "
                                           "expects a finite value"),
                         ValueError);
    CHECK_THROWS_WITH_AS(t.evaluate(bad), doctest::Contains("Trainer::evaluate: sample 2's target is nan"), ValueError);
    CHECK(trained_values(t.parameters()) == w);
  }
  SUBCASE("a target outside [0, 1] for BCEWithLogitsLoss") {
    UncheckedPairs bad;
    bad.t[3 * 64 + 1] = 1.5f;
    TrainerOptions o = pair_options();
    o.regression = {.loss = RegressionLoss::bce_with_logits};
    Trainer<GroupDenoiser, Sgd<>> t(Sgd({.lr = 0.1}), o);
    CHECK_THROWS_WITH_AS(t.fit(bad, 1),
                         doctest::Contains("sample 3's target is 1.5 at channel 0, pixel (0, 1); BCEWithLogitsLoss "
                                           "expects a value in [0, 1]"),
                         ValueError);
    Trainer<GroupDenoiser, Sgd<>> mse(Sgd({.lr = 0.1}), pair_options()); // MSELoss takes 1.5
    CHECK(mse.fit(bad, 1).size() == 1);
  }
  SUBCASE("options the chosen loss does not take, or that do not fit the network") {
    using Dense = Trainer<GroupDenoiser, Sgd<>>;
    TrainerOptions o = pair_options();
    o.regression = {.loss = RegressionLoss::mse, .delta = 0.5};
    CHECK_THROWS_WITH_AS(Dense(Sgd({.lr = 0.1}), o),
                         doctest::Contains("RegressionOptions::delta (HuberLoss's) was set, but the chosen loss is "
                                           "MSELoss"),
                         ValueError);
    o.regression = {.loss = RegressionLoss::huber, .delta = -1};
    CHECK_THROWS_WITH_AS(Dense(Sgd({.lr = 0.1}), o), doctest::Contains("HuberLoss: delta is -1"), ValueError);
    o.regression = {.loss = RegressionLoss::bce_with_logits, .pos_weight = {1.f, 2.f}};
    CHECK_THROWS_WITH_AS(Dense(Sgd({.lr = 0.1}), o),
                         doctest::Contains("2 pos_weight values for an input of 1 channels"), ShapeError);
    TrainerOptions c = pair_options();
    c.regression = {.loss = RegressionLoss::l1};
    using Classifier = Trainer<Sequential<Input<1, 8, 8>, Flatten, Linear<64, 3>>, Sgd<>>;
    CHECK_THROWS_WITH_AS(Classifier(Sgd({.lr = 0.1}), c),
                         doctest::Contains("TrainerOptions::regression (L1Loss) is the loss of a network predicting "
                                           "per pixel"),
                         ValueError);
  }
  SUBCASE("a target accuracy, or image-only augmentation") {
    const PairSet train = noisy_bands(16, 7);
    TrainerOptions o = pair_options();
    o.target_accuracy = 90;
    Trainer<GroupDenoiser, Sgd<>> t(Sgd({.lr = 0.1}), o);
    CHECK_THROWS_WITH_AS(t.fit(train, 1, &train), doctest::Contains("reports only its loss"), ValueError);
    CHECK(t.step() == 0);
    TrainerOptions a = pair_options();
    a.augment = Augmentation{RandomHorizontalFlip()};
    CHECK_THROWS_WITH_AS((Trainer<GroupDenoiser, Sgd<>>(Sgd({.lr = 0.1}), a)),
                         doctest::Contains("would move the images and not their masks or target images"), ValueError);
  }
}

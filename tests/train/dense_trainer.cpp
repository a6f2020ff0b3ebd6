// The Trainer on a network with a class per pixel (a U-Net, MaskDataset): per-pixel loss over
// the step's counted pixels whatever the split (replicas, deterministic chunks), evaluation as
// pixel accuracy and mean IoU, joint augmentation, exact resume, mixed precision, and the
// typed errors of a bad dense seam. Ranks: tests/mpi/ddp_check.cpp's `segment` case.

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/unet.hpp>

#include "support/mask_bands.hpp"
#include "support/temp_dir.hpp"

using namespace cohort;

namespace {
using test::mask_bands;
using test::TempDir;

// GroupNorm: every sample is normalised alone, so a batch split between replicas computes what
// the whole batch does (BatchNorm's shard statistics would differ, as DataParallel's do).
using GroupUNet = models::UNet<Shape<1, 8, 8>, 3, 4, 1, models::UNetUpsampling::bilinear, models::UNetNorm::group>;
using BatchUNet = models::UNet<Shape<1, 8, 8>, 3, 4, 1>;
using MaskSet = MaskDataset<Shape<1, 8, 8>>;

TrainerOptions dense_options(std::size_t batch = 16) {
  TrainerOptions o{.batch_size = batch, .seed = 5, .log = nullptr};
  return o;
}

template <class P>
std::vector<float> weights_of(P& p) {
  return {p.values.data(), p.values.data() + p.values.size()};
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

/// A dataset of masks that does not check its values (a user's own type): the Trainer must.
struct UncheckedMasks {
  using shape = Shape<1, 8, 8>;
  using mask_shape = Shape<8, 8>;
  std::vector<float> x = std::vector<float>(4 * 64, 0.f);
  std::vector<std::int32_t> y = std::vector<std::int32_t>(4 * 64, 0);
  std::size_t size() const { return 4; }
  const float* image(std::size_t i) const { return x.data() + i * 64; }
  const std::int32_t* mask(std::size_t i) const { return y.data() + i * 64; }
  std::size_t num_classes() const { return 3; }
  std::int32_t ignore_index() const { return -100; }
};
} // namespace

TEST_CASE("Trainer on masks: the U-Net learns and evaluate's pixel accuracy, mean IoU and loss are over pixels") {
  const MaskSet train = mask_bands(96, 1), test = mask_bands(48, 2);
  TempDir dir("cohort_dense_trainer_");
  TrainerOptions o = dense_options();
  o.metrics = dir.path / "metrics.jsonl";
  Trainer<GroupUNet, Adam<>> t(Adam({.lr = 1e-2}), o);
  const EvalReport before = t.evaluate(test);
  const auto history = t.fit(train, 15, &test);
  const EvalReport e = t.evaluate(test);
  REQUIRE(e.mean_iou);
  REQUIRE(before.mean_iou);
  MESSAGE("mean IoU ", *before.mean_iou, " -> ", *e.mean_iou, ", pixel accuracy ", e.accuracy, "%, loss ", e.loss);
  CHECK(history.back().train_loss < 0.5 * history.front().train_loss);
  CHECK(*e.mean_iou > 0.8); // measured 0.88 after 15 epochs (0.22 untrained)
  CHECK(*e.mean_iou > *before.mean_iou + 0.3);
  REQUIRE(history.back().test_mean_iou);
  CHECK(*history.back().test_mean_iou == *e.mean_iou);

  // The same numbers from the predictions: SegmentationMetrics and PixelCrossEntropyLoss over
  // predict()'s scores of the whole test set (a third of its pixels ignored).
  const auto scores = t.predict(test.images());
  using Out = GroupUNet::output_shape;
  SegmentationMetrics m(3);
  m.add(ConstBatchView<Out, float>(scores.data(), test.size()), test.masks());
  CHECK(*e.mean_iou == doctest::Approx(m.mean_iou()).epsilon(1e-12));
  CHECK(e.accuracy == doctest::Approx(100.0 * m.pixel_accuracy()).epsilon(1e-12));
  CHECK(e.iou == m.iou());
  PixelCrossEntropyLoss<> ce;
  CHECK(
      e.loss ==
      doctest::Approx(ce.forward(ConstBatchView<Out, float>(scores.data(), test.size()), test.masks())).epsilon(1e-5));

  // The metrics file records the mean IoU beside the pixel accuracy.
  std::ifstream in(o.metrics);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  CHECK(last.find("\"test_mean_iou\": null") == std::string::npos);
  CHECK(last.find("\"test_mean_iou\": ") != std::string::npos);
  std::ostringstream printed;
  print_epoch_line(printed, history.back());
  CHECK(printed.str().find("test pixel accuracy") != std::string::npos);
  CHECK(printed.str().find("mean IoU 0.") != std::string::npos);
}

TEST_CASE("Trainer on masks: a step's loss is the whole batch's mean over its counted pixels, however it is split") {
  // Samples 0, 3, 6, ... have 48 of their 64 pixels ignored: the two replicas' shards count
  // different numbers of pixels, and each must divide by the whole batch's count.
  const MaskSet train = mask_bands(32, 3);
  for (const bool weighted : {false, true}) {
    CAPTURE(weighted);
    TrainerOptions o = dense_options(32);
    o.max_steps = 1;
    if (weighted) o.loss = {.label_smoothing = 0.1, .class_weights = {1.f, 3.f, 0.5f}};
    Trainer<GroupUNet, Sgd<>> one(Sgd({.lr = 0.1}), o);
    Trainer<GroupUNet, Sgd<>, ThreadedReplicas<2>> two(Sgd({.lr = 0.1}), o);
    const auto l1 = one.fit(train, 1).back().train_loss;
    const auto l2 = two.fit(train, 1).back().train_loss;
    CHECK(l2 == doctest::Approx(l1).epsilon(1e-6));
    // The gradients too: after one SGD step the weights agree to float rounding.
    const double d = max_difference(weights_of(one.parameters()), weights_of(two.parameters()));
    MESSAGE("weighted ", weighted, ": loss ", l1, " vs ", l2, ", weights differ by ", d);
    CHECK(d < 1e-6); // measured 5e-10 and 7e-9 (float sums in another order)
    // Evaluation split between the replicas counts the same pixels as one network.
    const EvalReport e1 = one.evaluate(train), e2 = two.evaluate(train);
    CHECK(e2.accuracy == doctest::Approx(e1.accuracy).epsilon(1e-12));
    CHECK(*e2.mean_iou == doctest::Approx(*e1.mean_iou).epsilon(1e-12));
    CHECK(e2.loss == doctest::Approx(e1.loss).epsilon(1e-6));
  }
}

TEST_CASE(
    "Trainer on masks: each training image is cropped and flipped with its mask, as MaskDataset::load_batch does") {
  const MaskSet train = mask_bands(24, 8);
  const JointAugmentation aug{JointRandomCrop(8, 2), JointRandomHorizontalFlip()};
  TrainerOptions o = dense_options(24);
  o.max_steps = 1;
  o.shuffle = false; // the batch is samples 0 .. 23 in order
  o.joint_augment = aug;
  Trainer<GroupUNet, Sgd<>> t(Sgd({.lr = 0.1}), o);
  const double trained = t.fit(train, 1).back().train_loss;
  // The loss of the untrained network on the batch load_batch makes with the same draw.
  std::vector<std::size_t> idx(train.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::vector<float> x(train.size() * 64);
  std::vector<std::int32_t> y(train.size() * 64);
  train.load_batch(idx, x, y, aug, {.seed = o.seed, .epoch = 0});
  Network<GroupUNet> net(o.seed);
  PixelCrossEntropyLoss<> ce;
  const double by_hand = ce.forward(net.forward(ConstBatchView<Shape<1, 8, 8>, float>(x.data(), train.size())), y);
  CHECK(trained == doctest::Approx(by_hand).epsilon(1e-6));
  // Without the masks moving along (the images alone augmented) the loss is another.
  std::vector<std::int32_t> unmoved(train.masks().begin(), train.masks().end());
  CHECK(std::abs(ce.forward(net.forward(ConstBatchView<Shape<1, 8, 8>, float>(x.data(), train.size())), unmoved) -
                 trained) > 1e-3);
}

TEST_CASE("Trainer on masks: its steps are the hand-written loop's on the same batches, bitwise (BatchNorm, Adam)") {
  // The loop of examples/segment_fashion_mnist.cpp on the samples in order: the Trainer starts
  // from Network<Net>(seed)'s weights, so only the order of the samples can differ between the
  // two (the example's mean IoU after 200 steps differed between them, bench/RESULTS.md).
  const MaskSet train = mask_bands(48, 9);
  constexpr std::size_t batch = 16, epochs = 2;
  TrainerOptions o = dense_options(batch);
  o.shuffle = false;
  Trainer<BatchUNet, Adam<>> t(Adam({.lr = 1e-2}), o);
  t.fit(train, epochs);

  Network<BatchUNet> net(o.seed);
  PixelCrossEntropyLoss<> ce;
  Adam opt({.lr = 1e-2});
  std::vector<std::size_t> idx(batch);
  std::vector<float> x(batch * 64);
  std::vector<std::int32_t> y(batch * 64);
  net.train();
  for (std::size_t e = 0; e < epochs; ++e)
    for (std::size_t b = 0; b < train.size(); b += batch) {
      for (std::size_t i = 0; i < batch; ++i) idx[i] = b + i;
      train.load_batch(idx, x, y);
      ce.forward(net.forward(ConstBatchView<Shape<1, 8, 8>, float>(x.data(), batch)), y);
      net.backward(ce.backward());
      opt.step(net);
    }
  const double dw = max_difference(weights_of(t.parameters()), weights_of(net.parameters()));
  const auto& tb = t.parameters().buffers;
  const auto& nb = net.parameters().buffers;
  REQUIRE(tb.size() == nb.size());
  const double db = max_difference({tb.data(), tb.data() + tb.size()}, {nb.data(), nb.data() + nb.size()});
  MESSAGE("after ", epochs * train.size() / batch, " steps: weights differ by ", dw, ", running statistics by ", db);
  CHECK(dw == 0); // the same kernels on the same numbers in the same order
  CHECK(db == 0);
}

TEST_CASE("Trainer on masks: deterministic chunks give the same weights for 1, 2 and 4 replicas, bitwise") {
  // BatchNorm (statistics per chunk), class weights, label smoothing and a joint crop and flip.
  const MaskSet train = mask_bands(40, 4);
  const auto trained = [&](std::size_t replicas) {
    TrainerOptions o = dense_options(16);
    o.parallel.deterministic = true;
    o.parallel.deterministic_chunks = 4;
    o.parallel.replicas = replicas;
    o.loss = {.label_smoothing = 0.05, .class_weights = {1.f, 2.f, 0.5f}};
    o.joint_augment = JointAugmentation{JointRandomCrop(8, 1), JointRandomHorizontalFlip()};
    Trainer<BatchUNet, Adam<>, ThreadedReplicas<dynamic_replicas>> t(Adam({.lr = 1e-2}), o);
    t.fit(train, 2);
    auto w = weights_of(t.parameters());
    const auto& b = t.parameters().buffers;
    w.insert(w.end(), b.data(), b.data() + b.size()); // the running statistics too
    return w;
  };
  const auto w1 = trained(1);
  CHECK(trained(2) == w1);
  CHECK(trained(4) == w1);
}

TEST_CASE("Trainer on masks: resuming mid-epoch into a trainer of another seed is bitwise exact") {
  const MaskSet train = mask_bands(40, 6);
  TempDir dir("cohort_dense_resume_");
  const auto options = [](std::uint64_t seed, std::uint64_t max_steps) {
    TrainerOptions o = dense_options(16);
    o.seed = seed;
    o.max_steps = max_steps;
    o.joint_augment = JointAugmentation{JointRandomCrop(8, 2), JointRandomHorizontalFlip()};
    return o;
  };
  Trainer<BatchUNet, Adam<>> straight(Adam({.lr = 1e-2}), options(5, 7)); // 3 batches per epoch: ends mid-epoch 2
  straight.fit(train, 3);
  Trainer<BatchUNet, Adam<>> first(Adam({.lr = 1e-2}), options(5, 4));
  first.fit(train, 3);
  first.save(dir.path / "half.safetensors");
  Trainer<BatchUNet, Adam<>> second(Adam({.lr = 1e-2}), options(99, 7));
  second.resume(dir.path / "half.safetensors");
  second.fit(train, 3);
  CHECK(second.step() == 7);
  CHECK(weights_of(second.parameters()) == weights_of(straight.parameters()));
}

TEST_CASE("Trainer on masks: bf16 mixed precision trains the U-Net") {
  const MaskSet train = mask_bands(96, 1), test = mask_bands(48, 2);
  Trainer<GroupUNet, Adam<>, SingleDevice<>, MixedPrecision<bf16>> t(Adam({.lr = 1e-2}), dense_options());
  const auto history = t.fit(train, 15, &test);
  REQUIRE(history.back().test_mean_iou);
  MESSAGE("bf16: mean IoU ", *history.back().test_mean_iou);
  CHECK(std::isfinite(history.back().train_loss));
  CHECK(history.back().train_loss < 0.5 * history.front().train_loss);
  CHECK(*history.back().test_mean_iou > 0.75); // measured 0.86 (float: 0.88)
}

TEST_CASE("Trainer on masks: a bad seam is a typed error before any step") {
  const MaskSet train = mask_bands(16, 7);
  SUBCASE("the dataset's ignore_index is not the trainer's") {
    const MaskSet voc = mask_bands(16, 7, 255);
    Trainer<GroupUNet, Sgd<>> t(Sgd({.lr = 0.1}), dense_options());
    const auto w = weights_of(t.parameters());
    CHECK_THROWS_WITH_AS(t.fit(voc, 1),
                         doctest::Contains("the dataset marks ignored pixels with 255, the trainer's loss and metrics "
                                           "ignore -100 (TrainerOptions::ignore_index)"),
                         ValueError);
    CHECK(weights_of(t.parameters()) == w);
    TrainerOptions o = dense_options();
    o.ignore_index = 255;
    Trainer<GroupUNet, Sgd<>> fixed(Sgd({.lr = 0.1}), o);
    CHECK(fixed.fit(voc, 1).size() == 1);
  }
  SUBCASE("a mask value that is neither a class nor ignore_index, in the caller's own dataset type") {
    UncheckedMasks bad;
    bad.y[2 * 64 + 8 * 5 + 3] = 7;
    Trainer<GroupUNet, Sgd<>> t(Sgd({.lr = 0.1}), dense_options());
    const auto w = weights_of(t.parameters());
    CHECK_THROWS_WITH_AS(t.fit(bad, 1),
                         doctest::Contains("Trainer::fit: pixel (5, 3) of sample 2's mask is 7, expected a class in "
                                           "[0, 3) or the ignore_index -100"),
                         ValueError);
    CHECK_THROWS_WITH_AS(t.evaluate(bad), doctest::Contains("Trainer::evaluate: pixel (5, 3) of sample 2"), ValueError);
    CHECK(weights_of(t.parameters()) == w);
  }
  SUBCASE("more classes in the dataset than the network scores") {
    using TwoClass = models::UNet<Shape<1, 8, 8>, 2, 4, 1>;
    Trainer<TwoClass, Sgd<>> t(Sgd({.lr = 0.1}), dense_options());
    CHECK_THROWS_WITH_AS(t.fit(train, 1),
                         doctest::Contains("the dataset has 3 classes, the network scores 2 per pixel"), ValueError);
  }
  SUBCASE("image-only augmentation for masks, joint augmentation for labels") {
    TrainerOptions o = dense_options();
    o.augment = Augmentation{RandomHorizontalFlip()};
    using Dense = Trainer<GroupUNet, Sgd<>>;
    CHECK_THROWS_WITH_AS(Dense(Sgd({.lr = 0.1}), o), doctest::Contains("would move the images and not their masks"),
                         ValueError);
    TrainerOptions j = dense_options();
    j.joint_augment = JointAugmentation{JointRandomHorizontalFlip()};
    using Classifier = Trainer<Sequential<Input<1, 8, 8>, Flatten, Linear<64, 3>>, Sgd<>>;
    CHECK_THROWS_WITH_AS(Classifier(Sgd({.lr = 0.1}), j),
                         doctest::Contains("transforms images with their masks, and this network predicts one class "
                                           "per image"),
                         ValueError);
  }
  SUBCASE("a test set whose every pixel is ignored has no accuracy") {
    std::vector<std::int32_t> none(4 * 64, -100);
    const MaskSet empty = MaskSet::copy_of(std::vector<float>(4 * 64, 0.f), none, 3);
    Trainer<GroupUNet, Sgd<>> t(Sgd({.lr = 0.1}), dense_options());
    CHECK_THROWS_WITH_AS(t.evaluate(empty), doctest::Contains("every pixel of the dataset's masks is the ignore_index"),
                         ValueError);
  }
}

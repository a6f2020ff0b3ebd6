// The Trainer's data seam (issue 34): a dataset's run-time shape, its classes and every label are
// checked before any step; evaluate on an empty set is an error. (A dataset whose type names a
// shape other than the network's input is a compile error: tests/compile_fail/dataset_shape.cpp.)

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"

using namespace cohort;
using test::Bands;

namespace {
using SeamNet = models::ModelC; // 1x28x28 -> 10 classes

TrainerOptions seam_options() { return {.batch_size = 8, .log = nullptr}; }

/// Bands with a run-time shape (a folder reader's kind), a class count and a label to spoil.
struct RuntimeBands {
  const Bands* b;
  std::vector<std::size_t> extents{1, 28, 28};
  std::size_t classes = 10;
  std::size_t bad_index = std::size_t(-1);
  std::int32_t bad_label = 10;
  std::vector<std::size_t> sample_extents() const { return extents; }
  std::size_t size() const { return b->size(); }
  std::size_t num_classes() const { return classes; }
  const float* image(std::size_t i) const { return b->image(i); }
  std::int32_t label(std::size_t i) const { return i == bad_index ? bad_label : b->label(i); }
};

template <class T>
std::vector<float> weights(T& t) {
  return {t.parameters().values.begin(), t.parameters().values.end()};
}
} // namespace

TEST_CASE("Trainer data seam: a run-time-shaped dataset of another shape is a ShapeError before any step") {
  const Bands b(32, 1);
  RuntimeBands d{&b};
  d.extents = {1, 32, 32};
  Trainer<SeamNet, Sgd<>> t(Sgd({.lr = 0.1}), seam_options());
  const auto before = weights(t);
  CHECK_THROWS_WITH_AS(
      t.fit(d, 1), doctest::Contains("Trainer::fit: the dataset's samples are 1x32x32, the network's input is 1x28x28"),
      ShapeError);
  CHECK(t.step() == 0);
  CHECK(weights(t) == before);
  CHECK_THROWS_AS(t.evaluate(d), ShapeError);
  d.extents = {1, 28, 28};
  CHECK_NOTHROW(t.fit(d, 1));
  CHECK(t.step() == 4);
}

TEST_CASE("Trainer data seam: more classes than the network's outputs is a ValueError before any step") {
  const Bands b(32, 1);
  RuntimeBands d{&b};
  d.classes = 11;
  Trainer<SeamNet, Sgd<>> t(Sgd({.lr = 0.1}), seam_options());
  CHECK_THROWS_WITH_AS(t.fit(d, 1),
                       doctest::Contains("Trainer::fit: the dataset has 11 classes, the network has 10 outputs"),
                       ValueError);
  CHECK(t.step() == 0);
}

TEST_CASE("Trainer data seam: a bad label anywhere is a ValueError naming its dataset index, before any step") {
  const Bands b(48, 1);
  RuntimeBands d{&b};
  d.bad_index = 41; // in the sixth batch of 8: five steps would have been taken before it
  Trainer<SeamNet, Sgd<>> t(Sgd({.lr = 0.1}), seam_options());
  const auto before = weights(t);
  CHECK_THROWS_WITH_AS(
      t.fit(d, 1), doctest::Contains("the label of sample 41 of the dataset is 10, the network's classes are 0 to 9"),
      ValueError);
  CHECK(t.step() == 0);
  CHECK(weights(t) == before);
  d.bad_label = -3;
  CHECK_THROWS_WITH_AS(t.evaluate(d), doctest::Contains("Trainer::evaluate: the label of sample 41"), ValueError);

  // A bad test set is refused before the first epoch, not after it.
  RuntimeBands good{&b};
  CHECK_THROWS_WITH_AS(t.fit(good, 1, &d), doctest::Contains("Trainer::fit (test set): the label of sample 41"),
                       ValueError);
  CHECK(t.step() == 0);
}

TEST_CASE("Trainer data seam: evaluate on an empty dataset is an error, not 0%") {
  const Bands b(0, 1);
  Trainer<SeamNet, Sgd<>> t(Sgd({.lr = 0.1}), seam_options());
  CHECK_THROWS_WITH_AS(t.evaluate(b), doctest::Contains("Trainer::evaluate: the dataset is empty"), ValueError);
}

TEST_CASE("Trainer data seam: a view over the caller's memory trains without a copy") {
  const Bands b(32, 2);
  const ImageView<Shape<1, 28, 28>> view(b.x, b.y, 10);
  Trainer<SeamNet, Sgd<>> t(Sgd({.lr = 0.1}), seam_options());
  t.fit(view, 1);
  CHECK(t.step() == 4);
  CHECK(t.evaluate(view).samples == 32);
}

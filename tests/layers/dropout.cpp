#include <doctest/doctest.h>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

// The fixtures apply, in PyTorch, the masks cohort_mirror.py computes from cohort's Philox
// streams: these tests pin the mask convention (seed, layer, step, global sample index).
TEST_CASE("Dropout: masks and scaling match the reference") {
  check_layer_fixture<Dropout<0.25f>, Shape<10>>("layer_dropout", Mode::train, 1234, 3);
}
TEST_CASE("Dropout2d: whole-channel masks match the reference") {
  check_layer_fixture<Dropout2d<0.1f>, Shape<5, 3, 3>>("layer_dropout2d", Mode::train, 99, 7);
}
TEST_CASE("Dropout: gradients match finite differences (masks replayed)") {
  gradcheck_layer<Dropout<0.3f>, Shape<12>>(3, Mode::train);
  gradcheck_layer<Dropout2d<0.3f>, Shape<4, 2, 2>>(3, Mode::train);
}

TEST_CASE("Dropout: identity in eval mode, drop rate close to P in training") {
  Network<single_layer_net<Shape<1000>, Dropout<0.25f>>> net(11);
  std::vector<float> x(8 * 1000, 1.f);
  net.eval();
  auto y = net.forward(ConstBatchView<Shape<1000>, float>(x.data(), 8));
  for (float v : y.span()) REQUIRE(v == 1.f);
  net.train();
  y = net.forward(ConstBatchView<Shape<1000>, float>(x.data(), 8));
  std::size_t zeros = 0;
  for (float v : y.span()) {
    REQUIRE((v == 0.f || v == doctest::Approx(1 / 0.75f)));
    zeros += v == 0.f;
  }
  CHECK(std::abs(double(zeros) / 8000 - 0.25) < 0.02);
}

TEST_CASE("Dropout: fresh masks every training step, masks indexed by global sample") {
  using Net = single_layer_net<Shape<64>, Dropout<0.5f>>;
  std::vector<float> x(4 * 64, 1.f);
  Network<Net> a(1), b(1);
  auto y1 = a.forward(ConstBatchView<Shape<64>, float>(x.data(), 4));
  const std::vector<float> first(y1.data(), y1.data() + y1.size());
  auto y2 = a.forward(ConstBatchView<Shape<64>, float>(x.data(), 4));
  CHECK(std::vector<float>(y2.data(), y2.data() + y2.size()) != first);
  // A shard holding samples 2..3 of the same global batch draws the same masks for them.
  b.set_shard(2, true);
  auto ys = b.forward(ConstBatchView<Shape<64>, float>(x.data(), 2));
  CHECK(std::vector<float>(ys.data(), ys.data() + ys.size()) == std::vector<float>(first.begin() + 128, first.end()));
}

// Upsample (layers/upsample.hpp) against PyTorch's nn.Upsample: nearest and bilinear at scales 2
// and 3, align_corners false and true, single-row images (the clamped taps); finite
// differences; torch's index rules at the edges.

#include <doctest/doctest.h>

#include <cohort/layers/upsample.hpp>

#include "support/layer_harness.hpp"

using namespace cohort;
using namespace cohort::test;

namespace {
using Bilinear = UpsampleMode;
} // namespace

static_assert(std::is_same_v<Upsample<2>::bind<Shape<3, 5, 4>>::output_shape, Shape<3, 10, 8>>);
static_assert(
    std::is_same_v<Upsample<3, Bilinear::bilinear, true>::bind<Shape<2, 1, 7>>::output_shape, Shape<2, 3, 21>>);
static_assert(!Upsample<2>::accepts<Shape<12>>); // an image layer
static_assert(single_layer_net<Shape<4, 3, 3>, Upsample<2>>::parameter_count == 0);

TEST_CASE("Upsample: nearest matches PyTorch's nn.Upsample (scales 2 and 3)") {
  check_layer_fixture<Upsample<2>, Shape<2, 5, 4>>("upsample_nearest_2");
  check_layer_fixture<Upsample<3>, Shape<3, 3, 5>>("upsample_nearest_3");
}
TEST_CASE("Upsample: bilinear matches PyTorch (align_corners false and true, scales 2 and 3, one-row images)") {
  check_layer_fixture<Upsample<2, Bilinear::bilinear>, Shape<2, 5, 4>>("upsample_bilinear_2");
  check_layer_fixture<Upsample<3, Bilinear::bilinear>, Shape<3, 4, 3>>("upsample_bilinear_3");
  check_layer_fixture<Upsample<2, Bilinear::bilinear, true>, Shape<2, 5, 4>>("upsample_bilinear_2_align");
  check_layer_fixture<Upsample<3, Bilinear::bilinear, true>, Shape<3, 4, 3>>("upsample_bilinear_3_align");
  check_layer_fixture<Upsample<2, Bilinear::bilinear>, Shape<2, 1, 3>>("upsample_bilinear_2_single_row");
  check_layer_fixture<Upsample<2, Bilinear::bilinear, true>, Shape<2, 1, 3>>("upsample_bilinear_2_align_single_row");
}
TEST_CASE("Upsample: gradients match finite differences") {
  gradcheck_layer<Upsample<2>, Shape<2, 3, 4>>(2, Mode::train);
  gradcheck_layer<Upsample<3, Bilinear::bilinear>, Shape<2, 3, 4>>(2, Mode::train);
  gradcheck_layer<Upsample<2, Bilinear::bilinear, true>, Shape<2, 4, 3>>(2, Mode::train);
}
TEST_CASE("Upsample: torch's source taps at the edges (half-pixel centres clamped at 0, corners aligned)") {
  // align_corners=False, scale 2: output 0 reads (0.5 - 0.5 * ... ) -> real -0.25 clamped to 0;
  // output 1 reads 0.25 between inputs 0 and 1; the last output clamps to the last input.
  constexpr auto t0 = detail::linear_tap<4, 2, false>(0);
  static_assert(t0.i0 == 0 && t0.i1 == 1 && t0.l1 == 0.0f);
  constexpr auto t1 = detail::linear_tap<4, 2, false>(1);
  static_assert(t1.i0 == 0 && t1.i1 == 1 && t1.l1 == 0.25f && t1.l0 == 0.75f);
  constexpr auto t7 = detail::linear_tap<4, 2, false>(7);
  static_assert(t7.i0 == 3 && t7.i1 == 3);
  // align_corners=True: the first and last outputs are the first and last inputs exactly.
  constexpr auto a0 = detail::linear_tap<4, 2, true>(0);
  constexpr auto a7 = detail::linear_tap<4, 2, true>(7);
  static_assert(a0.i0 == 0 && a0.l1 == 0.0f && a7.i0 == 3 && a7.i1 == 3);
  // Every output that reads an input lies in the range the device gather scans.
  const auto covered = []<std::size_t In, std::size_t S, bool Align>() {
    for (std::size_t o = 0; o < In * S; ++o) {
      const auto t = detail::linear_tap<In, S, Align>(o);
      for (std::size_t i : {t.i0, t.i1}) {
        const detail::LinearReaders<In, S, Align> r(i);
        if (o < r.lo || o >= r.hi) return false;
      }
    }
    return true;
  };
  CHECK(covered.operator()<4, 2, false>());
  CHECK(covered.operator()<5, 3, false>());
  CHECK(covered.operator()<2, 7, true>());
  CHECK(covered.operator()<9, 4, true>());
  CHECK(covered.operator()<1, 3, true>());
  CHECK(Upsample<2, UpsampleMode::bilinear, true>::signature() == "Upsample<2,bilinear,align_corners>");
  CHECK(Upsample<3>::signature() == "Upsample<3,nearest>");
}

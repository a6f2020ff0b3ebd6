// im2col / col2im against a direct definition, on geometries with padding, stride and odd sizes
// (GCC 12 at -O3 once miscompiled a straightforward im2col; this pins the kernels themselves).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <cohort/backend/cpu/conv2d.hpp>

using namespace cohort;

namespace {
template <class G>
void check_im2col() {
  std::vector<float> x(G::in_size), col(G::patch * G::out_plane, 42.f), dx(G::in_size, 0.f), dx_ref(G::in_size, 0.f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.1f) + 2.f;
  cpu::im2col<G>(x.data(), col.data());
  std::size_t bad = 0;
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t a = 0; a < G::kernel; ++a)
      for (std::size_t b = 0; b < G::kernel; ++b)
        for (std::size_t i = 0; i < G::out_h; ++i)
          for (std::size_t j = 0; j < G::out_w; ++j) {
            const long ih = long(i * G::stride + a) - long(G::padding), iw = long(j * G::stride + b) - long(G::padding);
            const bool inside = ih >= 0 && iw >= 0 && ih < long(G::in_h) && iw < long(G::in_w);
            const std::size_t r = ((c * G::kernel + a) * G::kernel + b) * G::out_plane + i * G::out_w + j;
            const float expected = inside ? x[(c * G::in_h + std::size_t(ih)) * G::in_w + std::size_t(iw)] : 0.f;
            bad += col[r] != expected;
            if (inside) dx_ref[(c * G::in_h + std::size_t(ih)) * G::in_w + std::size_t(iw)] += col[r];
          }
  CHECK(bad == 0);
  cpu::col2im_add<G>(col.data(), dx.data());
  CHECK(dx == dx_ref);
}
} // namespace

TEST_CASE("im2col and col2im: padding, stride, odd and non-square sizes") {
  check_im2col<Conv2dGeometry<256, 512, 7, 7, 3, 1, 1>>();
  check_im2col<Conv2dGeometry<3, 4, 9, 8, 3, 1, 0>>();
  check_im2col<Conv2dGeometry<2, 4, 11, 10, 5, 2, 2>>();
  check_im2col<Conv2dGeometry<1, 16, 28, 28, 5, 1, 2>>();
  check_im2col<Conv2dGeometry<2, 2, 6, 7, 3, 3, 1>>();
  check_im2col<Conv2dGeometry<1, 1, 4, 4, 4, 1, 3>>();
  check_im2col<Conv2dGeometry<4, 6, 5, 5, 1, 1, 0>>();
}

// How close the direct convolution's inner kernel (forward tiles, also dX's) runs to the FMA
// peak on ResNet-20's shapes, one thread, no padding, copies or threading around it:
//
//   direct_kernel            (compare with fma_peak's 1-thread figure)
//
// "computed" counts every FMA the kernel issues, garbage wide positions included; "useful" only
// the convolution's own multiply-adds. The gap between the two is the wide planes' garbage
// columns (7x7 planes: 64 positions computed for 49). One JSON line per shape.

#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_common.hpp"
#include <cohort/backend/cpu.hpp>

using namespace cohort;

namespace {
template <class G>
void measure(const char* name) {
  using V = cpu::direct::plan_t<G>;
  const Isa isa = cpu::active_isa();
  const std::size_t rows = cpu::direct::forward_rows<G>(isa), count = cpu::direct::forward_group<G>;
  std::vector<float> xt(count * V::cin * V::channel_stride + 64, 0.5f), yw(count * rows * V::positions + 64);
  std::vector<float> w(G::out_channels * G::patch, 0.01f);
  HostBuffer<float> packed;
  cpu::direct::pack_for<G, G>(isa, w.data(), packed, false);
  const auto run = [&] {
    cpu::direct::forward_samples_dispatch<G>(isa, xt.data(), count, packed.data(), nullptr, yw.data());
  };
  for (int i = 0; i < 20; ++i) run();
  const int reps = 400;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  const double taps = double(G::in_channels * G::kernel * G::kernel);
  const double useful = 2.0 * double(count * G::out_channels * G::out_h * G::out_w) * taps;
  const double computed = 2.0 * double(count * rows * V::positions) * taps;
  std::printf("{\"shape\": \"%s\", \"samples\": %zu, \"useful_gflops\": %.1f, \"computed_gflops\": %.1f}\n", name,
              count, useful / s * 1e-9, computed / s * 1e-9);
}
} // namespace

int main() {
  cohort::bench::refuse_compile_only_build("direct_kernel");
  set_num_threads(1);
  measure<Conv2dGeometry<16, 16, 28, 28, 3, 1, 1>>("16->16 3x3 28x28");
  measure<Conv2dGeometry<32, 32, 14, 14, 3, 1, 1>>("32->32 3x3 14x14");
  measure<Conv2dGeometry<64, 64, 7, 7, 3, 1, 1>>("64->64 3x3 7x7");
  measure<Conv2dGeometry<16, 32, 28, 28, 3, 2, 1>>("16->32 3x3 stride 2 28x28");
  measure<Conv2dGeometry<32, 64, 14, 14, 3, 2, 1>>("32->64 3x3 stride 2 14x14");
}

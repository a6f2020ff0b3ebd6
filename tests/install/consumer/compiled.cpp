// Uses an installed cohort in compiled mode (cohort::kernels): one training step of the seed
// notebooks' model C, whose kernels the installed library holds (this unit compiles none of
// them: it declares them extern, and links libcohort_kernels.a). Returns 0 only when the loss
// before and after the step is finite.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <cohort/cohort.hpp>
#include <cohort/tensor/xtensor.hpp> // xtensor containers and views

#if !defined(COHORT_COMPILED_KERNELS)
#error "linking cohort::kernels defines COHORT_COMPILED_KERNELS"
#endif

using namespace cohort;

int main() {
  Network<models::ModelC> net(/*seed=*/1);
  NllLoss loss;
  Sgd opt({.lr = 0.05});

  xt::xtensor<float, 4> images({8, 1, 28, 28});
  std::vector<std::int32_t> labels(8);
  for (std::size_t n = 0; n < 8; ++n) {
    labels[n] = std::int32_t(n % 10);
    for (std::size_t i = 0; i < 784; ++i) images.data()[n * 784 + i] = float((n * 7 + i * 3) % 11) / 11.f;
  }

  const double before = loss.forward(net.forward(images), labels);
  net.backward(loss.backward());
  opt.step(net);
  const double after = loss.forward(net.forward(images), labels);

  std::printf("cohort consumer (compiled kernels): loss %.6f -> %.6f\n", before, after);
  return std::isfinite(before) && std::isfinite(after) ? 0 : 1;
}

// The convolution algorithms a program compiles by default (conv2d_winograd.hpp: without
// COHORT_CONV_ALL_ALGORITHMS, as cohort_tests and the kernel library are built): each layer's
// automatic choice and the direct kernel only. Asking for another one runs the layer's default,
// bit for bit. The opt-in variants themselves are tested where they are compiled
// (tests/backend/cpu/conv2d_winograd.cpp, its own program).
#include <doctest/doctest.h>

#include <random>
#include <span>
#include <vector>

#include <cohort/backend/cpu.hpp>

#include "support/compare.hpp"

using namespace cohort;

namespace {
using cpu::ConvAlgorithm;
using F2Layer = Conv2dGeometry<32, 40, 9, 9, 3, 1, 1>;    // >= 32 channels: F(2x2) by default
using DirectLayer = Conv2dGeometry<8, 24, 9, 9, 3, 1, 1>; // 8 channels: direct by default
// 16 channels: direct on AVX-512 and the baseline, F(4x4) on AVX2 (conv2d_winograd.hpp's table).
using NarrowLayer = Conv2dGeometry<16, 24, 9, 9, 3, 1, 1>;

/// Sets the algorithm for one scope, then restores automatic.
struct DefaultAlgorithmScope {
  explicit DefaultAlgorithmScope(ConvAlgorithm a) { cpu::set_conv_algorithm(a); }
  ~DefaultAlgorithmScope() { cpu::set_conv_algorithm(ConvAlgorithm::automatic); }
  DefaultAlgorithmScope(const DefaultAlgorithmScope&) = delete;
  DefaultAlgorithmScope& operator=(const DefaultAlgorithmScope&) = delete;
};

/// y, dX, dW and db of G on fixed random data, with the algorithm set now.
template <class G>
std::vector<float> forward_backward() {
  using Kernels = ops::Conv2dKernels<Cpu>;
  constexpr std::size_t batch = 3;
  std::mt19937 gen(11);
  std::normal_distribution<float> normal;
  std::vector<float> x(batch * G::in_size), w(G::out_channels * G::patch), b(G::out_channels), dy(batch * G::out_size);
  for (auto* v : {&x, &w, &b, &dy})
    for (auto& e : *v) e = normal(gen);
  std::vector<float> y(batch * G::out_size), dx(x.size()), dw(w.size()), db(b.size());
  CpuContext ctx;
  Kernels::workspace<G, float> ws;
  Kernels::forward<G>(ctx, x.data(), w.data(), b.data(), y.data(), batch, ws);
  Kernels::backward<G>(ctx,
                       ops::Conv2dBackwardArgs<float>{.x = x.data(),
                                                      .w = w.data(),
                                                      .dy = dy.data(),
                                                      .dx = dx.data(),
                                                      .dw = dw.data(),
                                                      .db = db.data(),
                                                      .batch = batch},
                       ws);
  for (const auto* v : {&dx, &dw, &db}) y.insert(y.end(), v->begin(), v->end());
  return y;
}
/// forward_backward's y, dX, dW and db under F(4x4), each within the opt-in F(4x4)'s bound of the
/// direct kernel's (tests/backend/cpu/conv2d_winograd.cpp), and not equal to them: F(4x4) ran.
template <class G>
void check_f4_against_direct(const std::vector<float>& f4, const std::vector<float>& direct) {
  constexpr std::size_t batch = 3;
  const std::size_t sizes[] = {batch * G::out_size, batch * G::in_size, G::out_channels * G::patch, G::out_channels};
  const char* names[] = {"y", "dx", "dw", "db"};
  std::size_t at = 0;
  for (int t = 0; t < 4; ++t) {
    const std::span<const float> a(f4.data() + at, sizes[t]), d(direct.data() + at, sizes[t]);
    COHORT_CHECK_CLOSE(a, d, t == 3 ? 1e-6 : 2e-5, names[t]);
    at += sizes[t];
  }
  CHECK(f4 != direct);
}
} // namespace

TEST_CASE("Winograd (default build): a layer compiles its automatic choice and the direct kernel only") {
  static_assert(!cpu::all_conv_algorithms, "cohort_tests is built with the default algorithm set");
  for (const Isa isa : {Isa::generic, Isa::avx2, Isa::avx512}) {
    CHECK(cpu::winograd::choose<F2Layer>(isa) == ConvAlgorithm::winograd_f2);
    CHECK(cpu::winograd::choose<DirectLayer>(isa) == ConvAlgorithm::direct);
  }
  static_assert(cpu::winograd::compiled<F2Layer, ConvAlgorithm::winograd_f2>);
  static_assert(cpu::winograd::compiled<F2Layer, ConvAlgorithm::direct>);
  static_assert(!cpu::winograd::compiled<F2Layer, ConvAlgorithm::winograd_f4>);
  static_assert(!cpu::winograd::compiled<DirectLayer, ConvAlgorithm::winograd_f2>);
  static_assert(!cpu::winograd::compiled<DirectLayer, ConvAlgorithm::winograd_f4>);
  static_assert(cpu::winograd::compiled<DirectLayer, ConvAlgorithm::direct>);

  const auto f2_default = forward_backward<F2Layer>();
  const auto direct_default = forward_backward<DirectLayer>();
  {
    // Not compiled for either layer: both keep their default, bit for bit.
    DefaultAlgorithmScope scope(ConvAlgorithm::winograd_f4);
    CHECK(cpu::conv_algorithm<F2Layer>() == ConvAlgorithm::winograd_f2);
    CHECK(cpu::conv_algorithm<DirectLayer>() == ConvAlgorithm::direct);
    CHECK(forward_backward<F2Layer>() == f2_default);
    CHECK(forward_backward<DirectLayer>() == direct_default);
  }
  {
    // F(2x2) is not compiled for the 16-channel layer: it stays direct.
    DefaultAlgorithmScope scope(ConvAlgorithm::winograd_f2);
    CHECK(cpu::conv_algorithm<DirectLayer>() == ConvAlgorithm::direct);
    CHECK(forward_backward<DirectLayer>() == direct_default);
  }
  {
    // The direct kernel is always there, and it is another computation than F(2x2)'s.
    DefaultAlgorithmScope scope(ConvAlgorithm::direct);
    CHECK(cpu::conv_algorithm<F2Layer>() == ConvAlgorithm::direct);
    CHECK(forward_backward<F2Layer>() != f2_default);
  }
}

TEST_CASE("Winograd (default build): a layer runs the running instruction set's choice, F(4x4) on AVX2's narrow "
          "layers") {
  // NarrowLayer is direct on AVX-512 and the baseline and F(4x4) on AVX2 (COHORT_ISA=avx2 reruns
  // this suite on that path): both are compiled, F(2x2) is not.
  static_assert(cpu::winograd::choose<NarrowLayer>(Isa::avx512) == ConvAlgorithm::direct);
  static_assert(cpu::winograd::choose<NarrowLayer>(Isa::avx2) == ConvAlgorithm::winograd_f4);
  static_assert(cpu::winograd::compiled<NarrowLayer, ConvAlgorithm::winograd_f4>);
  static_assert(!cpu::winograd::compiled<NarrowLayer, ConvAlgorithm::winograd_f2>);
  const Isa isa = cpu::active_isa();
  INFO("instruction set " << isa_name(isa));
  CHECK(cpu::conv_algorithm<NarrowLayer>() == cpu::winograd::choose<NarrowLayer>(isa));

  const auto automatic = forward_backward<NarrowLayer>();
  std::vector<float> direct;
  {
    DefaultAlgorithmScope scope(ConvAlgorithm::direct);
    direct = forward_backward<NarrowLayer>();
  }
  if (isa != Isa::avx2) {
    CHECK(automatic == direct);
    return;
  }
  check_f4_against_direct<NarrowLayer>(automatic, direct);
}

TEST_CASE("Winograd (default build): a variant is compiled only for the instruction sets whose choice it is") {
  // 32 channels on an 8x8 plane: F(4x4) on AVX2 and AVX-512, F(2x2) on the baseline. The program
  // holds both, but neither for the other instruction sets: asked for, each keeps its own.
  using L = Conv2dGeometry<32, 32, 8, 8, 3, 1, 1>;
  using cpu::winograd::compiled_on;
  static_assert(cpu::winograd::choose<L>(Isa::avx2) == ConvAlgorithm::winograd_f4);
  static_assert(cpu::winograd::choose<L>(Isa::avx512) == ConvAlgorithm::winograd_f4);
  static_assert(cpu::winograd::choose<L>(Isa::generic) == ConvAlgorithm::winograd_f2);
  static_assert(cpu::winograd::compiled<L, ConvAlgorithm::winograd_f2> &&
                cpu::winograd::compiled<L, ConvAlgorithm::winograd_f4>);
  static_assert(!compiled_on<L, ConvAlgorithm::winograd_f2>(Isa::avx512) &&
                !compiled_on<L, ConvAlgorithm::winograd_f2>(Isa::avx2) &&
                !compiled_on<L, ConvAlgorithm::winograd_f4>(Isa::generic));
  static_assert(compiled_on<L, ConvAlgorithm::winograd_f4>(Isa::avx2) == cpu::compiled_isa(Isa::avx2));
  static_assert(compiled_on<L, ConvAlgorithm::winograd_f4>(Isa::avx512) == cpu::compiled_isa(Isa::avx512));
  static_assert(compiled_on<L, ConvAlgorithm::winograd_f2>(Isa::generic));
  {
    DefaultAlgorithmScope scope(ConvAlgorithm::winograd_f2);
    CHECK(cpu::conv_algorithm<L>(Isa::avx2) == ConvAlgorithm::winograd_f4);
    CHECK(cpu::conv_algorithm<L>(Isa::avx512) == ConvAlgorithm::winograd_f4);
    CHECK(cpu::conv_algorithm<L>(Isa::generic) == ConvAlgorithm::winograd_f2);
  }
  {
    DefaultAlgorithmScope scope(ConvAlgorithm::winograd_f4);
    CHECK(cpu::conv_algorithm<L>(Isa::generic) == ConvAlgorithm::winograd_f2);
    CHECK(cpu::conv_algorithm<L>(Isa::avx512) == ConvAlgorithm::winograd_f4);
    CHECK(cpu::conv_algorithm<L>(Isa::avx2) == ConvAlgorithm::winograd_f4);
  }
  // And the running instruction set runs its own, bit for bit, whichever variant is asked for (a
  // variant not compiled on it would stop the program: conv2d_winograd_choice.hpp).
  const Isa isa = cpu::active_isa();
  INFO("instruction set " << isa_name(isa));
  const auto automatic = forward_backward<L>();
  for (const ConvAlgorithm a : {ConvAlgorithm::winograd_f2, ConvAlgorithm::winograd_f4}) {
    DefaultAlgorithmScope scope(a);
    CHECK(forward_backward<L>() == automatic);
  }
  // Where the choice is F(4x4), it is F(4x4) that runs: within its bound of the direct kernel
  // (tests/backend/cpu/conv2d_winograd.cpp), and not equal to it.
  std::vector<float> direct;
  {
    DefaultAlgorithmScope scope(ConvAlgorithm::direct);
    direct = forward_backward<L>();
  }
  if (cpu::winograd::choose<L>(isa) == ConvAlgorithm::winograd_f4)
    check_f4_against_direct<L>(automatic, direct);
  else
    CHECK(automatic != direct); // the baseline's F(2x2) ran, not the direct kernel
}

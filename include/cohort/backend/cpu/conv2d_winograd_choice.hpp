#pragma once
/// \file
/// Which algorithm a stride-1 convolution runs on the CPU, decided at compile time per layer and
/// instruction set: the measured table (choose) and what is compiled (compiled_on). The kernels'
/// dispatchers (conv2d_winograd_forward.hpp, conv2d_winograd_weight_grad.hpp) instantiate a
/// Winograd kernel only for the instruction sets that can run it, so a layer whose F(4x4) is
/// AVX2's choice alone compiles no AVX-512 or baseline F(4x4) (issue 36: the per-ISA table).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "cohort/backend/cpu/conv2d_winograd_transform.hpp"
#include "cohort/backend/cpu/simd.hpp"

namespace cohort::cpu {

/// How a stride-1 convolution is computed on the CPU.
enum class ConvAlgorithm : std::uint8_t {
  automatic,   ///< per layer: what the measurements in bench/RESULTS.md chose (winograd::choose)
  direct,      ///< the direct kernel (conv2d_direct.hpp): the smallest error
  winograd_f2, ///< Winograd F(2x2, r x r)
  winograd_f4, ///< Winograd F(4x4, r x r)
};

/// Whether every convolution algorithm is compiled for every layer it applies to (then any of them
/// can be selected at run time), or only each layer's automatic choice and the direct kernel (the
/// default). COHORT_CONV_ALL_ALGORITHMS turns the first on; like the instruction-set macros
/// (simd.hpp) it must be the same in every unit of a program, and the compiled kernel library
/// exports its own (CMake option COHORT_KERNELS_ALL_CONV_ALGORITHMS).
#ifdef COHORT_CONV_ALL_ALGORITHMS
inline constexpr bool all_conv_algorithms = true;
#else
inline constexpr bool all_conv_algorithms = false;
#endif

namespace detail {
[[noreturn, gnu::cold]] inline void winograd_not_compiled(Isa isa, std::size_t m) noexcept {
  std::fprintf(stderr,
               "cohort: Winograd F(%zux%zu) is not compiled for this layer on the %s path: the program's units "
               "disagree about COHORT_CONV_ALL_ALGORITHMS (backend/cpu/conv2d_winograd_choice.hpp)\n",
               m, m, isa_name(isa).data());
  std::abort();
}
} // namespace detail

namespace winograd {

/// What `automatic` picks for Gk on the instruction set `isa`: a table measured per vector width
/// (bench/RESULTS.md, "Winograd"; "F(4x4) by default on AVX2"), 3x3 kernels only (model B's 5x5
/// layer gains forward and loses more in dW), never below 16 channels on either side.
///
/// - AVX-512: F(4x4, 3x3) on planes of at most 8x8 with 32-96 channels (ResNet-20's last stage,
///   FastResNet's 7x7 layers: 1.2-1.3x faster than F(2x2) on Intel, fwd+bwd), F(2x2, 3x3) on the
///   rest where both sides have at least 32 channels. With 16 channels the transforms cost more
///   than the products save (ResNet-20's first stage: 1.4x slower with F(2x2), 1.45x with F(4x4)).
/// - The baseline: F(2x2) from 32 channels, the AVX-512 table before F(4x4) (not measured since).
/// - AVX2 (16 vector registers, so the direct kernel's register tile is half as tall and runs at
///   ~40-60% of the FMA peak): F(4x4, 3x3) on narrow layers (16-23 channels on the smaller side)
///   and on planes of at most 8x8, where its 2x2 tiles of 4x4 waste no more than F(2x2)'s; F(2x2)
///   on the rest with >= 24 channels. F(4x4) only up to 96 input channels: its error grows with
///   the length of the sums, and tests/backend/cpu/conv2d_winograd.cpp bounds it (2e-5 of the
///   largest value) on layers up to 96 channels.
///
/// F(2x2, 3x3)'s error is no larger than the direct kernel's; F(4x4)'s is 4-15x the direct one
/// and within the PyTorch parity bound of the models that take it (2e-5 of a tensor's largest
/// value on the AVX2 and AVX-512 paths: tests/support/compare.hpp).
template <class Gk>
constexpr ConvAlgorithm choose(Isa isa) noexcept {
  if constexpr (!applicable<Gk> || Gk::kernel != 3) {
    (void)isa;
    return ConvAlgorithm::direct;
  } else {
    constexpr std::size_t narrow = std::min(Gk::in_channels, Gk::out_channels);
    // Where F(4x4) may run at all: its error is bounded up to 96 input channels.
    constexpr bool f4_channels = Gk::in_channels <= 96;
    constexpr bool small_plane = Gk::out_h <= 8;
    if (narrow < 16) return ConvAlgorithm::direct;
    if (isa == Isa::avx2) {
      if (f4_channels && (narrow < 24 || small_plane)) return ConvAlgorithm::winograd_f4;
      return narrow >= 24 ? ConvAlgorithm::winograd_f2 : ConvAlgorithm::direct;
    }
    if (narrow < 32) return ConvAlgorithm::direct;
    if (isa == Isa::avx512 && f4_channels && small_plane) return ConvAlgorithm::winograd_f4;
    return ConvAlgorithm::winograd_f2;
  }
}

/// The algorithm of Winograd tiles of M x M outputs.
template <std::size_t M>
inline constexpr ConvAlgorithm tile_algorithm = M == 2 ? ConvAlgorithm::winograd_f2 : ConvAlgorithm::winograd_f4;

/// Whether algorithm A is compiled for the convolution Gk on the instruction set `isa`, and so
/// can run it there. The direct kernel always is; a Winograd variant where it is Gk's automatic
/// choice on `isa` and `isa` is compiled (simd.hpp's compiled_isa: `-march=native` on an AVX-512
/// machine compiles no AVX2 table's choices), or everywhere with COHORT_CONV_ALL_ALGORITHMS.
/// The rest are opt-in: compiling every variant for every layer cost three quarters of a
/// 16-channel layer's kernels (ResNet-20's first stage, bench/RESULTS.md "Compile time"), and
/// F(4x4) for the AVX-512 and baseline paths of AVX2's F(4x4) layers would be code no default
/// run enters.
template <class Gk, ConvAlgorithm A>
constexpr bool compiled_on(Isa isa) noexcept {
  if constexpr (A == ConvAlgorithm::direct) {
    (void)isa;
    return true;
  } else if constexpr (!applicable<Gk> || A == ConvAlgorithm::automatic) {
    (void)isa;
    return false;
  } else {
    return compiled_isa(isa) && (all_conv_algorithms || choose<Gk>(isa) == A);
  }
}

/// Whether algorithm A is compiled for Gk on any instruction set of the program.
template <class Gk, ConvAlgorithm A>
inline constexpr bool
    compiled = compiled_on<Gk, A>(Isa::avx512) || compiled_on<Gk, A>(Isa::avx2) || compiled_on<Gk, A>(Isa::generic);

/// dispatch_isa (simd.hpp) for a Winograd kernel of M x M tiles run for Gk: the paths of the
/// instruction sets on which that algorithm is not compiled for Gk are never referenced, so never
/// instantiated. conv_algorithm(isa) returns no algorithm that is not compiled on `isa`, so the
/// last branch is a broken invariant (units built with different COHORT_CONV_ALL_ALGORITHMS).
template <class Gk, std::size_t M, class A, class B, class C>
COHORT_ALWAYS_INLINE void dispatch_compiled(Isa isa, A&& avx512, B&& avx2, C&& generic) {
  constexpr ConvAlgorithm alg = tile_algorithm<M>;
  if constexpr (compiled_on<Gk, alg>(Isa::avx512))
    if (isa == Isa::avx512) return avx512();
  if constexpr (compiled_on<Gk, alg>(Isa::avx2))
    if (isa == Isa::avx2) return avx2();
  if constexpr (compiled_on<Gk, alg>(Isa::generic))
    if (isa == Isa::generic) return generic();
  cpu::detail::winograd_not_compiled(isa, M);
}

} // namespace winograd
} // namespace cohort::cpu

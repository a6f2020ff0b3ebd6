#pragma once
/// \file
/// Winograd convolution F(m x m, r x r) for stride-1 layers: fewer multiplications than the
/// direct kernel (conv2d_direct.hpp), at the price of a larger rounding error.
///
/// An output tile of m x m positions is computed from an alpha x alpha input tile (alpha = m + r - 1):
///
///   Y = A^T [ (G g G^T) (.) (B^T d B) ] A          (.) element-wise, per (output, input) channel
///
/// and the element-wise products summed over input channels become alpha^2 independent GEMMs,
///
///   M[pos] (tiles x Cout) = V[pos] (tiles x Cin) * U[pos] (Cin x Cout),
///
/// with V = B^T d B of every tile and U = G g G^T of every filter. F(2x2, 3x3) does 16 products
/// where the direct kernel does 36 (2.25x fewer), F(4x4, 3x3) 36 for 144 (4x), F(2x2, 5x5) 36 for
/// 100 (2.8x); tiles hanging over the output's edge waste part of that.
///
/// The matrices come from Toom-Cook interpolation at the points 0, +-1, +-1/2 or +-2 and
/// infinity, computed at compile time in double (Transform). The input and output arrive and
/// leave in the direct path's wide-plane layout (Wide<G>), so the pad/unpad steps of the direct
/// path (the fused ReLU and max-pool, dX from a pooled gradient) are shared unchanged. Inside,
/// planes are transposed to channel-last so every transform is vectorised over 16 channels.
///
/// Forward and dX: every output element is one fixed sequence of operations (its tile's
/// transform, a GEMM row reduced over input channels in order, the output transform), whatever
/// the batch, the grouping of samples or the thread count. dW: sums over sample groups fixed by the
/// batch size, in order: it does not depend on the thread count.
///
/// Rounding error (tests/backend/cpu/conv2d_winograd.cpp measures it per algorithm): F(2x2, 3x3)'s
/// is no larger than the direct kernel's, F(4x4)'s and the 5x5 kernels' are several times larger
/// and grow with the channel count. conv_algorithm() says which one a layer uses.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "cohort/backend/cpu/conv2d_direct.hpp"
#include "cohort/backend/cpu/conv2d_winograd_forward.hpp"
#include "cohort/backend/cpu/conv2d_winograd_transform.hpp"
#include "cohort/backend/cpu/conv2d_winograd_weight_grad.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/tensor/buffer.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

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

namespace winograd {

/// Floats of per-thread scratch run_group needs for groups of up to `group` samples.
template <class Gk, std::size_t M>
constexpr std::size_t scratch_floats(std::size_t group) noexcept {
  using P = Plan<Gk, M>;
  return GroupScratch<P>::floats(group) + P::Wide::cin * P::Wide::plane + Gk::out_channels * P::Wide::positions + 32;
}

// ---- which algorithm a layer uses -------------------------------------------------------------

namespace detail {
inline std::atomic<int>& algorithm_override() noexcept {
  static std::atomic<int> value{-1}; // -1: not set in code, read COHORT_CONV_ALGORITHM
  return value;
}
/// An algorithm by the name COHORT_CONV_ALGORITHM gives it: auto, direct, f2 or f4.
inline std::optional<ConvAlgorithm> parse_algorithm(std::string_view name) noexcept {
  if (name == "auto") return ConvAlgorithm::automatic;
  if (name == "direct") return ConvAlgorithm::direct;
  if (name == "f2") return ConvAlgorithm::winograd_f2;
  if (name == "f4") return ConvAlgorithm::winograd_f4;
  return std::nullopt;
}
/// COHORT_CONV_ALGORITHM, read once (a name parse_algorithm does not know: auto, with one
/// warning; not an exception, as for COHORT_ISA: a tuning knob should not stop training).
inline ConvAlgorithm algorithm_from_environment() noexcept {
  static const ConvAlgorithm a = [] {
    const char* env = std::getenv("COHORT_CONV_ALGORITHM");
    if (!env) return ConvAlgorithm::automatic;
    if (const auto known = parse_algorithm(env)) {
      if (!all_conv_algorithms && (*known == ConvAlgorithm::winograd_f2 || *known == ConvAlgorithm::winograd_f4))
        std::fprintf(stderr,
                     "cohort: COHORT_CONV_ALGORITHM=%s reaches only the layers whose default it is: this program "
                     "was built without COHORT_CONV_ALL_ALGORITHMS, which compiles every algorithm for every layer\n",
                     env);
      return *known;
    }
    std::fprintf(stderr, "cohort: COHORT_CONV_ALGORITHM=\"%s\" is not auto, direct, f2 or f4; using auto\n", env);
    return ConvAlgorithm::automatic;
  }();
  return a;
}
} // namespace detail

/// What `automatic` picks for Gk on the instruction set `isa`: a table measured per vector width
/// (bench/RESULTS.md, "Winograd"; "F(4x4) by default on AVX2"), 3x3 kernels only (model B's 5x5
/// layer gains forward and loses more in dW), never below 16 channels on either side.
///
/// - AVX-512 (and the baseline): F(2x2, 3x3) where both sides have at least 32 channels. With
///   16 channels the transforms cost more than the products save (ResNet-20's first stage: 1.4x
///   slower), and F(4x4) paid only on model D's layers, where its error is not promised.
/// - AVX2 (16 vector registers, so the direct kernel's register tile is half as tall and runs at
///   ~40-60% of the FMA peak): F(4x4, 3x3) on narrow layers (16-23 channels on the smaller side)
///   and on planes of at most 8x8, where its 2x2 tiles of 4x4 waste no more than F(2x2)'s; F(2x2)
///   on the rest with >= 24 channels. F(4x4) only up to 96 input channels: its error grows with
///   the length of the sums, and tests/backend/cpu/conv2d_winograd.cpp bounds it (2e-5 of the
///   largest value) on layers up to 96 channels.
///
/// F(2x2, 3x3)'s error is no larger than the direct kernel's; F(4x4)'s is 4-15x the direct one
/// and still within the 1e-5 PyTorch parity bounds of the models that take it.
template <class Gk>
constexpr ConvAlgorithm choose(Isa isa) noexcept {
  if constexpr (!applicable<Gk> || Gk::kernel != 3) {
    (void)isa;
    return ConvAlgorithm::direct;
  } else {
    constexpr std::size_t narrow = std::min(Gk::in_channels, Gk::out_channels);
    if (narrow < 16) return ConvAlgorithm::direct;
    if (isa == Isa::avx2) {
      if (Gk::in_channels <= 96 && (narrow < 24 || Gk::out_h <= 8)) return ConvAlgorithm::winograd_f4;
      return narrow >= 24 ? ConvAlgorithm::winograd_f2 : ConvAlgorithm::direct;
    }
    return narrow >= 32 ? ConvAlgorithm::winograd_f2 : ConvAlgorithm::direct;
  }
}

namespace detail {
/// Whether A is Gk's automatic choice on `isa` and that path is compiled (simd.hpp's
/// compiled_isa: `-march=native` on an AVX-512 machine compiles no AVX2 table's choices).
template <class Gk, ConvAlgorithm A>
constexpr bool chosen_on(Isa isa) noexcept {
  return compiled_isa(isa) && choose<Gk>(isa) == A;
}
} // namespace detail

/// Whether algorithm A is compiled for the convolution Gk, and so can run it. The direct kernel
/// always is, and so is the layer's automatic choice on every instruction set the program
/// compiles (it picks its path at run time); the other Winograd variants only with
/// COHORT_CONV_ALL_ALGORITHMS. Those are opt-in, and compiling them for every layer cost three
/// quarters of a 16-channel layer's kernels (ResNet-20's first stage, bench/RESULTS.md "Compile
/// time").
template <class Gk, ConvAlgorithm A>
inline constexpr bool compiled = A == ConvAlgorithm::direct ||
                                 (applicable<Gk> && A != ConvAlgorithm::automatic &&
                                  (all_conv_algorithms || detail::chosen_on<Gk, A>(Isa::avx512) ||
                                   detail::chosen_on<Gk, A>(Isa::avx2) || detail::chosen_on<Gk, A>(Isa::generic)));

} // namespace winograd

/// Sets the algorithm of every stride-1 convolution the CPU backend runs from now on
/// (`automatic` restores the per-layer default). Overrides COHORT_CONV_ALGORITHM. A layer for
/// which the algorithm is not compiled (winograd::compiled: Winograd where it cannot run, the
/// opt-in variants without COHORT_CONV_ALL_ALGORITHMS) keeps its default; conv_algorithm<Gk>()
/// says what it runs.
inline void set_conv_algorithm(ConvAlgorithm a) noexcept {
  winograd::detail::algorithm_override().store(int(a), std::memory_order_relaxed);
}

/// The algorithm the convolution Gk runs with now: the one set (set_conv_algorithm, else
/// COHORT_CONV_ALGORITHM) where it is compiled for Gk, else Gk's automatic choice.
template <class Gk>
ConvAlgorithm conv_algorithm() noexcept {
  if constexpr (!winograd::applicable<Gk>) {
    return ConvAlgorithm::direct;
  } else {
    const int set = winograd::detail::algorithm_override().load(std::memory_order_relaxed);
    const ConvAlgorithm a = set >= 0 ? ConvAlgorithm(set) : winograd::detail::algorithm_from_environment();
    switch (a) {
    case ConvAlgorithm::direct:
      return a;
    case ConvAlgorithm::winograd_f2:
      if constexpr (winograd::compiled<Gk, ConvAlgorithm::winograd_f2>) return a;
      break;
    case ConvAlgorithm::winograd_f4:
      if constexpr (winograd::compiled<Gk, ConvAlgorithm::winograd_f4>) return a;
      break;
    default:
      break;
    }
    return winograd::choose<Gk>(active_isa());
  }
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop

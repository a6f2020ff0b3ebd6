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
#include "cohort/backend/cpu/conv2d_winograd_choice.hpp"
#include "cohort/backend/cpu/conv2d_winograd_forward.hpp"
#include "cohort/backend/cpu/conv2d_winograd_transform.hpp"
#include "cohort/backend/cpu/conv2d_winograd_weight_grad.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/tensor/buffer.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu {

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

} // namespace winograd

/// Sets the algorithm of every stride-1 convolution the CPU backend runs from now on
/// (`automatic` restores the per-layer default). Overrides COHORT_CONV_ALGORITHM. A layer for
/// which the algorithm is not compiled on the running instruction set (winograd::compiled_on:
/// Winograd where it cannot run, the opt-in variants without COHORT_CONV_ALL_ALGORITHMS) keeps
/// its default; conv_algorithm<Gk>() says what it runs.
inline void set_conv_algorithm(ConvAlgorithm a) noexcept {
  winograd::detail::algorithm_override().store(int(a), std::memory_order_relaxed);
}

/// The algorithm the convolution Gk runs with now on the instruction set `isa`: the one set
/// (set_conv_algorithm, else COHORT_CONV_ALGORITHM) where it is compiled for Gk on `isa`, else
/// Gk's automatic choice there.
template <class Gk>
ConvAlgorithm conv_algorithm(Isa isa) noexcept {
  if constexpr (!winograd::applicable<Gk>) {
    (void)isa;
    return ConvAlgorithm::direct;
  } else {
    const int set = winograd::detail::algorithm_override().load(std::memory_order_relaxed);
    const ConvAlgorithm a = set >= 0 ? ConvAlgorithm(set) : winograd::detail::algorithm_from_environment();
    switch (a) {
    case ConvAlgorithm::direct:
      return a;
    case ConvAlgorithm::winograd_f2:
      if (winograd::compiled_on<Gk, ConvAlgorithm::winograd_f2>(isa)) return a;
      break;
    case ConvAlgorithm::winograd_f4:
      if (winograd::compiled_on<Gk, ConvAlgorithm::winograd_f4>(isa)) return a;
      break;
    default:
      break;
    }
    return winograd::choose<Gk>(isa);
  }
}
/// conv_algorithm on the instruction set the CPU backend runs (active_isa).
template <class Gk>
ConvAlgorithm conv_algorithm() noexcept {
  return conv_algorithm<Gk>(active_isa());
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop

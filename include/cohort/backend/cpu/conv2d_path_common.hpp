#pragma once
/// \file
/// What every CPU convolution path shares (backend/cpu/conv2d.hpp dispatches between the paths):
/// a layer's workspace, the per-thread transient buffers, conversions at the edges of the float
/// kernels for 16-bit storage types, the bf16 dot-product choice and the batch's split into groups.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/conv2d_amx.hpp"
#include "cohort/backend/cpu/conv2d_avx512_bf16.hpp"
#include "cohort/backend/cpu/conv2d_direct.hpp"
#include "cohort/backend/cpu/conv2d_dy.hpp"
#include "cohort/backend/cpu/conv2d_strided.hpp"
#include "cohort/backend/cpu/conv2d_winograd.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/tap_range.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"

namespace cohort {
namespace cpu {

/// col (patch, out_plane) from one (C, H, W) sample; zero where the window hangs over the padding.
template <class G, class T>
void im2col(const T* x, T* col) {
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t kh = 0; kh < G::kernel; ++kh) {
      const TapRange rows = tap_range(kh, G::in_h, G::out_h, G::stride, G::padding);
      for (std::size_t kw = 0; kw < G::kernel; ++kw) {
        const TapRange cols = tap_range(kw, G::in_w, G::out_w, G::stride, G::padding);
        T* row = col + ((c * G::kernel + kh) * G::kernel + kw) * G::out_plane;
        std::fill(row, row + rows.first * G::out_w, T(0));
        for (std::size_t oh = rows.first; oh < rows.last; ++oh) {
          const T* in = x + (c * G::in_h + (oh * G::stride + kh - G::padding)) * G::in_w + kw - G::padding;
          T* out = row + oh * G::out_w;
          std::fill(out, out + cols.first, T(0));
          if constexpr (G::stride == 1)
            std::copy(in + cols.first, in + cols.last, out + cols.first);
          else
            for (std::size_t ow = cols.first; ow < cols.last; ++ow) out[ow] = in[ow * G::stride];
          std::fill(out + cols.last, out + G::out_w, T(0));
        }
        std::fill(row + rows.last * G::out_w, row + G::out_plane, T(0));
      }
    }
}

/// dx += scatter of col (patch, out_plane) back onto one (C, H, W) sample.
template <class G, class T>
void col2im_add(const T* col, T* dx) {
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t kh = 0; kh < G::kernel; ++kh) {
      const TapRange rows = tap_range(kh, G::in_h, G::out_h, G::stride, G::padding);
      for (std::size_t kw = 0; kw < G::kernel; ++kw) {
        const TapRange cols = tap_range(kw, G::in_w, G::out_w, G::stride, G::padding);
        const T* row = col + ((c * G::kernel + kh) * G::kernel + kw) * G::out_plane;
        for (std::size_t oh = rows.first; oh < rows.last; ++oh) {
          T* out = dx + (c * G::in_h + (oh * G::stride + kh - G::padding)) * G::in_w + kw - G::padding;
          const T* in = row + oh * G::out_w;
          for (std::size_t ow = cols.first; ow < cols.last; ++ow) out[ow * G::stride] += in[ow];
        }
      }
    }
}

} // namespace cpu

#ifndef COHORT_CHECK_SCRATCH
#ifdef NDEBUG
#define COHORT_CHECK_SCRATCH 0
#else
#define COHORT_CHECK_SCRATCH 1
#endif
#endif

namespace cpu::detail {
/// The per-thread buffers of the convolution paths, by what they hold. A path uses each at most
/// once per call, so two names never alias.
enum class Transient : std::uint8_t {
  input,     ///< padded or converted input planes (and the dX path's padded dY)
  output,    ///< transposed dY, or an output / dX in float
  partials,  ///< per-chunk partial dW sums, or converted weights
  bias_sums, ///< per-sample bias-gradient sums
};
inline constexpr std::size_t transient_kinds = 4;
/// Extra floats past every transient buffer that checked builds (debug, or COHORT_CHECK_SCRATCH=1
/// as the sanitizer tests are) fill with a canary and check at the next request: a kernel that
/// wrote past what it asked for fails there, naming the buffer.
inline constexpr std::size_t transient_guard = 16;

/// Batch-sized buffer `kind` of the calling thread, at least `n` floats, shared by every layer's
/// passes: it grows to the largest layer's need, then never allocates.
inline float* transient(Transient kind, std::size_t n) {
  thread_local HostBuffer<float> buffers[transient_kinds];
  auto& b = buffers[std::size_t(kind)];
#if COHORT_CHECK_SCRATCH
  thread_local std::size_t asked[transient_kinds] = {};
  constexpr float canary = -1.2345e-38f; // a subnormal no kernel output ends in by chance
  std::size_t& last = asked[std::size_t(kind)];
  for (std::size_t i = 0; i < transient_guard && last + i < b.size(); ++i)
    if (std::memcmp(&b[last + i], &canary, sizeof canary) != 0)
      throw std::logic_error(cohort::detail::concat("conv2d: a kernel wrote past transient buffer ", int(kind),
                                                    " (asked for ", last, " floats)"));
  if (b.size() < n + transient_guard) b.resize(n + transient_guard);
  std::fill(b.data() + n, b.data() + n + transient_guard, canary);
  last = n;
#else
  if (b.size() < n) b.resize(n);
#endif
  return b.data();
}

/// Per-thread scratch for im2col matrices: grows to the largest layer, then never allocates.
template <class T>
HostBuffer<T>& conv_scratch(std::size_t n) {
  thread_local HostBuffer<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer;
}
} // namespace cpu::detail
} // namespace cohort

namespace cohort::cpu::conv2d_paths {

struct Common {
  /// What a layer keeps between calls: its packed weights and, when a ReLU and a max-pool are
  /// fused into it, the pool's argmax. Batch-sized buffers (padded inputs, transposed dY) are
  /// per-thread transients shared by every layer, so memory grows with the largest layer, not
  /// with the sum of them.
  template <class G, class T>
  struct workspace {
    HostBuffer<float> packed, packed_t;            // weights for forward and for dX
    HostBuffer<bfloat16> amx_packed, amx_packed_t; // the same for the bf16 dot kernels (AMX layout)
    HostBuffer<float> bias, bias_tiles;            // the bias in float (16-bit storage types), as AMX tiles
    HostBuffer<float> winograd, winograd_t;        // Winograd-transformed weights, forward and dX
    HostBuffer<float> winograd_bias;               // the bias padded to the Winograd output channels
    HostBuffer<std::uint8_t> window;               // fused pool: argmax of each window (2*down + right)
    void reserve(std::size_t) noexcept {}
  };

  // ---- conversions at the edges of the direct path (16-bit storage types) -----------------------

  /// Sample n of a (batch, size) tensor as floats (per-thread scratch slot 2 unless float).
  template <class T>
  static const float* sample(const T* p, std::size_t n, std::size_t size) {
    return cpu::direct::as_floats(p + n * size, size, 2);
  }
  /// Where a kernel writes `n` floats that end up in `dst`: dst itself for float, else scratch.
  template <class T>
  static float* staging(T* dst, std::size_t n) {
    if constexpr (std::is_same_v<T, float>)
      return dst;
    else
      return cpu::convert_scratch(3, n);
  }
  template <class T>
  static void unstage(Isa isa, const float* src, T* dst, std::size_t n) {
    if constexpr (!std::is_same_v<T, float>) cpu::store_floats(isa, src, dst, n);
  }
  template <class G, class T>
  static const float* float_bias(Isa isa, const T* b, workspace<G, T>& ws) {
    if constexpr (std::is_same_v<T, float>) {
      return b;
    } else {
      if (!b) return nullptr;
      ws.bias.resize(G::out_channels);
      cpu::load_floats(isa, b, ws.bias.data(), G::out_channels);
      return ws.bias.data();
    }
  }

  /// Whether the forward kernel of Gk can run on bf16 dot products (AMX tiles or AVX512-BF16
  /// vectors: the same layers, data and packing) for storage type T; the CPU decides at run time.
  template <class Gk, class T>
  static constexpr bool bf16_dot_path = std::is_same_v<T, bfloat16>&& cpu::amx_conv::applicable<Gk>;

  /// The bf16 dot-product engine Gk runs on now: bf16_dot_engine(), except that AVX512-BF16
  /// yields to Winograd where conv_algorithm<Gk>() picks it. Its 2x the FMA rate buys no more
  /// than F(2x2, 3x3)'s 2.25x fewer products (Zen 4, model D's 128->256 layer at batch 128:
  /// forward 76 ms either way, backward 179 ms on bf16 vectors against 154 ms by Winograd in
  /// float). AMX (15x the FMA rate) always runs.
  template <class Gk>
  static cpu::Bf16Dot bf16_engine_for() noexcept {
    const cpu::Bf16Dot engine = cpu::bf16_dot_engine();
    if (engine == cpu::Bf16Dot::avx512 && cpu::conv_algorithm<Gk>() != cpu::ConvAlgorithm::direct)
      return cpu::Bf16Dot::none;
    return engine;
  }

  /// Calls `group_fn(n0, count, group)` for the batch cut into groups of at most `max_group`
  /// consecutive samples, the groups split between threads; `group` bounds every group's size.
  /// The batch is first cut into equal chunks of samples, 4 per thread, which threads claim as
  /// they come free, and each chunk into groups: whole groups would not split evenly (22 groups
  /// of 6 samples went 12:10 between two threads).
  template <class GroupFn>
  static void for_each_group(CpuContext& ctx, std::size_t batch, std::size_t max_group, GroupFn&& group_fn) {
    const std::size_t chunks = std::min(batch, 4 * ctx.threads().size());
    const std::size_t per_chunk = (batch + chunks - 1) / chunks, group = std::min(max_group, per_chunk);
    ctx.threads().parallel_for(chunks, 1, [&, per_chunk, group](std::size_t lo, std::size_t hi) {
      for (std::size_t c = lo; c < hi; ++c) {
        const std::size_t end = std::min(batch, (c + 1) * per_chunk);
        for (std::size_t n0 = c * per_chunk; n0 < end; n0 += group) group_fn(n0, std::min(group, end - n0), group);
      }
    });
  }
};

} // namespace cohort::cpu::conv2d_paths

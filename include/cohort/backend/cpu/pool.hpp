#pragma once
/// \file
/// MaxPool2d on the CPU, saving the argmax of every window for the backward pass.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"

namespace cohort {

template <>
struct ops::PoolKernels<Cpu> {
  template <class G, class T>
  struct workspace {
    HostBuffer<std::uint32_t> argmax; // (batch, C, out_h, out_w): index into the input plane
    void reserve(std::size_t batch) { argmax.resize(batch * G::out_size); }
  };

  template <class G, class T>
  static void max_forward(CpuContext& ctx, const T* x, T* y, std::size_t batch, workspace<G, T>& ws) {
    ws.reserve(batch);
    std::uint32_t* arg = ws.argmax.data();
    ctx.threads().parallel_for(batch * G::channels, 16, [&](std::size_t p0, std::size_t p1) {
      for (std::size_t plane = p0; plane < p1; ++plane) {
        const T* in = x + plane * G::in_h * G::in_w;
        T* out = y + plane * G::out_h * G::out_w;
        std::uint32_t* idx = arg + plane * G::out_h * G::out_w;
        for (std::size_t oh = 0; oh < G::out_h; ++oh)
          for (std::size_t ow = 0; ow < G::out_w; ++ow) {
            const std::ptrdiff_t h0 = std::ptrdiff_t(oh * G::stride) - std::ptrdiff_t(G::padding);
            const std::ptrdiff_t w0 = std::ptrdiff_t(ow * G::stride) - std::ptrdiff_t(G::padding);
            T best = -std::numeric_limits<T>::infinity();
            std::uint32_t best_at = 0;
            bool first = true;
            for (std::ptrdiff_t h = std::max<std::ptrdiff_t>(h0, 0);
                 h < std::min<std::ptrdiff_t>(h0 + G::kernel, G::in_h); ++h)
              for (std::ptrdiff_t w = std::max<std::ptrdiff_t>(w0, 0);
                   w < std::min<std::ptrdiff_t>(w0 + G::kernel, G::in_w); ++w) {
                const T v = in[h * G::in_w + w];
                // PyTorch keeps the first maximum and lets NaN win.
                if (first || v > best || std::isnan(v)) {
                  best = v;
                  best_at = std::uint32_t(h * G::in_w + w);
                  first = false;
                  if (std::isnan(v)) goto done;
                }
              }
          done:
            out[oh * G::out_w + ow] = best;
            idx[oh * G::out_w + ow] = best_at;
          }
      }
    });
  }

  template <class G, class T>
  static void max_backward(CpuContext& ctx, const T* dy, T* dx, std::size_t batch, workspace<G, T>& ws) {
    const std::uint32_t* arg = ws.argmax.data();
    constexpr std::size_t out_plane = G::out_h * G::out_w, in_plane = G::in_h * G::in_w;
    ctx.threads().parallel_for(batch * G::channels, 16, [&](std::size_t p0, std::size_t p1) {
      std::fill(dx + p0 * in_plane, dx + p1 * in_plane, T(0));
      for (std::size_t plane = p0; plane < p1; ++plane)
        for (std::size_t i = 0; i < out_plane; ++i)
          dx[plane * in_plane + arg[plane * out_plane + i]] += dy[plane * out_plane + i];
    });
  }
};

} // namespace cohort

#pragma once
/// \file
/// Conv2d on the CPU: im2col + GEMM per sample.
///
/// The forward pass writes the bias into the output first and lets the GEMM accumulate onto it;
/// the backward pass recomputes the im2col matrix instead of keeping one per sample (which
/// would cost batch x patch x plane floats of memory).

#include <algorithm>
#include <cstddef>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/ops.hpp"

namespace cohort {
namespace cpu {

/// col (patch, out_plane) from one (C, H, W) sample; zero where the window hangs over the padding.
template <class G, class T>
void im2col(const T* x, T* col) {
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t kh = 0; kh < G::kernel; ++kh)
      for (std::size_t kw = 0; kw < G::kernel; ++kw) {
        T* row = col + ((c * G::kernel + kh) * G::kernel + kw) * G::out_plane;
        for (std::size_t oh = 0; oh < G::out_h; ++oh) {
          const std::ptrdiff_t ih = std::ptrdiff_t(oh * G::stride + kh) - std::ptrdiff_t(G::padding);
          T* out = row + oh * G::out_w;
          if (ih < 0 || ih >= std::ptrdiff_t(G::in_h)) {
            std::fill(out, out + G::out_w, T(0));
            continue;
          }
          const T* in = x + (c * G::in_h + std::size_t(ih)) * G::in_w;
          for (std::size_t ow = 0; ow < G::out_w; ++ow) {
            const std::ptrdiff_t iw = std::ptrdiff_t(ow * G::stride + kw) - std::ptrdiff_t(G::padding);
            out[ow] = (iw < 0 || iw >= std::ptrdiff_t(G::in_w)) ? T(0) : in[iw];
          }
        }
      }
}

/// dx += scatter of col (patch, out_plane) back onto one (C, H, W) sample.
template <class G, class T>
void col2im_add(const T* col, T* dx) {
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t kh = 0; kh < G::kernel; ++kh)
      for (std::size_t kw = 0; kw < G::kernel; ++kw) {
        const T* row = col + ((c * G::kernel + kh) * G::kernel + kw) * G::out_plane;
        for (std::size_t oh = 0; oh < G::out_h; ++oh) {
          const std::ptrdiff_t ih = std::ptrdiff_t(oh * G::stride + kh) - std::ptrdiff_t(G::padding);
          if (ih < 0 || ih >= std::ptrdiff_t(G::in_h)) continue;
          T* out = dx + (c * G::in_h + std::size_t(ih)) * G::in_w;
          const T* in = row + oh * G::out_w;
          for (std::size_t ow = 0; ow < G::out_w; ++ow) {
            const std::ptrdiff_t iw = std::ptrdiff_t(ow * G::stride + kw) - std::ptrdiff_t(G::padding);
            if (iw >= 0 && iw < std::ptrdiff_t(G::in_w)) out[iw] += in[ow];
          }
        }
      }
}

}  // namespace cpu

template <>
struct ops::Conv2dKernels<Cpu> {
  template <class G, class T>
  struct workspace {
    HostBuffer<T> col;  // (patch, out_plane) for one sample
    void reserve(std::size_t) { col.resize(G::patch * G::out_plane); }
  };

  template <class G, class T>
  static void forward(CpuContext&, const T* x, const T* w, const T* b, T* y, std::size_t batch,
                      workspace<G, T>& ws) {
    ws.reserve(batch);
    for (std::size_t n = 0; n < batch; ++n) {
      T* yn = y + n * G::out_size;
      for (std::size_t o = 0; o < G::out_channels; ++o) std::fill(yn + o * G::out_plane, yn + (o + 1) * G::out_plane, b[o]);
      cpu::im2col<G>(x + n * G::in_size, ws.col.data());
      cpu::gemm(false, false, G::out_channels, G::out_plane, G::patch, T(1), w, G::patch, ws.col.data(), G::out_plane,
                T(1), yn, G::out_plane);
    }
  }

  template <class G, class T>
  static void backward(CpuContext&, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, std::size_t batch,
                       bool accumulate, workspace<G, T>& ws) {
    ws.reserve(batch);
    if (!accumulate) {
      std::fill(dw, dw + G::out_channels * G::patch, T(0));
      std::fill(db, db + G::out_channels, T(0));
    }
    for (std::size_t n = 0; n < batch; ++n) {
      const T* dyn = dy + n * G::out_size;
      for (std::size_t o = 0; o < G::out_channels; ++o) {
        T s = 0;
        for (std::size_t p = 0; p < G::out_plane; ++p) s += dyn[o * G::out_plane + p];
        db[o] += s;
      }
      cpu::im2col<G>(x + n * G::in_size, ws.col.data());
      // dW (out, patch) += dY_n (out, plane) * col^T (plane, patch)
      cpu::gemm(false, true, G::out_channels, G::patch, G::out_plane, T(1), dyn, G::out_plane, ws.col.data(),
                G::out_plane, T(1), dw, G::patch);
      if (dx) {
        // dcol (patch, plane) = W^T (patch, out) * dY_n (out, plane), then scattered onto dx
        cpu::gemm(true, false, G::patch, G::out_plane, G::out_channels, T(1), w, G::patch, dyn, G::out_plane, T(0),
                  ws.col.data(), G::out_plane);
        T* dxn = dx + n * G::in_size;
        std::fill(dxn, dxn + G::in_size, T(0));
        cpu::col2im_add<G>(ws.col.data(), dxn);
      }
    }
  }
};

}  // namespace cohort

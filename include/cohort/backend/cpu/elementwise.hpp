#pragma once
/// \file
/// Element-wise ops on the CPU: ReLU, dropout masks, copies.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/random.hpp"

namespace cohort {

template <>
struct ops::ElementwiseKernels<Cpu> {
  template <class T>
  static void copy(CpuContext&, const T* x, T* y, std::size_t n) {
    std::copy(x, x + n, y);
  }

  template <class T>
  static void relu_forward(CpuContext&, const T* x, T* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
  }
  /// dx = dy where y > 0 (PyTorch's threshold_backward on the output).
  template <class T>
  static void relu_backward(CpuContext&, const T* y, const T* dy, T* dx, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
  }

  /// For each unit u of `units` (an element, or a channel of `unit_size` elements): keep it when
  /// stream.uniform(first_index + u) >= p, store the mask (0 or 1/(1-p)) and y = x * mask.
  template <class T>
  static void dropout_forward(CpuContext&, RandomStream stream, std::uint64_t first_index, float p, const T* x, T* mask,
                              T* y, std::size_t units, std::size_t unit_size) {
    const T scale = T(1) / (T(1) - T(p));
    for (std::size_t u = 0; u < units; ++u) {
      const T m = stream.uniform(first_index + u) >= p ? scale : T(0);
      mask[u] = m;
      for (std::size_t j = 0; j < unit_size; ++j) y[u * unit_size + j] = x[u * unit_size + j] * m;
    }
  }

  /// y[u, j] = x[u, j] * mask[u]: a per-unit mask broadcast over `unit_size` elements.
  template <class T>
  static void multiply(CpuContext&, const T* x, const T* mask, T* y, std::size_t units, std::size_t unit_size) {
    for (std::size_t u = 0; u < units; ++u)
      for (std::size_t j = 0; j < unit_size; ++j) y[u * unit_size + j] = x[u * unit_size + j] * mask[u];
  }
};

} // namespace cohort

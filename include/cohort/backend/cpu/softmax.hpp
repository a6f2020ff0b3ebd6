#pragma once
/// \file
/// Row-wise log-softmax and the classification losses on the CPU.
///
/// Losses reduce with the mean over the batch (PyTorch's default reduction); sums are taken in
/// double so the result does not depend on the batch size's rounding.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"

namespace cohort {

template <>
struct ops::SoftmaxKernels<Cpu> {
  template <class T, class U>
  static void log_softmax_forward(CpuContext& ctx, const T* x, U* y, std::size_t rows, std::size_t cols) {
    ctx.threads().parallel_for(rows, 4096 / cols + 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t r = lo; r < hi; ++r) log_softmax_row(x + r * cols, y + r * cols, cols);
    });
  }

  /// dx = dy - exp(y) * sum(dy), row by row.
  template <class T>
  static void log_softmax_backward(CpuContext&, const T* y, const T* dy, T* dx, std::size_t rows, std::size_t cols) {
    using A = accumulator_t<T>;
    for (std::size_t r = 0; r < rows; ++r) {
      const T* yr = y + r * cols;
      const T* gr = dy + r * cols;
      A sum = 0;
      for (std::size_t c = 0; c < cols; ++c) sum += A(gr[c]);
      for (std::size_t c = 0; c < cols; ++c) dx[r * cols + c] = T(A(gr[c]) - std::exp(A(yr[c])) * sum);
    }
  }

  /// mean_n -logp[n, label[n]]; grad (if not null) = d loss / d logp, scaled by `grad_scale`.
  template <class T>
  static double nll(CpuContext&, const T* logp, const std::int32_t* labels, std::size_t rows, std::size_t cols, T* grad,
                    double grad_scale) {
    double sum = 0;
    for (std::size_t r = 0; r < rows; ++r) sum -= double(accumulator_t<T>(logp[r * cols + std::size_t(labels[r])]));
    if (grad) {
      std::fill(grad, grad + rows * cols, T(0));
      const T g = T(-grad_scale / double(rows));
      for (std::size_t r = 0; r < rows; ++r) grad[r * cols + std::size_t(labels[r])] = g;
    }
    return sum / double(rows);
  }

  /// Fused log-softmax + NLL on raw scores; `logp` receives the log-probabilities (in the
  /// accumulator type: the loss is computed in float for 16-bit scores).
  template <class T, class L>
  static double cross_entropy(CpuContext& ctx, const T* x, const std::int32_t* labels, std::size_t rows,
                              std::size_t cols, L* logp, T* grad, double grad_scale) {
    log_softmax_forward(ctx, x, logp, rows, cols);
    double sum = 0;
    for (std::size_t r = 0; r < rows; ++r) sum -= double(accumulator_t<T>(logp[r * cols + std::size_t(labels[r])]));
    if (grad) {
      // d/dx = (softmax - onehot) / rows
      using A = accumulator_t<T>;
      const A s = A(grad_scale / double(rows));
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) {
          const A p = std::exp(A(logp[r * cols + c]));
          grad[r * cols + c] = T((p - (std::size_t(labels[r]) == c ? A(1) : A(0))) * s);
        }
    }
    return sum / double(rows);
  }

  /// Cross-entropy with torch's label smoothing and class weights (ops::CrossEntropyTerms):
  /// returns the summed loss / t.denominator; grad = d loss / d x times `grad_scale`, row n
  /// being (softmax * a_n - target_n) / denominator with a_n = (1 - eps) w[y_n] + (eps / C) sum_c w[c]
  /// and target_n[c] = (1 - eps) w[y_n] [c == y_n] + (eps / C) w[c].
  template <class T, class L>
  static double cross_entropy(CpuContext& ctx, const T* x, const std::int32_t* labels, std::size_t rows,
                              std::size_t cols, L* logp, T* grad, double grad_scale, const ops::CrossEntropyTerms& t) {
    using A = accumulator_t<T>;
    log_softmax_forward(ctx, x, logp, rows, cols);
    const double eps = t.smoothing, eps_c = eps / double(cols);
    const auto weight = [&](std::size_t c) { return t.weights ? double(t.weights[c]) : 1.0; };
    // torch: (1 - eps) * nll_loss(logp, y, w) + (eps / C) * sum_n sum_c w[c] * -logp[n, c] / W
    double picked = 0, smooth = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t y = std::size_t(labels[r]);
      picked -= weight(y) * double(A(logp[r * cols + y]));
      if (eps != 0)
        for (std::size_t c = 0; c < cols; ++c) smooth -= weight(c) * double(A(logp[r * cols + c]));
    }
    if (grad) {
      const A s = A(grad_scale / t.denominator), keep = A(1 - eps), spread = A(eps_c);
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t y = std::size_t(labels[r]);
        const A wy = A(weight(y));
        const A a = keep * wy + spread * A(t.weight_sum);
        for (std::size_t c = 0; c < cols; ++c) {
          const A target = spread * A(weight(c)) + (c == y ? keep * wy : A(0));
          grad[r * cols + c] = T((std::exp(A(logp[r * cols + c])) * a - target) * s);
        }
      }
    }
    return (1 - eps) * (picked / t.denominator) + (smooth / t.denominator) * eps_c;
  }

 private:
  template <class T, class U>
  static void log_softmax_row(const T* x, U* y, std::size_t cols) {
    using A = accumulator_t<T>;
    A mx = -std::numeric_limits<A>::infinity();
    for (std::size_t c = 0; c < cols; ++c) mx = std::max(mx, A(x[c]));
    A sum = 0;
    for (std::size_t c = 0; c < cols; ++c) sum += std::exp(A(x[c]) - mx);
    const A lse = std::log(sum);
    for (std::size_t c = 0; c < cols; ++c) y[c] = U(A(x[c]) - mx - lse);
  }
};

} // namespace cohort

#pragma once
/// \file
/// Row-wise log-softmax and the classification losses on a device backend. Losses reduce with
/// the mean over the batch, summed in double as on the CPU.
///
/// The losses take their labels in host memory (the loss classes' interface): they are copied
/// to a device scratch buffer first (one per thread and device).

#include <cstddef>
#include <cstdint>
#include <map>

#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>

#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/device/math.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
template <class T, class U>
struct LogSoftmaxRow {
  const T* x;
  U* y;
  std::size_t cols;
  COHORT_HOST_DEVICE void operator()(std::size_t r) const {
    using A = accumulator_t<T>;
    const T* in = x + r * cols;
    A mx = -math::infinity<A>();
    for (std::size_t c = 0; c < cols; ++c) mx = A(in[c]) > mx ? A(in[c]) : mx;
    A sum = 0;
    for (std::size_t c = 0; c < cols; ++c) sum += math::exp(A(in[c]) - mx);
    const A lse = math::log(sum);
    for (std::size_t c = 0; c < cols; ++c) y[r * cols + c] = U(A(in[c]) - mx - lse);
  }
};
/// dx = dy - exp(y) * sum(dy), one row per index.
template <class T>
struct LogSoftmaxGradRow {
  const T* y;
  const T* dy;
  T* dx;
  std::size_t cols;
  COHORT_HOST_DEVICE void operator()(std::size_t r) const {
    using A = accumulator_t<T>;
    A sum = 0;
    for (std::size_t c = 0; c < cols; ++c) sum += A(dy[r * cols + c]);
    for (std::size_t c = 0; c < cols; ++c)
      dx[r * cols + c] = T(A(dy[r * cols + c]) - math::exp(A(y[r * cols + c])) * sum);
  }
};
/// -logp[r, label[r]] in double.
template <class L>
struct PickedLoss {
  const L* logp;
  const std::int32_t* labels;
  std::size_t cols;
  COHORT_HOST_DEVICE double operator()(std::size_t r) const {
    return -double(accumulator_t<L>(logp[r * cols + std::size_t(labels[r])]));
  }
};
/// NLL's gradient: g at each row's label, 0 elsewhere.
template <class T>
struct NllGrad {
  const std::int32_t* labels;
  std::size_t cols;
  T g;
  T* grad;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    grad[i] = std::size_t(labels[i / cols]) == i % cols ? g : T(0);
  }
};
/// Cross-entropy's gradient: (softmax - onehot) * s.
template <class T, class L>
struct CrossEntropyGrad {
  const L* logp;
  const std::int32_t* labels;
  std::size_t cols;
  accumulator_t<T> s;
  T* grad;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    const A onehot = std::size_t(labels[i / cols]) == i % cols ? A(1) : A(0);
    grad[i] = T((math::exp(A(logp[i])) - onehot) * s);
  }
};

/// Weighted, smoothed cross-entropy's two sums (ops::CrossEntropyTerms), per row in double:
/// w[y] * -logp[r, y] (`smooth` false), or sum_c w[c] * -logp[r, c] (`smooth` true).
template <class L>
struct WeightedRowLoss {
  const L* logp;
  const std::int32_t* labels;
  const float* weights; // device memory; null: all 1
  std::size_t cols;
  bool smooth;
  COHORT_HOST_DEVICE double operator()(std::size_t r) const {
    using A = accumulator_t<L>;
    const L* row = logp + r * cols;
    if (!smooth) {
      const std::size_t y = std::size_t(labels[r]);
      return -(weights ? double(weights[y]) : 1.0) * double(A(row[y]));
    }
    double sum = 0;
    for (std::size_t c = 0; c < cols; ++c) sum -= (weights ? double(weights[c]) : 1.0) * double(A(row[c]));
    return sum;
  }
};
/// Its gradient: (softmax * a_r - target_r) * s, as the CPU kernel computes it.
template <class T, class L>
struct WeightedCrossEntropyGrad {
  const L* logp;
  const std::int32_t* labels;
  const float* weights;
  std::size_t cols;
  accumulator_t<T> s, keep, spread, weight_sum; // grad_scale / D, 1 - eps, eps / C, sum_c w[c]
  T* grad;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    const std::size_t y = std::size_t(labels[i / cols]), c = i % cols;
    const A wy = weights ? A(double(weights[y])) : A(1);
    const A wc = weights ? A(double(weights[c])) : A(1);
    const A a = keep * wy + spread * weight_sum;
    const A target = spread * wc + (c == y ? keep * wy : A(0));
    grad[i] = T((math::exp(A(logp[i])) * a - target) * s);
  }
};

/// Cross-entropy per pixel of (N, C, H, W) scores (PixelCrossEntropyLoss's formulas, the CPU
/// loop's): pixel i = n * plane + p reads its C scores `plane` apart. `operator()(i)` is the
/// pixel's term of the summed loss, (1 - eps) w_y (-logp_y) + eps / C sum_c w_c (-logp_c), in
/// double (0 for an ignored pixel); `gradient(i)` writes its C gradients (0 when ignored).
template <class T>
struct PixelCrossEntropy {
  const T* x;
  const std::int32_t* labels;
  const float* weights; // device memory; null: all 1
  std::size_t classes, plane;
  std::int32_t ignore;
  double keep, spread, weight_sum; // 1 - eps, eps / C, sum_c w[c]
  double scale;                    // grad_scale / denominator
  T* grad;

  COHORT_HOST_DEVICE double weight(std::size_t c) const { return weights ? double(weights[c]) : 1.0; }
  COHORT_HOST_DEVICE const T* scores(std::size_t i) const { return x + (i / plane) * classes * plane + i % plane; }
  /// The log-sum-exp of the pixel's scores.
  COHORT_HOST_DEVICE double lse(const T* xs) const {
    double m = double(accumulator_t<T>(xs[0]));
    for (std::size_t c = 1; c < classes; ++c) {
      const double v = double(accumulator_t<T>(xs[c * plane]));
      m = v > m ? v : m;
    }
    double sum = 0;
    for (std::size_t c = 0; c < classes; ++c) sum += math::exp(double(accumulator_t<T>(xs[c * plane])) - m);
    return m + math::log(sum);
  }
  COHORT_HOST_DEVICE double operator()(std::size_t i) const {
    const std::int32_t y = labels[i];
    if (y == ignore) return 0.0;
    const T* xs = scores(i);
    const double l = lse(xs);
    double smooth = 0;
    for (std::size_t c = 0; c < classes; ++c) smooth -= weight(c) * (double(accumulator_t<T>(xs[c * plane])) - l);
    const double picked = -weight(std::size_t(y)) * (double(accumulator_t<T>(xs[std::size_t(y) * plane])) - l);
    return keep * picked + spread * smooth;
  }
  COHORT_HOST_DEVICE void gradient(std::size_t i) const {
    const std::int32_t y = labels[i];
    T* gs = grad + (i / plane) * classes * plane + i % plane;
    if (y == ignore) {
      for (std::size_t c = 0; c < classes; ++c) gs[c * plane] = T(0);
      return;
    }
    const T* xs = scores(i);
    const double l = lse(xs), wy = weight(std::size_t(y));
    // d/dx_c: (1 - eps) w_y (p_c - [c = y]) + (eps / C) (sum_c' w_c' p_c - w_c), over the denominator.
    for (std::size_t c = 0; c < classes; ++c) {
      const double prob = math::exp(double(accumulator_t<T>(xs[c * plane])) - l);
      const double d =
          keep * wy * (prob - (c == std::size_t(y) ? 1.0 : 0.0)) + spread * (weight_sum * prob - weight(c));
      gs[c * plane] = T(accumulator_t<T>(d * scale));
    }
  }
};
template <class T>
struct PixelCrossEntropyGrad {
  PixelCrossEntropy<T> f;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const { f.gradient(i); }
};

/// `n` host values copied to the context's device, for the current loss call: per thread and per
/// device (a replica thread may drive another device on a later call); `Slot` tells apart the
/// copies one call needs at once.
template <class V, int Slot, class Context>
const V* device_copy(const Context& ctx, const V* host, std::size_t n) {
  thread_local std::map<int, DeviceBuffer<V>> by_device;
  int device = 0;
  if constexpr (requires { ctx.device; }) device = ctx.device;
  DeviceBuffer<V>& values = by_device[device];
  values.assign_from_host(host, n);
  return values.data();
}
/// The labels of the current loss call on the context's device.
template <class Context>
const std::int32_t* device_labels(const Context& ctx, const std::int32_t* host, std::size_t n) {
  return device_copy<std::int32_t, 0>(ctx, host, n);
}
} // namespace detail

/// ops::SoftmaxKernels for a device backend.
template <class Backend>
struct SoftmaxKernels {
  using context = typename Backend::context;

  template <class T, class U>
  static void log_softmax_forward(context& ctx, const T* x, U* y, std::size_t rows, std::size_t cols) {
    for_each_index(ctx.policy(), rows, detail::LogSoftmaxRow<T, U>{x, y, cols});
  }
  template <class T>
  static void log_softmax_backward(context& ctx, const T* y, const T* dy, T* dx, std::size_t rows, std::size_t cols) {
    for_each_index(ctx.policy(), rows, detail::LogSoftmaxGradRow<T>{y, dy, dx, cols});
  }

  /// mean_n -logp[n, label[n]]; grad (if not null) = d loss / d logp, scaled by `grad_scale`.
  /// `labels` are in host memory.
  template <class T>
  static double nll(context& ctx, const T* logp, const std::int32_t* labels, std::size_t rows, std::size_t cols,
                    T* grad, double grad_scale) {
    const std::int32_t* d_labels = detail::device_labels(ctx, labels, rows);
    const double sum = picked_sum(ctx, logp, d_labels, rows, cols);
    if (grad)
      for_each_index(ctx.policy(), rows * cols,
                     detail::NllGrad<T>{d_labels, cols, T(-grad_scale / double(rows)), grad});
    return sum / double(rows);
  }

  /// Fused log-softmax + NLL on raw scores; `logp` receives the log-probabilities.
  template <class T, class L>
  static double cross_entropy(context& ctx, const T* x, const std::int32_t* labels, std::size_t rows, std::size_t cols,
                              L* logp, T* grad, double grad_scale) {
    const std::int32_t* d_labels = detail::device_labels(ctx, labels, rows);
    log_softmax_forward(ctx, x, logp, rows, cols);
    const double sum = picked_sum(ctx, logp, d_labels, rows, cols);
    if (grad)
      for_each_index(
          ctx.policy(), rows * cols,
          detail::CrossEntropyGrad<T, L>{logp, d_labels, cols, accumulator_t<T>(grad_scale / double(rows)), grad});
    return sum / double(rows);
  }

  /// Cross-entropy with torch's label smoothing and class weights (ops::CrossEntropyTerms; the
  /// CPU kernel's formulas). `labels` and `t.weights` are in host memory.
  template <class T, class L>
  static double cross_entropy(context& ctx, const T* x, const std::int32_t* labels, std::size_t rows, std::size_t cols,
                              L* logp, T* grad, double grad_scale, const ops::CrossEntropyTerms& t) {
    using A = accumulator_t<T>;
    const std::int32_t* d_labels = detail::device_labels(ctx, labels, rows);
    const float* d_weights = t.weights ? detail::device_copy<float, 1>(ctx, t.weights, cols) : nullptr;
    log_softmax_forward(ctx, x, logp, rows, cols);
    const double eps = t.smoothing, eps_c = eps / double(cols);
    const double picked = row_sum(ctx, detail::WeightedRowLoss<L>{logp, d_labels, d_weights, cols, false}, rows);
    const double smooth =
        eps != 0 ? row_sum(ctx, detail::WeightedRowLoss<L>{logp, d_labels, d_weights, cols, true}, rows) : 0.0;
    if (grad)
      for_each_index(ctx.policy(), rows * cols,
                     detail::WeightedCrossEntropyGrad<T, L>{logp, d_labels, d_weights, cols,
                                                            A(grad_scale / t.denominator), A(1 - eps), A(eps_c),
                                                            A(t.weight_sum), grad});
    return (1 - eps) * (picked / t.denominator) + (smooth / t.denominator) * eps_c;
  }

  /// Cross-entropy per pixel of (batch, classes, plane) scores (PixelCrossEntropyLoss's terms:
  /// pixels labelled `ignore` count for nothing), the summed loss over `denominator`; `grad` (if
  /// not null) receives its gradient times `grad_scale`. `labels` (batch * plane) and
  /// `t.weights` are in host memory; `denominator` > 0 (the caller's weight total).
  template <class T>
  static double pixel_cross_entropy(context& ctx, const T* x, const std::int32_t* labels, std::size_t batch,
                                    std::size_t classes, std::size_t plane, std::int32_t ignore, T* grad,
                                    double grad_scale, const ops::CrossEntropyTerms& t) {
    const std::size_t pixels = batch * plane;
    const std::int32_t* d_labels = detail::device_labels(ctx, labels, pixels);
    const float* d_weights = t.weights ? detail::device_copy<float, 1>(ctx, t.weights, classes) : nullptr;
    const detail::PixelCrossEntropy<T> f{x,
                                         d_labels,
                                         d_weights,
                                         classes,
                                         plane,
                                         ignore,
                                         1 - t.smoothing,
                                         t.smoothing / double(classes),
                                         t.weight_sum,
                                         grad_scale / t.denominator,
                                         grad};
    if (grad) for_each_index(ctx.policy(), pixels, detail::PixelCrossEntropyGrad<T>{f});
    return row_sum(ctx, f, pixels) / t.denominator;
  }

 private:
  template <class F>
  static double row_sum(context& ctx, F f, std::size_t rows) {
    return thrust::transform_reduce(ctx.policy(), thrust::counting_iterator<std::size_t>(0),
                                    thrust::counting_iterator<std::size_t>(rows), f, 0.0, thrust::plus<double>{});
  }
  template <class L>
  static double picked_sum(context& ctx, const L* logp, const std::int32_t* labels, std::size_t rows,
                           std::size_t cols) {
    return thrust::transform_reduce(ctx.policy(), thrust::counting_iterator<std::size_t>(0),
                                    thrust::counting_iterator<std::size_t>(rows),
                                    detail::PickedLoss<L>{logp, labels, cols}, 0.0, thrust::plus<double>{});
  }
};

} // namespace cohort::device

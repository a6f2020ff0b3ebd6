#pragma once
/// \file
/// BatchNorm2d on a device backend. Per-channel sums run over the batch read in channel-major
/// order (every element of a channel is one contiguous segment), in double as on the CPU, with
/// device::SegmentedSum: no host synchronisation (a reduce_by_key had four per layer and step);
/// statistics are two-pass (mean, then squared deviations). Elements are then
/// normalised as x * scale[c] + shift[c]. A following ReLU is fused; the max-pool is not.

#include <cstddef>

#include "cohort/backend/device/device_buffer.hpp"
#include "cohort/backend/device/for_each_index.hpp"
#include "cohort/backend/device/math.hpp"
#include "cohort/backend/device/segmented_sum.hpp"
#include "cohort/backend/op_arguments.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/macros.hpp"

namespace cohort::device {

namespace detail {
/// Position j of the channel-major order (c, n, p) -> its offset in the (n, c, p) tensor.
template <class G>
struct ChannelMajor {
  std::size_t batch;
  COHORT_HOST_DEVICE std::size_t operator()(std::size_t j) const {
    const std::size_t np = batch * G::plane, c = j / np, n = j % np / G::plane, p = j % G::plane;
    return n * G::size + c * G::plane + p;
  }
};
/// x, or (x - mean[c])^2 when `mean` is given, in double, channel-major.
template <class G, class T>
struct StatisticTerm {
  const T* x;
  const double* mean_sum; // per-channel sums of x (null: the first pass)
  std::size_t batch;
  COHORT_HOST_DEVICE double operator()(std::size_t j) const {
    const double v = double(accumulator_t<T>(x[ChannelMajor<G>{batch}(j)]));
    if (!mean_sum) return v;
    const double d = v - mean_sum[j / (batch * G::plane)] / double(batch * G::plane);
    return d * d;
  }
};
/// The gradient terms, channel-major: dy' or dy' * xhat, with dy' = 0 where a fused ReLU's
/// output is not positive.
template <class G, class T>
struct GradTerm {
  const T* x;
  const T* dy;
  const T* relu_y;
  const double* mean;
  const double* invstd;
  std::size_t batch;
  bool times_xhat;
  COHORT_HOST_DEVICE double operator()(std::size_t j) const {
    const std::size_t i = ChannelMajor<G>{batch}(j), c = j / (batch * G::plane);
    const double g = relu_y && !(accumulator_t<T>(relu_y[i]) > 0) ? 0.0 : double(accumulator_t<T>(dy[i]));
    return times_xhat ? g * (double(accumulator_t<T>(x[i])) - mean[c]) * invstd[c] : g;
  }
};
/// Per channel: batch statistics from the two sums, then scale and shift for the normalisation.
template <class A>
struct TrainingStatistics {
  const double* sum;
  const double* sq_sum;
  const A* gamma;
  const A* beta;
  double count, eps;
  double *mean, *var, *invstd;
  A *scale, *shift;
  COHORT_HOST_DEVICE void operator()(std::size_t c) const {
    mean[c] = sum[c] / count;
    var[c] = sq_sum[c] / count; // biased, as PyTorch normalises
    invstd[c] = 1.0 / math::sqrt(var[c] + eps);
    scale[c] = A(double(gamma[c]) * invstd[c]);
    shift[c] = A(double(beta[c]) - mean[c] * double(gamma[c]) * invstd[c]);
  }
};
template <class A, class S>
struct RunningStatistics {
  const S* running_mean;
  const S* running_var;
  const A* gamma;
  const A* beta;
  double eps;
  double *mean, *invstd;
  A *scale, *shift;
  COHORT_HOST_DEVICE void operator()(std::size_t c) const {
    mean[c] = double(running_mean[c]);
    invstd[c] = 1.0 / math::sqrt(double(running_var[c]) + eps);
    scale[c] = A(double(gamma[c]) * invstd[c]);
    shift[c] = A(double(beta[c]) - mean[c] * double(gamma[c]) * invstd[c]);
  }
};
template <class S>
struct UpdateRunning {
  const double* mean;
  const double* var;
  double momentum, count;
  S* running_mean;
  S* running_var;
  COHORT_HOST_DEVICE void operator()(std::size_t c) const {
    running_mean[c] = S(momentum * mean[c] + (1.0 - momentum) * double(running_mean[c]));
    running_var[c] = S(momentum * (var[c] * count / (count - 1.0)) + (1.0 - momentum) * double(running_var[c]));
  }
};
template <class G, class T>
struct Normalize {
  using A = accumulator_t<T>;
  const T* x;
  const A* scale;
  const A* shift;
  T* y;
  bool relu;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t c = i % G::size / G::plane;
    const A v = A(x[i]) * scale[c] + shift[c];
    y[i] = T(relu && !(v > A(0)) ? A(0) : v);
  }
};
template <class A>
struct AffineGrads {
  const double* sum_dy;
  const double* sum_dy_xhat;
  A* dgamma;
  A* dbeta;
  bool accumulate;
  COHORT_HOST_DEVICE void operator()(std::size_t c) const {
    dgamma[c] = A((accumulate ? double(dgamma[c]) : 0.0) + sum_dy_xhat[c]);
    dbeta[c] = A((accumulate ? double(dbeta[c]) : 0.0) + sum_dy[c]);
  }
};
/// dx = gamma * invstd * (dy' - mean(dy') - xhat * mean(dy' * xhat)) in training, gamma * invstd
/// * dy' with running statistics.
template <class G, class T>
struct InputGrad {
  const T* x;
  const T* dy;
  const T* relu_y;
  const accumulator_t<T>* gamma;
  const double* mean;
  const double* invstd;
  const double* sum_dy;
  const double* sum_dy_xhat;
  double count;
  bool training;
  T* dx;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    const std::size_t c = i % G::size / G::plane;
    const double g = relu_y && !(accumulator_t<T>(relu_y[i]) > 0) ? 0.0 : double(accumulator_t<T>(dy[i]));
    const double k = double(gamma[c]) * invstd[c];
    if (!training) {
      dx[i] = T(accumulator_t<T>(k * g));
      return;
    }
    const double xhat = (double(accumulator_t<T>(x[i])) - mean[c]) * invstd[c];
    dx[i] = T(accumulator_t<T>(k * (g - sum_dy[c] / count - xhat * sum_dy_xhat[c] / count)));
  }
};
} // namespace detail

/// ops::BatchNormKernels for a device backend.
template <class Backend>
struct BatchNormKernels {
  using context = typename Backend::context;

  template <class G, class T>
  struct workspace {
    using A = accumulator_t<T>;
    DeviceBuffer<double> sum, sq_sum, mean, var, invstd; // (C)
    DeviceBuffer<A> scale, shift;                        // (C): y = x * scale + shift
    SegmentedSum sums;                                   // its block sums
    std::size_t count = 0;                               // values per channel in the last training batch
    void reserve(std::size_t) {
      for (auto* b : {&sum, &sq_sum, &mean, &var, &invstd}) b->resize(G::channels);
      scale.resize(G::channels);
      shift.resize(G::channels);
    }
  };

  template <class T>
  static constexpr bool fuses_relu = true;
  template <class G, class PG, class T>
  static constexpr bool fuses_relu_pool = false;

  template <class G, class T>
  static void forward_train(context& ctx, const T* x, const accumulator_t<T>* gamma, const accumulator_t<T>* beta, T* y,
                            std::size_t batch, float eps, workspace<G, T>& ws, bool relu = false) {
    ws.reserve(batch);
    ws.count = batch * G::plane;
    channel_sums<G>(ctx, ws, batch, detail::StatisticTerm<G, T>{x, nullptr, batch}, ws.sum.data());
    channel_sums<G>(ctx, ws, batch, detail::StatisticTerm<G, T>{x, ws.sum.data(), batch}, ws.sq_sum.data());
    for_each_index(ctx.policy(), G::channels,
                   detail::TrainingStatistics<accumulator_t<T>>{
                       ws.sum.data(), ws.sq_sum.data(), gamma, beta, double(ws.count), double(eps), ws.mean.data(),
                       ws.var.data(), ws.invstd.data(), ws.scale.data(), ws.shift.data()});
    for_each_index(ctx.policy(), batch * G::size,
                   detail::Normalize<G, T>{x, ws.scale.data(), ws.shift.data(), y, relu});
  }

  template <class G, class T, class S>
  static void update_running(context& ctx, S* running_mean, S* running_var, std::size_t, float momentum,
                             workspace<G, T>& ws) {
    for_each_index(ctx.policy(), G::channels,
                   detail::UpdateRunning<S>{ws.mean.data(), ws.var.data(), double(momentum), double(ws.count),
                                            running_mean, running_var});
  }

  template <class G, class T, class S>
  static void forward_eval(context& ctx, const ops::BatchNormEvalArgs<T, S>& a, workspace<G, T>& ws) {
    ws.reserve(a.batch);
    for_each_index(ctx.policy(), G::channels,
                   detail::RunningStatistics<accumulator_t<T>, S>{a.running_mean, a.running_var, a.gamma, a.beta,
                                                                  double(a.eps), ws.mean.data(), ws.invstd.data(),
                                                                  ws.scale.data(), ws.shift.data()});
    for_each_index(ctx.policy(), a.batch * G::size,
                   detail::Normalize<G, T>{a.x, ws.scale.data(), ws.shift.data(), a.y, a.relu});
  }

  /// Uses the statistics the forward pass saved (batch ones in training, running ones in eval).
  template <class G, class T>
  static void backward(context& ctx, const ops::BatchNormBackwardArgs<T>& a, workspace<G, T>& ws) {
    const T *x = a.x, *dy = a.dy, *relu_y = a.relu_y;
    T* dx = a.dx;
    const std::size_t batch = a.batch;
    // sum and sq_sum are free after forward: they take sum(dy') and sum(dy' * xhat).
    const detail::GradTerm<G, T> term{x, dy, relu_y, ws.mean.data(), ws.invstd.data(), batch, false};
    channel_sums<G>(ctx, ws, batch, term, ws.sum.data());
    auto with_xhat = term;
    with_xhat.times_xhat = true;
    channel_sums<G>(ctx, ws, batch, with_xhat, ws.sq_sum.data());
    for_each_index(
        ctx.policy(), G::channels,
        detail::AffineGrads<accumulator_t<T>>{ws.sum.data(), ws.sq_sum.data(), a.dgamma, a.dbeta, a.accumulate});
    if (!dx) return;
    for_each_index(ctx.policy(), batch * G::size,
                   detail::InputGrad<G, T>{x, dy, relu_y, a.gamma, ws.mean.data(), ws.invstd.data(), ws.sum.data(),
                                           ws.sq_sum.data(), double(batch * G::plane), a.training, dx});
  }

 private:
  /// out[c] = sum over the batch of channel c of term(j), j in channel-major order.
  template <class G, class W, class Term>
  static void channel_sums(context& ctx, W& ws, std::size_t batch, Term term, double* out) {
    ws.sums(ctx.policy(), G::channels, batch * G::plane, term, out);
  }
};

} // namespace cohort::device

#pragma once
/// \file
/// GroupNorm on a device backend: the CPU backend's algorithm (backend/cpu/group_norm.hpp) as
/// launches. Per sample and group a SegmentedSum of x, then of (x - mean)^2 (two passes, double);
/// y per element from its channel's scale and shift. Backward: SegmentedSums of dy and dy * x per
/// sample and channel, their combination per group, dx per element, and dgamma / dbeta per
/// channel over the samples in order. Fixed trees: the same result on every device system.

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
template <class T>
struct GroupValue {
  const T* x;
  COHORT_HOST_DEVICE double operator()(std::size_t j) const { return double(accumulator_t<T>(x[j])); }
};
/// (x - mean of its group)^2; groups are segments of `per_group` consecutive elements.
template <class T>
struct GroupSquare {
  const T* x;
  const double* sum;
  std::size_t per_group;
  COHORT_HOST_DEVICE double operator()(std::size_t j) const {
    const double d = double(accumulator_t<T>(x[j])) - sum[j / per_group] / double(per_group);
    return d * d;
  }
};
struct GroupStatistics {
  const double* sum;
  const double* square;
  double* mean;
  double* rstd;
  std::size_t per_group;
  double eps;
  COHORT_HOST_DEVICE void operator()(std::size_t s) const {
    mean[s] = sum[s] / double(per_group);
    rstd[s] = 1.0 / math::sqrt(square[s] / double(per_group) + eps);
  }
};
template <class G, class T>
struct GroupNormalize {
  const T* x;
  const accumulator_t<T>* gamma;
  const accumulator_t<T>* beta;
  const double* mean;
  const double* rstd;
  T* y;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    const std::size_t c = i % G::size / G::plane, s = i / (G::channels_per_group * G::plane);
    const A scale = A(rstd[s] * double(gamma[c])), shift = A(double(beta[c]) - mean[s] * rstd[s] * double(gamma[c]));
    y[i] = T(A(x[i]) * scale + shift);
  }
};
template <class T>
struct ProductTerm {
  const T* dy;
  const T* x;
  COHORT_HOST_DEVICE double operator()(std::size_t j) const {
    return double(accumulator_t<T>(dy[j])) * double(accumulator_t<T>(x[j]));
  }
};
/// Per sample and group: sum_c gamma[c] * (sum dy), sum_c gamma[c] * (sum dy * x).
template <class G, class A>
struct GroupGradientSums {
  const double* db; // (batch, channels)
  const double* ds;
  const A* gamma;
  double* db_g; // (batch, groups)
  double* ds_g;
  COHORT_HOST_DEVICE void operator()(std::size_t s) const {
    const std::size_t n = s / G::groups, c0 = s % G::groups * G::channels_per_group;
    double b = 0, d = 0;
    for (std::size_t k = 0; k < G::channels_per_group; ++k) {
      b += double(gamma[c0 + k]) * db[n * G::channels + c0 + k];
      d += double(gamma[c0 + k]) * ds[n * G::channels + c0 + k];
    }
    db_g[s] = b;
    ds_g[s] = d;
  }
};
template <class G, class T>
struct GroupNormInputGradient {
  const T* x;
  const T* dy;
  const accumulator_t<T>* gamma;
  const double* mean;
  const double* rstd;
  const double* db_g;
  const double* ds_g;
  T* dx;
  COHORT_HOST_DEVICE void operator()(std::size_t i) const {
    using A = accumulator_t<T>;
    constexpr double m = double(G::channels_per_group * G::plane);
    const std::size_t c = i % G::size / G::plane, s = i / (G::channels_per_group * G::plane);
    const double r = rstd[s];
    const double c2 = (db_g[s] * mean[s] - ds_g[s]) * r * r * r / m;
    const double c3 = -c2 * mean[s] - db_g[s] * r / m;
    dx[i] = T(A(r * double(gamma[c])) * A(dy[i]) + A(c2) * A(x[i]) + A(c3));
  }
};
template <class G, class A>
struct GroupNormWeightGradient {
  const double* db;
  const double* ds;
  const double* mean;
  const double* rstd;
  A* dgamma;
  A* dbeta;
  std::size_t batch;
  bool accumulate;
  COHORT_HOST_DEVICE void operator()(std::size_t c) const {
    double dg = 0, dbeta_sum = 0;
    for (std::size_t n = 0; n < batch; ++n) {
      const std::size_t s = n * G::groups + c / G::channels_per_group;
      dg += (ds[n * G::channels + c] - mean[s] * db[n * G::channels + c]) * rstd[s];
      dbeta_sum += db[n * G::channels + c];
    }
    dgamma[c] = accumulate ? A(double(dgamma[c]) + dg) : A(dg);
    dbeta[c] = accumulate ? A(double(dbeta[c]) + dbeta_sum) : A(dbeta_sum);
  }
};
} // namespace detail

template <class Backend>
struct GroupNormKernels {
  using context = typename Backend::context;

  template <class G, class T>
  struct workspace {
    SegmentedSum sums[2];
    DeviceBuffer<double> sum, square, mean, rstd; // (batch, groups)
    DeviceBuffer<double> db, ds;                  // (batch, channels)
    void reserve(std::size_t) {}
  };

  template <class G, class T>
  static void forward(context& ctx, const T* x, const accumulator_t<T>* gamma, const accumulator_t<T>* beta, T* y,
                      std::size_t batch, float eps, workspace<G, T>& ws) {
    constexpr std::size_t per_group = G::channels_per_group * G::plane;
    const std::size_t segments = batch * G::groups;
    for (DeviceBuffer<double>* b : {&ws.sum, &ws.square, &ws.mean, &ws.rstd}) b->resize_uninitialized(segments);
    ws.sums[0](ctx.policy(), segments, per_group, detail::GroupValue<T>{x}, ws.sum.data());
    ws.sums[1](ctx.policy(), segments, per_group, detail::GroupSquare<T>{x, ws.sum.data(), per_group},
               ws.square.data());
    for_each_index(ctx.policy(), segments,
                   detail::GroupStatistics{ws.sum.data(), ws.square.data(), ws.mean.data(), ws.rstd.data(), per_group,
                                           double(eps)});
    for_each_index(ctx.policy(), batch * G::size,
                   detail::GroupNormalize<G, T>{x, gamma, beta, ws.mean.data(), ws.rstd.data(), y});
  }

  template <class G, class T>
  static void backward(context& ctx, const ops::GroupNormBackwardArgs<T>& a, workspace<G, T>& ws) {
    using A = accumulator_t<T>;
    const std::size_t rows = a.batch * G::channels, segments = a.batch * G::groups;
    ws.db.resize_uninitialized(rows);
    ws.ds.resize_uninitialized(rows);
    ws.sums[0](ctx.policy(), rows, G::plane, detail::GroupValue<T>{a.dy}, ws.db.data());
    ws.sums[1](ctx.policy(), rows, G::plane, detail::ProductTerm<T>{a.dy, a.x}, ws.ds.data());
    if (a.dx) {
      ws.sum.resize_uninitialized(segments); // reused: sum_c gamma db, sum_c gamma ds per group
      ws.square.resize_uninitialized(segments);
      for_each_index(
          ctx.policy(), segments,
          detail::GroupGradientSums<G, A>{ws.db.data(), ws.ds.data(), a.gamma, ws.sum.data(), ws.square.data()});
      for_each_index(ctx.policy(), a.batch * G::size,
                     detail::GroupNormInputGradient<G, T>{a.x, a.dy, a.gamma, ws.mean.data(), ws.rstd.data(),
                                                          ws.sum.data(), ws.square.data(), a.dx});
    }
    for_each_index(ctx.policy(), G::channels,
                   detail::GroupNormWeightGradient<G, A>{ws.db.data(), ws.ds.data(), ws.mean.data(), ws.rstd.data(),
                                                         a.dgamma, a.dbeta, a.batch, a.accumulate});
  }
};

} // namespace cohort::device

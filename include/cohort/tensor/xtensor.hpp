#pragma once
/// \file
/// xtensor interop: with this header, a batch view's `tensor()` and a network's
/// `parameters().view<Layer, "name">()`, `parameter("0.weight")` and `buffer("1.running_mean")`
/// are xtensor adaptors over cohort's memory (no copy). `Network::forward` and `as_batch` take
/// xtensor containers (anything with `.shape()` and `.data()`) without it. Kept out of
/// <cohort/cohort.hpp>: they were 13% of its parsing time (issue 32).
/// Example (compiled: tests/docs/headers.cpp, "tensor/xtensor"):
///
///     auto w = net.parameters().view<0, "weight">();   // xt::xfixed_adaptor, shape (8, 1, 3, 3)
///     auto x = cohort::as_batch<cohort::Shape<1, 28, 28>>(images);
///     x.tensor()(0, 0, 3, 4) = 1.f;                     // writes into `images`

#include <cstddef>

#include "cohort/detail/xtensor.hpp"
#include "cohort/detail/xtensor_interop.hpp"

namespace cohort::detail {

template <>
struct XtensorInterop<void> {
  /// Row-major adaptor of `size` elements at `data` with a run-time shape.
  template <class T, class Shape>
  static auto adapt(T* data, std::size_t size, const Shape& shape) {
    return xt::adapt(data, size, xt::no_ownership(), shape);
  }
  /// Adaptor with the compile-time shape (Dims...).
  template <std::size_t... Dims, class T>
  static auto adapt_fixed(T* data) {
    return xt::adapt(data, xt::fixed_shape<Dims...>{});
  }
};

} // namespace cohort::detail

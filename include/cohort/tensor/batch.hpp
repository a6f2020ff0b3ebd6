#pragma once
/// \file
/// Views of a batch of samples with a compile-time per-sample shape and a run-time batch size.
/// Example (compiled: tests/docs/headers.cpp, "tensor/batch"):
///
///     xt::xtensor<float, 4> images({128, 1, 28, 28});
///     auto x = cohort::as_batch<cohort::Shape<1, 28, 28>>(images);   // checks the shape
///     x.batch();          // 128
///     x.tensor()(0, 0, 3, 4) = 1.f;   // an xtensor adaptor (<cohort/tensor/xtensor.hpp>)

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "cohort/detail/xtensor_interop.hpp"

#include "cohort/core/error.hpp"
#include "cohort/core/shape.hpp"

namespace cohort {

/// A non-owning (N, S...) row-major batch. `T` may be const.
template <ShapeType S, class T>
class BatchView {
 public:
  using shape = S;
  using value_type = std::remove_const_t<T>;
  static constexpr std::size_t rank = S::rank + 1;

  constexpr BatchView() = default;
  constexpr BatchView(T* data, std::size_t batch) noexcept : data_(data), batch_(batch) {}
  /// A view of mutable data converts to a view of const data.
  /// (A template, so that a view of const data declares no conversion to its own type.)
  template <class U = T>
  requires(!std::is_const_v<U>) constexpr operator BatchView<S, const U>() const noexcept { return {data_, batch_}; }

  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t batch() const noexcept { return batch_; }
  constexpr std::size_t size() const noexcept { return batch_ * S::size; }
  constexpr std::span<T> span() const noexcept { return {data_, size()}; }
  /// The first element of sample `n`.
  constexpr T* sample(std::size_t n) const noexcept { return data_ + n * S::size; }
  /// Samples [first, first + count) as a smaller batch.
  constexpr BatchView slice(std::size_t first, std::size_t count) const noexcept {
    return {data_ + first * S::size, count};
  }

  /// The full shape (N, S...).
  std::array<std::size_t, rank> dims() const noexcept {
    std::array<std::size_t, rank> d{};
    d[0] = batch_;
    for (std::size_t i = 0; i < S::rank; ++i) d[i + 1] = S::extents[i];
    return d;
  }
  /// An xtensor adaptor over the same memory (no copy, no allocation); needs
  /// <cohort/tensor/xtensor.hpp>.
  template <class Tag = void>
  auto tensor() const {
    return detail::XtensorInterop<Tag>::adapt(data_, size(), dims());
  }

 private:
  T* data_ = nullptr;
  std::size_t batch_ = 0;
};

template <ShapeType S, class T>
using ConstBatchView = BatchView<S, const T>;

namespace detail {
template <class Dims>
std::string dims_str(const Dims& d) {
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(d[i]);
  }
  return s;
}
} // namespace detail

/// Views an xtensor container (or anything with `.shape()` and `.data()`, row-major and
/// contiguous) as a batch of `S`-shaped samples. Throws ShapeError naming `what`, the expected
/// and the found shape when they differ.
template <ShapeType S, class Container>
auto as_batch(Container& c, std::string_view what = "batch") {
  using elem = std::remove_reference_t<decltype(*c.data())>;
  const auto& shp = c.shape();
  bool ok = shp.size() == S::rank + 1 && shp[0] > 0;
  for (std::size_t i = 0; ok && i < S::rank; ++i) ok = static_cast<std::size_t>(shp[i + 1]) == S::extents[i];
  if (!ok)
    throw ShapeError(
        detail::concat(what, ": expected a batch of shape N x ", S::str(), ", found ", detail::dims_str(shp)));
  return BatchView<S, elem>(c.data(), static_cast<std::size_t>(shp[0]));
}

} // namespace cohort

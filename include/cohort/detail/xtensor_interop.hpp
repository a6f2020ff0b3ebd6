#pragma once
/// \file
/// The seam between cohort's views and xtensor: BatchView::tensor() and Parameters::view(),
/// parameter() and buffer() return xtensor adaptors through detail::XtensorInterop<Tag>, which
/// <cohort/tensor/xtensor.hpp> defines. Without that header they are a compile error that says
/// what to include, and no unit parses xtensor's headers unless it uses them (<cohort/cohort.hpp>
/// parsed in 4.8 s with them, 4.2 s without: issue 32).

#include <cstddef>

namespace cohort::detail {

/// What a unit without <cohort/tensor/xtensor.hpp> gets: the views default `Tag` to void, and
/// only that header specialises XtensorInterop<void>.
template <class Tag>
struct XtensorInterop {
  static_assert(sizeof(Tag*) == 0, "cohort: BatchView::tensor() and Parameters::view()/parameter()/buffer() return "
                                   "xtensor adaptors: #include <cohort/tensor/xtensor.hpp> to use them");
  // Declared only, so that the assertion above is the one error a missing include gives.
  template <class... A>
  static int adapt(A&&...);
  template <std::size_t... Dims, class... A>
  static int adapt_fixed(A&&...);
};

} // namespace cohort::detail

#pragma once
/// \file
/// Thrust reports failures its own way (thrust::system_error from an algorithm or a launch,
/// a std::bad_alloc subclass from a device allocation); the device contexts turn them into
/// cohort errors that name the operation and the device:
///
///     the training step failed in a Thrust algorithm: parallel_for failed: cudaErrorLaunchFailure:
///     unspecified launch failure on device 1, rank 3
///
///     ctx.translate_errors("the training step", [&] { ... });

#include <new>
#include <string>
#include <utility>

#include <thrust/system_error.h>

#include "cohort/core/error.hpp"

namespace cohort::device {

/// f(), with Thrust's exceptions rethrown as `E` (a cohort::DeviceError): `what` names the
/// operation, `where()` the device (" on device 1, rank 3"), called only on failure.
template <class E, class Where, class F>
decltype(auto) translate_thrust_errors(const char* what, Where&& where, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const thrust::system_error& e) {
    throw E(cohort::detail::concat(what, " failed in a Thrust algorithm: ", e.what(), where()));
  } catch (const std::bad_alloc& e) {
    throw E(cohort::detail::concat(what, " failed: out of memory (", e.what(), ")", where()));
  }
}

} // namespace cohort::device

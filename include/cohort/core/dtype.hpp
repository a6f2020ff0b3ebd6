#pragma once
/// \file
/// Element types as they appear in files (safetensors names) and at run time.
/// Example (compiled: tests/docs/headers.cpp, "core/dtype"):
///
///     static_assert(cohort::dtype_of<float> == cohort::DType::f32);

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "cohort/precision/half.hpp"

namespace cohort {

/// The element types cohort stores or reads.
enum class DType : std::uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

/// Size of one element in bytes.
constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
  case DType::f64:
  case DType::i64:
    return 8;
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::f16:
  case DType::bf16:
  case DType::i16:
    return 2;
  case DType::i8:
  case DType::u8:
  case DType::boolean:
    return 1;
  }
  return 0;
}

/// The safetensors spelling ("F32", "I64", ...).
constexpr std::string_view dtype_name(DType t) noexcept {
  switch (t) {
  case DType::f64:
    return "F64";
  case DType::f32:
    return "F32";
  case DType::f16:
    return "F16";
  case DType::bf16:
    return "BF16";
  case DType::i64:
    return "I64";
  case DType::i32:
    return "I32";
  case DType::i16:
    return "I16";
  case DType::i8:
    return "I8";
  case DType::u8:
    return "U8";
  case DType::boolean:
    return "BOOL";
  }
  return "?";
}

/// Inverse of dtype_name; empty for names cohort does not know.
constexpr std::optional<DType> dtype_from_name(std::string_view s) noexcept {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::i16, DType::i8,
                  DType::u8, DType::boolean})
    if (dtype_name(t) == s) return t;
  return std::nullopt;
}

namespace detail {
template <class T>
struct dtype_of_impl;
template <>
struct dtype_of_impl<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct dtype_of_impl<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct dtype_of_impl<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct dtype_of_impl<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct dtype_of_impl<std::uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct dtype_of_impl<half> {
  static constexpr DType value = DType::f16;
};
template <>
struct dtype_of_impl<bfloat16> {
  static constexpr DType value = DType::bf16;
};
} // namespace detail

/// The DType of a C++ element type.
template <class T>
inline constexpr DType dtype_of = detail::dtype_of_impl<T>::value;

/// The type sums, statistics and parameter gradients are kept in: float for float and the 16-bit
/// types (half, bfloat16), double for double (gradient checks run the whole network in double).
template <class T>
struct accumulator {
  using type = float;
};
template <>
struct accumulator<double> {
  using type = double;
};
template <class T>
using accumulator_t = typename accumulator<T>::type;

} // namespace cohort

#pragma once
/// \file
/// Compile-time shapes of one sample (the batch dimension is a run-time value and is not part
/// of a `Shape`).
/// Example (compiled: tests/docs/headers.cpp, "core/shape"):
///
///     using Image = cohort::Shape<1, 28, 28>;   // C, H, W
///     static_assert(Image::size == 784);

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>

namespace cohort {

/// The shape of one sample: `Shape<C, H, W>` for images, `Shape<N>` for feature vectors.
template <std::size_t... Extents>
struct Shape {
  static_assert(sizeof...(Extents) > 0, "Shape: give at least one extent, e.g. Shape<10>");
  static_assert(((Extents > 0) && ...), "Shape: every extent must be at least 1");

  static constexpr std::size_t rank = sizeof...(Extents);
  static constexpr std::size_t size = (Extents * ...);
  static constexpr std::array<std::size_t, rank> extents{Extents...};

  /// "1x28x28": how error messages and signatures print a shape.
  static std::string str() {
    std::string s;
    for (std::size_t i = 0; i < rank; ++i) {
      if (i) s += 'x';
      s += std::to_string(extents[i]);
    }
    return s;
  }
};

/// Declares a network's per-sample input: `Sequential<Input<1, 28, 28>, ...>`.
template <std::size_t... Extents>
struct Input {
  using shape = Shape<Extents...>;
};

namespace detail {
template <class T>
struct is_shape : std::false_type {};
template <std::size_t... E>
struct is_shape<Shape<E...>> : std::true_type {};

template <class T>
struct is_input : std::false_type {};
template <std::size_t... E>
struct is_input<Input<E...>> : std::true_type {};

/// Extent `I` of shape `S`, or 0 when `S` has no such axis (lets predicates test rank and
/// extents in one expression without instantiating an out-of-range access).
template <class S, std::size_t I>
constexpr std::size_t extent_or_zero() {
  if constexpr (I < S::rank)
    return S::extents[I];
  else
    return 0;
}
} // namespace detail

/// True for `Shape<...>`.
template <class T>
concept ShapeType = detail::is_shape<T>::value;

/// Rank-3 (C, H, W) shapes.
template <class T>
concept ImageShape = ShapeType<T> && T::rank == 3;

/// Produced when a link in a `Sequential` fails to type-check; nothing accepts it, so the chain
/// stops after the first (and clearest) error.
struct InvalidShape {
  static constexpr std::size_t rank = 0;
  static constexpr std::size_t size = 0;
};

/// What a layer accepts as input, as shown in compile errors (`Expected = expect::Image<16>`).
namespace expect {
/// (Channels, H, W) for any H and W.
template <std::size_t Channels>
struct Image {};
/// (C, H, W) for any C, H and W.
struct AnyImage {};
/// A feature vector of exactly N values: Shape<N>.
template <std::size_t N>
struct Vector {};
/// A feature vector of any length.
struct AnyVector {};
/// Any shape at all (element-wise layers).
struct AnyShape {};
} // namespace expect

} // namespace cohort

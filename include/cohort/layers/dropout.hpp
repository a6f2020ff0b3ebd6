#pragma once
/// \file
/// Dropout (element-wise) and Dropout2d (whole channels), active in training mode only.
/// Example (compiled: tests/docs/headers.cpp, "layers/dropout"):
///
///     using Head = Sequential<Input<64>, Dropout<0.25f>, Linear<64, 10>>;
///
/// Kept values are scaled by 1/(1-P), as in PyTorch. Masks come from the counter-based
/// generator in core/random.hpp, indexed by (seed, layer, training step, global sample,
/// element): they do not depend on thread count, replica count or world size.

#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/core/random.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

namespace detail {
/// Shared by both dropout layers: the random stream a forward pass draws from.
inline RandomStream dropout_stream(const StepInfo& step, std::size_t layer) noexcept {
  return {step.seed, streams::dropout(layer, step.step)};
}

/// Dropout on S-shaped samples seen as `Units` units of `UnitSize` elements each: one random
/// number per unit, the mask broadcast over the unit (an element for Dropout, a channel for
/// Dropout2d).
template <class Layer, class S, float P, std::size_t Units, std::size_t UnitSize>
struct BoundDropout : NoTensors {
  using layer = Layer;
  using input_shape = S;
  using output_shape = S;
  static constexpr float p = P;

  template <class Backend, class T>
  struct state {
    typename Backend::template buffer<accumulator_t<T>> mask; // (batch, Units): 0 or 1/(1-P)
    void reserve(std::size_t batch) { mask.resize(batch * Units); }
  };

  template <class Backend, class T>
  static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& s) {
    using K = ops::ElementwiseKernels<Backend>;
    if (a.step.mode == Mode::eval || P == 0.f)
      K::copy(a.ctx, a.x, a.y, a.batch * S::size);
    else
      K::dropout_forward(a.ctx, dropout_stream(a.step, a.index),
                         GlobalUnits{a.step.sample_offset, a.step.sample_stride, Units}, P, a.x, s.mask.data(), a.y,
                         a.batch * Units, UnitSize);
  }
  template <class Backend, class T>
  static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& s) {
    if (!a.dx) return;
    using K = ops::ElementwiseKernels<Backend>;
    if (a.step.mode == Mode::eval || P == 0.f)
      K::copy(a.ctx, a.dy, a.dx, a.batch * S::size);
    else
      K::multiply(a.ctx, a.dy, s.mask.data(), a.dx, a.batch * Units, UnitSize);
  }
};
} // namespace detail

/// `Dropout<P>`: zeroes each element with probability P during training.
template <float P>
struct Dropout {
  static_assert(P >= 0.f && P < 1.f, "Dropout: P must be in [0, 1)");

  static constexpr std::string_view name = "Dropout";
  static std::string signature() { return std::string(name) + detail::template_args(P); }
  using expected_input = expect::AnyShape;
  template <class S>
  static constexpr bool accepts = ShapeType<S>;
  template <class S>
  using bind = detail::BoundDropout<Dropout, S, P, S::size, 1>;
};

/// `Dropout2d<P>`: zeroes whole channels of (C, H, W) samples with probability P during training.
template <float P>
struct Dropout2d {
  static_assert(P >= 0.f && P < 1.f, "Dropout2d: P must be in [0, 1)");

  static constexpr std::string_view name = "Dropout2d";
  static std::string signature() { return std::string(name) + detail::template_args(P); }
  using expected_input = expect::AnyImage;
  template <class S>
  static constexpr bool accepts = ImageShape<S>;
  template <class S>
  using bind = detail::BoundDropout<Dropout2d, S, P, S::extents[0], S::extents[1] * S::extents[2]>;
};

} // namespace cohort

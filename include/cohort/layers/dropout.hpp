#pragma once
/// \file
/// Dropout (element-wise) and Dropout2d (whole channels), active in training mode only.
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
template <class Backend, class T>
using mask_buffer = typename Backend::template buffer<T>;

/// Shared by both dropout layers: the random stream a forward pass draws from.
inline RandomStream dropout_stream(const StepInfo& step, std::size_t layer) noexcept {
  return {step.seed, streams::dropout(layer, step.step)};
}
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
  struct bind : NoTensors {
    using layer = Dropout;
    using input_shape = S;
    using output_shape = S;
    static constexpr float p = P;

    template <class Backend, class T>
    struct state {
      detail::mask_buffer<Backend, T> mask; // (batch, S...): 0 or 1/(1-P)
      void reserve(std::size_t batch) { mask.resize(batch * S::size); }
    };

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& s) {
      using K = ops::ElementwiseKernels<Backend>;
      if (a.step.mode == Mode::eval || P == 0.f) {
        K::copy(a.ctx, a.x, a.y, a.batch * S::size);
        return;
      }
      K::dropout_forward(a.ctx, detail::dropout_stream(a.step, a.index), a.step.sample_offset * S::size, P, a.x,
                         s.mask.data(), a.y, a.batch * S::size, 1);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& s) {
      if (!a.dx) return;
      using K = ops::ElementwiseKernels<Backend>;
      if (a.step.mode == Mode::eval || P == 0.f)
        K::copy(a.ctx, a.dy, a.dx, a.batch * S::size);
      else
        K::multiply(a.ctx, a.dy, s.mask.data(), a.dx, a.batch * S::size, 1);
    }
  };
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
  struct bind : NoTensors {
    using layer = Dropout2d;
    using input_shape = S;
    using output_shape = S;
    static constexpr float p = P;
    static constexpr std::size_t channels = S::extents[0], plane = S::extents[1] * S::extents[2];

    template <class Backend, class T>
    struct state {
      detail::mask_buffer<Backend, T> mask; // (batch, C): 0 or 1/(1-P)
      void reserve(std::size_t batch) { mask.resize(batch * channels); }
    };

    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& s) {
      using K = ops::ElementwiseKernels<Backend>;
      if (a.step.mode == Mode::eval || P == 0.f) {
        K::copy(a.ctx, a.x, a.y, a.batch * S::size);
        return;
      }
      // One random number per (sample, channel); the mask is broadcast over the plane.
      K::dropout_forward(a.ctx, detail::dropout_stream(a.step, a.index), a.step.sample_offset * channels, P, a.x,
                         s.mask.data(), a.y, a.batch * channels, plane);
    }
    template <class Backend, class T>
    static void backward(const BackwardArgs<Backend, T>& a, state<Backend, T>& s) {
      if (!a.dx) return;
      using K = ops::ElementwiseKernels<Backend>;
      if (a.step.mode == Mode::eval || P == 0.f)
        K::copy(a.ctx, a.dy, a.dx, a.batch * S::size);
      else
        K::multiply(a.ctx, a.dy, s.mask.data(), a.dx, a.batch * channels, plane);
    }
  };
};

} // namespace cohort

#pragma once
/// \file
/// Batch normalisation of feature vectors, as torch.nn.BatchNorm1d on (N, Features) batches.
/// Example (compiled: tests/docs/headers.cpp, "layers/batch_norm1d"):
///
///     using Head = Sequential<Input<64, 4, 4>, Flatten, Linear<1024, 128>, BatchNorm1d<128>, ReLU>;
///
/// Every feature is normalised over the batch: in training mode with the batch's mean and
/// biased variance, updating running_mean/running_var with `Momentum` (the running variance
/// unbiased, over N samples) and num_batches_tracked; in evaluation mode with the running
/// statistics. The same tensors, mixed-precision rule (float weights and statistics) and kernels
/// as BatchNorm2d, with a plane of one value. Only (Features) vectors are taken, not PyTorch's
/// (Features, L) sequences. State dict: "weight", "bias", "running_mean", "running_var",
/// "num_batches_tracked".

#include <cstddef>
#include <string>
#include <string_view>

#include "cohort/backend/ops.hpp"
#include "cohort/core/error.hpp"
#include "cohort/layers/batch_norm2d.hpp"
#include "cohort/layers/layer.hpp"

namespace cohort {

/// `BatchNorm1d<Features, Eps = 1e-5f, Momentum = 0.1f>` (affine, tracking running statistics)
/// over Shape<Features> inputs: after Flatten or Linear.
template <std::size_t Features, float Eps = 1e-5f, float Momentum = 0.1f>
struct BatchNorm1d {
  static_assert(Features >= 1, "BatchNorm1d: Features must be at least 1");
  static_assert(Eps > 0.f, "BatchNorm1d: Eps must be positive");
  static_assert(Momentum >= 0.f && Momentum <= 1.f, "BatchNorm1d: Momentum must be in [0, 1]");

  static constexpr std::string_view name = "BatchNorm1d";
  static std::string signature() { return std::string(name) + detail::template_args(Features, Eps, Momentum); }
  /// A vector of Features values: an image must go through Flatten (and usually Linear) first.
  using expected_input = expect::Vector<Features>;
  template <class S>
  static constexpr bool accepts = ShapeType<S>&& S::rank == 1 && detail::extent_or_zero<S, 0>() == Features;

  template <class S>
  struct bind : detail::BoundBatchNorm<BatchNorm1d, S, ChannelGeometry<Features, 1>, Eps, Momentum> {
    using base = detail::BoundBatchNorm<BatchNorm1d, S, ChannelGeometry<Features, 1>, Eps, Momentum>;
    template <class Backend, class T>
    using state = typename base::template state<Backend, T>;

    /// As BatchNorm2d's, after PyTorch's check that training sees more than one value per feature
    /// (one sample would normalise every feature to 0 and give a NaN running variance).
    template <class Backend, class T>
    static void forward(const ForwardArgs<Backend, T>& a, state<Backend, T>& ws) {
      if (a.step.mode == Mode::train && a.batch < 2)
        throw ValueError(cohort::detail::concat("BatchNorm1d (layer ", a.index,
                                                "): training needs more than 1 value per feature, found a batch of ",
                                                a.batch, " (PyTorch raises too; use eval mode for single samples)"));
      base::forward(a, ws);
    }
  };
};

} // namespace cohort

#pragma once
/// \file
/// The seam between layers and backends.
///
/// A layer never computes anything itself: it describes shapes and parameters, and calls an op
/// family specialised for the backend it runs on, e.g.
///
///     ops::Conv2dKernels<Backend>::template forward<Geometry>(ctx, x, w, b, y, batch, ws);
///
/// Entry points with many buffers take an argument struct instead (op_arguments.hpp):
///
///     ops::Conv2dKernels<Backend>::template backward<Geometry>(ctx, ops::Conv2dBackwardArgs<T>{.x = x, ...}, ws);
///
/// A backend (cohort/backend/cpu.hpp, cohort/backend/cuda.cuh) specialises every family below.
/// Geometry arrives as a type whose members are compile-time constants, so a backend can pick or
/// generate kernels for the exact shape. Everything is NCHW, row-major, as in PyTorch.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cohort/backend/op_arguments.hpp"
#include "cohort/core/macros.hpp"

namespace cohort {

/// Geometry of one Conv2d layer, all compile-time constants.
template <std::size_t InC, std::size_t OutC, std::size_t H, std::size_t W, std::size_t K, std::size_t S, std::size_t P>
struct Conv2dGeometry {
  static constexpr std::size_t in_channels = InC, out_channels = OutC;
  static constexpr std::size_t in_h = H, in_w = W, kernel = K, stride = S, padding = P;
  static constexpr std::size_t out_h = (H + 2 * P - K) / S + 1;
  static constexpr std::size_t out_w = (W + 2 * P - K) / S + 1;
  static constexpr std::size_t in_size = InC * H * W;           // per sample
  static constexpr std::size_t out_size = OutC * out_h * out_w; // per sample
  static constexpr std::size_t patch = InC * K * K;             // rows of the im2col matrix
  static constexpr std::size_t out_plane = out_h * out_w;       // columns of the im2col matrix
};

/// Geometry of one ConvTranspose2d layer (torch's arguments; square kernel, no groups or
/// dilation). A transposed convolution is the input gradient of the convolution that maps its
/// output back onto its input: `adjoint`, whose weight tensor (InC, OutC, K, K) is torch's
/// ConvTranspose2d weight as it stands. output_padding (< stride) adds rows and columns at the
/// bottom and right that the adjoint's floor division leaves out.
template <std::size_t InC, std::size_t OutC, std::size_t H, std::size_t W, std::size_t K, std::size_t S, std::size_t P,
          std::size_t OutPad>
struct ConvTranspose2dGeometry {
  static_assert(OutPad < S, "ConvTranspose2dGeometry: output_padding must be smaller than the stride (as torch's)");
  static_assert((H - 1) * S + K + OutPad > 2 * P && (W - 1) * S + K + OutPad > 2 * P,
                "ConvTranspose2dGeometry: the padding crops the whole output");
  static constexpr std::size_t in_channels = InC, out_channels = OutC;
  static constexpr std::size_t in_h = H, in_w = W, kernel = K, stride = S, padding = P, output_padding = OutPad;
  static constexpr std::size_t out_h = (H - 1) * S + K + OutPad - 2 * P;
  static constexpr std::size_t out_w = (W - 1) * S + K + OutPad - 2 * P;
  static constexpr std::size_t in_size = InC * H * W, out_plane = out_h * out_w, out_size = OutC * out_plane;
  using adjoint = Conv2dGeometry<OutC, InC, out_h, out_w, K, S, P>;
  static_assert(adjoint::out_h == H && adjoint::out_w == W);
};

/// Geometry of one GroupNorm layer: Channels in Groups of Channels / Groups, each channel
/// Plane values per sample (H * W; 1 for (N, C) inputs).
template <std::size_t Channels, std::size_t Groups, std::size_t Plane>
struct GroupNormGeometry {
  static_assert(Groups >= 1 && Channels % Groups == 0, "GroupNormGeometry: Groups must divide Channels");
  static constexpr std::size_t channels = Channels, groups = Groups, plane = Plane;
  static constexpr std::size_t channels_per_group = Channels / Groups, size = Channels * Plane;
};

/// Geometry of one pooling layer (MaxPool2d, AvgPool2d, AdaptiveAvgPool2d).
template <std::size_t C, std::size_t H, std::size_t W, std::size_t K, std::size_t S, std::size_t P>
struct Pool2dGeometry {
  static constexpr std::size_t channels = C, in_h = H, in_w = W, kernel = K, stride = S, padding = P;
  static constexpr std::size_t out_h = (H + 2 * P - K) / S + 1;
  static constexpr std::size_t out_w = (W + 2 * P - K) / S + 1;
  static constexpr std::size_t in_size = C * H * W, out_size = C * out_h * out_w;
};

/// Geometry of a channel-wise op (BatchNorm2d, Dropout2d) on (C, plane) samples; BatchNorm1d's
/// (Features) vectors are Plane = 1.
template <std::size_t C, std::size_t Plane>
struct ChannelGeometry {
  static constexpr std::size_t channels = C, plane = Plane, size = C * Plane;
};

/// Global index of the random number of dropout unit u of a batch (Units units per sample):
/// (offset + (u / units) * stride) * units + u % units, so a unit draws the same number however
/// the global batch is split between replicas and ranks.
struct GlobalUnits {
  std::uint64_t offset = 0, stride = 1, units = 1;
  COHORT_HOST_DEVICE constexpr std::uint64_t operator()(std::uint64_t u) const noexcept {
    return (offset + u / units * stride) * units + u % units;
  }
};

/// The CUDA backend's tag, defined by cohort/backend/cuda.cuh (nvcc only). Declared here so that
/// `SingleDevice<Cuda>` can be named anywhere and a build without CUDA reports a clear error
/// (backend_available) instead of an unknown name or a link failure.
struct Cuda;

/// Whether a backend is defined in this translation unit (its header is included).
template <class Backend>
inline constexpr bool backend_available = requires {
  sizeof(Backend);
};

/// Whether a backend's buffers are host memory that host code may read and write directly (the
/// CPU backend), or device memory reached only through copies (`host_memory = false`). Parameter
/// views, state_dict and the optimisers' host loops require the former.
template <class Backend>
inline constexpr bool host_memory_backend = [] {
  if constexpr (requires { Backend::host_memory; })
    return bool(Backend::host_memory);
  else
    return true;
}();

namespace ops {

// The op families. Each is only declared here: a backend defines all of them for its tag
// (cohort/backend/cpu.hpp, thrust_device.hpp, cuda.cuh), and BackendProtocol checks that it did.

/// Conv2d: forward, and backward to input, weight and bias.
template <class Backend>
struct Conv2dKernels; // defined by each backend
/// ConvTranspose2d over a ConvTranspose2dGeometry: forward, and backward to input, weight and
/// bias (ConvTranspose2dBackwardArgs).
template <class Backend>
struct ConvTranspose2dKernels; // defined by each backend
/// Depthwise convolution (torch's Conv2d with groups = in = out channels): one K x K filter per
/// channel, over a Pool2dGeometry (channels, image, kernel, stride, padding); backward takes
/// Conv2dBackwardArgs (relu_y unused).
template <class Backend>
struct DepthwiseConv2dKernels; // defined by each backend
/// Linear (fully connected): forward and backward.
template <class Backend>
struct LinearKernels; // defined by each backend
/// MaxPool2d with saved argmax, AvgPool2d, global average pooling (AdaptiveAvgPool2d<1>).
template <class Backend>
struct PoolKernels; // defined by each backend
/// BatchNorm2d and BatchNorm1d in training and evaluation mode.
template <class Backend>
struct BatchNormKernels; // defined by each backend
/// GroupNorm over a GroupNormGeometry: forward (the same in training and evaluation: there are no
/// running statistics) and backward (GroupNormBackwardArgs).
template <class Backend>
struct GroupNormKernels; // defined by each backend
/// Upsample (nearest, bilinear) by an integer scale over an UpsampleGeometry
/// (backend/upsample_rules.hpp): forward and the input gradient.
template <class Backend>
struct UpsampleKernels; // defined by each backend
/// Element-wise ops: ReLU, dropout masks, copies.
template <class Backend>
struct ElementwiseKernels; // defined by each backend
/// Element-wise activations with a backward pass of their own: SiLU, GELU, LeakyReLU, ReLU6,
/// Hardsigmoid, Hardswish, Sigmoid, Tanh.
template <class Backend>
struct ActivationKernels; // defined by each backend
/// The terms CrossEntropyLoss adds to plain cross-entropy (torch's label_smoothing and weight),
/// for SoftmaxKernels' weighted cross_entropy: the summed loss
/// (1 - eps) * sum_n w[y_n] * -logp[n, y_n] + (eps / C) * sum_n sum_c w[c] * -logp[n, c],
/// divided by `denominator`.
struct CrossEntropyTerms {
  double smoothing = 0;           // eps in [0, 1]
  const float* weights = nullptr; // one per class, in host memory; null: every class weighs 1
  double weight_sum = 0;          // sum_c w[c] (C without weights)
  double denominator = 1;         // the batch's weight total, or a larger batch's (split batches)
};

/// Row-wise log-softmax and the classification losses.
template <class Backend>
struct SoftmaxKernels; // defined by each backend

/// A family a backend has defined (a complete specialisation).
template <class Family>
concept defined_family = requires {
  sizeof(Family);
};

} // namespace ops

/// What a backend provides: the context its kernels run with (threads, streams, handles) and
/// every op family above specialised for its tag. Network and Trainer check it, so a backend
/// whose header is missing, or a new backend with a family left out, fails with this concept's
/// name and the family it lacks.
template <class B>
concept BackendProtocol = requires {
  typename B::context;
}
&&ops::defined_family<ops::Conv2dKernels<B>>&& ops::defined_family<ops::ConvTranspose2dKernels<B>>&&
    ops::defined_family<ops::DepthwiseConv2dKernels<B>>&& ops::defined_family<ops::LinearKernels<B>>&&
        ops::defined_family<ops::PoolKernels<B>>&& ops::defined_family<ops::UpsampleKernels<B>>&&
            ops::defined_family<ops::BatchNormKernels<B>>&& ops::defined_family<ops::GroupNormKernels<B>>&&
                ops::defined_family<ops::ElementwiseKernels<B>>&& ops::defined_family<ops::ActivationKernels<B>>&&
                    ops::defined_family<ops::SoftmaxKernels<B>>;

} // namespace cohort

#pragma once
/// \file
/// The arguments of the op families' many-pointer entry points, as named fields (CUTLASS's
/// `Arguments` habit): a call site says which buffer is which, so two swapped pointers of the
/// same type read as a mistake instead of compiling silently.
///
///     ops::Conv2dKernels<Backend>::template backward<G>(
///         ctx, ops::Conv2dBackwardArgs<T>{.x = x, .w = w, .dy = dy, .dx = dx, .dw = dw, .db = db, .batch = n}, ws);
///
/// (Name the struct's type: the entry points deduce T from it.)
///
/// Pointers are the backend's memory (device pointers on a device backend). The storage type T
/// is float, double, half or bfloat16; weight-side gradients and BatchNorm's affine parameters
/// are in its accumulator type (float for the 16-bit types).

#include <cstddef>

#include "cohort/core/dtype.hpp"

namespace cohort::ops {

/// Conv2dKernels::backward: gradients of a convolution's input, weights and bias.
template <class T>
struct Conv2dBackwardArgs {
  const T* x = nullptr;           // the layer's input, (batch, G::in_size)
  const T* w = nullptr;           // its weights
  const T* dy = nullptr;          // gradient of its output (of a fused ReLU's, with relu_y)
  T* dx = nullptr;                // gradient of its input, written; null: not wanted
  accumulator_t<T>* dw = nullptr; // weight gradient; null: not wanted (x is not read, db must be null)
  accumulator_t<T>* db = nullptr; // bias gradient; null: no bias
  std::size_t batch = 0;          // samples
  bool accumulate = false;        // add to dw and db instead of overwriting them
  const T* relu_y = nullptr;      // a fused ReLU's output: dy counts only where it is > 0
};

/// ConvTranspose2dKernels::backward: gradients of a transposed convolution's input, weights and
/// bias.
template <class T>
struct ConvTranspose2dBackwardArgs {
  const T* x = nullptr;           // the layer's input, (batch, G::in_size)
  const T* w = nullptr;           // its weights, (in_channels, out_channels, K, K) as torch's
  const T* dy = nullptr;          // gradient of its output
  T* dx = nullptr;                // gradient of its input, written; null: not wanted
  accumulator_t<T>* dw = nullptr; // weight gradient
  accumulator_t<T>* db = nullptr; // bias gradient; null: no bias
  std::size_t batch = 0;          // samples
  bool accumulate = false;        // add to dw and db instead of overwriting them
};

/// Conv2dKernels::backward_relu_pool: the backward pass of Conv2d -> ReLU -> MaxPool2d fused.
template <class T>
struct Conv2dReluPoolBackwardArgs {
  const T* x = nullptr;           // the convolution's input
  const T* w = nullptr;           // its weights
  const T* dpool = nullptr;       // gradient of the pool's output
  const T* pooled = nullptr;      // the pool's output (its sign is the ReLU's mask)
  T* dx = nullptr;                // gradient of the convolution's input, written; null: not wanted
  accumulator_t<T>* dw = nullptr; // weight gradient
  accumulator_t<T>* db = nullptr; // bias gradient; null: no bias
  std::size_t batch = 0;
  bool accumulate = false; // add to dw and db instead of overwriting them
};

/// LinearKernels::backward: gradients of a fully connected layer's input, weights and bias.
template <class T>
struct LinearBackwardArgs {
  const T* x = nullptr;           // the layer's input, (batch, In)
  const T* w = nullptr;           // its weights, (Out, In)
  const T* dy = nullptr;          // gradient of its output, (batch, Out)
  T* dx = nullptr;                // gradient of its input, written; null: not wanted
  accumulator_t<T>* dw = nullptr; // weight gradient
  accumulator_t<T>* db = nullptr; // bias gradient
  std::size_t batch = 0;
  bool accumulate = false; // add to dw and db instead of overwriting them
};

/// BatchNormKernels::forward_eval (and forward_eval_relu_pool): normalisation with the running
/// statistics, which are in S (float, or double for double layers).
template <class T, class S>
struct BatchNormEvalArgs {
  const T* x = nullptr;
  const accumulator_t<T>* gamma = nullptr; // scale, one per channel
  const accumulator_t<T>* beta = nullptr;  // shift
  const S* running_mean = nullptr;
  const S* running_var = nullptr;
  T* y = nullptr; // the output; forward_eval_relu_pool: the pool's output
  std::size_t batch = 0;
  float eps = 1e-5f;
  bool relu = false; // forward_eval: write max(y, 0) (a fused ReLU)
};

/// BatchNormKernels::backward: with the statistics the forward pass saved (the batch's in
/// training, the running ones in evaluation).
template <class T>
struct BatchNormBackwardArgs {
  bool training = true; // the forward pass's mode
  const T* x = nullptr;
  const accumulator_t<T>* gamma = nullptr;
  const T* dy = nullptr;              // gradient of the output (of a fused ReLU's, with relu_y)
  T* dx = nullptr;                    // gradient of the input, written; null: not wanted
  accumulator_t<T>* dgamma = nullptr; // written or accumulated
  accumulator_t<T>* dbeta = nullptr;
  std::size_t batch = 0;
  bool accumulate = false;   // add to dgamma and dbeta instead of overwriting them
  const T* relu_y = nullptr; // a fused ReLU's output: dy counts only where it is > 0
};

/// GroupNormKernels::backward: with the statistics the forward pass saved in the workspace.
template <class T>
struct GroupNormBackwardArgs {
  const T* x = nullptr;
  const accumulator_t<T>* gamma = nullptr; // scale, one per channel
  const T* dy = nullptr;                   // gradient of the output
  T* dx = nullptr;                         // gradient of the input, written; null: not wanted
  accumulator_t<T>* dgamma = nullptr;      // written or accumulated
  accumulator_t<T>* dbeta = nullptr;
  std::size_t batch = 0;
  bool accumulate = false; // add to dgamma and dbeta instead of overwriting them
};

/// BatchNormKernels::backward_relu_pool: the backward pass of BatchNorm2d -> ReLU -> MaxPool2d.
template <class T>
struct BatchNormReluPoolBackwardArgs {
  bool training = true;
  const T* x = nullptr;
  const accumulator_t<T>* gamma = nullptr;
  const T* dpool = nullptr;  // gradient of the pool's output
  const T* pooled = nullptr; // the pool's output
  T* dx = nullptr;           // gradient of the input, written; null: not wanted
  accumulator_t<T>* dgamma = nullptr;
  accumulator_t<T>* dbeta = nullptr;
  std::size_t batch = 0;
  bool accumulate = false;
};

/// ElementwiseKernels::copy_channels: a block of `channels` consecutive channels of every sample,
/// from (batch, src_channels, plane) at channel src_first to (batch, dst_channels, plane) at
/// dst_first: one group of a grouped convolution gathered or scattered, a branch of a channel
/// concatenation.
struct ChannelCopy {
  std::size_t batch = 0;
  std::size_t plane = 0;    // elements per channel (H * W)
  std::size_t channels = 0; // the block's width
  std::size_t src_channels = 0, src_first = 0;
  std::size_t dst_channels = 0, dst_first = 0;
};

} // namespace cohort::ops

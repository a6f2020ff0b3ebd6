#pragma once
/// \file
/// Exports a network to ONNX (opset 17), for inference outside cohort: onnxruntime, TensorRT,
/// OpenVINO, or netron to look at it.
/// Example (not compiled: half of it is Python):
///
///     cohort::Network<cohort::models::ResNet20> net(/*seed=*/0);
///     ...                                                  // train
///     cohort::export_onnx(net, "resnet20.onnx");           // or trainer.parameters()
///
///     # Python
///     sess = onnxruntime.InferenceSession("resnet20.onnx")
///     y = sess.run(None, {"input": x})[0]                  # x: float32 (N, 1, 28, 28), any N
///
/// What is written: the network as it computes in evaluation mode, whatever mode it is in
/// (Dropout is left out, BatchNorm normalises with its running statistics), as one graph with
/// input "input" of shape (N, C, H, W) or (N, Features), N a symbolic batch size, and output
/// "output". The weights are initializers named as cohort's state_dict names them ("0.weight",
/// "3.body.1.running_var"), the names PyTorch gives the same model; num_batches_tracked is not
/// written (inference does not use it). The layers map to operators as torch.onnx.export maps
/// them:
///
///     Conv2d            Conv (kernel_shape, strides, pads, group; bias input only with a bias)
///     DepthwiseConv2d   Conv (group = Channels)
///     ConvTranspose2d   ConvTranspose (kernel_shape, strides, pads, output_padding)
///     BatchNorm2d/1d    BatchNormalization (epsilon = Eps, momentum = 1 - Momentum)
///     GroupNorm         Reshape (N, Groups, -1), InstanceNormalization, Reshape back, Mul, Add
///                       (no GroupNormalization operator before opset 18)
///     ReLU / LeakyReLU  Relu / LeakyRelu (alpha = NegativeSlope)
///     GELU              x * 0.5 * (1 + Erf(x / sqrt(2))) as Div, Erf, Add, Mul, Mul (no Gelu
///                       operator before opset 20)
///     SiLU              x * Sigmoid(x)
///     ReLU6             Clip (min 0, max 6 as scalar inputs)
///     Hardsigmoid       HardSigmoid (alpha = 1/6, beta = 0.5);   Hardswish: HardSwish
///     Sigmoid / Tanh    Sigmoid / Tanh
///     MaxPool2d         MaxPool;   AvgPool2d: AveragePool (count_include_pad = 1)
///     AdaptiveAvgPool2d GlobalAveragePool
///     Dropout/2d        nothing (the identity in evaluation mode)
///     Flatten           Flatten (axis 1);   Linear: Gemm (transB = 1);   LogSoftmax: axis 1
///     Residual          the body's nodes, the shortcut's (none for Identity), then Add
///     Gated             the gate's nodes, then Mul (the gate's (N, C, 1, 1) broadcast)
///     Concat            each branch's nodes (none for Identity), then Concat (axis 1)
///     Upsample          Resize with constant scales: nearest as "asymmetric" + "floor",
///                       bilinear as "linear" with "pytorch_half_pixel" or "align_corners"
///
/// A layer without a mapping is a compile error naming its position and type.
///
/// Why a writer of its own: an ONNX file is a protobuf message, and the header-only core must
/// not gain a mandatory dependency (libprotobuf, onnx) for one export. The part of the wire
/// format a model needs is small (io/detail/onnx_proto.hpp): varints, length-delimited fields
/// and little-endian raw float data. The file is written atomically (io/atomic_file.hpp).

#include <filesystem>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/core/error.hpp"
#include "cohort/io/atomic_file.hpp"
#include "cohort/io/detail/onnx_graph.hpp"
#include "cohort/io/detail/onnx_layers.hpp"
#include "cohort/network/network.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/network/sequential.hpp"

namespace cohort {

/// Writes `params` (a network's state, e.g. `trainer.parameters()`) as an ONNX model of Net in
/// evaluation mode; see the top of this file.
///
///     cohort::export_onnx(trainer.parameters(), "model.onnx");
///
/// Throws IoError naming `path` when it cannot be written (the old file, if any, is kept), and
/// ValueError when the model exceeds protobuf's 2 GiB message limit.
template <NetworkDescription Net>
void export_onnx(const Parameters<Net, float, Cpu>& params, const std::filesystem::path& path) {
  detail::OnnxGraph g;
  const std::string last =
      detail::onnx_chain<Net>(g, params.values.data(), params.buffers.data(), "", "", std::string("input"));
  g.set_output(last);
  const auto in = detail::extents_of<typename Net::input_shape>();
  const auto out = detail::extents_of<typename Net::output_shape>();
  const std::string bytes = g.model(in, out, Net::signature());
  if (bytes.size() > 0x7fffffffu)
    throw ValueError(detail::concat(path.string(), ": the ONNX model would take ", bytes.size(),
                                    " bytes; protobuf messages are limited to 2 GiB"));
  const std::span<const char> part(bytes.data(), bytes.size());
  write_file_atomically(path, std::span<const std::span<const char>>(&part, 1));
}

/// Writes network `net` as an ONNX model in evaluation mode (its own mode is left unchanged).
///
///     cohort::export_onnx(net, "model.onnx");
template <NetworkDescription Net>
void export_onnx(const Network<Net, float, Cpu>& net, const std::filesystem::path& path) {
  export_onnx(net.parameters(), path);
}

} // namespace cohort

#pragma once
/// \file
/// Gradients on the wire as 16-bit values: half the bytes of every bucket's all-reduce.
/// Example (compiled: tests/docs/headers.cpp, "parallel/gradient_compression"):
///
///     TrainerOptions o;
///     o.parallel.compression = cohort::GradientCompression::bf16;   // or fp16
///     o.parallel.error_feedback = true;                             // carry the rounding over
///
/// ProcessGroupDDP rounds each gradient bucket to bf16 or fp16 (round to nearest even), sums it
/// in that format (every partial sum rounded, as NCCL sums 16-bit buffers; PyTorch's
/// fp16_compress_hook / bf16_compress_hook and Horovod's Compression.fp16 do the same), gathers
/// the 16-bit sums and widens them back to float for the optimiser. The loss already carries
/// 1/world, so the sum is the average and fp16's range holds it where float gradients are
/// small; under MixedPrecision<fp16> an overflow shows as inf and the step is skipped as any
/// overflowing step is.
///
/// Error feedback (off by default, as in PyTorch's hooks): each rank keeps what rounding took
/// from its gradient and adds it to the next step's before rounding (1-bit SGD / EF-SGD), so
/// the rounding error is delayed, not lost. Checkpoints keep the residuals
/// (train/error_feedback_state.hpp): a resume on the same world size, or in deterministic mode
/// on any world size dividing the chunk count, continues bit for bit.
///
/// The device engines (ProcessGroupDDP<Nccl, Cuda>, ProcessGroupDDP<Mpi, ThrustDevice>) pack and
/// widen on the device with the same rounding (backend/device/gradient_packing.hpp); NCCL then
/// sums ncclBfloat16 / ncclHalf buffers, MPI the packed values with the reduction above.
///
/// In deterministic mode each chunk's gradient is rounded on its own and the chunks are summed
/// in float in chunk order: the weights stay bitwise the same for every world size dividing the
/// chunk count, compressed or not.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cohort/core/error.hpp"
#include "cohort/core/macros.hpp"
#include "cohort/precision/half.hpp"

namespace cohort {

/// How ProcessGroupDDP sends gradient buckets (DataParallelOptions::compression).
enum class GradientCompression : std::uint8_t { none, bf16, fp16 };

/// How an engine sends its gradient buckets (DataParallelOptions::compression and
/// ::error_feedback), as the device engines' all-reduces take it.
struct BucketCompression {
  GradientCompression format = GradientCompression::none;
  bool error_feedback = false;
};

constexpr std::string_view compression_name(GradientCompression c) noexcept {
  return c == GradientCompression::bf16 ? "bf16" : c == GradientCompression::fp16 ? "fp16" : "none";
}

/// "none", "bf16" or "fp16"; ValueError naming the text otherwise.
inline GradientCompression parse_compression(std::string_view text) {
  for (const auto c : {GradientCompression::none, GradientCompression::bf16, GradientCompression::fp16})
    if (text == compression_name(c)) return c;
  throw ValueError("gradient compression: expected none, bf16 or fp16, found \"" + std::string(text) + "\"");
}

namespace detail {

/// float <-> the 16-bit format's bits (host and device code: the device engines pack with these
/// too, so every backend rounds alike).
COHORT_HOST_DEVICE constexpr std::uint16_t to_wire(GradientCompression c, float v) noexcept {
  return c == GradientCompression::fp16 ? float_to_half_bits(v) : float_to_bfloat16_bits(v);
}
COHORT_HOST_DEVICE constexpr float from_wire(GradientCompression c, std::uint16_t b) noexcept {
  return c == GradientCompression::fp16 ? half_bits_to_float(b) : bfloat16_bits_to_float(b);
}

/// One gradient value onto the wire: `g` (+ `*residual`), rounded; the residual then holds what
/// rounding dropped (zero when the value overflowed). residual = nullptr: no error feedback.
COHORT_HOST_DEVICE constexpr std::uint16_t pack_gradient(GradientCompression c, float g, float* residual) noexcept {
  if (!residual) return to_wire(c, g);
  const float v = g + *residual;
  const std::uint16_t out = to_wire(c, v);
  const float dropped = v - from_wire(c, out);
  // An overflow (fp16's inf) drops no finite amount: carrying inf or NaN would poison every
  // later step of this element, so the residual restarts at zero (the step itself overflows and
  // is skipped under MixedPrecision).
  *residual = dropped - dropped == 0.f ? dropped : 0.f;
  return out;
}
/// out[i] = pack_gradient(g[i], residual + i), for i in [0, n).
inline void pack_gradients(GradientCompression c, const float* g, std::uint16_t* out, std::size_t n,
                           float* residual) noexcept {
  if (residual)
    for (std::size_t i = 0; i < n; ++i) out[i] = pack_gradient(c, g[i], residual + i);
  else
    for (std::size_t i = 0; i < n; ++i) out[i] = to_wire(c, g[i]);
}
inline void unpack_gradients(GradientCompression c, const std::uint16_t* in, float* g, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) g[i] = from_wire(c, in[i]);
}
/// inout[i] = round(in[i] + inout[i]): one partial sum of the 16-bit reduction.
inline void add_packed(GradientCompression c, const std::uint16_t* in, std::uint16_t* inout, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) inout[i] = to_wire(c, from_wire(c, in[i]) + from_wire(c, inout[i]));
}

} // namespace detail
} // namespace cohort

#pragma once
/// \file
/// Error feedback's residuals in a checkpoint (DataParallelOptions::error_feedback with
/// compressed gradients): what rounding to 16 bits has dropped from each rank's gradients so
/// far, owed to its next ones. A run resumed without them would lose that debt, so ProcessGroupDDP
/// saves them beside the weights, as rank 0 gathers them:
/// Example (not compiled: the tensors in a file, not code):
///
///     cohort.error_feedback.per_rank    (world, store) float32: row r is rank r's residual
///     cohort.error_feedback.per_chunk   (chunks, store) float32: deterministic mode, row j is
///                                       chunk j's (the chunk's rank does not matter)
///
/// A resume puts them back exactly when the layout fits: the same world size, or in
/// deterministic mode the same chunk count (any world size dividing it). Otherwise, or when a
/// checkpoint has none, the residuals restart at zero, as they do in PyTorch's compression hooks
/// (whose state is never saved). Any trainer can resume such a checkpoint: one without error
/// feedback ignores the tensor.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace cohort {

struct ErrorFeedbackState {
  enum class Layout : std::uint8_t { per_rank, per_chunk };
  static constexpr std::string_view per_rank_tensor = "cohort.error_feedback.per_rank";
  static constexpr std::string_view per_chunk_tensor = "cohort.error_feedback.per_chunk";

  Layout layout = Layout::per_rank;
  std::size_t rows = 0, row_size = 0;
  std::vector<float> values; // rows x row_size

  bool empty() const noexcept { return rows == 0; }
  std::string_view tensor_name() const noexcept {
    return layout == Layout::per_chunk ? per_chunk_tensor : per_rank_tensor;
  }
};

} // namespace cohort

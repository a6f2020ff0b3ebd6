#pragma once
/// \file
/// Moving an (H, W) plane in place by whole pixels, the edges filled: the one operation a random
/// crop with padding is, for any element type (float images, int32 class masks). Whole-pixel
/// moves copy values, never blend them, so a mask cropped this way stays a mask (what
/// torchvision's nearest interpolation of masks guarantees).

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace cohort::detail {

/// out(y, x) = in(y + dy, x + dx) where that lies inside the plane, else `fill`; in place.
template <class T>
void shift_plane(T* plane, std::size_t height, std::size_t width, std::ptrdiff_t dy, std::ptrdiff_t dx, T fill) {
  static_assert(std::is_trivially_copyable_v<T>, "shift_plane: the plane's values are moved with memmove");
  const std::ptrdiff_t H = std::ptrdiff_t(height), W = std::ptrdiff_t(width);
  // Walking rows away from the source (down when dy > 0, up when dy < 0) reads every source row
  // before it is overwritten.
  for (std::ptrdiff_t step = 0; step < H; ++step) {
    const std::ptrdiff_t y = dy >= 0 ? step : H - 1 - step, sy = y + dy;
    T* row = plane + y * W;
    if (sy < 0 || sy >= H) {
      std::fill(row, row + W, fill);
      continue;
    }
    // Columns [x0, x1) of the output come from the source row; the rest is fill.
    const std::ptrdiff_t x0 = std::clamp<std::ptrdiff_t>(-dx, 0, W), x1 = std::clamp<std::ptrdiff_t>(W - dx, 0, W);
    if (x1 > x0) std::memmove(row + x0, plane + sy * W + x0 + dx, std::size_t(x1 - x0) * sizeof(T));
    std::fill(row, row + x0, fill);
    std::fill(row + x1, row + W, fill);
  }
}

/// Mirrors every row of `rows` rows of `width` values (x -> width - 1 - x).
template <class T>
void mirror_rows(T* values, std::size_t rows, std::size_t width) {
  for (std::size_t r = 0; r < rows; ++r) std::reverse(values + r * width, values + (r + 1) * width);
}

} // namespace cohort::detail

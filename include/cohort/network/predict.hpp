#pragma once
/// \file
/// Predictions for new images: the network's scores or class probabilities for any number of
/// samples, in evaluation mode (dropout off, BatchNorm's running statistics), computed in chunks
/// so memory does not grow with the number of samples. Trainer::predict does the same with a
/// trainer's weights.
/// Example (compiled: tests/docs/headers.cpp, "network/predict"):
///
///     std::vector<float> p = cohort::predict(net, images, cohort::Prediction::probabilities);
///     // p[i * 10 + k]: sample i's probability of class k (images: N * 784 floats, normalised)
///     std::vector<std::size_t> k = cohort::predicted_classes<10>(p);   // argmax per sample
///
/// Scores are the network's outputs as they are (log-probabilities after a final LogSoftmax,
/// logits otherwise); probabilities are their softmax (their exp after a LogSoftmax). Results do
/// not depend on the chunk size or the thread count (cohort's kernels are bitwise the same for
/// any count), and the network's training/eval mode is restored afterwards.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/detail/type_list.hpp"
#include "cohort/layers/log_softmax.hpp"
#include "cohort/network/network.hpp"
#include "cohort/network/test_time_augmentation.hpp"

namespace cohort {

enum class Prediction {
  scores,       ///< the network's outputs (logits, or log-probabilities after a final LogSoftmax)
  probabilities ///< softmax of the scores
};

namespace detail {

template <class Net>
inline constexpr bool ends_in_log_softmax =
    std::is_same_v<typename at_t<Net::layer_count - 1, typename Net::layers>::layer, LogSoftmax>;

/// Row-wise softmax in place (max-subtracted), or exp of log-probabilities.
inline void to_probabilities(std::span<float> scores, std::size_t classes, bool log_probabilities) {
  for (std::size_t r = 0; r + classes <= scores.size(); r += classes) {
    float* row = scores.data() + r;
    if (log_probabilities) {
      for (std::size_t k = 0; k < classes; ++k) row[k] = std::exp(row[k]);
      continue;
    }
    const float m = *std::max_element(row, row + classes);
    double sum = 0;
    for (std::size_t k = 0; k < classes; ++k) sum += row[k] = std::exp(row[k] - m);
    for (std::size_t k = 0; k < classes; ++k) row[k] = float(row[k] / sum);
  }
}

/// The same per pixel of (N, C, H, W) scores: softmax over the C scores of each pixel (stride
/// `plane` = H * W apart).
inline void to_pixel_probabilities(std::span<float> scores, std::size_t classes, std::size_t plane) {
  std::vector<double> e(classes);
  for (std::size_t s = 0; s + classes * plane <= scores.size(); s += classes * plane)
    for (std::size_t p = 0; p < plane; ++p) {
      float* x = scores.data() + s + p;
      float m = x[0];
      for (std::size_t k = 1; k < classes; ++k) m = std::max(m, x[k * plane]);
      double sum = 0;
      for (std::size_t k = 0; k < classes; ++k) sum += e[k] = std::exp(double(x[k * plane] - m));
      for (std::size_t k = 0; k < classes; ++k) x[k * plane] = float(e[k] / sum);
    }
}

} // namespace detail

/// `what` for the images in `images` (N * input size floats, normalised as in training), `chunk`
/// samples at a time; returns N * classes floats (a dense network's N * C * H * W: a score or
/// probability per class and pixel, softmax over each pixel's classes). ShapeError if `images`
/// is not whole samples, ValueError for a chunk of 0. `tta`: TestTimeAugmentation::flip averages
/// each image's scores with its mirror's (network/test_time_augmentation.hpp; probabilities are
/// the softmax of the averaged scores).
template <class Net>
std::vector<float> predict(Network<Net, float, Cpu>& net, std::span<const float> images,
                           Prediction what = Prediction::scores, std::size_t chunk = 256,
                           TestTimeAugmentation tta = TestTimeAugmentation::none) {
  using In = typename Net::input_shape;
  using Out = typename Net::output_shape;
  static_assert(Out::rank == 1 || Out::rank == 3,
                "predict: the network's output must be one vector of class scores per sample, or (C, H, W) scores "
                "per pixel");
  if (images.size() % In::size != 0)
    throw ShapeError(detail::concat("predict: ", images.size(), " floats are not whole samples of ", In::str(), " (",
                                    In::size, " floats each)"));
  if (chunk == 0) throw ValueError("predict: chunk must be at least 1 sample");
  detail::check_test_time_augmentation<In>(tta, "predict");
  const std::size_t n = images.size() / In::size;
  std::vector<float> out(n * Out::size);
  std::vector<float> mirrored; // the chunk's images mirrored (TestTimeAugmentation::flip)
  struct RestoreMode {
    Network<Net, float, Cpu>& net;
    bool training;
    ~RestoreMode() {
      if (training) net.train();
    }
  } restore{net, net.training()};
  net.eval();
  for (std::size_t first = 0; first < n; first += chunk) {
    const std::size_t count = std::min(chunk, n - first);
    const auto y = net.forward(ConstBatchView<In, float>(images.data() + first * In::size, count));
    std::copy(y.data(), y.data() + count * Out::size, out.data() + first * Out::size);
    if constexpr (In::rank == 3) {
      if (tta == TestTimeAugmentation::flip) {
        mirrored.resize(count * In::size);
        detail::mirror_width<In>(images.data() + first * In::size, mirrored.data(), count);
        const auto ym = net.forward(ConstBatchView<In, float>(mirrored.data(), count));
        detail::average_mirrored_scores<Out>(out.data() + first * Out::size, ym.data(), count);
      }
    }
  }
  if (what == Prediction::probabilities) {
    if constexpr (Out::rank == 3)
      detail::to_pixel_probabilities(out, Out::extents[0], Out::extents[1] * Out::extents[2]);
    else
      // averaged log-probabilities no longer sum to 1 once exponentiated: their softmax does
      detail::to_probabilities(out, Out::size, detail::ends_in_log_softmax<Net> && tta == TestTimeAugmentation::none);
  }
  return out;
}

/// The highest-scoring class of each sample of predict's result (scores or probabilities):
/// the first of equal maxima, as torch.argmax.
template <std::size_t Classes>
std::vector<std::size_t> predicted_classes(std::span<const float> predictions) {
  std::vector<std::size_t> k(predictions.size() / Classes);
  for (std::size_t i = 0; i < k.size(); ++i) {
    const float* row = predictions.data() + i * Classes;
    k[i] = std::size_t(std::max_element(row, row + Classes) - row);
  }
  return k;
}

} // namespace cohort

#pragma once
/// \file
/// Initialisations a recipe applies to chosen layers after the default one (Parameters::
/// initialize): torch.nn.init.dirac_ (a convolution that passes its input through), and the
/// whitening of a first convolution from the training images' patches (airbench's
/// init_whitening_conv). They write into a tensor of a host state_dict (Parameters::find).
/// Example (compiled: tests/docs/headers.cpp, "network/init"):
///
///     // using Net = Sequential<Input<1, 28, 28>, Conv2d<1, 8, 2>, ReLU, Conv2d<8, 8, 3, 1, 1>, ...>;
///     auto& p = net.parameters();                         // a Network<Net>'s, or a CPU Trainer's
///     cohort::init::whitening(p.find("0.weight"), images, {1, 28, 28});   // 8 = 2 x (1 x 2 x 2)
///     cohort::init::dirac(p.find("2.weight"));            // a 3x3 convolution that passes its input on

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/network/parameters.hpp"

namespace cohort::init {

/// An image's (channels, height, width): what whitening reads `images` as.
struct ImageShape {
  std::size_t channels = 0, height = 0, width = 0;
};

namespace detail {

using cohort::detail::concat;

/// The weight's 4 extents, or a ShapeError naming `who` and the tensor.
inline void check_conv_weight(const TensorRef& w, const char* who) {
  if (w.dtype != DType::f32 || w.shape.size() != 4 || w.kind != TensorKind::parameter)
    throw ShapeError(concat(who, ": ", w.name, " is not a float convolution weight (out, in, kh, kw) (", w.shape.size(),
                            " dimensions)"));
}

/// Eigenvalues (descending) and unit eigenvectors (row k: the k-th) of the symmetric n x n
/// matrix `a` (row-major, overwritten), by cyclic Jacobi rotations in double: the matrices here
/// are small (C * kh * kw, at most a few dozen), and the method is accurate to rounding.
inline void symmetric_eigen(std::vector<double>& a, std::size_t n, std::vector<double>& values,
                            std::vector<double>& vectors) {
  std::vector<double> v(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) v[i * n + i] = 1.0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0, scale = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) (i == j ? scale : off) += a[i * n + j] * a[i * n + j];
    if (off <= 1e-30 * scale || off == 0) break;
    for (std::size_t p = 0; p + 1 < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) {
        const double apq = a[p * n + q];
        if (apq == 0) continue;
        const double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (std::size_t k = 0; k < n; ++k) { // A <- A J (columns p, q)
          const double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (std::size_t k = 0; k < n; ++k) { // A <- J^T A (rows p, q)
          const double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (std::size_t k = 0; k < n; ++k) { // V <- V J: columns of V are the eigenvectors
          const double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return a[x * n + x] > a[y * n + y]; });
  values.resize(n);
  vectors.resize(n * n);
  for (std::size_t k = 0; k < n; ++k) {
    values[k] = a[order[k] * n + order[k]];
    for (std::size_t i = 0; i < n; ++i) vectors[k * n + i] = v[i * n + order[k]];
  }
}

} // namespace detail

/// torch.nn.init.dirac_(weight, groups): zeros, then a one at the kernel's centre (index k / 2
/// per spatial axis) from input channel i to output channel i of each group, for i below
/// min(out / groups, in). ShapeError for a tensor that is not a 4-d float convolution weight,
/// or whose output channels `groups` does not divide.
inline void dirac(const TensorRef& weight, std::size_t groups = 1) {
  detail::check_conv_weight(weight, "init::dirac");
  const std::size_t out = weight.shape[0], in = weight.shape[1], kh = weight.shape[2], kw = weight.shape[3];
  if (groups == 0 || out % groups != 0)
    throw ShapeError(detail::concat("init::dirac: ", weight.name, " has ", out, " output channels, not divisible into ",
                                    groups, " groups"));
  float* w = static_cast<float*>(weight.data);
  std::fill(w, w + weight.size, 0.0f);
  const std::size_t per_group = out / groups;
  for (std::size_t g = 0; g < groups; ++g)
    for (std::size_t i = 0; i < std::min(per_group, in); ++i)
      w[(((g * per_group + i) * in + i) * kh + kh / 2) * kw + kw / 2] = 1.0f;
}

/// airbench's init_whitening_conv: the weight (2 * C * kh * kw, C, kh, kw) of a first
/// convolution becomes the eigenvectors of the covariance of every kh x kw patch (stride 1, no
/// padding) of `images` (N images of `shape`, normalised as the network sees them), each divided
/// by sqrt(its eigenvalue + eps), largest eigenvalue first, then the same vectors negated:
///   cov = P^T P / n over the n patches (uncentred), cov = V diag(l) V^T,
///   weight[k] = v_k / sqrt(l_k + eps), weight[C kh kw + k] = -weight[k].
/// Computed in double (torch's eigh runs in the patches' float32); an eigenvector's sign is
/// arbitrary, so a channel and its negated twin may come out swapped against torch's.
/// ShapeError when the weight's shape does not fit `shape`, or `images` is not whole images.
inline void whitening(const TensorRef& weight, std::span<const float> images, ImageShape shape, double eps = 5e-4) {
  detail::check_conv_weight(weight, "init::whitening");
  const std::size_t out = weight.shape[0], c = weight.shape[1], kh = weight.shape[2], kw = weight.shape[3];
  const std::size_t d = c * kh * kw, image = shape.channels * shape.height * shape.width;
  if (c != shape.channels || out != 2 * d)
    throw ShapeError(detail::concat("init::whitening: ", weight.name, " is (", out, ", ", c, ", ", kh, ", ", kw,
                                    "); whitening ", shape.channels, "-channel images with ", kh, "x", kw,
                                    " patches needs (", 2 * shape.channels * kh * kw, ", ", shape.channels, ", ", kh,
                                    ", ", kw, ")"));
  if (image == 0 || images.empty() || images.size() % image != 0 || shape.height < kh || shape.width < kw)
    throw ShapeError(detail::concat("init::whitening: ", images.size(), " floats are not whole ", shape.channels, "x",
                                    shape.height, "x", shape.width, " images (at least one, at least ", kh, "x", kw,
                                    ")"));
  if (!(eps >= 0)) throw ValueError(detail::concat("init::whitening: eps must be >= 0, got ", eps));
  const std::size_t n_images = images.size() / image, oh = shape.height - kh + 1, ow = shape.width - kw + 1;
  std::vector<double> cov(d * d, 0.0), patch(d);
  for (std::size_t n = 0; n < n_images; ++n) {
    const float* x = images.data() + n * image;
    for (std::size_t y = 0; y < oh; ++y)
      for (std::size_t z = 0; z < ow; ++z) {
        std::size_t k = 0;
        for (std::size_t ch = 0; ch < c; ++ch)
          for (std::size_t i = 0; i < kh; ++i)
            for (std::size_t j = 0; j < kw; ++j) patch[k++] = x[(ch * shape.height + y + i) * shape.width + z + j];
        for (std::size_t a = 0; a < d; ++a)
          for (std::size_t b = a; b < d; ++b) cov[a * d + b] += patch[a] * patch[b];
      }
  }
  const double count = double(n_images * oh * ow);
  for (std::size_t a = 0; a < d; ++a)
    for (std::size_t b = a; b < d; ++b) cov[b * d + a] = cov[a * d + b] /= count;
  std::vector<double> values, vectors;
  detail::symmetric_eigen(cov, d, values, vectors);
  float* w = static_cast<float*>(weight.data);
  for (std::size_t k = 0; k < d; ++k)
    if (!(values[k] + eps > 0))
      throw ValueError(detail::concat("init::whitening: the patches' covariance has eigenvalue ", values[k],
                                      " (direction ", k, " of ", d, "): with eps ", eps,
                                      " the scale 1 / sqrt(eigenvalue + eps) is not finite; use eps > 0"));
  for (std::size_t k = 0; k < d; ++k) {
    const double s = 1 / std::sqrt(values[k] + eps);
    for (std::size_t i = 0; i < d; ++i) {
      w[k * d + i] = float(vectors[k * d + i] * s);
      w[(d + k) * d + i] = float(-vectors[k * d + i] * s);
    }
  }
}

} // namespace cohort::init

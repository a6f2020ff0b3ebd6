#pragma once
// One forward and backward pass of a network as one vector of floats (output, input gradient,
// parameter gradients), and the check that 1, 2 and 3 threads give the same bits: the layer
// tests' thread-independence cases.

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cohort/cohort.hpp>

namespace cohort::test {

/// `net`'s output on x, its input gradient for dy and its parameter gradients, concatenated.
template <class Net>
std::vector<float> pass_values(Network<Net>& net, const std::vector<float>& x, const std::vector<float>& dy,
                               std::size_t batch) {
  const auto y = net.forward(ConstBatchView<typename Net::input_shape, float>(x.data(), batch));
  std::vector<float> out(y.data(), y.data() + y.size());
  const auto dx =
      net.backward(ConstBatchView<typename Net::output_shape, float>(dy.data(), batch), {.input_grad = true});
  out.insert(out.end(), dx.data(), dx.data() + dx.size());
  out.insert(out.end(), net.gradients().values.begin(), net.gradients().values.end());
  return out;
}

/// Values in [-1, 1) of a fixed pattern, n of them (`stride` and `modulus` vary it).
inline std::vector<float> pattern(std::size_t n, std::size_t stride, std::size_t modulus) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float((i * stride) % modulus) / float(modulus / 2) - 1.f;
  return v;
}

/// Network<Net>(seed) on 1, 2 and 3 threads: bitwise the same pass_values.
template <class Net>
void check_same_bits_on_1_2_3_threads(std::size_t batch, std::uint64_t seed) {
  const auto x = pattern(batch * Net::input_shape::size, 37, 101);
  const auto dy = pattern(batch * Net::output_shape::size, 53, 89);
  std::vector<float> first;
  for (std::size_t threads : {1, 2, 3}) {
    CAPTURE(threads);
    set_num_threads(threads);
    REQUIRE(num_threads() == threads);
    Network<Net> net(seed);
    const std::vector<float> out = pass_values(net, x, dy, batch);
    if (first.empty())
      first = out;
    else
      CHECK(out == first);
  }
  set_num_threads(1);
}

} // namespace cohort::test

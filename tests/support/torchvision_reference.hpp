#pragma once
// What the torchvision reference helpers (tests/tools/torchvision_resnet.cpp,
// torchvision_mobilenet.cpp) share: a network loaded strictly under torchvision's names, its
// eval-mode output written for the Python side, and SGD steps on one batch with their losses.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>

namespace cohort::test {

/// The "labels" tensor (int64, as torch saves class indices) of a safetensors file.
inline std::vector<std::int32_t> labels_of(const std::string& path) {
  const auto l = SafetensorsFile::read(path).values<std::int64_t>("labels");
  return {l.begin(), l.end()};
}

/// A network of `Net` in T, loaded strictly from `weights` through `names` (file -> state_dict).
template <class Net, class T = float>
std::unique_ptr<Network<Net, T>> loaded_network(const std::string& weights, std::vector<RenameRule> names) {
  auto net = std::make_unique<Network<Net, T>>();
  load_weights(weights, net->parameters(), {.rename = std::move(names)});
  return net;
}

/// `net`'s eval-mode output for the "x" tensor of the file `x_path`, written to `out` as "y".
template <class Net>
void write_eval_output(Network<Net>& net, const std::string& x_path, const std::string& out) {
  using In = typename Net::input_shape;
  const auto x = SafetensorsFile::read(x_path).values<float>("x");
  net.eval();
  const auto y = net.forward(ConstBatchView<In, float>(x.data(), x.size() / In::size));
  SafetensorsWriter w;
  w.add<float>("y", {y.batch(), Net::output_shape::size}, y.span());
  w.write(out);
}

/// `steps` SGD steps (train mode, cross-entropy) on the one batch (x, labels); then the weights
/// under torchvision's names (`names` inverted) at `out`, and the losses ("loss") at out + ".loss".
template <class Net, class T>
void train_and_save(Network<Net, T>& net, const std::vector<T>& x, const std::vector<std::int32_t>& labels,
                    std::size_t steps, const SgdOptions& options, const std::vector<RenameRule>& names,
                    const std::string& out) {
  Sgd<T> opt(options);
  CrossEntropyLoss<T> ce;
  std::vector<T> losses;
  for (std::size_t s = 0; s < steps; ++s) {
    losses.push_back(
        T(ce.forward(net.forward(ConstBatchView<typename Net::input_shape, T>(x.data(), labels.size())), labels)));
    net.backward(ce.backward());
    opt.step(net);
  }
  save_weights(out, net.parameters(), inverted(names));
  SafetensorsWriter w;
  w.add<T>("loss", {losses.size()}, losses);
  w.write(out + ".loss");
}

} // namespace cohort::test

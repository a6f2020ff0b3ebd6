// FastResNet (models/fast_resnet.hpp), the time-to-accuracy record network: its parameter count
// and state_dict (names and shapes) are those of its PyTorch twin, cohort_modules.fast_resnet(),
// which bench/time_to_accuracy.py trains with the identical recipe. Its layers are each checked
// against PyTorch fixtures in tests/layers/; training it is what the benchmark measures.

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <cohort/models/fast_resnet.hpp>
#include <cohort/network/network.hpp>

using namespace cohort;

static_assert(models::FastResNet::parameter_count == 261'298); // sum(p.numel() for p in fast_resnet().parameters())
static_assert(std::is_same_v<models::FastResNet::output_shape, Shape<10>>);
static_assert(models::FastResNetOf<3, 32, 16>::parameter_count == 116'890); // fast_resnet(16, 10, 3, 32)

TEST_CASE("FastResNet: the state_dict of its PyTorch twin, name for name and shape for shape") {
  // ' '.join(f'{k}:{"x".join(map(str, v.shape))}' for k, v in fast_resnet().state_dict().items())
  const std::string torch_twin =
      "0.weight:24x1x3x3 1.weight:24 1.bias:24 1.running_mean:24 1.running_var:24 1.num_batches_tracked: "
      "4.weight:48x24x3x3 5.weight:48 5.bias:48 5.running_mean:48 5.running_var:48 5.num_batches_tracked: "
      "7.body.0.weight:48x48x3x3 7.body.1.weight:48 7.body.1.bias:48 7.body.1.running_mean:48 "
      "7.body.1.running_var:48 7.body.1.num_batches_tracked: 7.body.3.weight:48x48x3x3 7.body.4.weight:48 "
      "7.body.4.bias:48 7.body.4.running_mean:48 7.body.4.running_var:48 7.body.4.num_batches_tracked: "
      "9.weight:96x48x3x3 10.weight:96 10.bias:96 10.running_mean:96 10.running_var:96 10.num_batches_tracked: "
      "12.body.0.weight:96x96x3x3 12.body.1.weight:96 12.body.1.bias:96 12.body.1.running_mean:96 "
      "12.body.1.running_var:96 12.body.1.num_batches_tracked: 12.body.3.weight:96x96x3x3 12.body.4.weight:96 "
      "12.body.4.bias:96 12.body.4.running_mean:96 12.body.4.running_var:96 12.body.4.num_batches_tracked: "
      "15.weight:10x96 15.bias:10";
  // Compared as sets: inside a residual block cohort lists the parameters before the buffers
  // (torch interleaves them per sub-module); a state_dict loads by name either way.
  const auto sorted_words = [](const std::string& text) {
    std::vector<std::string> words;
    std::istringstream in(text);
    for (std::string w; in >> w;) words.push_back(w);
    std::sort(words.begin(), words.end());
    return words;
  };
  Network<models::FastResNet> net(0);
  std::string ours;
  for (const TensorRef& t : net.state_dict()) {
    if (!ours.empty()) ours += ' ';
    ours += t.name + ':';
    for (std::size_t d = 0; d < t.shape.size(); ++d) ours += (d ? "x" : "") + std::to_string(t.shape[d]);
  }
  CHECK(sorted_words(ours) == sorted_words(torch_twin));
}

// MobileNetV2 (models/mobilenet_v2.hpp): the generated networks' shapes and parameter counts
// against torchvision's, and the name map, here without running a network. The numerics (strict
// loads of torchvision's state_dicts, eval logits, three training steps, ONNX) are checked against
// torchvision by reference.torchvision_mobilenet (tests/reference/torchvision_mobilenet.py).

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include <cohort/models/mobilenet_v2.hpp>

using namespace cohort;

// The parameter counts of torchvision's modules (sum(p.numel() for p in model.parameters())):
// mobilenet_v2(), mobilenet_v2(width_mult=0.5), and the small variant's twin of
// tests/reference/torchvision_mobilenet.py (small()).
static_assert(models::MobileNetV2<>::parameter_count == 3'504'872);
static_assert(models::MobileNetV2<1000, std::ratio<1, 2>>::parameter_count == 1'968'680);
static_assert(models::MobileNetV2Small<>::parameter_count == 424'714);
static_assert(std::is_same_v<models::MobileNetV2<>::output_shape, Shape<1000>>);
static_assert(std::is_same_v<models::MobileNetV2Small<3, 32>::input_shape, Shape<3, 32, 32>>);
static_assert(models::make_divisible(32 * 0.35) == 16 && models::make_divisible(1280 * 1.4) == 1792 &&
              models::make_divisible(24 * 0.75) == 24); // torchvision's _make_divisible

namespace {
/// How many rules map a torchvision name onto cohort's tensor `name` (rule.to a prefix of it).
std::size_t targets(const std::vector<RenameRule>& rules, const std::string& name) {
  return std::size_t(std::count_if(rules.begin(), rules.end(),
                                   [&](const RenameRule& r) { return r.is_prefix && name.starts_with(r.to); }));
}
std::string renamed(const std::vector<RenameRule>& rules, const std::string& torch_name) {
  for (const RenameRule& r : rules)
    if (r.matches(torch_name)) return r.apply(torch_name);
  return "(no rule)";
}
} // namespace

TEST_CASE("MobileNetV2: every tensor is reached by exactly one of torchvision's names") {
  using Net = models::MobileNetV2<>;
  const auto rules = models::mobilenet_v2_names<Net>();
  CHECK(rules.size() == 2 + 4 + 16 * 6 + 2 + 1); // stem, first block, 16 expanded blocks, last conv, head
  for (const LayoutEntry& e : Net::layout.entries) CHECK_MESSAGE(targets(rules, e.name()) == 1, e.name());
  CHECK(renamed(rules, "features.0.0.weight") == "0.weight");
  CHECK(renamed(rules, "features.1.conv.1.weight") == "6.weight"); // the first block's projection
  CHECK(renamed(rules, "features.2.conv.1.0.weight") == "11.weight");
  CHECK(renamed(rules, "features.3.conv.3.running_var") == "16.body.7.running_var");
  CHECK(renamed(rules, "features.18.0.weight") == "66.weight"); // the last 1x1 convolution
  CHECK(renamed(rules, "features.18.1.num_batches_tracked") == "67.num_batches_tracked");
  CHECK(renamed(rules, "classifier.1.weight") == "72.weight");
  const auto backbone = models::mobilenet_v2_names<Net>(/*head=*/false);
  CHECK(backbone.size() == rules.size() - 1);
  CHECK(targets(backbone, "72.weight") == 0);
}

TEST_CASE("MobileNetV2-small: the map follows its own table (five stages, a 512-wide last convolution)") {
  using Net = models::MobileNetV2Small<>;
  const auto rules = models::mobilenet_v2_names<Net>();
  CHECK(rules.size() == 2 + 4 + 10 * 6 + 2 + 1);
  for (const LayoutEntry& e : Net::layout.entries) CHECK_MESSAGE(targets(rules, e.name()) == 1, e.name());
  CHECK(renamed(rules, "features.12.0.weight") == std::to_string(Net::layer_count - 7) + ".weight"); // 11 blocks
}

// Loading weights someone else named (train/weight_names.hpp): rename rules, torch's non-strict
// load with its missing and unexpected keys, exact F16/BF16 -> float conversion, and errors that
// list every problem with the file's own names.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/precision/half.hpp>

#include "support/temp_dir.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {

using Net = models::ModelB; // conv, BatchNorm (buffers), Linear: every kind of tensor

/// `net`'s tensors written under the names `rename(name)` gives (skipped when it returns ""),
/// with F32 parameters stored as `dtype` (F16 or BF16 round them).
template <class Rename>
fs::path write_renamed(const fs::path& path, Network<Net>& net, Rename rename, DType dtype = DType::f32) {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  for (const TensorRef& t : net.parameters().state_dict()) {
    const std::string name = rename(t.name);
    if (name.empty()) continue;
    if (t.dtype != DType::f32 || dtype == DType::f32) {
      w.add(name, t.dtype, t.shape, t.data, t.bytes());
      continue;
    }
    std::vector<std::uint16_t> half(t.size);
    const auto* v = static_cast<const float*>(t.data);
    for (std::size_t i = 0; i < t.size; ++i)
      half[i] = dtype == DType::f16 ? detail::float_to_half_bits(v[i]) : detail::float_to_bfloat16_bits(v[i]);
    w.add(name, dtype, t.shape, half.data(), half.size() * 2);
  }
  w.write(path);
  return path;
}

std::vector<float> values(Network<Net>& n) { return {n.parameters().values.begin(), n.parameters().values.end()}; }

} // namespace

TEST_CASE("load_weights: prefix and exact rename rules map another program's names onto the network's") {
  test::TempDir dir;
  Network<Net> source(1), target(2);
  const auto file = write_renamed(dir.path / "w.safetensors", source, [](const std::string& n) {
    return n == "9.weight" ? std::string("fc.weight") : n == "9.bias" ? std::string("fc.bias") : "backbone." + n;
  });
  CHECK_THROWS_AS(load_weights(file, target.parameters()), CheckpointError); // the names do not fit as they are
  const LoadReport r =
      load_weights(file, target.parameters(),
                   {.rename = {RenameRule::exact("fc.weight", "9.weight"), RenameRule::exact("fc.bias", "9.bias"),
                               RenameRule::prefix("backbone.", "")}});
  CHECK(values(target) == values(source));
  CHECK(r.missing.empty());
  CHECK(r.unexpected.empty());
  CHECK(r.loaded == source.parameters().state_dict().size());
}

TEST_CASE("load_weights: non-strict loads what fits and reports torch's missing and unexpected keys") {
  test::TempDir dir;
  Network<Net> source(1), target(2);
  const auto before = values(target);
  // A new head: the file's classifier is "head.*" (another model's), the network's 9.* stays.
  const auto file = write_renamed(dir.path / "w.safetensors", source, [](const std::string& n) {
    return n.rfind("9.", 0) == 0 ? "head." + n.substr(2) : n;
  });
  for (const char* problem :
       {"head.weight: unexpected (this network has no such tensor)",
        "head.bias: unexpected (this network has no such tensor)", "9.weight: missing", "9.bias: missing"})
    CHECK_THROWS_WITH_AS(load_weights(file, target.parameters()), doctest::Contains(problem), CheckpointError);
  CHECK(values(target) == before); // nothing loaded on failure
  const LoadReport r = load_weights(file, target.parameters(), {.strict = false});
  CHECK(r.missing == std::vector<std::string>{"9.weight", "9.bias"});
  auto unexpected = r.unexpected;
  std::sort(unexpected.begin(), unexpected.end());
  CHECK(unexpected == std::vector<std::string>{"head.bias", "head.weight"});
  auto& p = target.parameters();
  for (const TensorRef& t : p.state_dict()) {
    CAPTURE(t.name);
    const auto* got = static_cast<const std::uint8_t*>(t.data);
    const TensorRef* from = nullptr;
    const auto src = source.parameters().state_dict();
    for (const auto& s : src)
      if (s.name == t.name) from = &s;
    REQUIRE(from);
    const bool same = std::equal(got, got + t.bytes(), static_cast<const std::uint8_t*>(from->data));
    CHECK(same == (t.name.rfind("9.", 0) != 0)); // the head kept its own initialisation
  }
}

TEST_CASE("load_weights: F16 and BF16 tensors load into a float network exactly") {
  test::TempDir dir;
  for (const DType dtype : {DType::f16, DType::bf16}) {
    CAPTURE(dtype_name(dtype));
    Network<Net> source(1), target(2);
    const auto file = write_renamed(
        dir.path / "h.safetensors", source, [](const std::string& n) { return n; }, dtype);
    const LoadReport r = load_weights(file, target.parameters());
    CHECK(!r.converted.empty());
    const auto src = source.parameters().state_dict();
    const auto dst = target.parameters().state_dict();
    for (std::size_t k = 0; k < src.size(); ++k) {
      if (src[k].dtype != DType::f32) continue;
      const auto* a = static_cast<const float*>(src[k].data);
      const auto* b = static_cast<const float*>(dst[k].data);
      std::size_t off = 0;
      for (std::size_t i = 0; i < src[k].size; ++i) {
        const float rounded = dtype == DType::f16
                                  ? detail::half_bits_to_float(detail::float_to_half_bits(a[i]))
                                  : detail::bfloat16_bits_to_float(detail::float_to_bfloat16_bits(a[i]));
        off += rounded != b[i];
      }
      CHECK(off == 0);
    }
  }
}

TEST_CASE("load_weights: a shape mismatch names the tensor, the file's own name and both shapes, and every problem "
          "is listed") {
  test::TempDir dir;
  Network<models::ModelC> other(1);
  SafetensorsWriter w;
  for (const TensorRef& t : other.parameters().state_dict()) w.add("m." + t.name, t.dtype, t.shape, t.data, t.bytes());
  w.write(dir.path / "c.safetensors");
  Network<Net> target(2);
  try {
    load_weights(dir.path / "c.safetensors", target.parameters(), {.rename = {RenameRule::prefix("m.", "")}});
    FAIL("loaded a model C file into model B");
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("and ") == std::string::npos); // no "and 28 more"
    for (const TensorRef& t : target.parameters().state_dict()) {
      CAPTURE(t.name);
      const bool named = msg.find("\n  " + t.name + ":") != std::string::npos ||
                         msg.find("\n  " + t.name + " (the file's") != std::string::npos;
      CHECK(named); // each network tensor is named as missing or mismatched
    }
    CHECK(msg.find("0.weight (the file's m.0.weight): shape 32x1x3x3 in the file, 16x1x5x5 in the network") !=
          std::string::npos);
  }
}

TEST_CASE("load_weights: two file tensors renamed onto one network tensor are an error") {
  test::TempDir dir;
  Network<Net> source(1), target(2);
  const auto file = write_renamed(dir.path / "w.safetensors", source, [](const std::string& n) { return n; });
  CHECK_THROWS_WITH_AS(load_weights(file, target.parameters(), {.rename = {RenameRule::exact("9.bias", "0.bias")}}),
                       doctest::Contains("0.bias: two tensors of the file map to it, 0.bias and 9.bias"),
                       CheckpointError);
}

TEST_CASE("Trainer::init_from: renames and a non-strict load, with the report") {
  test::TempDir dir;
  Network<Net> source(1);
  const auto file = write_renamed(dir.path / "w.safetensors", source,
                                  [](const std::string& n) { return n.rfind("9.", 0) == 0 ? "" : "features." + n; });
  Trainer<Net, Sgd<>> t(Sgd({.lr = 0.01}), {.seed = 5, .log = nullptr});
  const LoadReport r = t.init_from(file, {.rename = {RenameRule::prefix("features.", "")}, .strict = false});
  CHECK(r.missing == std::vector<std::string>{"9.weight", "9.bias"});
  CHECK(r.unexpected.empty());
  CHECK(r.loaded == source.parameters().state_dict().size() - 2);
}

// Checkpoints (train/checkpoint.hpp) through the Trainer and directly: strict loading that changes
// nothing on failure, PyTorch's names, checksums that catch a flipped bit, loading from memory,
// and file text escaped in the messages.

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>

#include "support/bands.hpp"
#include "support/safetensors_bytes.hpp"
#include "support/trained_weights.hpp"

using namespace cohort;
namespace fs = std::filesystem;

namespace {
using test::Bands;
using test::TempDir;

/// A model C checkpoint after one epoch of Adam (3 steps).
fs::path adam_checkpoint(const TempDir& dir) {
  const Bands data(48, 4);
  Trainer<models::ModelC, Adam<>> c(Adam({.lr = 1e-3}), {.batch_size = 16, .log = nullptr});
  c.fit(data, 1);
  c.save(dir.path / "c.safetensors");
  return dir.path / "c.safetensors";
}

/// `bytes` with one bit of tensor `name`'s data flipped.
std::vector<char> flip_bit_in(const std::vector<char>& bytes, const std::string& name) {
  const auto f = SafetensorsFile::parse("x", bytes);
  auto out = bytes;
  const std::size_t at = test::data_start(bytes) + f.at(name).begin + 9;
  out[at] = char(out[at] ^ 0x04);
  return out;
}

std::vector<float> values_of(const auto& store) { return {store.values.begin(), store.values.end()}; }
} // namespace

// Moved from tests/train/trainer.cpp (there named "Checkpoints: ..."): the asan.* build runs this file.
TEST_CASE("Checkpoint loading: a mismatching or corrupt checkpoint changes nothing and names every problem") {
  const Bands data(48, 4);
  TempDir dir("cohort_checkpoint_");
  Trainer<models::ModelC, Adam<>> c(Adam({.lr = 1e-3}), {.batch_size = 16, .log = nullptr});
  c.fit(data, 1);
  c.save(dir.path / "c.safetensors");

  Trainer<models::ModelB, Adam<>> b(Adam({.lr = 1e-3}), {.batch_size = 16, .log = nullptr});
  const std::vector<float> before(b.parameters().values.begin(), b.parameters().values.end());
  try {
    b.resume(dir.path / "c.safetensors");
    FAIL("a model C checkpoint loaded into model B");
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    CHECK(m.find("c.safetensors: does not fit") != std::string::npos);
    CHECK(m.find("0.weight: shape 32x1x3x3 in the file, 16x1x5x5 in the network") != std::string::npos);
    CHECK(m.find("1.running_mean: missing") != std::string::npos);
    CHECK(m.find("nothing was loaded") != std::string::npos);
  }
  CHECK(std::equal(before.begin(), before.end(), b.parameters().values.begin()));

  // Another seed: the weights init_from loads cannot be the ones this trainer starts with.
  Trainer<models::ModelC, Sgd<>> other_opt(Sgd({.lr = 0.1}), {.batch_size = 16, .seed = 77, .log = nullptr});
  CHECK_THROWS_WITH_AS(other_opt.resume(dir.path / "c.safetensors"),
                       doctest::Contains("optimizer: the file was written by Adam, this run uses SGD"),
                       CheckpointError);
  // Weights alone load into any optimiser (--init-from), strictly by name: every tensor is then
  // the file's, bit for bit, while the optimiser and the position start fresh.
  const auto file = SafetensorsFile::read(dir.path / "c.safetensors");
  const auto refs = other_opt.parameters().state_dict();
  REQUIRE(!refs.empty());
  const auto& w0 = refs.front(); // "0.weight"
  const auto file_w0 = file.values<float>(w0.name);
  REQUIRE(!std::equal(file_w0.begin(), file_w0.end(), static_cast<const float*>(w0.data)));
  other_opt.init_from(dir.path / "c.safetensors");
  for (const TensorRef& t : other_opt.parameters().state_dict()) {
    CAPTURE(t.name);
    REQUIRE(t.dtype == DType::f32); // model C: no counters
    const auto v = file.values<float>(t.name);
    REQUIRE(v.size() == t.size);
    CHECK(std::equal(v.begin(), v.end(), static_cast<const float*>(t.data)));
  }
  CHECK(other_opt.step() == 0);
  CHECK(other_opt.optimizer().steps() == 0);

  // A truncated checkpoint is a FormatError, and the network is untouched.
  std::ifstream in(dir.path / "c.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir.path / "cut.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  Trainer<models::ModelC, Adam<>> fresh(Adam({.lr = 1e-3}), {.batch_size = 16, .log = nullptr});
  const std::vector<float> init(fresh.parameters().values.begin(), fresh.parameters().values.end());
  CHECK_THROWS_AS(fresh.resume(dir.path / "cut.safetensors"), FormatError);
  CHECK(std::equal(init.begin(), init.end(), fresh.parameters().values.begin()));
  CHECK(fresh.step() == 0);
}

TEST_CASE("Checkpoint files: tensors keep PyTorch's names and dtypes, weights files have no optimiser state") {
  TempDir dir("cohort_checkpoint_");
  Network<models::ModelB> net(3);
  save_weights(dir.path / "w.safetensors", net.parameters());
  const auto f = SafetensorsFile::read(dir.path / "w.safetensors");
  CHECK(f.entries().size() == 16);
  CHECK(f.at("1.num_batches_tracked").dtype == DType::i64);
  CHECK(f.at("9.weight").shape == std::vector<std::size_t>{10, 1568});
  CHECK(f.metadata().at("format") == "pt");
  Network<models::ModelB> other(4);
  load_weights(dir.path / "w.safetensors", other.parameters());
  CHECK(std::equal(net.parameters().values.begin(), net.parameters().values.end(), other.parameters().values.begin()));
}

TEST_CASE("load_checkpoint: a flipped bit is a ChecksumError naming the tensor, resume and init_from change nothing") {
  TempDir dir("cohort_checkpoint_");
  const fs::path good = adam_checkpoint(dir);
  const auto bytes = test::file_bytes(good);
  const auto stored = SafetensorsFile::read(good).metadata();
  const std::string header = test::header_of(bytes);

  struct Corruption {
    std::string file, fragment;
    std::vector<char> bytes;
  };
  const std::vector<Corruption> corruptions{
      {"weight.safetensors",
       "tensor \"0.weight\": checksum mismatch: expected CRC32C " + stored.at("cohort.crc32c.0.weight") + ", found ",
       flip_bit_in(bytes, "0.weight")},
      {"slot.safetensors",
       "tensor \"optimizer.exp_avg_sq.4.bias\": checksum mismatch: expected CRC32C " +
           stored.at("cohort.crc32c.optimizer.exp_avg_sq.4.bias"),
       flip_bit_in(bytes, "optimizer.exp_avg_sq.4.bias")},
      // "3" -> "2": one bit of the trainer's position, in the header.
      {"step.safetensors", "header checksum mismatch: expected CRC32C " + stored.at("cohort.crc32c"),
       test::edit_header(bytes, "\"cohort.trainer.step\":\"3\"", "\"cohort.trainer.step\":\"2\"")},
  };
  for (const auto& c : corruptions) {
    CAPTURE(c.file);
    test::write_bytes(dir.path / c.file, c.bytes);
    Trainer<models::ModelC, Adam<>> fresh(Adam({.lr = 1e-3}), {.batch_size = 16, .seed = 9, .log = nullptr});
    const auto params = values_of(fresh.parameters());
    try {
      fresh.resume(dir.path / c.file);
      FAIL("a corrupt checkpoint was loaded");
    } catch (const CheckpointError& e) {
      CHECK(std::string(e.what()).rfind((dir.path / c.file).string() + ": " + c.fragment, 0) == 0);
    }
    CHECK(values_of(fresh.parameters()) == params);
    CHECK(fresh.step() == 0);
    CHECK(fresh.optimizer().steps() == 0);
    CHECK_THROWS_WITH_AS(fresh.init_from(dir.path / c.file), doctest::Contains(c.fragment.c_str()), CheckpointError);
    CHECK(values_of(fresh.parameters()) == params);

    // Directly: the typed error, before anything is copied.
    Network<models::ModelC> net(9);
    Adam<> opt({.lr = 1e-3});
    const auto before = values_of(net.parameters());
    CHECK_THROWS_AS(load_checkpoint(dir.path / c.file, net.parameters(), opt), ChecksumError);
    CHECK_THROWS_AS(load_weights(dir.path / c.file, net.parameters()), ChecksumError);
    CHECK(values_of(net.parameters()) == before);
  }
  // The intact file still resumes.
  Trainer<models::ModelC, Adam<>> fresh(Adam({.lr = 1e-3}), {.batch_size = 16, .log = nullptr});
  fresh.resume(good);
  CHECK(fresh.step() == 3);
}

TEST_CASE("load_checkpoint: from memory, and from a file without checksums (as Python writes them)") {
  TempDir dir("cohort_checkpoint_");
  const fs::path good = adam_checkpoint(dir);
  auto bytes = test::file_bytes(good);

  Network<models::ModelC> a(1), b(2);
  Adam<> opt_a({.lr = 1e-3}), opt_b({.lr = 1e-3});
  const TrainerState sa = load_checkpoint(SafetensorsFile::parse("in memory", bytes), a.parameters(), opt_a);
  CHECK(sa.step == 3);
  CHECK(opt_a.steps() == 3);

  // Every checksum key removed: a plain safetensors file, loaded unchecked, with the same result.
  const auto metadata = SafetensorsFile::parse("x", bytes).metadata();
  for (const auto& [key, value] : metadata)
    if (key.rfind("cohort.crc32c", 0) == 0)
      bytes = test::edit_header(bytes, test::entry_text(test::header_of(bytes), key), "");
  const auto plain = SafetensorsFile::parse("plain", bytes);
  CHECK_FALSE(plain.checksummed());
  CHECK(load_checkpoint(plain, b.parameters(), opt_b).step == 3);
  CHECK(values_of(a.parameters()) == values_of(b.parameters()));
  load_weights(plain, b.parameters());
  CHECK(values_of(a.parameters()) == values_of(b.parameters()));
}

TEST_CASE("load_checkpoint: names and values from the file are escaped in the CheckpointError") {
  TempDir dir("cohort_checkpoint_");
  const auto file = SafetensorsFile::read(adam_checkpoint(dir));
  // A copy of the checkpoint with hostile text: an extra tensor, the optimiser's name and the
  // step holding bytes 0xff, 0x01 and an ANSI escape.
  SafetensorsWriter w;
  for (const auto& e : file.entries()) {
    const auto bytes = file.bytes(e);
    w.add(e.name, e.dtype, e.shape, bytes.data(), bytes.size());
  }
  const std::vector<float> one{1.f};
  w.add<float>("x\xff\x01", {1}, one);
  for (const auto& [key, value] : file.metadata())
    if (key.rfind("cohort.crc32c", 0) != 0) w.set_metadata(key, value);
  w.set_metadata("cohort.optimizer", "Ad\xff\x1b[31mam");
  w.set_metadata("cohort.trainer.step", "1\xff");
  w.write(dir.path / "hostile.safetensors");

  Network<models::ModelC> net(1);
  Adam<> opt({.lr = 1e-3});
  try {
    load_checkpoint(dir.path / "hostile.safetensors", net.parameters(), opt);
    FAIL("loaded");
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(test::printable_ascii(m));
    CHECK(m.find("optimizer: the file was written by Ad\\xff\\x1b[31mam, this run uses Adam") != std::string::npos);
    CHECK(m.find("metadata cohort.trainer.step: \"1\\xff\" is not a non-negative integer") != std::string::npos);
  }
  try {
    load_weights(dir.path / "hostile.safetensors", net.parameters());
    FAIL("loaded");
  } catch (const CheckpointError& e) {
    CHECK(test::printable_ascii(e.what()));
    CHECK(std::string(e.what()).find("x\\xff\\x01: unexpected (this network has no such tensor)") != std::string::npos);
  }
}

TEST_CASE("Checkpoint: error feedback's residuals round-trip, other trainers ignore them, a malformed one is named") {
  TempDir dir("cohort_checkpoint_");
  Network<models::ModelC> net(1), other(2);
  Adam<> opt({.lr = 1e-3}), other_opt({.lr = 1e-3});
  const ErrorFeedbackState saved{.layout = ErrorFeedbackState::Layout::per_chunk,
                                 .rows = 4,
                                 .row_size = 3,
                                 .values = {1, -2, 3, 4, 5e-8f, 6, 7, 8, 9, 10, 11, -12}};
  const fs::path path = dir.path / "ef.safetensors";
  save_checkpoint(path, net.parameters(), opt, TrainerState{}, &saved);
  ErrorFeedbackState back;
  load_checkpoint(path, other.parameters(), other_opt, &back);
  CHECK(back.layout == ErrorFeedbackState::Layout::per_chunk);
  CHECK(back.rows == 4);
  CHECK(back.row_size == 3);
  CHECK(back.values == saved.values);
  CHECK_NOTHROW(load_checkpoint(path, other.parameters(), other_opt)); // a trainer without error feedback

  // The residuals reshaped to one dimension (checksums removed, so the shape check speaks).
  auto bytes = test::file_bytes(path);
  const auto metadata = SafetensorsFile::parse("x", bytes).metadata();
  for (const auto& [key, value] : metadata)
    if (key.rfind("cohort.crc32c", 0) == 0)
      bytes = test::edit_header(bytes, test::entry_text(test::header_of(bytes), key), "");
  bytes = test::edit_header(bytes, "\"shape\":[4,3]", "\"shape\":[12]");
  ErrorFeedbackState unused;
  CHECK_THROWS_WITH_AS(
      load_checkpoint(SafetensorsFile::parse("reshaped", bytes), other.parameters(), other_opt, &unused),
      doctest::Contains("cohort.error_feedback.per_chunk: F32 12 in the file, F32 (rows, values) "
                        "expected"),
      CheckpointError);
}

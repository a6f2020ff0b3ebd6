// What ranks compare at start: one line per layer and tensor, a stable hash, and a message that
// quotes the first line where two ranks differ.

#include <doctest/doctest.h>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/parallel/signature.hpp>

using namespace cohort;

TEST_CASE("Signature: one line per layer (hyperparameters, shapes) and per tensor") {
  const auto lines = network_signature<models::ModelA>();
  REQUIRE(lines.size() == 1 + 12 + 8);
  CHECK(lines[0] == "input: 1x28x28");
  CHECK(lines[3] == "layer 2: Conv2d<16,32,3,1,0> 16x26x26 -> 32x24x24");
  CHECK(lines[13] == "tensor 0.weight: parameter 16x1x3x3");
  const auto b = network_signature<models::ModelB>();
  CHECK(std::find(b.begin(), b.end(), "tensor 1.running_var: buffer 16") != b.end());
  CHECK(std::find(b.begin(), b.end(), "tensor 1.num_batches_tracked: counter scalar") != b.end());
}

TEST_CASE("Signature: equal texts hash equal, a one-character change does not") {
  const std::string a = join_lines(network_signature<models::ModelC>());
  std::string b = a;
  CHECK(fnv1a(a) == fnv1a(b));
  b[b.size() / 2] ^= 1;
  CHECK(fnv1a(a) != fnv1a(b));
  CHECK(fnv1a("") == 14695981039346656037ull); // the FNV-1a offset basis: the same on every platform
}

TEST_CASE("Signature: the difference names both ranks and quotes both lines") {
  using Wider = Sequential<Input<1, 28, 28>, Conv2d<1, 32, 3, 1, 1>, ReLU, MaxPool2d<2>, Flatten, Linear<6272, 128>,
                           ReLU, Linear<128, 10>>;
  const std::string c = join_lines(network_signature<models::ModelC>());
  const std::string w = join_lines(network_signature<Wider>());
  CHECK(signature_difference(c, c, 0, 1).empty());
  CHECK(signature_difference(c, w, 0, 3) ==
        "rank 0 has \"layer 4: Linear<6272,64> 6272 -> 64\", rank 3 has \"layer 4: Linear<6272,128> 6272 -> 128\"");
  CHECK(signature_difference(c + "batch_size: 128\n", c, 0, 2) ==
        "rank 0 has \"batch_size: 128\" where rank 2 has nothing more");
}

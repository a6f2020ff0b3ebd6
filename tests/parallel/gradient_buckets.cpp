// Gradient buckets: whole layers, last layers first, covering the store exactly once.

#include <doctest/doctest.h>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/parallel/gradient_buckets.hpp>

using namespace cohort;

namespace {
template <class Net>
void check_cover(const std::vector<GradientBucket>& buckets) {
  REQUIRE(!buckets.empty());
  CHECK(buckets.front().end == Net::parameter_store_size);
  CHECK(buckets.back().begin == 0);
  for (std::size_t b = 0; b + 1 < buckets.size(); ++b) {
    CHECK(buckets[b].begin == buckets[b + 1].end); // contiguous, in backward order
    CHECK(buckets[b].first_layer > buckets[b + 1].first_layer);
  }
  for (const auto& k : buckets) CHECK(k.begin == Net::layout.param_base[k.first_layer]); // layer boundaries
}
} // namespace

TEST_CASE("Gradient buckets: model D in 1 MiB buckets") {
  using D = models::ModelD;
  const auto buckets = plan_buckets<D>(1 << 20);
  check_cover<D>(buckets);
  // Layers with parameters: 0, 3, 6 (convolutions), 10, 12, 14 (linear). From the end: 14 (5 K
  // values) joins 12 (263 K) to pass 256 K values; 10 (2.4 M), 6 (1.2 M) and 3 (295 K) are each
  // big enough alone; 0 is what is left.
  REQUIRE(buckets.size() == 5);
  const std::size_t first[] = {12, 10, 6, 3, 0};
  for (std::size_t b = 0; b < 5; ++b) CHECK(buckets[b].first_layer == first[b]);
}

TEST_CASE("Gradient buckets: one bucket when the cap is huge, one per layer when it is tiny") {
  using A = models::ModelA;
  const auto one = plan_buckets<A>(std::size_t(1) << 40);
  check_cover<A>(one);
  CHECK(one.size() == 1);
  const auto per_layer = plan_buckets<A>(1);
  check_cover<A>(per_layer);
  CHECK(per_layer.size() == 4); // Conv2d, Conv2d, Linear, Linear
}

TEST_CASE("Gradient buckets: frozen layers are left out, and no bucket spans one") {
  using D = models::ModelD; // parameters in layers 0, 3, 6, 10, 12, 14
  // The head only: one bucket, from layer 14 down to where 12 starts.
  const auto head = plan_buckets<D>(std::size_t(1) << 40, frozen_layers<D>(Freeze::below(12)));
  REQUIRE(head.size() == 1);
  CHECK(head[0].first_layer == 12);
  CHECK(head[0].begin == D::layout.param_base[12]);
  CHECK(head[0].end == D::parameter_store_size);
  // A frozen middle (layers 6 and 10): the huge cap still cuts above and below it.
  const auto middle = plan_buckets<D>(std::size_t(1) << 40, frozen_layers<D>(Freeze::layers(6, 11)));
  REQUIRE(middle.size() == 2);
  CHECK(middle[0].first_layer == 12);
  CHECK(middle[0].end == D::parameter_store_size);
  CHECK(middle[1].first_layer == 0);
  CHECK(middle[1].begin == 0);
  CHECK(middle[1].end == D::layout.param_base[6]);
  for (const auto& k : middle) CHECK((k.end <= D::layout.param_base[6] || k.begin >= D::layout.param_base[11]));
}

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <set>

#include <cohort/core/random.hpp>

using namespace cohort;

// Known-answer vectors published with Random123 (kat_vectors, "philox4x32 10").
TEST_CASE("Philox4x32-10: Random123 known answers") {
  using W = std::array<std::uint32_t, 4>;
  CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == W{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        W{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        W{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5, "usable at compile time");
}

TEST_CASE("RandomStream: indexable, uniform on the unit interval, streams independent") {
  const RandomStream a{42, 1}, b{42, 2}, c{43, 1};
  double sum = 0, sumsq = 0;
  const int n = 100000;
  int same_b = 0, same_c = 0;
  for (int i = 0; i < n; ++i) {
    const float u = a.uniform(std::uint64_t(i));
    REQUIRE(u >= 0.f);
    REQUIRE(u < 1.f);
    sum += u;
    sumsq += double(u) * u;
    same_b += a.bits(std::uint64_t(i)) == b.bits(std::uint64_t(i));
    same_c += a.bits(std::uint64_t(i)) == c.bits(std::uint64_t(i));
  }
  CHECK(std::abs(sum / n - 0.5) < 0.005);                            // mean of U(0,1)
  CHECK(std::abs(sumsq / n - sum * sum / n / n - 1.0 / 12) < 0.003); // variance of U(0,1)
  CHECK(same_b < 5);
  CHECK(same_c < 5);
  // Element i is the same whatever order or grouping it is drawn in.
  CHECK(a.bits(12345) == a.block(12345 / 4)[12345 % 4]);
}

TEST_CASE("streams: distinct uses never share a stream") {
  std::set<std::uint64_t> ids;
  for (std::uint64_t i = 0; i < 64; ++i) {
    ids.insert(streams::init(i));
    ids.insert(streams::dropout(i % 8, i));
    ids.insert(streams::shuffle(i));
  }
  CHECK(ids.size() == 3 * 64);
}

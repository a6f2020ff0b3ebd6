#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include <cohort/data/sampler.hpp>

using namespace cohort;
using Indices = std::vector<std::size_t>;

namespace {

bool is_permutation_of_iota(const Indices& v) {
  Indices sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != i) return false;
  return true;
}

// A line-by-line transcription of torch.utils.data.DistributedSampler.__init__/__iter__ (torch
// 2.x) applied to a given list, written with list operations rather than the modulo formula the
// header uses, so that the two are independent.
struct TorchSplit {
  std::size_t num_samples, total_size;
  Indices indices;
};
TorchSplit torch_split(Indices indices, std::size_t world, std::size_t rank, bool drop_last) {
  const std::size_t len = indices.size();
  const double n = double(len), w = double(world);
  const auto num_samples =
      static_cast<std::size_t>(drop_last && len % world != 0 ? std::ceil((n - w) / w) : std::ceil(n / w));
  const std::size_t total_size = num_samples * world;
  if (!drop_last) {
    const std::size_t padding = total_size - len;
    if (padding <= len) {
      indices.insert(indices.end(), indices.begin(), indices.begin() + std::ptrdiff_t(padding));
    } else {
      Indices repeated; // indices * ceil(padding / len)
      const auto times = static_cast<std::size_t>(std::ceil(double(padding) / n));
      for (std::size_t r = 0; r < times; ++r) repeated.insert(repeated.end(), indices.begin(), indices.end());
      indices.insert(indices.end(), repeated.begin(), repeated.begin() + std::ptrdiff_t(padding));
    }
  } else {
    indices.resize(total_size);
  }
  REQUIRE(indices.size() == total_size);
  Indices mine; // indices[rank:total_size:world]
  for (std::size_t t = rank; t < total_size; t += world) mine.push_back(indices[t]);
  REQUIRE(mine.size() == num_samples);
  return {num_samples, total_size, mine};
}

} // namespace

// ---------------------------------------------------------------------------------------------
// ShuffleSampler

TEST_CASE("ShuffleSampler: every epoch is a permutation and a pure function of seed and epoch") {
  for (std::size_t n : {0u, 1u, 2u, 3u, 5u, 17u, 1000u}) {
    const ShuffleSampler a(n, 7), b(n, 7);
    for (std::uint64_t epoch = 0; epoch < 5; ++epoch) {
      const Indices v = a.indices(epoch);
      CHECK(v.size() == n);
      CHECK(is_permutation_of_iota(v));
      CHECK(v == b.indices(epoch)); // another object, same arguments: same order
      CHECK(v == a.indices(epoch)); // asking again changes nothing
    }
  }
}

TEST_CASE("ShuffleSampler: the order depends on the seed and on the epoch") {
  const std::size_t n = 1000;
  const Indices base = ShuffleSampler(n, 7).indices(3);
  const auto same_positions = [&](const Indices& other) {
    std::size_t same = 0;
    for (std::size_t i = 0; i < n; ++i) same += base[i] == other[i];
    return same;
  };
  // Two independent random permutations agree in about one position on average.
  CHECK(same_positions(ShuffleSampler(n, 7).indices(4)) < 10);
  CHECK(same_positions(ShuffleSampler(n, 8).indices(3)) < 10);
  // Not torch's seed + epoch: (seed 1, epoch 0) and (seed 0, epoch 1) are unrelated.
  const Indices s1e0 = ShuffleSampler(n, 1).indices(0), s0e1 = ShuffleSampler(n, 0).indices(1);
  CHECK(s1e0 != s0e1);
  // The order is actually shuffled.
  Indices identity(n);
  std::iota(identity.begin(), identity.end(), std::size_t{0});
  CHECK(same_positions(identity) < 10);
}

TEST_CASE("ShuffleSampler: without shuffle every epoch is the identity") {
  const ShuffleSampler s(6, 42, /*shuffle=*/false);
  CHECK(s.indices(0) == Indices{0, 1, 2, 3, 4, 5});
  CHECK(s.indices(9) == Indices{0, 1, 2, 3, 4, 5});
}

TEST_CASE("ShuffleSampler: positions are roughly uniform over 2000 epochs") {
  // Where element 0 lands, and which element lands first, in a size-10 permutation: each of the
  // 10 outcomes should occur 200 times. Pearson's chi-square with 9 degrees of freedom exceeds
  // 27.88 with probability 0.001; a biased shuffle (e.g. bound i instead of i+1) is far above.
  const std::size_t n = 10, epochs = 2000;
  for (std::uint64_t seed : {0u, 1u, 12345u}) {
    const ShuffleSampler s(n, seed);
    std::vector<double> where_zero(n, 0), first(n, 0);
    Indices v;
    for (std::uint64_t epoch = 0; epoch < epochs; ++epoch) {
      s.indices(epoch, v);
      where_zero[std::size_t(std::find(v.begin(), v.end(), std::size_t{0}) - v.begin())] += 1;
      first[v[0]] += 1;
    }
    const double expected = double(epochs) / double(n);
    double chi_zero = 0, chi_first = 0;
    for (std::size_t i = 0; i < n; ++i) {
      chi_zero += (where_zero[i] - expected) * (where_zero[i] - expected) / expected;
      chi_first += (first[i] - expected) * (first[i] - expected) / expected;
    }
    INFO("seed ", seed, ": chi-square of element 0's position ", chi_zero, ", of the first element ", chi_first);
    CHECK(chi_zero < 27.88);
    CHECK(chi_first < 27.88);
  }
}

TEST_CASE("ShuffleSampler: a reused output vector is not reallocated") {
  const ShuffleSampler s(5000, 3);
  Indices v;
  s.indices(0, v);
  const std::size_t* data = v.data();
  for (std::uint64_t epoch = 1; epoch < 4; ++epoch) {
    s.indices(epoch, v);
    CHECK(v.data() == data);
    CHECK(is_permutation_of_iota(v));
  }
}

TEST_CASE("ShuffleSampler: sizes beyond 32 bits and wrong output spans throw ValueError") {
  if constexpr (sizeof(std::size_t) > 4) {
    CHECK_NOTHROW(ShuffleSampler(ShuffleSampler::max_size, 0)); // nothing is allocated up front
    CHECK_THROWS_WITH_AS(ShuffleSampler(std::size_t{1} << 32, 0),
                         "ShuffleSampler: dataset size 4294967296 is out of range (expected 0..4294967295; "
                         "indices are drawn from 32-bit random words)",
                         ValueError);
  }
  Indices four(4);
  CHECK_THROWS_WITH_AS(ShuffleSampler(5, 0).fill(0, four),
                       "ShuffleSampler: output span has 4 elements, expected 5 (the dataset size)", ValueError);
}

TEST_CASE("uniform_below: Lemire's rejection removes the bias of plain multiply-shift") {
  // bound = 3 * 2^30: plain (x * bound) >> 32 = floor(3x / 4) hits multiples of 3 twice as
  // often (probability 1/2 instead of 1/3); with rejection each residue mod 3 has 1/3.
  const std::uint32_t bound = 0xC0000000u;
  const RandomStream rs{99, streams::shuffle(0)};
  const int draws = 30000;
  int multiples = 0, retried = 0;
  for (int i = 0; i < draws; ++i) {
    const std::uint32_t y = detail::uniform_below(rs, std::uint64_t(i), bound);
    REQUIRE(y < bound);
    multiples += y % 3 == 0;
    // The first word is rejected when the low half of x * bound is below 2^32 mod bound = 2^30.
    retried += static_cast<std::uint32_t>(std::uint64_t{rs.bits(std::uint64_t(i))} * bound) < (1u << 30);
  }
  CHECK(std::abs(double(multiples) / draws - 1.0 / 3) < 0.015);
  CHECK(std::abs(double(retried) / draws - 0.25) < 0.015); // rejections really happen (1/4 here)
  // Small bounds: every value reachable, nothing out of range.
  std::set<std::uint32_t> seen;
  for (std::uint64_t i = 0; i < 200; ++i) {
    const std::uint32_t y = detail::uniform_below(rs, i, 7);
    REQUIRE(y < 7);
    seen.insert(y);
  }
  CHECK(seen.size() == 7);
  CHECK(detail::uniform_below(rs, 5, 1) == 0);
}

// ---------------------------------------------------------------------------------------------
// DistributedSampler

TEST_CASE("DistributedSampler: without shuffle the index lists equal torch's") {
  // Printed by torch 2.x:
  //   s = torch.utils.data.DistributedSampler(range(size), num_replicas=world, rank=rank,
  //                                           shuffle=False, drop_last=drop_last)
  //   (s.num_samples, s.total_size, list(s))
  struct Case {
    std::size_t size;
    int world, rank;
    bool drop_last;
    std::size_t num_samples, total_size;
    Indices expected;
  };
  const std::vector<Case> cases = {
      {10, 3, 0, false, 4, 12, {0, 3, 6, 9}}, // size % world != 0: padded by wrapping
      {10, 3, 1, false, 4, 12, {1, 4, 7, 0}},
      {10, 3, 2, false, 4, 12, {2, 5, 8, 1}},
      {10, 3, 0, true, 3, 9, {0, 3, 6}}, // ... or cut
      {10, 3, 1, true, 3, 9, {1, 4, 7}},
      {10, 3, 2, true, 3, 9, {2, 5, 8}},
      {12, 4, 0, false, 3, 12, {0, 4, 8}}, // divisible: drop_last changes nothing
      {12, 4, 1, false, 3, 12, {1, 5, 9}},
      {12, 4, 2, false, 3, 12, {2, 6, 10}},
      {12, 4, 3, false, 3, 12, {3, 7, 11}},
      {12, 4, 0, true, 3, 12, {0, 4, 8}},
      {12, 4, 1, true, 3, 12, {1, 5, 9}},
      {12, 4, 2, true, 3, 12, {2, 6, 10}},
      {12, 4, 3, true, 3, 12, {3, 7, 11}},
      {7, 2, 0, false, 4, 8, {0, 2, 4, 6}},
      {7, 2, 1, false, 4, 8, {1, 3, 5, 0}},
      {7, 2, 0, true, 3, 6, {0, 2, 4}},
      {7, 2, 1, true, 3, 6, {1, 3, 5}},
      {5, 8, 0, false, 1, 8, {0}}, // size < world, padding 3 <= size 5
      {5, 8, 1, false, 1, 8, {1}},
      {5, 8, 2, false, 1, 8, {2}},
      {5, 8, 3, false, 1, 8, {3}},
      {5, 8, 4, false, 1, 8, {4}},
      {5, 8, 5, false, 1, 8, {0}},
      {5, 8, 6, false, 1, 8, {1}},
      {5, 8, 7, false, 1, 8, {2}},
      {3, 8, 0, false, 1, 8, {0}}, // padding 5 > size 3: the list is repeated
      {3, 8, 1, false, 1, 8, {1}},
      {3, 8, 2, false, 1, 8, {2}},
      {3, 8, 3, false, 1, 8, {0}},
      {3, 8, 4, false, 1, 8, {1}},
      {3, 8, 5, false, 1, 8, {2}},
      {3, 8, 6, false, 1, 8, {0}},
      {3, 8, 7, false, 1, 8, {1}},
      {2, 5, 0, false, 1, 5, {0}}, // padding 3 > size 2
      {2, 5, 1, false, 1, 5, {1}},
      {2, 5, 2, false, 1, 5, {0}},
      {2, 5, 3, false, 1, 5, {1}},
      {2, 5, 4, false, 1, 5, {0}},
      {1, 4, 0, false, 1, 4, {0}},
      {1, 4, 1, false, 1, 4, {0}},
      {1, 4, 2, false, 1, 4, {0}},
      {1, 4, 3, false, 1, 4, {0}},
      {3, 4, 0, true, 0, 0, {}}, // drop_last with size < world: every rank gets nothing
      {3, 4, 1, true, 0, 0, {}},
      {3, 4, 2, true, 0, 0, {}},
      {3, 4, 3, true, 0, 0, {}},
      {1, 1, 0, false, 1, 1, {0}},
      {1, 1, 0, true, 1, 1, {0}},
      {4, 4, 0, true, 1, 4, {0}},
      {4, 4, 1, true, 1, 4, {1}},
      {4, 4, 2, true, 1, 4, {2}},
      {4, 4, 3, true, 1, 4, {3}},
  };
  for (const Case& c : cases) {
    INFO("size ", c.size, ", world ", c.world, ", rank ", c.rank, ", drop_last ", c.drop_last);
    const DistributedSampler d(c.size, c.world, c.rank, {.shuffle = false, .drop_last = c.drop_last});
    CHECK(d.num_samples() == c.num_samples);
    CHECK(d.total_size() == c.total_size);
    CHECK(d.indices(0) == c.expected);
    CHECK(d.indices(5) == c.expected); // the epoch only matters when shuffling
  }
}

TEST_CASE("DistributedSampler: equals a transcription of torch's recipe for all small cases") {
  for (bool shuffle : {false, true})
    for (bool drop_last : {false, true})
      for (std::size_t size = 1; size <= 20; ++size)
        for (int world = 1; world <= 7; ++world)
          for (int rank = 0; rank < world; ++rank) {
            INFO("size ", size, ", world ", world, ", rank ", rank, ", shuffle ", shuffle, ", drop_last ", drop_last);
            const std::uint64_t seed = 11, epoch = 4;
            const DistributedSampler d(size, world, rank, {.shuffle = shuffle, .seed = seed, .drop_last = drop_last});
            const Indices input = ShuffleSampler(size, seed, shuffle).indices(epoch);
            const TorchSplit want = torch_split(input, std::size_t(world), std::size_t(rank), drop_last);
            CHECK(d.num_samples() == want.num_samples);
            CHECK(d.total_size() == want.total_size);
            CHECK(d.indices(epoch) == want.indices);
          }
}

TEST_CASE("DistributedSampler: with shuffle the ranks share one permutation and cover the dataset") {
  const std::size_t size = 103;
  const std::uint64_t seed = 5, epoch = 2;
  const Indices permutation = ShuffleSampler(size, seed).indices(epoch);
  for (bool drop_last : {false, true}) {
    INFO("drop_last ", drop_last);
    const int world = 4;
    Indices interleaved; // rank r's k-th index is element r + k*world of torch's padded list
    std::size_t total = 0;
    for (int rank = 0; rank < world; ++rank) {
      const DistributedSampler d(size, world, rank, {.seed = seed, .drop_last = drop_last});
      const Indices mine = d.indices(epoch);
      REQUIRE(mine.size() == d.num_samples());
      CHECK(d.num_samples() == (drop_last ? 25u : 26u));
      total = d.total_size();
      interleaved.resize(total);
      for (std::size_t k = 0; k < mine.size(); ++k) interleaved[std::size_t(rank) + k * std::size_t(world)] = mine[k];
    }
    // The first min(size, total) entries are the shared permutation itself: every index once.
    const std::size_t kept = std::min(size, total);
    CHECK(Indices(interleaved.begin(), interleaved.begin() + std::ptrdiff_t(kept)) ==
          Indices(permutation.begin(), permutation.begin() + std::ptrdiff_t(kept)));
    if (drop_last) {
      CHECK(total == 100); // 3 samples dropped, none repeated
      CHECK(std::set<std::size_t>(interleaved.begin(), interleaved.end()).size() == 100);
    } else {
      CHECK(total == 104); // 1 padded duplicate: the permutation's first element, as torch wraps
      CHECK(is_permutation_of_iota(Indices(interleaved.begin(), interleaved.begin() + 103)));
      CHECK(interleaved[103] == permutation[0]);
    }
  }
}

TEST_CASE("DistributedSampler: epochs and seeds change the order, the same arguments repeat it") {
  const DistributedSampler a(500, 3, 1), b(500, 3, 1), other_seed(500, 3, 1, {.seed = 1});
  CHECK(a.indices(0) == b.indices(0));
  CHECK(a.indices(7) == b.indices(7));
  CHECK(a.indices(0) != a.indices(1));
  CHECK(a.indices(0) != other_seed.indices(0));
  // Reusing the output vector: room for the permutation is allocated once.
  Indices v;
  a.indices(0, v);
  a.indices(1, v);
  const std::size_t* data = v.data();
  a.indices(2, v);
  CHECK(v.data() == data);
  CHECK(v == a.indices(2));
}

TEST_CASE("DistributedSampler: invalid arguments throw ValueError naming the value and the range") {
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 2, 3),
                       "DistributedSampler: rank 3 is out of range for world size 2 (expected 0..1)", ValueError);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 2, -1),
                       "DistributedSampler: rank -1 is out of range for world size 2 (expected 0..1)", ValueError);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 2, 2),
                       "DistributedSampler: rank 2 is out of range for world size 2 (expected 0..1)", ValueError);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, 0, 0),
                       "DistributedSampler: world size 0 is out of range (expected at least 1)", ValueError);
  CHECK_THROWS_WITH_AS(DistributedSampler(10, -2, 0),
                       "DistributedSampler: world size -2 is out of range (expected at least 1)", ValueError);
  CHECK_THROWS_WITH_AS(DistributedSampler(0, 2, 0),
                       "DistributedSampler: dataset size 0 is out of range (expected 1..4294967295; "
                       "indices are drawn from 32-bit random words)",
                       ValueError);
  if constexpr (sizeof(std::size_t) > 4) {
    CHECK_THROWS_WITH_AS(DistributedSampler(std::size_t{1} << 32, 2, 0),
                         "DistributedSampler: dataset size 4294967296 is out of range (expected 1..4294967295; "
                         "indices are drawn from 32-bit random words)",
                         ValueError);
  }
  CHECK_THROWS_AS(DistributedSampler(10, 2, 5), Error); // catchable as the common base too
}

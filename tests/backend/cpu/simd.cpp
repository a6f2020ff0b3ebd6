// The instruction-set dispatch (backend/cpu/simd.hpp). The suite runs once per path
// (tests/CMakeLists.txt: isa.avx2.all_tests and isa.generic.all_tests set COHORT_ISA); this case
// makes each run prove that the kernels took the path it asked for. Every kernel entry counts its
// calls per instruction set while cpu::isa_trace is on, and a training step of
// models A-D (convolutions, pooling, BatchNorm, GEMMs, an optimiser, 16-bit conversions) may call
// entries of the requested instruction set only.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/precision/mixed_precision.hpp>
#include <cohort/train/trainer.hpp>

#include "support/bands.hpp"
#include "support/skip.hpp"

using namespace cohort;

namespace {
using Calls = std::array<std::uint64_t, 3>; // per Isa: generic, avx2, avx512

Calls entry_calls() {
  Calls c{};
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = cpu::isa_entry_calls[i].load();
  return c;
}

/// Two optimiser steps of `Net`: forward, backward and the optimiser's element rule, in float
/// and in 16 bits (the conversions between them have their own kernels).
template <class Net, class Opt, class Precision = FullPrecision>
void train_two_steps(Opt opt) {
  const test::Bands data(16, 1);
  Trainer<Net, Opt, SingleDevice<>, Precision> t(std::move(opt), {.batch_size = 8, .max_steps = 2, .log = nullptr});
  t.fit(data, 1);
  t.evaluate(data);
}
} // namespace

TEST_CASE("COHORT_ISA: kernels run the requested instruction set's code and no other") {
  const cpu::IsaRequest request = cpu::isa_request();
  // A value that names no instruction set is ignored with a warning by the library; a test run
  // with one (a typo in CI) would silently rerun the default path, so it fails here.
  REQUIRE_MESSAGE((!request.set || request.known), "COHORT_ISA=\""
                                                       << std::string(request.text)
                                                       << "\" names no instruction set (generic, avx2, avx512)");
  const Isa want = request.set ? request.isa : cpu::detected_isa();
  if (want > cpu::detected_isa())
    COHORT_SKIP("COHORT_ISA=" << isa_name(want) << " but this CPU has " << isa_name(cpu::detected_isa()) << " only");
  REQUIRE(cpu::active_isa() == want);

  cpu::isa_trace = true;
  const Calls before = entry_calls();
  train_two_steps<models::ModelA>(Adadelta({.lr = 0.5}));
  train_two_steps<models::ModelB>(Sgd({.lr = 0.05, .momentum = 0.9}));
  train_two_steps<models::ModelC>(Adam({.lr = 1e-3}));
  train_two_steps<models::ModelD>(Adam({.lr = 1e-3}));
  train_two_steps<models::ModelB, Sgd<>, MixedPrecision<fp16>>(Sgd({.lr = 0.05}));
  train_two_steps<models::ModelC, Adam<>, MixedPrecision<bf16>>(Adam({.lr = 1e-3}));
  const Calls after = entry_calls();
  cpu::isa_trace = false;
  Calls calls{};
  for (std::size_t i = 0; i < calls.size(); ++i) calls[i] = after[i] - before[i];
  MESSAGE("kernel entries called: generic " << calls[0] << ", avx2 " << calls[1] << ", avx512 " << calls[2]);

  const auto of = [&](Isa i) { return calls[std::size_t(i)]; };
  CHECK(of(want) > 0);
  // Nothing wider than the request. Nothing narrower either, except that the AVX-512 path
  // transposes dY with the AVX2 8x8 kernel (conv2d_direct.hpp: transpose_dy).
  for (Isa other : {Isa::generic, Isa::avx2, Isa::avx512}) {
    if (other == want || (want == Isa::avx512 && other == Isa::avx2)) continue;
    CHECK_MESSAGE(of(other) == 0, isa_name(other) << " kernels ran " << of(other) << " times under " << isa_name(want));
  }
}

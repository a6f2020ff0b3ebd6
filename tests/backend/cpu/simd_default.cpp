// The instruction sets a header-only program compiles by default (backend/cpu/simd.hpp:
// compiled_isa): the compiler's target and wider. Its own program (cohort_isa_default_tests),
// built as a user's -march=native unit is, with no COHORT_CPU_* macro, so that below the target
// no path exists; ctest runs it as it is and under COHORT_ISA=generic, where the kernels must run
// the narrowest compiled path, say so once on stderr, and compute the right numbers (a dispatch
// that found no path used to run nothing and leave the output unwritten).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include <cohort/backend/cpu.hpp>

using namespace cohort;

#if defined(COHORT_CPU_ALL_ISAS) || defined(COHORT_CPU_TARGET_ISA_ONLY)
#error "tests/CMakeLists.txt builds this file with the default instruction sets"
#endif

namespace {
/// What active_isa() writes to stderr on its first call (it decides once per process).
std::string first_active_isa_stderr(Isa& isa) {
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(capture), STDERR_FILENO);
  isa = cpu::active_isa();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string text;
  std::rewind(capture);
  for (int c; (c = std::fgetc(capture)) != EOF;) text += char(c);
  std::fclose(capture);
  return text;
}
} // namespace

TEST_CASE("instruction sets (default build): the compiler's target and wider are compiled, and the kernels run one "
          "of them") {
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512}) CHECK(cpu::compiled_isa(i) == (i >= cpu::compiler_target_isa));
  CHECK(cpu::narrowest_compiled_isa == cpu::compiler_target_isa);
  CHECK(cpu::widest_compiled_isa == Isa::avx512);

  Isa isa{};
  const std::string said = first_active_isa_stderr(isa);
  const cpu::IsaRequest request = cpu::isa_request();
  REQUIRE((!request.set || request.known));
  const Isa detected = cpu::detected_isa();
  Isa want = detected;
  if (request.set && request.isa < want) want = std::max(request.isa, cpu::narrowest_compiled_isa);
  CHECK(isa == want);
  const bool clamped = request.set && request.isa < cpu::narrowest_compiled_isa;
  INFO("COHORT_ISA=" << (request.set ? request.text : "(unset)") << ", stderr: " << said);
  CHECK((said.find("compiled for " + std::string(isa_name(cpu::narrowest_compiled_isa)) + " and wider only") !=
         std::string::npos) == clamped);
  if (cpu::compiler_target_isa > Isa::generic && request.set && request.isa == Isa::generic)
    CHECK(clamped); // ctest's COHORT_ISA=generic run on a -march=native build

  // A convolution through the dispatch, against the sum written out in double.
  using G = Conv2dGeometry<3, 8, 6, 6, 3, 1, 1>;
  constexpr std::size_t batch = 2;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(batch * G::in_size), w(G::out_channels * G::patch), b(G::out_channels);
  for (auto* v : {&x, &w, &b})
    for (auto& e : *v) e = normal(gen);
  std::vector<float> y(batch * G::out_size, std::nanf(""));
  CpuContext ctx;
  ops::Conv2dKernels<Cpu>::workspace<G, float> ws;
  cpu::isa_trace = true;
  std::array<std::uint64_t, 3> before{};
  for (std::size_t i = 0; i < 3; ++i) before[i] = cpu::isa_entry_calls[i].load();
  ops::Conv2dKernels<Cpu>::forward<G>(ctx, x.data(), w.data(), b.data(), y.data(), batch, ws);
  cpu::isa_trace = false;
  CHECK(cpu::isa_entry_calls[std::size_t(isa)].load() > before[std::size_t(isa)]);
  for (Isa other : {Isa::generic, Isa::avx2, Isa::avx512})
    if (other < cpu::narrowest_compiled_isa)
      CHECK(cpu::isa_entry_calls[std::size_t(other)].load() == before[std::size_t(other)]);
  double worst = 0;
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t o = 0; o < G::out_channels; ++o)
      for (std::size_t i = 0; i < G::out_h; ++i)
        for (std::size_t j = 0; j < G::out_w; ++j) {
          double s = b[o];
          for (std::size_t c = 0; c < G::in_channels; ++c)
            for (std::size_t kh = 0; kh < 3; ++kh)
              for (std::size_t kw = 0; kw < 3; ++kw) {
                const std::ptrdiff_t r = std::ptrdiff_t(i + kh) - 1, q = std::ptrdiff_t(j + kw) - 1;
                if (r < 0 || q < 0 || r >= std::ptrdiff_t(G::in_h) || q >= std::ptrdiff_t(G::in_w)) continue;
                s += double(x[n * G::in_size + (c * G::in_h + std::size_t(r)) * G::in_w + std::size_t(q)]) *
                     double(w[((o * G::in_channels + c) * 3 + kh) * 3 + kw]);
              }
          const float got = y[n * G::out_size + (o * G::out_h + i) * G::out_w + j];
          worst = std::max(worst, std::isnan(got) ? INFINITY : std::abs(double(got) - s));
        }
  CHECK(worst < 1e-5); // 27-term sums of unit normals in float
}

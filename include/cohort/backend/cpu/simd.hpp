#pragma once
/// \file
/// Vector types and run-time instruction-set dispatch for the CPU kernels.
///
///     switch (cpu::active_isa()) { case Isa::avx512: ...; case Isa::avx2: ...; default: ... }
///
/// Kernels are written once over `vec<W>` (GCC/Clang vector extensions) as always-inline
/// templates, and instantiated inside small entry functions compiled for AVX-512, AVX2+FMA or the
/// baseline, so a binary built without -march flags still runs the widest code the machine has,
/// and a binary built on an AVX-512 machine still runs elsewhere. Paths below the compiler's own
/// target are not compiled by default (compiled_isa). `COHORT_ISA=generic|avx2|avx512` in the
/// environment narrows the choice among the compiled paths (tests use it to run every path on one
/// machine); any other value is ignored with a warning on stderr (isa_request() tells which).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.
//
// Built without -march (a user's default flags), GCC also reports it *at the end of the
// translation unit*: it checks each always-inlined helper returning a vector (load<16>, a rule
// instantiated with vec<16>, ...) when it finalises the inline functions, and a diagnostic
// pragma is looked up at the location it reports, the TU's last line, which no push/pop here
// can reach. So below AVX-512 this one note stays off for the rest of the TU. It is only the
// ABI note (no function of cohort's is called out of line with a vector argument, so the ABI
// it warns about is never used); every other warning stays the user's.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort {

/// The instruction sets the CPU kernels are compiled for.
enum class Isa : std::uint8_t { generic, avx2, avx512 };

constexpr std::string_view isa_name(Isa i) noexcept {
  return i == Isa::avx512 ? "avx512" : i == Isa::avx2 ? "avx2" : "generic";
}

namespace cpu {

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define COHORT_X86 1
#define COHORT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi2,f16c")))
#define COHORT_TARGET_AVX2 __attribute__((target("avx2,fma,bmi2,f16c")))
#else
#define COHORT_X86 0
#define COHORT_TARGET_AVX512
#define COHORT_TARGET_AVX2
#endif
#define COHORT_ALWAYS_INLINE inline __attribute__((always_inline))
// Register tiles: every loop that indexes an array of vector accumulators (its initialisation,
// its updates, its stores) carries `#pragma GCC unroll`, so the array becomes registers. One loop
// left rolled keeps the whole array in memory: GCC 12 under -mtune=skylake-avx512 (and icelake,
// rocketlake: what -march=native picks on those CPUs) did that to the direct kernel's 8 x 3 tile,
// whose init and store loops had no pragma; every FMA read and wrote the stack, 3x slower
// (measured on a Sapphire Rapids VM that GCC took for a Rocket Lake). The test
// cpu.register_tiles_stay_in_registers checks that kernel under those tunings;
// scripts/register-tiles.sh lists every kernel library function with stack traffic in its loops.
// A two-vector shuffle of 8 lanes by constant indices: GCC spells it __builtin_shuffle with an
// index vector, Clang __builtin_shufflevector with the indices as arguments. (Clang builds the
// fuzz targets, tests/fuzz/, which include this header through the optimisers.)
#if defined(__clang__)
#define COHORT_SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define COHORT_SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, ivec<8>{__VA_ARGS__})
#endif

/// What this CPU supports (checked once).
inline Isa detected_isa() noexcept {
#if COHORT_X86
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
      return Isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
    return Isa::generic;
  }();
  return isa;
#else
  return Isa::generic;
#endif
}

/// The widest instruction set the compiler flags already assume (-march=native on an AVX-512
/// machine: avx512).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
inline constexpr Isa compiler_target_isa = Isa::avx512;
#elif defined(__AVX2__) && defined(__FMA__)
inline constexpr Isa compiler_target_isa = Isa::avx2;
#else
inline constexpr Isa compiler_target_isa = Isa::generic;
#endif

/// Whether kernels are compiled for `isa`. By default every instruction set from the compiler's
/// target up: a binary built for AVX-512 (-march=native on such a machine) cannot start its
/// narrower paths on any CPU it runs on, except by COHORT_ISA, and compiling them tripled a
/// header-only unit's kernels (issue 32); one built without -march still gets all three and runs
/// the widest the machine has. COHORT_CPU_ALL_ISAS compiles all three whatever the flags (a test
/// suite that reruns itself under COHORT_ISA), COHORT_CPU_TARGET_ISA_ONLY only the target's. Like
/// COHORT_CONV_ALL_ALGORITHMS, the choice must be the same in every unit of a program; the
/// compiled kernel library exports its own (CMake option COHORT_KERNELS_ALL_ISAS).
#if defined(COHORT_CPU_ALL_ISAS) && defined(COHORT_CPU_TARGET_ISA_ONLY)
#error "cohort: define at most one of COHORT_CPU_ALL_ISAS and COHORT_CPU_TARGET_ISA_ONLY"
#endif
constexpr bool compiled_isa(Isa isa) noexcept {
#if defined(COHORT_CPU_ALL_ISAS)
  (void)isa;
  return true;
#elif defined(COHORT_CPU_TARGET_ISA_ONLY)
  return isa == compiler_target_isa;
#else
  return isa >= compiler_target_isa;
#endif
}
/// The narrowest and the widest instruction set compiled_isa() admits.
inline constexpr Isa narrowest_compiled_isa = compiled_isa(Isa::generic) ? Isa::generic
                                              : compiled_isa(Isa::avx2)  ? Isa::avx2
                                                                         : Isa::avx512;
inline constexpr Isa widest_compiled_isa = compiled_isa(Isa::avx512) ? Isa::avx512
                                           : compiled_isa(Isa::avx2) ? Isa::avx2
                                                                     : Isa::generic;

/// The instruction set of a kernel instantiated for W floats per vector.
constexpr Isa isa_of_width(int w) noexcept { return w == 16 ? Isa::avx512 : w == 8 ? Isa::avx2 : Isa::generic; }

/// Calls of the kernel entries per instruction set, counted while `isa_trace` is on (off by
/// default: an entry then costs one relaxed load, and entries are per product or per group of
/// samples, never per tile). tests/backend/cpu/simd.cpp turns it on to prove that a run under
/// COHORT_ISA executed only that path. A run-time switch, not a macro, so that one compiled
/// kernel library (compiled_kernels.hpp) serves the tests and the programs alike.
inline std::atomic<bool> isa_trace{false};
inline std::atomic<std::uint64_t> isa_entry_calls[3]{};
#define COHORT_ISA_ENTRY(isa)                                                                                          \
  (::cohort::cpu::isa_trace.load(std::memory_order_relaxed)                                                            \
       ? void(::cohort::cpu::isa_entry_calls[std::size_t(isa)].fetch_add(1, std::memory_order_relaxed))                \
       : void())

namespace detail {
/// active_isa() gave a path this unit did not compile: only a program whose units disagree about
/// the instruction sets (the macros above, or -march flags with the default rule) gets here, and
/// running nothing would leave the kernel's output unwritten.
[[noreturn, gnu::cold]] inline void isa_not_compiled(Isa isa) noexcept {
  std::fprintf(stderr,
               "cohort: the %s kernel path is not compiled in this unit: its units disagree about "
               "COHORT_CPU_ALL_ISAS / COHORT_CPU_TARGET_ISA_ONLY or -march (backend/cpu/simd.hpp)\n",
               isa_name(isa).data());
  std::abort();
}
} // namespace detail

/// Calls the one of `avx512()`, `avx2()`, `generic()` that matches `isa`, among the compiled
/// ones. For dispatchers of templated kernels: a path that is not compiled is never referenced,
/// so its kernel is not instantiated into code.
template <class A, class B, class C>
COHORT_ALWAYS_INLINE void dispatch_isa(Isa isa, A&& avx512, B&& avx2, C&& generic) {
  if constexpr (compiled_isa(Isa::avx512))
    if (isa == Isa::avx512) return avx512();
  if constexpr (compiled_isa(Isa::avx2))
    if (isa == Isa::avx2) return avx2();
  if constexpr (compiled_isa(Isa::generic)) {
    COHORT_ISA_ENTRY(Isa::generic);
    generic();
  } else {
    detail::isa_not_compiled(isa);
  }
}

/// What the COHORT_ISA environment variable asks for: nothing (unset), one of the instruction
/// sets by name, or a value that names none (`known` false).
struct IsaRequest {
  bool set = false, known = false;
  Isa isa = Isa::generic;
  const char* text = nullptr;
};
inline IsaRequest isa_request() noexcept {
  const char* env = std::getenv("COHORT_ISA");
  if (!env) return {};
  const std::string_view want(env);
  for (Isa i : {Isa::generic, Isa::avx2, Isa::avx512})
    if (want == isa_name(i)) return {true, true, i, env};
  return {true, false, Isa::generic, env};
}

/// The instruction set kernels use: the detected one among those compiled, narrowed by COHORT_ISA
/// if set. A COHORT_ISA that names no instruction set is ignored with one warning on stderr: it
/// used to select the baseline silently, so a typo in a CI job slowed every kernel down and tested
/// nothing new. One narrower than this program compiles (compiled_isa) gets the narrowest
/// compiled, also with a warning. Not an exception: this is read inside noexcept kernels, and a
/// wrong tuning knob should not stop training. (The test suite fails on both:
/// tests/backend/cpu/simd.cpp.)
inline Isa active_isa() noexcept {
  static const Isa isa = [] {
    const Isa detected = detected_isa();
    // (A CPU below the compiler's target cannot run this binary at all: no clamp matters there.)
    const Isa best = detected > widest_compiled_isa      ? widest_compiled_isa
                     : detected < narrowest_compiled_isa ? narrowest_compiled_isa
                                                         : detected;
    const IsaRequest r = isa_request();
    if (!r.set) return best;
    if (!r.known) {
      std::fprintf(stderr, "cohort: COHORT_ISA=\"%s\" is not generic, avx2 or avx512; ignored (using %s)\n", r.text,
                   isa_name(best).data());
      return best;
    }
    if (r.isa < narrowest_compiled_isa) {
      std::fprintf(stderr,
                   "cohort: COHORT_ISA=%s: this program's kernels are compiled for %s and wider only (its compiler "
                   "flags; COHORT_CPU_ALL_ISAS compiles every path); using %s\n",
                   r.text, isa_name(narrowest_compiled_isa).data(), isa_name(narrowest_compiled_isa).data());
      return narrowest_compiled_isa;
    }
    return r.isa < best ? r.isa : best;
  }();
  return isa;
}

/// W floats in one register (W = 16: AVX-512, 8: AVX2, 4: SSE/NEON).
template <int W>
struct vec_of;
template <>
struct vec_of<4> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct vec_of<8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct vec_of<16> {
  typedef float type __attribute__((vector_size(64)));
};
template <int W>
using vec = typename vec_of<W>::type;

/// W 32-bit integers (comparison masks, shuffle indices).
template <int W>
struct ivec_of;
template <>
struct ivec_of<4> {
  typedef std::int32_t type __attribute__((vector_size(16)));
};
template <>
struct ivec_of<8> {
  typedef std::int32_t type __attribute__((vector_size(32)));
};
template <>
struct ivec_of<16> {
  typedef std::int32_t type __attribute__((vector_size(64)));
};
template <int W>
using ivec = typename ivec_of<W>::type;

template <int W>
COHORT_ALWAYS_INLINE vec<W> load(const float* p) noexcept {
  vec<W> v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <int W>
COHORT_ALWAYS_INLINE void store(float* p, const vec<W>& v) noexcept {
  __builtin_memcpy(p, &v, sizeof v);
}
/// x in every lane. (Not `vec{} + x`: 0 + x is not an identity for x = -0, so the compiler
/// would emit a real addition before every broadcast.)
template <int W>
COHORT_ALWAYS_INLINE vec<W> broadcast(float x) noexcept {
  return [x]<std::size_t... I>(std::index_sequence<I...>) { return vec<W>{((void)I, x)...}; }
  (std::make_index_sequence<W>{});
}
/// Sum of the lanes in a fixed order (pairwise halves), so results are reproducible.
template <int W>
COHORT_ALWAYS_INLINE float hsum(const vec<W>& v) noexcept {
  float lanes[W];
  __builtin_memcpy(lanes, &v, sizeof v);
  for (int width = W / 2; width > 0; width /= 2)
    for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  return lanes[0];
}

/// Transposes an 8x8 block: rows of `in` (stride `ld_in`) become rows of `out` (stride `ld_out`).
/// With `mask` (same layout as `in`), elements whose mask is not > 0 become 0 on the way.
COHORT_ALWAYS_INLINE void transpose8x8(const float* __restrict in, std::size_t ld_in, float* __restrict out,
                                       std::size_t ld_out, const float* __restrict mask = nullptr) {
  using v8 = vec<8>;
  v8 r[8];
  for (int i = 0; i < 8; ++i) r[i] = load<8>(in + std::size_t(i) * ld_in);
  if (mask)
    for (int i = 0; i < 8; ++i) r[i] = load<8>(mask + std::size_t(i) * ld_in) > 0.f ? r[i] : v8{};
  v8 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = COHORT_SHUFFLE8(r[2 * i], r[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[2 * i + 1] = COHORT_SHUFFLE8(r[2 * i], r[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int h = 0; h < 2; ++h) {
    const int b = 4 * h;
    u[b + 0] = COHORT_SHUFFLE8(t[b + 0], t[b + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[b + 1] = COHORT_SHUFFLE8(t[b + 0], t[b + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[b + 2] = COHORT_SHUFFLE8(t[b + 1], t[b + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[b + 3] = COHORT_SHUFFLE8(t[b + 1], t[b + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int i = 0; i < 4; ++i) {
    store<8>(out + std::size_t(i) * ld_out, COHORT_SHUFFLE8(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11));
    store<8>(out + std::size_t(i + 4) * ld_out, COHORT_SHUFFLE8(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15));
  }
}

} // namespace cpu
} // namespace cohort

#pragma GCC diagnostic pop

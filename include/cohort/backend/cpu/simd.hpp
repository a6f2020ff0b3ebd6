#pragma once
/// \file
/// Vector types and run-time instruction-set dispatch for the CPU kernels.
///
///     switch (cpu::active_isa()) { case Isa::avx512: ...; case Isa::avx2: ...; default: ... }
///
/// Kernels are written once over `vec<W>` (GCC/Clang vector extensions) as always-inline
/// templates, and instantiated inside small entry functions compiled for AVX-512, AVX2+FMA or the
/// baseline, so a binary built without -march flags still runs the widest code the machine has,
/// and a binary built on an AVX-512 machine still runs elsewhere. `COHORT_ISA=generic|avx2|avx512`
/// in the environment narrows the choice (tests use it to run every path on one machine).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.
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

/// Whether kernels are compiled for `isa`. All three by default, so one binary runs the best
/// path of any x86-64 CPU. With COHORT_CPU_TARGET_ISA_ONLY defined, only compiler_target_isa:
/// a binary built with -march=native needs that CPU anyway, and the narrower paths would cost
/// compile time for nothing (train_mnist builds this way). COHORT_ISA cannot then choose a path.
constexpr bool compiled_isa(Isa isa) noexcept {
#ifdef COHORT_CPU_TARGET_ISA_ONLY
  return isa == compiler_target_isa;
#else
  (void)isa;
  return true;
#endif
}

/// Calls the one of `avx512()`, `avx2()`, `generic()` that matches `isa`, among the compiled
/// ones. For dispatchers of templated kernels: a path that is not compiled is never referenced,
/// so its kernel is not instantiated into code.
template <class A, class B, class C>
COHORT_ALWAYS_INLINE void dispatch_isa(Isa isa, A&& avx512, B&& avx2, C&& generic) {
  if constexpr (compiled_isa(Isa::avx512))
    if (isa == Isa::avx512) return avx512();
  if constexpr (compiled_isa(Isa::avx2))
    if (isa == Isa::avx2) return avx2();
  if constexpr (compiled_isa(Isa::generic)) generic();
}

/// The instruction set kernels use: the detected one, narrowed by COHORT_ISA if set (or, with
/// COHORT_CPU_TARGET_ISA_ONLY, the one compiled).
inline Isa active_isa() noexcept {
#ifdef COHORT_CPU_TARGET_ISA_ONLY
  return compiler_target_isa;
#endif
  static const Isa isa = [] {
    const Isa best = detected_isa();
    const char* env = std::getenv("COHORT_ISA");
    if (!env) return best;
    const std::string_view want(env);
    const Isa asked = want == "avx512" ? Isa::avx512 : want == "avx2" ? Isa::avx2 : Isa::generic;
    return asked < best ? asked : best;
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
COHORT_ALWAYS_INLINE void store(float* p, vec<W> v) noexcept {
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
COHORT_ALWAYS_INLINE float hsum(vec<W> v) noexcept {
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
  using i8 = ivec<8>;
  v8 r[8];
  for (int i = 0; i < 8; ++i) r[i] = load<8>(in + std::size_t(i) * ld_in);
  if (mask)
    for (int i = 0; i < 8; ++i) r[i] = load<8>(mask + std::size_t(i) * ld_in) > 0.f ? r[i] : v8{};
  v8 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = __builtin_shuffle(r[2 * i], r[2 * i + 1], i8{0, 8, 1, 9, 4, 12, 5, 13});
    t[2 * i + 1] = __builtin_shuffle(r[2 * i], r[2 * i + 1], i8{2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (int h = 0; h < 2; ++h) {
    const int b = 4 * h;
    u[b + 0] = __builtin_shuffle(t[b + 0], t[b + 2], i8{0, 1, 8, 9, 4, 5, 12, 13});
    u[b + 1] = __builtin_shuffle(t[b + 0], t[b + 2], i8{2, 3, 10, 11, 6, 7, 14, 15});
    u[b + 2] = __builtin_shuffle(t[b + 1], t[b + 3], i8{0, 1, 8, 9, 4, 5, 12, 13});
    u[b + 3] = __builtin_shuffle(t[b + 1], t[b + 3], i8{2, 3, 10, 11, 6, 7, 14, 15});
  }
  for (int i = 0; i < 4; ++i) {
    store<8>(out + std::size_t(i) * ld_out, __builtin_shuffle(u[i], u[i + 4], i8{0, 1, 2, 3, 8, 9, 10, 11}));
    store<8>(out + std::size_t(i + 4) * ld_out, __builtin_shuffle(u[i], u[i + 4], i8{4, 5, 6, 7, 12, 13, 14, 15}));
  }
}

} // namespace cpu
} // namespace cohort

#pragma GCC diagnostic pop

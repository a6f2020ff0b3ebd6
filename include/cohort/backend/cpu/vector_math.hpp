#pragma once
/// \file
/// exp, tanh and the normal CDF for the activation kernels, written once for a float and for a vector
/// of floats (`vec<W>`), so the vector body and the scalar tail of a loop compute the same
/// operations in the same order.
///
///     const vec<16> e = cpu::vexp(x);        // e^x in every lane, about 1 ulp
///     const vec<16> p = cpu::vnormal_cdf(x); // 0.5 * (1 + erf(x / sqrt(2))), erf's exact form
///
/// Accuracy (measured against double precision on a 1e-4 grid over [-95, 95]): exp within 1 ulp
/// wherever e^x is a normal float (subnormals on the way to 0, inf past the top); the normal CDF
/// within 1e-7 absolute everywhere, 7e-7 relative for x > -2 and 4e-6 relative in the lower tail
/// down to x = -5.65, 0 below (where it is < 8e-9: PyTorch's float 1 + erf(x / sqrt(2)) rounds to
/// 0 there too; its vectorised erf is itself an approximation within 1.5e-7 absolute). NaN stays
/// NaN in both.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cohort/backend/cpu/simd.hpp"

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu {

namespace detail {
/// The 32-bit integer type with the shape of V (int32_t for float, ivec<W> for vec<W>).
template <class V>
struct int_of {
  using type = std::int32_t;
};
template <>
struct int_of<vec<4>> {
  using type = ivec<4>;
};
template <>
struct int_of<vec<8>> {
  using type = ivec<8>;
};
template <>
struct int_of<vec<16>> {
  using type = ivec<16>;
};

/// c in every lane of V.
template <class V>
COHORT_ALWAYS_INLINE V splat(float c) noexcept {
  if constexpr (std::is_same_v<V, float>)
    return c;
  else
    return broadcast<int(sizeof(V) / sizeof(float))>(c);
}
/// Horner's rule, highest coefficient first: ((c0 x + c1) x + c2) ...
template <class V, std::size_t N>
COHORT_ALWAYS_INLINE V horner(const V& x, const float (&c)[N]) noexcept {
  V r = splat<V>(c[0]);
  for (std::size_t i = 1; i < N; ++i) r = r * x + c[i];
  return r;
}
} // namespace detail

/// e^x (Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-7 polynomial in r, times 2^n).
template <class V>
COHORT_ALWAYS_INLINE V vexp(const V& x) noexcept {
  using I = typename detail::int_of<V>::type;
  // Clamped to where e^x is a float (subnormals included); the results outside are fixed up at
  // the end. (Written as compare-and-select: a NaN fails both tests and stays NaN.)
  V c = x < -104.f ? detail::splat<V>(-104.f) : x;
  c = c > 89.f ? detail::splat<V>(89.f) : c;
  // n = round(c * log2 e): adding 1.5 * 2^23 leaves the integer in the low mantissa bits.
  constexpr float magic = 12582912.f;
  const V shifted = c * 1.44269504088896341f + magic;
  const V n = shifted - magic;
  V r = c - n * 0.693359375f; // ln 2 in two parts: n * hi is exact
  r = r - n * -2.12194440e-4f;
  constexpr float p[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  const V y = detail::horner(r, p) * (r * r) + r + 1.f;
  // 2^n as 2^n1 * 2^n2 with n1 = floor(n / 2), n2 = n - n1 (each a normal float, (k + 127) << 23
  // in bits, for n in [-150, 128]); the products are exact until the result is subnormal.
  const I ni = std::bit_cast<I>(shifted) - std::bit_cast<std::int32_t>(magic);
  const I n1 = ni >> 1, n2 = ni - n1;
  V e = (y * std::bit_cast<V>((n1 + 127) << 23)) * std::bit_cast<V>((n2 + 127) << 23);
  e = x > 88.72283905206835f ? detail::splat<V>(__builtin_inff()) : e;
  return x < -103.97208f ? detail::splat<V>(0.f) : e;
}

/// tanh(x) (Cephes' tanhf): x + x^3 P(x^2) for |x| < 0.625, else 1 - 2 / (e^(2|x|) + 1) with the
/// sign of x (1 from |x| = 44.4 on, where e^(2|x|) is inf). Within 2 ulp on [-20, 20] against
/// double precision; odd, so tanh(-0) = -0; NaN stays NaN (it takes the second branch).
template <class V>
COHORT_ALWAYS_INLINE V vtanh(const V& x) noexcept {
  using I = typename detail::int_of<V>::type;
  constexpr float p[] = {-5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f,
                         -3.33332819422e-1f};
  const I bits = std::bit_cast<I>(x);
  const V a = std::bit_cast<V>(bits & 0x7FFFFFFF);
  const V z = x * x;
  const V near = detail::horner(z, p) * z * x + x;
  const V far_abs = 1.f - 2.f / (vexp(a + a) + 1.f);
  const V far = std::bit_cast<V>(std::bit_cast<I>(far_abs) | (bits & std::int32_t(0x80000000u)));
  return a < 0.625f ? near : far;
}

/// erfc(a) for a >= 0.921875 (0 from a = 4 on, where erf(a) rounds to 1 in float):
/// exp(Q(a)), Q a degree-8 least-squares fit of log(erfc(a)) on [0.921875, 4].
template <class V>
COHORT_ALWAYS_INLINE V verfc_tail(const V& a) noexcept {
  constexpr float q[] = {1.6131018583109835e-06f, -4.557118518278003e-05f, 0.0005926017183810472f,
                         -0.004739417694509029f,  0.026362380012869835f,   -0.10997404903173447f,
                         -0.6319416165351868f,    -1.1301640272140503f,    0.0003025418263860047f};
  const V at = a > 4.f ? detail::splat<V>(4.f) : a;
  const V e = vexp(detail::horner(at, q));
  return a >= 4.f ? detail::splat<V>(0.f) : e;
}

/// Phi(x) = 0.5 * (1 + erf(x / sqrt(2))): GELU's factor and gradient. erf(z) near 0 is z * P(z^2)
/// (a degree-5 fit on |z| < 0.921875); further out Phi is taken from erfc(|z|) directly, which
/// keeps the lower tail accurate instead of cancelling 1 - erfc.
template <class V>
COHORT_ALWAYS_INLINE V vnormal_cdf(const V& x) noexcept {
  using I = typename detail::int_of<V>::type;
  constexpr float p[] = {-0.0006008737254887819f, 0.004997011739760637f, -0.026769496500492096f,
                         0.11281904578208923f,    -0.3761250376701355f,  1.1283791065216064f};
  const V z = x * 0.70710678118654752f; // x * M_SQRT1_2, as PyTorch
  const V a = std::bit_cast<V>(std::bit_cast<I>(z) & 0x7FFFFFFF);
  const V near = 0.5f + 0.5f * (z * detail::horner(z * z, p));
  const V half_erfc = 0.5f * verfc_tail(a);
  const V far = z > 0.f ? 1.f - half_erfc : half_erfc;
  // NaN: a < threshold is false and z > 0 is false, so `far` = 0.5 * erfc(NaN) = NaN.
  return a < 0.921875f ? near : far;
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop

#include "acspeed/fp16_cast.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ACSPEED_FP16_CAST_X86 1
#endif

namespace acspeed {
namespace {

constexpr uint16_t kMagnitude = 0x7fff;  // every bit but the sign
constexpr uint16_t kNonFinite = 0x7c00;  // exponent bits all ones: Inf (mantissa 0) or NaN; a larger magnitude is NaN

// The same bits as another type (std::bit_cast from C++20).
template <typename To, typename From>
To same_bits(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

float widen(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    // zero or subnormal: mantissa * 2^-24, exact in binary32 (a normal number there, so no flush-to-zero mode alters it)
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return same_bits<float>(sign | 0x7f800000u | (mantissa << 13));  // Inf, NaN (payload kept)
  // normal: rebias the exponent (15 -> 127), widen the mantissa (10 -> 23 bits)
  return same_bits<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Round to nearest even, overflow to Inf, NaN to a quiet NaN: the IEEE 754 conversion (F. Giesen's
// float_to_half_fast3_rtne).
uint16_t narrow(float value) {
  uint32_t bits = same_bits<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  bits &= 0x7fffffffu;
  if (bits >= 0x47800000u) return static_cast<uint16_t>(sign | (bits > 0x7f800000u ? 0x7e00u : 0x7c00u));  // >= 2^16
  if (bits < 0x38800000u) {  // below 2^-14: a subnormal fp16 or zero; adding 0.5 rounds the mantissa in place
    const float magic = 0.5f;
    return static_cast<uint16_t>(sign | (same_bits<uint32_t>(same_bits<float>(bits) + magic) - same_bits<uint32_t>(magic)));
  }
  const uint32_t odd = (bits >> 13) & 1u;
  bits += 0xc8000fffu + odd;  // rebias the exponent (127 -> 15) and round the 13 dropped bits, ties to even
  return static_cast<uint16_t>(sign | (bits >> 13));
}

#ifdef ACSPEED_FP16_CAST_X86
constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

__attribute__((target("avx2,f16c"))) void pack_avx2_f16c(const float* src, uint16_t* dst, size_t count,
                                                          float divisor) {
  const __m256 by = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 cast = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), kNearestEven));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_div_ps(cast, by), kNearestEven));
  }
  for (; i < count; ++i) dst[i] = narrow(widen(narrow(src[i])) / divisor);
}

__attribute__((target("avx2,f16c"))) bool unpack_avx2_f16c(const uint16_t* src, float* dst, size_t count) {
  const __m256i magnitude = _mm256_set1_epi16(static_cast<short>(kMagnitude));
  __m256i largest = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    largest = _mm256_max_epu16(largest, _mm256_and_si256(bits, magnitude));
  }
  alignas(32) uint16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), largest);
  uint16_t most = 0;
  for (uint16_t lane : lanes) most = lane > most ? lane : most;
  for (; i < count; ++i) {
    const uint16_t bits = src[i] & kMagnitude;
    most = bits > most ? bits : most;
  }
  if (most >= kNonFinite) return false;
  i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(bits));
  }
  for (; i < count; ++i) dst[i] = widen(src[i]);
  return true;
}

bool has_avx2_f16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}
#endif

}  // namespace

namespace detail {

void pack_fp16_portable(const float* src, uint16_t* dst, size_t count, float divisor) {
  for (size_t i = 0; i < count; ++i) dst[i] = narrow(widen(narrow(src[i])) / divisor);
}

bool unpack_fp16_if_finite_portable(const uint16_t* src, float* dst, size_t count) {
  uint16_t most = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint16_t bits = src[i] & kMagnitude;
    most = bits > most ? bits : most;
  }
  if (most >= kNonFinite) return false;
  for (size_t i = 0; i < count; ++i) dst[i] = widen(src[i]);
  return true;
}

}  // namespace detail

void pack_fp16(const float* src, uint16_t* dst, size_t count, float divisor) {
#ifdef ACSPEED_FP16_CAST_X86
  if (has_avx2_f16c()) return pack_avx2_f16c(src, dst, count, divisor);
#endif
  detail::pack_fp16_portable(src, dst, count, divisor);
}

bool unpack_fp16_if_finite(const uint16_t* src, float* dst, size_t count) {
#ifdef ACSPEED_FP16_CAST_X86
  if (has_avx2_f16c()) return unpack_avx2_f16c(src, dst, count);
#endif
  return detail::unpack_fp16_if_finite_portable(src, dst, count);
}

}  // namespace acspeed

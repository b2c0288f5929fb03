#include "acspeed/fp16_cast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace acspeed {
namespace {

bool is_finite_half(uint16_t bits) { return (bits & 0x7c00) != 0x7c00; }

// The value of a finite binary16 by its definition: (-1)^s * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024 when e == 0.
float reference(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return static_cast<float>((bits & 0x8000) ? -magnitude : magnitude);
}


std::vector<uint16_t> every_finite_half() {
  std::vector<uint16_t> halves;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    if (is_finite_half(static_cast<uint16_t>(bits))) halves.push_back(static_cast<uint16_t>(bits));
  }
  return halves;
}

using Unpack = bool (*)(const uint16_t*, float*, size_t);
const Unpack kImplementations[] = {&unpack_fp16_if_finite, &detail::unpack_fp16_if_finite_portable};

// fp32 inputs where a cast to fp16 can go wrong: every fp16 value, every midpoint between two neighbours
// (the ties) and the fp32 values next to it, the edges of the range (65504 is the largest fp16; from 65520
// up a value rounds to Inf), the subnormal and underflow edges, and random values over the whole range.
std::vector<float> hard_floats() {
  std::vector<float> floats;
  const auto halves = every_finite_half();
  for (uint16_t half : halves) floats.push_back(reference(half));
  for (size_t i = 0; i + 1 < halves.size(); ++i) {
    const float low = reference(halves[i]), high = reference(halves[i + 1]);
    if ((low < 0) != (high < 0) || std::abs(high) < std::abs(low)) continue;  // across zero or the sign boundary
    const float middle = low + (high - low) / 2;  // exact: fp16 neighbours differ by a power of two times 2^-24
    floats.insert(floats.end(), {middle, std::nextafter(middle, low), std::nextafter(middle, high)});
  }
  for (float edge : {65504.0f, 65519.996f, 65520.0f, 65536.0f, 1e30f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1p-26f,
                     0x1p-14f, 0x1.ffcp-15f, 1e-30f, 0x1p-149f, 0.0f, -0.0f, INFINITY, -INFINITY}) {
    floats.insert(floats.end(), {edge, -edge});
  }
  std::mt19937 random(39);  // every binary32 exponent, subnormals included, both signs
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-150, 127);
  while (floats.size() < 1'000'000) {
    const float value = std::ldexp(mantissa(random), exponent(random));
    floats.push_back(floats.size() % 2 ? value : -value);
  }
  return floats;
}

TEST(Fp16Cast, PackRoundsAsTheVectorUnitsDoForEveryHardInputAndDivisor) {
  // The vectorised pack is the CPU's own conversions (F16C, as torch's vectorised casts); the portable one
  // must give the same bits (tests/python/test_fp16_cast.py compares pack_fp16 with torch itself).
  const auto floats = hard_floats();
  for (float divisor : {1.0f, 2.0f, 3.0f, 7.0f, 8.0f, 64.0f, 1000.0f}) {
    std::vector<uint16_t> fast(floats.size()), portable(floats.size());
    pack_fp16(floats.data(), fast.data(), floats.size(), divisor);
    detail::pack_fp16_portable(floats.data(), portable.data(), floats.size(), divisor);
    for (size_t i = 0; i < floats.size(); ++i) {
      ASSERT_EQ(fast[i], portable[i]) << "input " << std::hexfloat << floats[i] << " divided by " << divisor;
    }
  }
}

TEST(Fp16Cast, PackCastsThenDividesRoundingTwice) {
  std::vector<float> src = {65504.0f, 65520.0f, -65520.0f, 3.0f, 1.0f, 0x1p-24f, 0.0f, -0.0f, 2049.0f};
  std::vector<uint16_t> dst(src.size());
  for (auto pack : {&pack_fp16, &detail::pack_fp16_portable}) {
    pack(src.data(), dst.data(), src.size(), 2.0f);
    // 65504/2 = 32752; 65520 overflows to Inf before the division, Inf/2 = Inf; 3/2 = 1.5; 2^-24/2 ties to 0;
    // 2049 is a tie between 2048 and 2050 in fp16: to even, 2048, then / 2 = 1024.
    EXPECT_EQ(dst, (std::vector<uint16_t>{0x77ff, 0x7c00, 0xfc00, 0x3e00, 0x3800, 0x0000, 0x0000, 0x8000, 0x6400}));
  }
}

TEST(Fp16Cast, UnpackWidensEveryFiniteHalfExactlyIncludingSubnormalsAndSignedZeros) {
  const auto halves = every_finite_half();
  ASSERT_EQ(halves.size(), 2u * 31 * 1024);
  for (Unpack unpack : kImplementations) {
    std::vector<float> out(halves.size(), 7.0f);
    ASSERT_TRUE(unpack(halves.data(), out.data(), halves.size()));
    for (size_t i = 0; i < halves.size(); ++i) {
      const float expected = reference(halves[i]);
      ASSERT_EQ(out[i], expected) << "half bits 0x" << std::hex << halves[i];
      ASSERT_EQ(std::signbit(out[i]), std::signbit(expected)) << "half bits 0x" << std::hex << halves[i];
    }
  }
}

TEST(Fp16Cast, UnpackAnyNanOrInfAnywhereLeavesTheDestinationUntouched) {
  // Lengths around the vector widths (8 and 16 halves), the bad value at the start, in the body and in the tail.
  for (Unpack unpack : kImplementations) {
    for (size_t count : {1u, 7u, 8u, 15u, 16u, 17u, 33u, 1000u}) {
      for (uint16_t bad : {uint16_t{0x7c00}, uint16_t{0xfc00}, uint16_t{0x7e00}, uint16_t{0x7c01}, uint16_t{0xffff}}) {
        for (size_t at : {size_t{0}, count / 2, count - 1}) {
          std::vector<uint16_t> halves(count, 0x3c00);  // 1.0
          halves[at] = bad;
          std::vector<float> out(count, -3.0f);
          EXPECT_FALSE(unpack(halves.data(), out.data(), count)) << count << " " << bad << " " << at;
          for (float value : out) ASSERT_EQ(value, -3.0f);
        }
      }
    }
  }
}

TEST(Fp16Cast, UnpackLargestFiniteHalvesAndOddLengthsAreWidened) {
  // 65504 (0x7bff) is finite: the check must not take the largest finite magnitude for an overflow.
  for (Unpack unpack : kImplementations) {
    for (size_t count : {0u, 1u, 9u, 16u, 23u, 40u}) {
      std::vector<uint16_t> halves(count);
      for (size_t i = 0; i < count; ++i) halves[i] = (i % 2) ? 0x7bff : 0xfbff;
      std::vector<float> out(count, 0.0f);
      ASSERT_TRUE(unpack(halves.data(), out.data(), count));
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(out[i], (i % 2) ? 65504.0f : -65504.0f);
    }
  }
}

}  // namespace
}  // namespace acspeed

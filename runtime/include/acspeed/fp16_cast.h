// The two casts of an fp16-compressed bucket (the comm hook's fp16 compression, python/acspeed/engine/),
// each one pass over the bucket:
//  - pack: the fp32 bucket into its fp16 copy, divided by the world size, as torch's fp16_compress_hook
//    computes it (`buffer.to(torch.float16).div_(world_size)`: a cast, then a division in fp32 rounded
//    back to fp16), bit for bit, where torch makes two passes;
//  - unpack: the reduced fp16 copy widened into the fp32 bucket, unless it holds a NaN or an Inf, which
//    the hook's non-finite fallback must see with the bucket's own gradients still in place (it reduces
//    them again uncompressed). The check reads the fp16 bits (a value is NaN or Inf when its exponent
//    bits are all ones), so it needs no float pass of its own.
// Vectorised (AVX2 and F16C) on x86-64 CPUs that have them, chosen once at run time; portable code
// elsewhere. Every rounding is to nearest, ties to even, as IEEE 754's default and torch's casts.
#pragma once

#include <cstddef>
#include <cstdint>

namespace acspeed {

// dst[i] = fp16(fp32(fp16(src[i])) / divisor) for `count` values: binary32 `src`, the bits of binary16 `dst`.
void pack_fp16(const float* src, uint16_t* dst, size_t count, float divisor);

// Widens `count` IEEE 754 binary16 values (their bits) at `src` into binary32 at `dst`, exactly (every
// binary16 value, subnormals included, is a binary32 value), when none of them is a NaN or an Inf;
// otherwise writes nothing. Returns whether it widened. `src` and `dst` must not overlap.
bool unpack_fp16_if_finite(const uint16_t* src, float* dst, size_t count);

namespace detail {
// The portable implementations (what the two run where the vectorised ones are not available); the
// tests compare them with the vectorised ones.
void pack_fp16_portable(const float* src, uint16_t* dst, size_t count, float divisor);
bool unpack_fp16_if_finite_portable(const uint16_t* src, float* dst, size_t count);
}  // namespace detail

}  // namespace acspeed

/*
 * half.h - portable scalar conversions between fp32 and fp16 / bf16.
 *
 * Rounding is to nearest, ties to even, with subnormals and signed zeros
 * kept and NaNs made quiet: the results equal the F16C instructions, so
 * every kernel variant stores the same bits (tests/test_internal.c checks
 * it against the compiler's _Float16).
 */
#ifndef SHEMB_HALF_H
#define SHEMB_HALF_H

#include <stdint.h>
#include <string.h>

#include "lib/hd.h"

SHEMB_HD static inline uint32_t shemb__f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

SHEMB_HD static inline float shemb__bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

SHEMB_HD static inline float shemb__bf16_to_f32(uint16_t h)
{
	return shemb__bits_f32((uint32_t)h << 16);
}

SHEMB_HD static inline uint16_t shemb__f32_to_bf16(float f)
{
	uint32_t u = shemb__f32_bits(f);
	uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t quiet_nan = (u >> 16) | 0x40u;

	return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

SHEMB_HD static inline float shemb__f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0x1f) /* infinity, or a NaN made quiet as F16C does */
		return shemb__bits_f32(sign | 0x7f800000u | (man << 13) |
				       (man ? 0x400000u : 0));
	if (exp == 0) /* zero or subnormal: man * 2^-24, exact in fp32 */
		return shemb__bits_f32(sign |
				       shemb__f32_bits((float)man * 0x1p-24f));
	return shemb__bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* Round the integer m / 2^shift to nearest, ties to even. */
SHEMB_HD static inline uint32_t shemb__round_shift(uint32_t m,
						   unsigned shift)
{
	uint32_t q = m >> shift;
	uint32_t rem = m & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);

	if (rem > half || (rem == half && (q & 1u)))
		q++;
	return q;
}

SHEMB_HD static inline uint16_t shemb__f32_to_f16(float f)
{
	uint32_t u = shemb__f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;
	uint32_t e = a >> 23;

	if (a > 0x7f800000u) /* NaN: keep the top payload bits, quiet */
		return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu);
	if (a >= 0x477ff000u) /* 65520 and up round to infinity */
		return sign | 0x7c00u;
	if (a < 0x38800000u) { /* below 2^-14: subnormal result or zero */
		unsigned shift = 126 - e;

		if (e == 0 || shift > 24)
			return sign;
		return sign | (uint16_t)shemb__round_shift(
				      (a & 0x7fffffu) | 0x800000u, shift);
	}
	/* normal; a carry out of the mantissa correctly bumps the exponent */
	return sign | (uint16_t)(((e - 112) << 10) +
				 shemb__round_shift(a & 0x7fffffu, 13));
}

#endif

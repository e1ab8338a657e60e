/*
 * kernels_avx2.c - the kernels built for AVX2 + F16C (compiled with
 * -mavx2 -mf16c; only called after the CPU was checked for them).
 */
#include "config.h"

#include <immintrin.h>
#include <stdint.h>

#include "cpu/half.h"

static void load_f16(const uint16_t *restrict src, float *restrict dst,
		     int64_t n)
{
	int64_t c = 0;

	for (; c + 8 <= n; c += 8)
		_mm256_storeu_ps(dst + c, _mm256_cvtph_ps(_mm_loadu_si128(
						  (const __m128i *)(src + c))));
	for (; c < n; c++)
		dst[c] = shemb__f16_to_f32(src[c]);
}

static void store_f16(uint16_t *restrict dst, const float *restrict src,
		      int64_t n)
{
	int64_t c = 0;

	for (; c + 8 <= n; c += 8)
		_mm_storeu_si128((__m128i *)(dst + c),
				 _mm256_cvtps_ph(_mm256_loadu_ps(src + c),
						 _MM_FROUND_TO_NEAREST_INT |
							 _MM_FROUND_NO_EXC));
	for (; c < n; c++)
		dst[c] = shemb__f32_to_f16(src[c]);
}

#define KERNELS_NAME shemb__kernels_avx2
#define KERNELS_ISA "avx2"
#include "cpu/kernels_impl.h"

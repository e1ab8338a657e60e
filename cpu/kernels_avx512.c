/*
 * kernels_avx512.c - the kernels built for AVX-512 (F, BW, VL, DQ) + F16C
 * (compiled with those -m flags; only called after the CPU was checked).
 */
#include "config.h"

#include <immintrin.h>
#include <stdint.h>

#include "cpu/half.h"

static void load_f16(const uint16_t *restrict src, float *restrict dst,
		     int64_t n)
{
	int64_t c = 0;

	for (; c + 16 <= n; c += 16)
		_mm512_storeu_ps(dst + c, _mm512_cvtph_ps(_mm256_loadu_si256(
						  (const __m256i *)(src + c))));
	for (; c < n; c++)
		dst[c] = shemb__f16_to_f32(src[c]);
}

static void store_f16(uint16_t *restrict dst, const float *restrict src,
		      int64_t n)
{
	int64_t c = 0;

	for (; c + 16 <= n; c += 16)
		_mm256_storeu_si256((__m256i *)(dst + c),
				    _mm512_cvtps_ph(_mm512_loadu_ps(src + c),
						    _MM_FROUND_TO_NEAREST_INT |
							    _MM_FROUND_NO_EXC));
	for (; c < n; c++)
		dst[c] = shemb__f32_to_f16(src[c]);
}

#define KERNELS_NAME shemb__kernels_avx512
#define KERNELS_ISA "avx512"
#include "cpu/kernels_impl.h"

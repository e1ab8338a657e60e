/*
 * kernels_generic.c - the kernels for any CPU (baseline ISA).
 */
#include "config.h"

#include <stdint.h>

#include "cpu/half.h"

static void load_f16(const uint16_t *restrict src, float *restrict dst,
		     int64_t n)
{
	for (int64_t c = 0; c < n; c++)
		dst[c] = shemb__f16_to_f32(src[c]);
}

static void store_f16(uint16_t *restrict dst, const float *restrict src,
		      int64_t n)
{
	for (int64_t c = 0; c < n; c++)
		dst[c] = shemb__f32_to_f16(src[c]);
}

#define KERNELS_NAME shemb__kernels_generic
#define KERNELS_ISA "generic"
#include "cpu/kernels_impl.h"

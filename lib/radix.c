/*
 * radix.c - stable LSD radix sort of 64-bit keys on some of their bits.
 * Eleven bits a pass: the counts fit in the first-level cache, and keys of
 * up to 33 bits take three passes.  A pass in which every key has the same
 * digit moves nothing.
 */
#include "lib/radix.h"

#include <stdlib.h>
#include <string.h>

#include "shemb.h"

#define RADIX_BITS 11
#define RADIX (1 << RADIX_BITS)

/* Counts of each digit turned into write offsets; 1 when one digit has
 * every key. */
static int offsets(uint32_t *count, int64_t n)
{
	uint32_t sum = 0;

	for (int d = 0; d < RADIX; d++) {
		uint32_t c = count[d];

		if (c == (uint64_t)n)
			return 1;
		count[d] = sum;
		sum += c;
	}
	return 0;
}

int shemb__radix_sort(uint64_t **keys, int64_t n, int lo, int hi)
{
	uint32_t *count;
	uint64_t *tmp;

	if (n < 2 || lo >= hi)
		return 0;
	if ((uint64_t)n > UINT32_MAX)
		return SHEMB_ENOMEM; /* the counts are 32-bit */
	count = malloc(RADIX * sizeof(*count));
	tmp = malloc((size_t)n * sizeof(*tmp));
	if (!count || !tmp) {
		free(count);
		free(tmp);
		return SHEMB_ENOMEM;
	}
	for (int shift = lo; shift < hi; shift += RADIX_BITS) {
		const uint64_t *src = *keys;
		uint64_t *dst = tmp, mask = RADIX - 1;

		if (hi - shift < RADIX_BITS)
			mask = (UINT64_C(1) << (hi - shift)) - 1;
		memset(count, 0, RADIX * sizeof(*count));
		for (int64_t k = 0; k < n; k++)
			count[(src[k] >> shift) & mask]++;
		if (offsets(count, n))
			continue;
		for (int64_t k = 0; k < n; k++)
			dst[count[(src[k] >> shift) & mask]++] = src[k];
		tmp = *keys;
		*keys = dst;
	}
	free(count);
	free(tmp);
	return 0;
}

/*
 * radix.h - a stable LSD radix sort of 64-bit keys on a range of their
 * bits, for the orderings a step needs on one thread (plan.c has the
 * parallel one of the ids).
 */
#ifndef SHEMB_RADIX_H
#define SHEMB_RADIX_H

#include <stdint.h>

/* Bits needed to write max_value (0 for 0). */
static inline int shemb__bits_for(uint64_t max_value)
{
	int bits = 0;

	while (bits < 64 && (max_value >> bits))
		bits++;
	return bits;
}

/*
 * Order keys[0 .. n) by bits [lo, hi), keeping the order of keys that
 * are equal there; tmp holds n keys too.  The sorted keys end in *keys
 * (the two buffers may have traded places).  SHEMB_ENOMEM or 0.
 */
int shemb__radix_sort(uint64_t **keys, uint64_t **tmp, int64_t n, int lo,
		      int hi);

#endif

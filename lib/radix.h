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
 * Order the n keys of *keys, a buffer from malloc(), by bits [lo, hi),
 * keeping the order of keys that are equal there.  The sorted keys end in
 * *keys, which may be another buffer from malloc() (the first one is then
 * freed).  SHEMB_ENOMEM, with *keys as it was, or 0.
 */
int shemb__radix_sort(uint64_t **keys, int64_t n, int lo, int hi);

#endif

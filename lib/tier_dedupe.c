/*
 * tier_dedupe.c - the distinct rows of a call that did not plan them, by
 * hashing: one pass, in a table the size of the call's rows, with no sort.
 */
#include "lib/tier_int.h"

#include <stdlib.h>

#include "lib/rowinit.h"

int64_t shemb__dedupe(int64_t n, const int64_t *rows, int64_t *d,
		      int32_t *at)
{
	uint64_t cap = 16, mask;
	int64_t *keys, nd = 0;
	int32_t *idx;

	while (cap < 2 * (uint64_t)n)
		cap *= 2;
	mask = cap - 1;
	keys = malloc(cap * sizeof(*keys));
	idx = malloc(cap * sizeof(*idx));
	if (!keys || !idx) {
		free(keys);
		free(idx);
		return -1;
	}
	for (uint64_t i = 0; i < cap; i++)
		keys[i] = -1;
	for (int64_t i = 0; i < n; i++) {
		uint64_t h = shemb__mix64((uint64_t)rows[i]) & mask;

		while (keys[h] >= 0 && keys[h] != rows[i])
			h = (h + 1) & mask;
		if (keys[h] < 0) {
			keys[h] = rows[i];
			idx[h] = (int32_t)nd;
			d[nd++] = rows[i];
		}
		if (at)
			at[i] = idx[h];
	}
	free(keys);
	free(idx);
	return nd;
}

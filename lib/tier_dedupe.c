/*
 * tier_dedupe.c - the distinct rows of a call that did not plan them, by
 * hashing: one pass, in a row map the size of the call's rows, with no
 * sort.
 */
#include "lib/tier_int.h"

struct seen {
	int64_t row;
	int32_t idx;            /* its place in the distinct rows */
};

int64_t shemb__dedupe(int64_t n, const int64_t *rows, int64_t *d,
		      int32_t *at)
{
	struct shemb__rowmap m;
	int64_t nd = 0;

	if (shemb__rowmap_init(&m, sizeof(struct seen), (uint64_t)n))
		return -1;
	for (int64_t i = 0; i < n; i++) {
		struct seen *s = shemb__rowmap_find(&m, rows[i]);

		if (!s) {
			s = shemb__rowmap_add(&m, rows[i]);
			s->idx = (int32_t)nd;
			d[nd++] = rows[i];
		}
		if (at)
			at[i] = s->idx;
	}
	shemb__rowmap_free(&m);
	return nd;
}

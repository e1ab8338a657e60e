/*
 * rowmap.h - records keyed by a row id, in one open-addressing table:
 * linear probing, and deletion that shifts later records back, so that
 * there are no tombstones.  Each record starts with its int64_t row (-1:
 * empty); what follows is the user's.  The device tier keeps its
 * row-to-slot index and the announced steps' occurrences in one, and a
 * call's distinct rows are found with one.
 */
#ifndef SHEMB_ROWMAP_H
#define SHEMB_ROWMAP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/rowinit.h"

struct shemb__rowmap {
	char *rec;              /* mask + 1 records of size bytes */
	size_t size;
	uint64_t mask;
	uint64_t count;
};

/* Room for n records at half load at most; 0 or SHEMB_ENOMEM. */
int shemb__rowmap_init(struct shemb__rowmap *m, size_t size, uint64_t n);
void shemb__rowmap_free(struct shemb__rowmap *m);
/* Grow, keeping the records, so that `more` can be added; 0 or
 * SHEMB_ENOMEM (the map unchanged). */
int shemb__rowmap_reserve(struct shemb__rowmap *m, uint64_t more);
/* The record of row, which must be absent, its user part uninitialised;
 * the room must be there (init or reserve). */
void *shemb__rowmap_add(struct shemb__rowmap *m, int64_t row);
void shemb__rowmap_del(struct shemb__rowmap *m, void *rec);

static inline int64_t *shemb__rowmap_rec(const struct shemb__rowmap *m,
					 uint64_t i)
{
	return (int64_t *)(m->rec + i * m->size);
}

static inline uint64_t shemb__rowmap_home(const struct shemb__rowmap *m,
					  int64_t row)
{
	return shemb__mix64((uint64_t)row) & m->mask;
}

/* The record of row, or NULL. */
static inline void *shemb__rowmap_find(const struct shemb__rowmap *m,
				       int64_t row)
{
	for (uint64_t i = shemb__rowmap_home(m, row);; i = (i + 1) & m->mask) {
		int64_t *r = shemb__rowmap_rec(m, i);

		if (*r == row)
			return r;
		if (*r < 0)
			return NULL;
	}
}

/* Start loading row's first probe: loops over rows touch the one
 * SHEMB__ROWMAP_AHEAD places ahead, since a map is often larger than the
 * caches and the misses then overlap. */
#define SHEMB__ROWMAP_AHEAD 8
static inline void shemb__rowmap_touch(const struct shemb__rowmap *m,
				       int64_t row)
{
	__builtin_prefetch(shemb__rowmap_rec(m, shemb__rowmap_home(m, row)));
}

#endif

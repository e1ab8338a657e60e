/*
 * rowmap.c - growing and deleting in the open-addressing row maps.
 */
#include "lib/rowmap.h"

#include <stdlib.h>
#include <string.h>

#include "shemb.h"

static int alloc_table(struct shemb__rowmap *m, uint64_t n)
{
	uint64_t cap = 16;

	while (cap < 2 * n)
		cap *= 2;
	m->rec = malloc(cap * m->size);
	if (!m->rec)
		return SHEMB_ENOMEM;
	m->mask = cap - 1;
	m->count = 0;
	for (uint64_t i = 0; i < cap; i++)
		*shemb__rowmap_rec(m, i) = -1;
	return 0;
}

int shemb__rowmap_init(struct shemb__rowmap *m, size_t size, uint64_t n)
{
	m->size = size;
	return alloc_table(m, n);
}

void shemb__rowmap_free(struct shemb__rowmap *m)
{
	free(m->rec);
	m->rec = NULL;
}

void *shemb__rowmap_add(struct shemb__rowmap *m, int64_t row)
{
	uint64_t i = shemb__rowmap_home(m, row);
	int64_t *r;

	while (*(r = shemb__rowmap_rec(m, i)) >= 0)
		i = (i + 1) & m->mask;
	*r = row;
	m->count++;
	return r;
}

int shemb__rowmap_reserve(struct shemb__rowmap *m, uint64_t more)
{
	struct shemb__rowmap old = *m;

	if (2 * (m->count + more) <= m->mask + 1)
		return 0;
	if (alloc_table(m, m->count + more)) {
		*m = old;
		return SHEMB_ENOMEM;
	}
	for (uint64_t i = 0; i <= old.mask; i++) {
		int64_t *r = shemb__rowmap_rec(&old, i);

		if (*r >= 0)
			memcpy(shemb__rowmap_add(m, *r), r, m->size);
	}
	free(old.rec);
	return 0;
}

/* The record at i may move into the hole at h unless its home lies
 * cyclically in (h, i]. */
void shemb__rowmap_del(struct shemb__rowmap *m, void *rec)
{
	uint64_t h = (uint64_t)((char *)rec - m->rec) / m->size;

	for (uint64_t i = (h + 1) & m->mask; *shemb__rowmap_rec(m, i) >= 0;
	     i = (i + 1) & m->mask) {
		int64_t *r = shemb__rowmap_rec(m, i);
		uint64_t home = shemb__rowmap_home(m, *r);

		if (((i - home) & m->mask) >= ((i - h) & m->mask)) {
			memcpy(shemb__rowmap_rec(m, h), r, m->size);
			h = i;
		}
	}
	*shemb__rowmap_rec(m, h) = -1;
	m->count--;
}

/*
 * spares.h - a few records kept for when the allocator has none, so that
 * a failure path that must still run (telling the other ranks, noting a
 * held buffer, making a request) takes one instead of failing too.
 *
 * The caller holds whatever lock guards the list.  A record is at least
 * a pointer long: while spare, its first bytes link it to the next.
 */
#ifndef SHEMB_SPARES_H
#define SHEMB_SPARES_H

#include <stdlib.h>
#include <string.h>

#include "shemb.h"

struct shemb__spares {
	void *head;
	int n;
};

/* A spare of size bytes, zeroed; NULL if none is left. */
static inline void *shemb__spare_take(struct shemb__spares *s, size_t size)
{
	void *p = s->head;

	if (p) {
		s->head = *(void **)p;
		s->n--;
		memset(p, 0, size);
	}
	return p;
}

/* size bytes, zeroed: from the allocator, else a spare; NULL if neither */
static inline void *shemb__spare_alloc(struct shemb__spares *s, size_t size)
{
	void *p = calloc(1, size);

	return p ? p : shemb__spare_take(s, size);
}

/* p done with: kept as a spare while there are fewer than want */
static inline void shemb__spare_free(struct shemb__spares *s, void *p,
				     int want)
{
	if (!p)
		return;
	if (s->n >= want) {
		free(p);
		return;
	}
	*(void **)p = s->head;
	s->head = p;
	s->n++;
}

/* Spares of size bytes made up to want: 0, or SHEMB_ENOMEM short of it. */
static inline int shemb__spares_fill(struct shemb__spares *s, size_t size,
				     int want)
{
	while (s->n < want) {
		void *p = malloc(size);

		if (!p)
			return SHEMB_ENOMEM;
		shemb__spare_free(s, p, want);
	}
	return 0;
}

static inline void shemb__spares_drop(struct shemb__spares *s)
{
	while (s->head) {
		void *p = s->head;

		s->head = *(void **)p;
		free(p);
	}
	s->n = 0;
}

#endif

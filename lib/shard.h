/*
 * shard.h - where each row of a table lives: which rank owns it, and at
 * which local row and columns of that rank's store.
 *
 * Row-wise tables place row id at p = perm(id): rank p % world, local row
 * p / world.  perm is a keyed bijection of [0, rows) (multiply-xorshift
 * rounds on the next power of two, walked back into range), so runs of
 * ids spread over the ranks and every rank holds the same number of rows
 * within one.  Header-only: the kernels that make initial rows (and a
 * device compiler) map local rows back to ids with it.
 */
#ifndef SHEMB_SHARD_H
#define SHEMB_SHARD_H

#include <stdbool.h>
#include <stdint.h>

#include "shemb.h"

struct shemb__shard {
	int kind;            /* enum shemb_shard, resolved: never AUTO */
	int world, rank;
	int owner;           /* SHARD_TABLE: the rank that holds it */
	int64_t rows;        /* the table's */
	int dim;             /* the table's */
	int col0, ncols;     /* this rank's columns of each row it holds */
	int64_t local_rows;  /* rows of this rank's store */
	/* SHARD_ROW with world > 1: the permutation */
	int bits;
	uint64_t key;
};

#define SHEMB__PERM_ROUNDS 3

static const uint64_t shemb__perm_mul[SHEMB__PERM_ROUNDS] = {
	0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull
};

static inline uint64_t shemb__perm_mask(const struct shemb__shard *s)
{
	return s->bits >= 64 ? ~0ull : (1ull << s->bits) - 1;
}

/* One pass of the bijection of [0, 2^bits). */
static inline uint64_t shemb__perm_once(const struct shemb__shard *s,
					uint64_t x)
{
	uint64_t mask = shemb__perm_mask(s);
	int sh = (s->bits + 1) / 2;

	x = (x + s->key) & mask;
	for (int r = 0; r < SHEMB__PERM_ROUNDS; r++) {
		x = (x * shemb__perm_mul[r]) & mask;
		x ^= x >> sh;
	}
	return x;
}

/* The inverse of an odd number modulo 2^64 (Newton's iteration). */
static inline uint64_t shemb__odd_inverse(uint64_t m)
{
	uint64_t x = m;

	for (int i = 0; i < 6; i++)
		x *= 2 - m * x;
	return x;
}

static inline uint64_t shemb__perm_undo_once(const struct shemb__shard *s,
					     uint64_t y)
{
	uint64_t mask = shemb__perm_mask(s);
	int sh = (s->bits + 1) / 2;

	for (int r = SHEMB__PERM_ROUNDS - 1; r >= 0; r--) {
		uint64_t x = y;

		for (int k = sh; k < s->bits; k += sh)
			x = y ^ (x >> sh); /* undo x ^= x >> sh */
		y = (x * shemb__odd_inverse(shemb__perm_mul[r])) & mask;
	}
	return (y - s->key) & mask;
}

/* Cycle walking: a bijection of [0, 2^bits) restricted to [0, rows). */
static inline int64_t shemb__perm(const struct shemb__shard *s, int64_t id)
{
	uint64_t p = shemb__perm_once(s, (uint64_t)id);

	while (p >= (uint64_t)s->rows)
		p = shemb__perm_once(s, p);
	return (int64_t)p;
}

static inline int64_t shemb__unperm(const struct shemb__shard *s, int64_t p)
{
	uint64_t id = shemb__perm_undo_once(s, (uint64_t)p);

	while (id >= (uint64_t)s->rows)
		id = shemb__perm_undo_once(s, id);
	return (int64_t)id;
}

static inline bool shemb__shard_permutes(const struct shemb__shard *s)
{
	return s->kind == SHEMB_SHARD_ROW && s->world > 1;
}

/* The rank holding row id; -1 when every rank holds (part of) it. */
static inline int shemb__shard_owner(const struct shemb__shard *s, int64_t id)
{
	switch (s->kind) {
	case SHEMB_SHARD_ROW:
		return shemb__shard_permutes(s)
			       ? (int)(shemb__perm(s, id) % s->world)
			       : 0;
	case SHEMB_SHARD_TABLE:
		return s->owner;
	default:
		return -1;
	}
}

/* Row id's owner (as shemb__shard_owner) and local row (as
 * shemb__shard_local), the permutation taken once. */
static inline void shemb__shard_place(const struct shemb__shard *s,
				      int64_t id, int *owner, int64_t *local)
{
	int64_t p;

	if (!shemb__shard_permutes(s)) {
		*owner = shemb__shard_owner(s, id);
		*local = id;
		return;
	}
	p = shemb__perm(s, id);
	*local = p / s->world;
	*owner = (int)(p - *local * s->world);
}

/* Row id's local row on the rank that holds it. */
static inline int64_t shemb__shard_local(const struct shemb__shard *s,
					 int64_t id)
{
	return shemb__shard_permutes(s) ? shemb__perm(s, id) / s->world : id;
}

/* The id of local row `local` of this rank. */
static inline int64_t shemb__shard_global(const struct shemb__shard *s,
					  int64_t local)
{
	return shemb__shard_permutes(s)
		       ? shemb__unperm(s, local * s->world + s->rank)
		       : local;
}

/* Rank r's columns under SHARD_COLUMN (all columns otherwise). */
/* The rows rank r holds of a row-wise table of rows rows over world
 * ranks. */
static inline int64_t shemb__shard_row_count(int64_t rows, int world, int r)
{
	return rows > r ? (rows - r + world - 1) / world : 0;
}

static inline void shemb__shard_columns(const struct shemb__shard *s, int r,
					int *col0, int *ncols)
{
	int base, extra;

	if (s->kind != SHEMB_SHARD_COLUMN) {
		*col0 = 0;
		*ncols = s->dim;
		return;
	}
	base = s->dim / s->world;
	extra = s->dim % s->world;
	*col0 = r * base + (r < extra ? r : extra);
	*ncols = base + (r < extra);
}

#endif

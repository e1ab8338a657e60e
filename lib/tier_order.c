/*
 * tier_order.c - the device tier's row-to-slot index and eviction order.
 *
 * Both are sized by the slots, not by the table, so a tier over a table of
 * billions of rows costs memory in proportion to what it caches, and
 * every operation on them is O(1) (the index: expected).
 */
#include "lib/tier_int.h"

#include <stdlib.h>
#include <string.h>

#include "lib/rowinit.h"

/* ---- index ---- */

int shemb__index_init(struct shemb__slot_index *ix, int32_t nslots)
{
	uint64_t cap = 16;

	while (cap < 2 * (uint64_t)nslots)
		cap *= 2;
	ix->rows = malloc(cap * sizeof(*ix->rows));
	ix->slots = malloc(cap * sizeof(*ix->slots));
	ix->mask = cap - 1;
	if (!ix->rows || !ix->slots)
		return SHEMB_ENOMEM;
	for (uint64_t i = 0; i < cap; i++)
		ix->rows[i] = -1;
	return 0;
}

void shemb__index_free(struct shemb__slot_index *ix)
{
	free(ix->rows);
	free(ix->slots);
}

static uint64_t home(const struct shemb__slot_index *ix, int64_t row)
{
	return shemb__mix64((uint64_t)row) & ix->mask;
}

int32_t shemb__index_find(const struct shemb__slot_index *ix, int64_t row)
{
	for (uint64_t i = home(ix, row);; i = (i + 1) & ix->mask) {
		if (ix->rows[i] == row)
			return ix->slots[i];
		if (ix->rows[i] < 0)
			return -1;
	}
}

void shemb__index_put(struct shemb__slot_index *ix, int64_t row, int32_t s)
{
	uint64_t i = home(ix, row);

	while (ix->rows[i] >= 0 && ix->rows[i] != row)
		i = (i + 1) & ix->mask;
	ix->rows[i] = row;
	ix->slots[i] = s;
}

/* Deleting moves back every later entry of the run that may sit there, so
 * lookups need no tombstones. */
void shemb__index_del(struct shemb__slot_index *ix, int64_t row)
{
	uint64_t i = home(ix, row), j;

	while (ix->rows[i] != row) {
		if (ix->rows[i] < 0)
			return;
		i = (i + 1) & ix->mask;
	}
	for (j = (i + 1) & ix->mask; ix->rows[j] >= 0; j = (j + 1) & ix->mask) {
		uint64_t h = home(ix, ix->rows[j]);

		/* entry j may move to the hole i unless its home lies
		 * cyclically in (i, j] */
		if (((j - h) & ix->mask) >= ((j - i) & ix->mask)) {
			ix->rows[i] = ix->rows[j];
			ix->slots[i] = ix->slots[j];
			i = j;
		}
	}
	ix->rows[i] = -1;
}

/* ---- eviction lists ---- */

int shemb__lists_init(struct shemb__evict_lists *l, int32_t nslots)
{
	size_t k = (size_t)nslots + 1;

	l->prev = malloc(k * sizeof(*l->prev));
	l->next = malloc(k * sizeof(*l->next));
	l->list = malloc(k);
	l->n = 0;
	l->nonempty = 0;
	for (int i = 0; i < SHEMB__NLISTS; i++)
		l->head[i] = l->tail[i] = -1;
	if (!l->prev || !l->next || !l->list)
		return SHEMB_ENOMEM;
	memset(l->list, -1, k);
	return 0;
}

void shemb__lists_free(struct shemb__evict_lists *l)
{
	free(l->prev);
	free(l->next);
	free(l->list);
}

static void link_slot(struct shemb__evict_lists *l, int li, int32_t s,
		      bool first)
{
	l->list[s] = (int8_t)li;
	if (first) {
		l->prev[s] = -1;
		l->next[s] = l->head[li];
		if (l->head[li] >= 0)
			l->prev[l->head[li]] = s;
		else
			l->tail[li] = s;
		l->head[li] = s;
	} else {
		l->next[s] = -1;
		l->prev[s] = l->tail[li];
		if (l->tail[li] >= 0)
			l->next[l->tail[li]] = s;
		else
			l->head[li] = s;
		l->tail[li] = s;
	}
	l->nonempty |= UINT64_C(1) << li;
	l->n++;
}

void shemb__lists_add(struct shemb__tier *tr, int32_t slot, bool first)
{
	link_slot(&tr->order, shemb__tier_list(tr, slot), slot, first);
}

void shemb__lists_remove(struct shemb__evict_lists *l, int32_t s)
{
	int li = l->list[s];

	if (li < 0)
		return;
	if (l->prev[s] >= 0)
		l->next[l->prev[s]] = l->next[s];
	else
		l->head[li] = l->next[s];
	if (l->next[s] >= 0)
		l->prev[l->next[s]] = l->prev[s];
	else
		l->tail[li] = l->prev[s];
	if (l->head[li] < 0)
		l->nonempty &= ~(UINT64_C(1) << li);
	l->list[s] = -1;
	l->n--;
}

/* The least valuable: the head of the lowest plain list; of pending
 * rows, the one the latest prefetch wants (the farthest use, as Belady
 * would); last, the current plan's. */
int32_t shemb__lists_victim(struct shemb__evict_lists *l, bool unprotected)
{
	uint64_t plain = l->nonempty & ((UINT64_C(1) << SHEMB__LIST_PENDING) -
					1);
	int32_t s;

	if (plain)
		s = l->head[__builtin_ctzll(plain)];
	else if (unprotected)
		return -1;
	else if (l->tail[SHEMB__LIST_PENDING] >= 0)
		s = l->tail[SHEMB__LIST_PENDING];
	else
		s = l->head[SHEMB__LIST_PLAN];
	if (s >= 0)
		shemb__lists_remove(l, s);
	return s;
}

/* ---- policy ---- */

int shemb__tier_list(const struct shemb__tier *tr, int32_t slot)
{
	uint32_t f;

	if (tr->plan_open && tr->plan_of[slot] == tr->plan)
		return SHEMB__LIST_PLAN;
	if (tr->policy == SHEMB_CACHE_LOOKAHEAD && tr->pending[slot])
		return SHEMB__LIST_PENDING;
	if (tr->policy == SHEMB_CACHE_LRU)
		return 0;
	f = tr->freq[tr->slot_row[slot]];
	return f ? 31 - __builtin_clz(f) : 0;
}

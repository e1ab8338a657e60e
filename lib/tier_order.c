/*
 * tier_order.c - the device tier's eviction order.
 *
 * Sized by the slots, not by the table, as the row-to-slot index is (a
 * row map, lib/rowmap.h), so a tier over a table of billions of rows
 * costs memory in proportion to what it caches; every operation is O(1).
 */
#include "lib/tier_int.h"

#include <stdlib.h>
#include <string.h>


/* ---- eviction lists ---- */

/* The lists link the slots' records, which the tier made. */
void shemb__lists_init(struct shemb__evict_lists *l, struct shemb__slot *slot)
{
	l->slot = slot;
	l->n = 0;
	l->nonempty = 0;
	for (int i = 0; i < SHEMB__NLISTS; i++)
		l->head[i] = l->tail[i] = -1;
}

static void link_slot(struct shemb__evict_lists *l, int li, int32_t s,
		      bool first)
{
	l->slot[s].list = (int16_t)li;
	if (first) {
		l->slot[s].prev = -1;
		l->slot[s].next = l->head[li];
		if (l->head[li] >= 0)
			l->slot[l->head[li]].prev = s;
		else
			l->tail[li] = s;
		l->head[li] = s;
	} else {
		l->slot[s].next = -1;
		l->slot[s].prev = l->tail[li];
		if (l->tail[li] >= 0)
			l->slot[l->tail[li]].next = s;
		else
			l->head[li] = s;
		l->tail[li] = s;
	}
	if (li < SHEMB__LIST_PLAN)
		l->nonempty |= UINT64_C(1) << li;
	l->n++;
}

void shemb__lists_add(struct shemb__tier *tr, int32_t slot, bool first)
{
	link_slot(&tr->order, shemb__tier_list(tr, slot), slot, first);
}

void shemb__lists_remove(struct shemb__evict_lists *l, int32_t s)
{
	int li = l->slot[s].list;

	if (li < 0)
		return;
	if (l->slot[s].prev >= 0)
		l->slot[l->slot[s].prev].next = l->slot[s].next;
	else
		l->head[li] = l->slot[s].next;
	if (l->slot[s].next >= 0)
		l->slot[l->slot[s].next].prev = l->slot[s].prev;
	else
		l->tail[li] = l->slot[s].prev;
	if (l->head[li] < 0 && li < SHEMB__LIST_PLAN)
		l->nonempty &= ~(UINT64_C(1) << li);
	l->slot[s].list = -1;
	l->n--;
}

/* Of the rows announced steps need, one the last of them needs. */
static int32_t farthest(const struct shemb__tier *tr)
{
	const struct shemb__ahead *a = &tr->ahead;

	for (uint64_t q = a->tail; q > a->head; q--) {
		int32_t s = tr->order.head[SHEMB__LIST_AHEAD +
					   (q - 1) % SHEMB__AHEAD_MAX];

		if (s >= 0)
			return s;
	}
	return -1;
}

/* The least valuable: the head of the lowest plain list; of rows that
 * announced steps need, one needed last (as Belady would choose); last,
 * the current plan's. */
int32_t shemb__lists_victim(struct shemb__tier *tr, bool unprotected)
{
	struct shemb__evict_lists *l = &tr->order;
	int32_t s;

	if (l->nonempty)
		s = l->head[__builtin_ctzll(l->nonempty)];
	else if (unprotected)
		return -1;
	else if ((s = farthest(tr)) < 0)
		s = l->head[SHEMB__LIST_PLAN];
	if (s >= 0)
		shemb__lists_remove(l, s);
	return s;
}

void shemb__lists_refile(struct shemb__tier *tr, int32_t slot)
{
	if (tr->slot[slot].list == shemb__tier_list(tr, slot))
		return;
	shemb__lists_remove(&tr->order, slot);
	shemb__lists_add(tr, slot, false);
}

/* ---- policy ---- */

int shemb__tier_list(const struct shemb__tier *tr, int32_t slot)
{
	int64_t next = tr->slot[slot].next_use;
	uint32_t f;

	if (tr->plan_open && tr->slot[slot].plan == tr->plan)
		return SHEMB__LIST_PLAN;
	if (tr->policy == SHEMB_CACHE_LOOKAHEAD && next >= 0)
		return SHEMB__LIST_AHEAD +
		       (int)((uint64_t)next % SHEMB__AHEAD_MAX);
	if (tr->policy == SHEMB_CACHE_LRU)
		return 0;
	f = tr->freq[tr->slot[slot].row];
	return f ? 31 - __builtin_clz(f) : 0;
}

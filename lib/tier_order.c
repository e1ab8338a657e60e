/*
 * tier_order.c - the device tier's row-to-slot index and eviction order.
 *
 * Both are sized by the slots, not by the table, so a tier over a table of
 * billions of rows costs memory in proportion to what it caches.
 */
#include "lib/tier_int.h"

#include <stdlib.h>

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

/* ---- eviction heap ---- */

int shemb__heap_init(struct shemb__evict_heap *h, int32_t nslots)
{
	h->heap = malloc(((size_t)nslots + 1) * sizeof(*h->heap));
	h->pos = malloc(((size_t)nslots + 1) * sizeof(*h->pos));
	h->key = calloc((size_t)nslots + 1, sizeof(*h->key));
	h->n = 0;
	if (!h->heap || !h->pos || !h->key)
		return SHEMB_ENOMEM;
	for (int32_t s = 0; s < nslots; s++)
		h->pos[s] = -1;
	return 0;
}

void shemb__heap_free(struct shemb__evict_heap *h)
{
	free(h->heap);
	free(h->pos);
	free(h->key);
}

static void place(struct shemb__evict_heap *h, int32_t i, int32_t slot)
{
	h->heap[i] = slot;
	h->pos[slot] = i;
}

static void sift_up(struct shemb__evict_heap *h, int32_t i)
{
	int32_t slot = h->heap[i];

	while (i > 0) {
		int32_t parent = (i - 1) / 2;

		if (h->key[h->heap[parent]] <= h->key[slot])
			break;
		place(h, i, h->heap[parent]);
		i = parent;
	}
	place(h, i, slot);
}

static void sift_down(struct shemb__evict_heap *h, int32_t i)
{
	int32_t slot = h->heap[i];

	for (;;) {
		int32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->key[h->heap[c + 1]] < h->key[h->heap[c]])
			c++;
		if (h->key[slot] <= h->key[h->heap[c]])
			break;
		place(h, i, h->heap[c]);
		i = c;
	}
	place(h, i, slot);
}

void shemb__heap_push(struct shemb__evict_heap *h, int32_t slot,
		      uint64_t key)
{
	h->key[slot] = key;
	place(h, h->n++, slot);
	sift_up(h, h->n - 1);
}

void shemb__heap_remove(struct shemb__evict_heap *h, int32_t slot)
{
	int32_t i = h->pos[slot], last;

	if (i < 0)
		return;
	h->pos[slot] = -1;
	last = h->heap[--h->n];
	if (i == h->n)
		return;
	place(h, i, last);
	sift_up(h, i);
	sift_down(h, h->pos[last]);
}

int32_t shemb__heap_pop(struct shemb__evict_heap *h)
{
	int32_t top;

	if (h->n == 0)
		return -1;
	top = h->heap[0];
	shemb__heap_remove(h, top);
	return top;
}

/* ---- policy ---- */

#define KEY_LOW_BITS 40
#define FREQ_CAP ((UINT64_C(1) << 23) - 1)

/*
 * LRU orders by the call that last used a slot; LFU by the row's count of
 * uses, ties to the least recent.  LOOKAHEAD is LFU for rows no pending
 * prefetch wants; those a prefetch wants go after them, the one wanted by
 * the latest prefetch (the farthest use) first, as Belady would.  Under
 * every policy, the rows of the planned lookup whose backward is still to
 * come go last: a prefetch of the next step must not push out the rows
 * the current step is about to update.
 */
uint64_t shemb__tier_key(const struct shemb__tier *tr, int32_t slot)
{
	uint64_t low = (UINT64_C(1) << 62) - 1;
	uint64_t recent = tr->tick & ((UINT64_C(1) << KEY_LOW_BITS) - 1);
	uint64_t f;

	if (tr->plan_open && tr->plan_of[slot] == tr->plan)
		return SHEMB__KEY_PLAN | (tr->tick & low);
	if (tr->policy == SHEMB_CACHE_LOOKAHEAD && tr->pending[slot])
		return SHEMB__KEY_PENDING | (~tr->announced[slot] & low);
	if (tr->policy == SHEMB_CACHE_LRU)
		return tr->tick & low;
	f = tr->freq[tr->slot_row[slot]];
	return (f < FREQ_CAP ? f : FREQ_CAP) << KEY_LOW_BITS | recent;
}

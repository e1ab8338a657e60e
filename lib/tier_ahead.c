/*
 * tier_ahead.c - the steps a LOOKAHEAD tier knows ahead.
 *
 * Each announced step keeps its distinct rows; a row's occurrences in the
 * queued steps are chained (next_seq, next_idx), and a map gives each
 * row's first and last occurrence.  So a row's next use is known in O(1)
 * when it is loaded, when a step is announced (a new last occurrence) and
 * when the oldest step is used up (the first occurrence moves on), and
 * eviction can take, of the rows some step needs, the one needed last:
 * Belady's choice, within the announced window.
 */
#include "lib/tier_int.h"

#include <stdlib.h>

#include "lib/rowinit.h"

/* ---- the map: row -> its first and last occurrence ---- */

static uint64_t home(const struct shemb__ahead *a, int64_t row)
{
	return shemb__mix64((uint64_t)row) & a->mask;
}

static struct shemb__ahead_entry *find(const struct shemb__ahead *a,
				       int64_t row)
{
	if (!a->map)
		return NULL;
	for (uint64_t i = home(a, row);; i = (i + 1) & a->mask) {
		if (a->map[i].row == row)
			return &a->map[i];
		if (a->map[i].row < 0)
			return NULL;
	}
}

static struct shemb__ahead_entry *insert(struct shemb__ahead *a, int64_t row)
{
	uint64_t i = home(a, row);

	while (a->map[i].row >= 0)
		i = (i + 1) & a->mask;
	a->map[i].row = row;
	a->count++;
	return &a->map[i];
}

/* Backward-shift deletion, as the slot index does. */
static void erase(struct shemb__ahead *a, struct shemb__ahead_entry *e)
{
	uint64_t i = (uint64_t)(e - a->map), j;

	for (j = (i + 1) & a->mask; a->map[j].row >= 0;
	     j = (j + 1) & a->mask) {
		uint64_t h = home(a, a->map[j].row);

		if (((j - h) & a->mask) >= ((j - i) & a->mask)) {
			a->map[i] = a->map[j];
			i = j;
		}
	}
	a->map[i].row = -1;
	a->count--;
}

/* Room for `more` entries at half load at most. */
static int reserve(struct shemb__ahead *a, uint64_t more)
{
	struct shemb__ahead_entry *old = a->map;
	uint64_t cap = a->map ? a->mask + 1 : 0, n = 1024;

	if (2 * (a->count + more) <= cap)
		return 0;
	while (n < 2 * (a->count + more))
		n *= 2;
	a->map = malloc(n * sizeof(*a->map));
	if (!a->map) {
		a->map = old;
		return SHEMB_ENOMEM;
	}
	a->mask = n - 1;
	a->count = 0;
	for (uint64_t i = 0; i < n; i++)
		a->map[i].row = -1;
	for (uint64_t i = 0; i < cap; i++)
		if (old[i].row >= 0)
			*insert(a, old[i].row) = old[i];
	free(old);
	return 0;
}

/* ---- steps ---- */

static struct shemb__ahead_step *step_of(struct shemb__ahead *a,
					 uint64_t seq)
{
	return &a->ring[seq % SHEMB__AHEAD_MAX];
}

static void step_free(struct shemb__ahead_step *s)
{
	free(s->rows);
	free(s->next_seq);
	free(s->next_idx);
	*s = (struct shemb__ahead_step){ 0 };
}

void shemb__ahead_free(struct shemb__ahead *a)
{
	for (uint64_t q = a->head; q < a->tail; q++)
		step_free(step_of(a, q));
	free(a->map);
	a->map = NULL;
}

int64_t shemb__ahead_first(const struct shemb__ahead *a, int64_t row)
{
	const struct shemb__ahead_entry *e = find(a, row);

	return e ? e->first_seq : -1;
}

/* A resident row's next use changed: its slot moves to its list. */
static void renew(struct shemb__tier *tr, int64_t row, int64_t seq)
{
	int32_t s = shemb__index_find(&tr->index, row);

	if (s < 0)
		return;
	tr->slot[s].next_use = seq;
	if (tr->slot[s].list >= 0)
		shemb__lists_refile(tr, s);
}

static void link_row(struct shemb__tier *tr, uint64_t seq, int32_t i)
{
	struct shemb__ahead *a = &tr->ahead;
	struct shemb__ahead_step *st = step_of(a, seq);
	int64_t row = st->rows[i];
	struct shemb__ahead_entry *e = find(a, row);

	st->next_seq[i] = -1;
	if (e) { /* needed earlier too: chain this occurrence */
		struct shemb__ahead_step *last = step_of(a,
							 (uint64_t)e->last_seq);

		last->next_seq[e->last_idx] = (int64_t)seq;
		last->next_idx[e->last_idx] = i;
		e->last_seq = (int64_t)seq;
		e->last_idx = i;
		return;
	}
	e = insert(a, row);
	e->first_seq = e->last_seq = (int64_t)seq;
	e->first_idx = e->last_idx = i;
	renew(tr, row, (int64_t)seq);
}

/* Queue a step of n distinct rows (copied). */
int shemb__ahead_push(struct shemb__tier *tr, int64_t n, const int64_t *rows)
{
	struct shemb__ahead *a = &tr->ahead;
	struct shemb__ahead_step *st;
	uint64_t seq = a->tail;

	if (a->tail - a->head >= SHEMB__AHEAD_MAX)
		return SHEMB_EINVAL;
	if (reserve(a, (uint64_t)n))
		return SHEMB_ENOMEM;
	st = step_of(a, seq);
	st->n = n;
	st->rows = malloc(((size_t)n + 1) * sizeof(*st->rows));
	st->next_seq = malloc(((size_t)n + 1) * sizeof(*st->next_seq));
	st->next_idx = malloc(((size_t)n + 1) * sizeof(*st->next_idx));
	if (!st->rows || !st->next_seq || !st->next_idx) {
		step_free(st);
		return SHEMB_ENOMEM;
	}
	for (int64_t i = 0; i < n; i++)
		st->rows[i] = rows[i];
	a->tail++;
	for (int64_t i = 0; i < n; i++) {
		if (i + SHEMB__LOOK_AHEAD < n)
			__builtin_prefetch(&a->map[home(a, rows[i +
						SHEMB__LOOK_AHEAD])]);
		link_row(tr, seq, (int32_t)i);
	}
	return 0;
}

/* The oldest step is used up (a lookup came): its rows' first
 * occurrences move on to their next. */
void shemb__ahead_pop(struct shemb__tier *tr)
{
	struct shemb__ahead *a = &tr->ahead;
	struct shemb__ahead_step *st;

	if (a->head == a->tail)
		return;
	st = step_of(a, a->head);
	a->head++;
	for (int64_t i = 0; i < st->n; i++) {
		struct shemb__ahead_entry *e;
		int64_t row = st->rows[i];

		if (i + SHEMB__LOOK_AHEAD < st->n) {
			int64_t later = st->rows[i + SHEMB__LOOK_AHEAD];

			__builtin_prefetch(&a->map[home(a, later)]);
			shemb__index_touch(&tr->index, later);
		}
		e = find(a, row);
		if (st->next_seq[i] < 0) {
			erase(a, e);
			renew(tr, row, -1);
			continue;
		}
		e->first_seq = st->next_seq[i];
		e->first_idx = st->next_idx[i];
		renew(tr, row, e->first_seq);
	}
	step_free(st);
}

/*
 * tier_ahead.c - the steps a LOOKAHEAD tier knows ahead.
 *
 * Each announced step keeps its distinct rows; a row's occurrences in the
 * queued steps are chained (next_seq, next_idx), and a row map gives each
 * row's first and last occurrence.  So a row's next use is known in O(1)
 * when it is loaded, when a step is announced (a new last occurrence) and
 * when the oldest step is used up (the first occurrence moves on), and
 * eviction can take, of the rows some step needs, the one needed last:
 * Belady's choice, within the announced window.
 */
#include "lib/tier_int.h"

#include <stdlib.h>


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
	shemb__rowmap_free(&a->map);
}

int64_t shemb__ahead_first(const struct shemb__ahead *a, int64_t row)
{
	const struct shemb__ahead_entry *e =
		a->map.rec ? shemb__rowmap_find(&a->map, row) : NULL;

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
	struct shemb__ahead_entry *e = shemb__rowmap_find(&a->map, row);

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
	e = shemb__rowmap_add(&a->map, row);
	e->first_seq = e->last_seq = (int64_t)seq;
	e->first_idx = e->last_idx = i;
	renew(tr, row, (int64_t)seq);
}

/* Queue a step of n distinct rows (copied). */
int shemb__ahead_push(struct shemb__tier *tr, int64_t n, const int64_t *rows)
{
	struct shemb__ahead *a = &tr->ahead;
	struct shemb__ahead_step *st;
	struct shemb__ahead_entry *e;
	uint64_t seq = a->tail;

	if (a->tail - a->head >= SHEMB__AHEAD_MAX)
		return SHEMB_EINVAL;
	if (a->map.rec ? shemb__rowmap_reserve(&a->map, (uint64_t)n)
		       : shemb__rowmap_init(&a->map, sizeof(*e), (uint64_t)n))
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
		if (i + SHEMB__ROWMAP_AHEAD < n)
			shemb__rowmap_touch(&a->map,
					    rows[i + SHEMB__ROWMAP_AHEAD]);
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

		if (i + SHEMB__ROWMAP_AHEAD < st->n) {
			int64_t later = st->rows[i + SHEMB__ROWMAP_AHEAD];

			shemb__rowmap_touch(&a->map, later);
			shemb__rowmap_touch(&tr->index, later);
		}
		e = shemb__rowmap_find(&a->map, row);
		if (st->next_seq[i] < 0) {
			shemb__rowmap_del(&a->map, e);
			renew(tr, row, -1);
			continue;
		}
		e->first_seq = st->next_seq[i];
		e->first_idx = st->next_idx[i];
		renew(tr, row, e->first_seq);
	}
	step_free(st);
}

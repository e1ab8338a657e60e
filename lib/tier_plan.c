/*
 * tier_plan.c - the rows of a planned lookup, kept for its backward: filed
 * last for eviction from the lookup until the backward that ends the plan
 * (a relaxed lookup's early rows are marked into the plan when it begins).
 */
#include "lib/tier_int.h"

/* The evictable rows of a plan that is over go to their plain lists. */
static void replace_plan_rows(struct shemb__tier *tr)
{
	struct shemb__evict_lists *l = &tr->order;
	int32_t s = l->head[SHEMB__LIST_PLAN];

	while (s >= 0) {
		int32_t next = l->slot[s].next;

		if (shemb__tier_list(tr, s) != SHEMB__LIST_PLAN) {
			shemb__lists_remove(l, s);
			shemb__lists_add(tr, s, false);
		}
		s = next;
	}
}

void shemb__tier_plan_begin(shemb_table *t)
{
	struct shemb__tier *tr = t->tier;

	if (!tr)
		return;
	shemb__loader_wait(t);
	pthread_mutex_lock(&tr->lock);
	tr->undo_armed = true;
	tr->undo_open = tr->plan_open;
	tr->plan++;
	if (tr->plan_open) /* a plan without its backward */
		replace_plan_rows(tr);
	tr->plan_open = true;
	pthread_mutex_unlock(&tr->lock);
}

/*
 * The lookup that began the current plan failed: the plan before it is
 * the current one again, open as it was.  The rows the failed call
 * stamped join it (some of them may be its own, which the stamps no
 * longer tell apart): kept a little too long rather than evicted before
 * its backward.  Where no plan was open, they are no plan's.
 */
static void plan_undo(struct shemb__tier *tr)
{
	uint64_t failed = tr->plan;
	uint64_t back = tr->undo_open ? failed - 1 : 0;

	tr->plan = failed - 1;
	tr->plan_open = tr->undo_open;
	for (int32_t s = 0; s < tr->nslots; s++) {
		if (tr->slot[s].plan == failed)
			tr->slot[s].plan = back;
		if (tr->slot[s].list >= 0) /* pinned slots are filed at unpin */
			shemb__lists_refile(tr, s);
	}
}

void shemb__tier_lookup_settle(shemb_table *t, bool ok)
{
	struct shemb__tier *tr = t->tier;

	if (!tr)
		return;
	shemb__loader_wait(t);
	pthread_mutex_lock(&tr->lock);
	if (ok && tr->policy == SHEMB_CACHE_LOOKAHEAD)
		shemb__ahead_pop(tr);
	if (!ok && tr->undo_armed)
		plan_undo(tr);
	tr->undo_armed = false;
	pthread_mutex_unlock(&tr->lock);
}

/* The backward's rows are pinned: they take their new keys at release. */
void shemb__tier_plan_end(shemb_table *t)
{
	struct shemb__tier *tr = t->tier;

	if (!tr)
		return;
	shemb__loader_wait(t);
	pthread_mutex_lock(&tr->lock);
	tr->undo_armed = false;
	if (tr->plan_open) {
		tr->plan_open = false;
		replace_plan_rows(tr);
	}
	pthread_mutex_unlock(&tr->lock);
}

void shemb__tier_plan_mark(shemb_table *t, int64_t n, const int64_t *rows)
{
	struct shemb__tier *tr = t->tier;

	if (!tr)
		return;
	shemb__loader_wait(t);
	pthread_mutex_lock(&tr->lock);
	for (int64_t i = 0; tr->plan_open && i < n; i++) {
		int32_t s = shemb__index_find(&tr->index, rows[i]);

		if (s < 0)
			continue;
		tr->slot[s].plan = tr->plan;
		if (tr->slot[s].pins == 0) /* pinned: filed at unpin */
			shemb__lists_refile(tr, s);
	}
	pthread_mutex_unlock(&tr->lock);
}

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

void shemb__tier_plan_begin(shemb_table *t, struct shemb__plan_begun *b)
{
	struct shemb__tier *tr = t->tier;

	b->plan = 0;
	if (!tr)
		return;
	shemb__loader_wait(t);
	pthread_mutex_lock(&tr->lock);
	b->was_open = tr->plan_open;
	b->plan = ++tr->plan;
	if (b->was_open) /* a plan without its backward */
		replace_plan_rows(tr);
	tr->plan_open = true;
	pthread_mutex_unlock(&tr->lock);
}

/*
 * The lookup that began plan b failed: the plan before it is the current
 * one again, open as it was, unless a later lookup began another since
 * (which replaced both).  The rows the failed call stamped join it (some
 * of them may be its own, which the stamps no longer tell apart): kept
 * a little too long rather than evicted before its backward.  Where no
 * plan was open, they are no plan's.
 */
static void plan_undo(struct shemb__tier *tr,
		      const struct shemb__plan_begun *b)
{
	uint64_t back = b->was_open ? b->plan - 1 : 0;

	if (tr->plan != b->plan)
		return;
	tr->plan = b->plan - 1;
	tr->plan_open = b->was_open;
	for (int32_t s = 0; s < tr->nslots; s++) {
		if (tr->slot[s].plan == b->plan)
			tr->slot[s].plan = back;
		if (tr->slot[s].list >= 0) /* pinned slots are filed at unpin */
			shemb__lists_refile(tr, s);
	}
}

void shemb__tier_lookup_settle(shemb_table *t, bool ok,
			       const struct shemb__plan_begun *b)
{
	struct shemb__tier *tr = t->tier;
	bool pop = ok && tr && tr->policy == SHEMB_CACHE_LOOKAHEAD;

	if (!tr || (!pop && (ok || !b->plan)))
		return;
	shemb__loader_wait(t);
	pthread_mutex_lock(&tr->lock);
	if (pop)
		shemb__ahead_pop(tr);
	else
		plan_undo(tr, b);
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

/*
 * tier_acquire.c - making rows resident in the device tier for a call.
 *
 * A call's rows are pinned from acquire to release, so no other call (a
 * concurrent lookup, or a prefetch) evicts them meanwhile; pinned slots
 * are in no eviction list.  A miss takes a free slot or evicts the least
 * valuable listed one, writing it back first when it changed.
 * Failures undo everything but evictions already written back: no row's
 * value is ever lost.
 */
#include "lib/tier_int.h"

#include <stdlib.h>
#include <string.h>

/* One resolution: the distinct rows and what became of them. */
struct resolve {
	int64_t nd;
	const int64_t *d;       /* distinct rows */
	int64_t *dslot;         /* their slots; -1: not loaded (prefetch) */
	int64_t *miss_rows, *miss_slots;
	int64_t *miss_at;       /* each miss's place in d */
	int64_t *wb_rows, *wb_slots;
	int32_t *victims;
	int64_t nmiss, nvict, nwb;
};

/* dslot, which the view keeps, and the scratch of the resolution in
 * one block */
static int alloc_resolve(struct resolve *r)
{
	size_t n = (size_t)r->nd + 1;
	int64_t *w = malloc(n * (5 * sizeof(int64_t) + sizeof(int32_t)));

	r->dslot = malloc(n * sizeof(int64_t));
	if (!w || !r->dslot) {
		free(w);
		free(r->dslot);
		r->dslot = NULL;
		return SHEMB_ENOMEM;
	}
	r->miss_rows = w;
	r->miss_slots = w + n;
	r->miss_at = w + 2 * n;
	r->wb_rows = w + 3 * n;
	r->wb_slots = w + 4 * n;
	r->victims = (int32_t *)(w + 5 * n);
	return 0;
}

static void free_resolve(struct resolve *r)
{
	free(r->miss_rows);
}

/* Misses, and the room for them without touching this call's hits;
 * each row's slot (or -1) into r->dslot. */
static void count(const struct shemb__tier *tr, struct resolve *r,
		  int64_t *misses, int64_t *room)
{
	int64_t m = 0, hits_evictable = 0;

	for (int64_t i = 0; i < r->nd; i++) {
		int32_t s;

		if (i + SHEMB__ROWMAP_AHEAD < r->nd)
			shemb__rowmap_touch(&tr->index,
					    r->d[i + SHEMB__ROWMAP_AHEAD]);
		s = shemb__index_find(&tr->index, r->d[i]);
		r->dslot[i] = s;
		if (s < 0)
			m++;
		else if (tr->slot[s].list >= 0)
			hits_evictable++;
	}
	*misses = m;
	*room = tr->nfree + tr->order.n - hits_evictable;
}

static void pin(struct shemb__tier *tr, int32_t s)
{
	shemb__lists_remove(&tr->order, s);
	tr->slot[s].pins++;
	tr->npinned++;
}

static void unpin(struct shemb__tier *tr, int32_t s)
{
	tr->npinned--;
	if (--tr->slot[s].pins == 0)
		shemb__lists_add(tr, s, false);
}

static void note_use(shemb_table *t, int32_t s, int use)
{
	struct shemb__tier *tr = t->tier;

	if (tr->freq && tr->freq[tr->slot[s].row] < UINT32_MAX)
		tr->freq[tr->slot[s].row]++;
	if (use == SHEMB__ROWS_PLANNED)
		tr->slot[s].plan = tr->plan;
	if (use == SHEMB__ROWS_PREFETCH)
		return;
	if (tr->slot[s].by_prefetch) {
		tr->slot[s].by_prefetch = 0;
		SHEMB__STAT_ADD(t, prefetch_hits, 1);
	}
}

/* Pin the hits; list the misses, up to `room` of them. */
static void take_hits(shemb_table *t, struct resolve *r, int use,
		      int64_t room)
{
	struct shemb__tier *tr = t->tier;
	int64_t hits = 0;

	r->nmiss = 0;
	for (int64_t i = 0; i < r->nd; i++) {
		int32_t s = (int32_t)r->dslot[i]; /* as count() found */

		if (s < 0) {
			if (r->nmiss < room) {
				r->miss_at[r->nmiss] = i;
				r->miss_rows[r->nmiss++] = r->d[i];
			}
			continue;
		}
		pin(tr, s);
		note_use(t, s, use);
		hits++;
	}
	SHEMB__STAT_ADD(t, cache_hits, hits);
}

/* Slots for the misses: free ones, then victims off the lists.  A
 * prefetch takes no protected row (of the current step's plan, or that
 * an announced step needs): it loads fewer rows instead. */
static void choose_slots(struct shemb__tier *tr, struct resolve *r,
			 bool partial)
{
	r->nvict = r->nwb = 0;
	for (int64_t k = 0; k < r->nmiss; k++) {
		int32_t s;

		if (tr->nfree > 0) {
			s = tr->free_slots[--tr->nfree];
		} else {
			s = shemb__lists_victim(tr, partial);
			if (s < 0) { /* a prefetch: no more room */
				r->nmiss = k;
				break;
			}
			r->victims[r->nvict++] = s;
			if (tr->slot[s].dirty) {
				r->wb_rows[r->nwb] = tr->slot[s].row;
				r->wb_slots[r->nwb++] = s;
			}
		}
		r->miss_slots[k] = s;
	}
}

/* Undo choose_slots and take_hits after a failure. */
static void give_up(struct shemb__tier *tr, struct resolve *r, bool evicted)
{
	for (int64_t k = r->nmiss - 1; k >= 0; k--) {
		int32_t s = (int32_t)r->miss_slots[k];

		if (evicted || tr->slot[s].row < 0)
			tr->free_slots[tr->nfree++] = s;
		else
			shemb__lists_add(tr, s, true);
	}
	for (int64_t i = 0; i < r->nd; i++)
		if (r->dslot[i] >= 0)
			unpin(tr, (int32_t)r->dslot[i]);
}

static void evict(shemb_table *t, struct resolve *r)
{
	struct shemb__tier *tr = t->tier;

	for (int64_t k = 0; k < r->nvict; k++) {
		int32_t s = r->victims[k];

		shemb__index_del(&tr->index, tr->slot[s].row);
		tr->slot[s].row = -1;
		tr->slot[s].dirty = 0;
		tr->slot[s].by_prefetch = 0;
		tr->slot[s].plan = 0; /* plans count from 1 */
	}
	SHEMB__STAT_ADD(t, cache_evictions, r->nvict);
}

static void settle_misses(shemb_table *t, struct resolve *r, int use)
{
	struct shemb__tier *tr = t->tier;

	for (int64_t k = 0; k < r->nmiss; k++) {
		int32_t s = (int32_t)r->miss_slots[k];

		shemb__index_put(&tr->index, r->miss_rows[k], s);
		tr->slot[s].row = r->miss_rows[k];
		tr->slot[s].next_use =
			tr->policy == SHEMB_CACHE_LOOKAHEAD
				? shemb__ahead_first(&tr->ahead,
						     r->miss_rows[k])
				: -1;
		tr->slot[s].pins = 1;
		tr->npinned++;
		tr->slot[s].by_prefetch = use == SHEMB__ROWS_PREFETCH;
		note_use(t, s, use);
		r->dslot[r->miss_at[k]] = s;
	}
}

/*
 * Room for r's misses comes back as calls in progress release their
 * pins.  Calls that must wait take their turns in order, and while any
 * waits, new calls queue behind it: a call needing most of the slots is
 * not starved by a stream of small ones.
 */
static void wait_turn(struct shemb__tier *tr, struct resolve *r,
		      int64_t *misses, int64_t *room)
{
	uint64_t me = tr->next_turn++;

	tr->waiting++;
	while (tr->serving != me ||
	       (*misses > *room && tr->npinned > 0)) {
		pthread_cond_wait(&tr->unpinned, &tr->lock);
		count(tr, r, misses, room);
	}
	tr->waiting--;
	tr->serving++;
	pthread_cond_broadcast(&tr->unpinned);
}

/* With the tier's lock held: pin r's rows, loading misses. */
static int resolve_locked(shemb_table *t, struct resolve *r, int use)
{
	struct shemb__tier *tr = t->tier;
	bool partial = use == SHEMB__ROWS_PREFETCH;
	int64_t misses, room;
	int rc;

	if (r->nd > tr->nslots && !partial)
		return shemb__fail(t->ctx, SHEMB_ENOMEM, "table '%s': a call "
				   "needs %lld distinct rows of this rank's "
				   "part; its device tier holds %d "
				   "(cache_rows)", t->name, (long long)r->nd,
				   tr->nslots);
	count(tr, r, &misses, &room);
	if (partial && tr->waiting)
		room = 0; /* a waiting call comes first: load nothing */
	else if (!partial && (misses > room || tr->waiting))
		wait_turn(tr, r, &misses, &room);
	if (misses > room && !partial)
		return shemb__fail(t->ctx, SHEMB_EINTERNAL, "table '%s': no "
				   "room in the device tier", t->name);
	take_hits(t, r, use, room < 0 ? 0 : room);
	choose_slots(tr, r, partial);
	rc = shemb__tier_write_back(t, r->nwb, r->wb_slots, r->wb_rows);
	if (rc) {
		give_up(tr, r, false);
		return rc;
	}
	evict(t, r);
	rc = shemb__tier_load(t, r->nmiss, r->miss_slots, r->miss_rows);
	if (rc) {
		give_up(tr, r, true);
		return rc;
	}
	settle_misses(t, r, use);
	return 0;
}

static int resolve_rows(shemb_table *t, struct resolve *r, int use)
{
	struct shemb__tier *tr = t->tier;
	int rc = alloc_resolve(r);

	if (rc)
		return shemb__fail(t->ctx, rc, "no memory");
	pthread_mutex_lock(&tr->lock);
	rc = resolve_locked(t, r, use);
	pthread_mutex_unlock(&tr->lock);
	free_resolve(r);
	return rc;
}

int shemb__rows_acquire(shemb_table *t, int64_t n, const int64_t *rows,
			bool distinct, int use, struct shemb__rows_view *v)
{
	struct resolve r = { .nd = n, .d = rows };
	int64_t *d = NULL;
	int32_t *of = NULL;
	int rc;

	memset(v, 0, sizeof(*v));
	v->use = use;
	if (!t->tier) {
		v->store = &t->store;
		v->at = rows;
		return 0;
	}
	v->store = &t->tier->dev;
	if (use != SHEMB__ROWS_PREFETCH)
		shemb__loader_wait(t); /* as if prefetches had loaded now */
	if (!distinct) {
		d = malloc(((size_t)n + 1) * sizeof(*d));
		of = malloc(((size_t)n + 1) * sizeof(*of));
		v->owned = malloc(((size_t)n + 1) * sizeof(int64_t));
		r.nd = d && of && v->owned ? shemb__dedupe(n, rows, d, of) : -1;
		r.d = d;
		rc = r.nd < 0 ? shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory")
			      : 0;
	} else {
		rc = 0;
	}
	if (!rc)
		rc = resolve_rows(t, &r, use);
	if (!rc) {
		v->slots = r.dslot;
		v->nslots = r.nd;
		v->at = r.dslot;
		for (int64_t i = 0; of && i < n; i++)
			v->owned[i] = r.dslot[of[i]];
		if (of)
			v->at = v->owned;
	} else {
		free(r.dslot);
		free(v->owned);
		v->owned = NULL;
	}
	free(d);
	free(of);
	return rc;
}

void shemb__rows_release(shemb_table *t, struct shemb__rows_view *v)
{
	struct shemb__tier *tr = t->tier;

	if (!tr || !v->slots)
		goto out;
	pthread_mutex_lock(&tr->lock);
	for (int64_t i = 0; i < v->nslots; i++) {
		int32_t s = (int32_t)v->slots[i];

		if (s < 0)
			continue;
		if (v->use == SHEMB__ROWS_WRITE)
			tr->slot[s].dirty = 1;
		unpin(tr, s);
	}
	pthread_cond_broadcast(&tr->unpinned);
	pthread_mutex_unlock(&tr->lock);
out:
	free(v->slots);
	free(v->owned);
	memset(v, 0, sizeof(*v));
}

/* rows[0 .. n) without repeats: rows itself when the caller knows it has
 * none (*copy NULL), else a copy to free (*copy); NULL without memory. */
static const int64_t *distinct_rows(shemb_table *t, int64_t *n,
				    const int64_t *rows, bool distinct,
				    int64_t **copy)
{
	int64_t nd;

	*copy = NULL;
	if (distinct)
		return rows;
	*copy = malloc(((size_t)*n + 1) * sizeof(**copy));
	nd = *copy ? shemb__dedupe(*n, rows, *copy, NULL) : -1;
	if (nd < 0) {
		free(*copy);
		*copy = NULL;
		shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory");
		return NULL;
	}
	*n = nd;
	return *copy;
}

/* Queue a coming step of n distinct rows of LOOKAHEAD tier t; `own`: the
 * announcement a prefetch makes of its step when the caller announces
 * none. */
static int announce(shemb_table *t, int64_t n, const int64_t *rows,
		    bool own)
{
	struct shemb__tier *tr = t->tier;
	int rc = 0;

	if (!tr || tr->policy != SHEMB_CACHE_LOOKAHEAD)
		return 0;
	shemb__loader_wait(t); /* announcements in call order */
	pthread_mutex_lock(&tr->lock);
	if (!own)
		tr->ahead.used = true;
	if (!own || !tr->ahead.used)
		rc = shemb__ahead_push(tr, n, rows);
	pthread_mutex_unlock(&tr->lock);
	if (rc == SHEMB_EINVAL && own)
		return 0; /* prefetches without lookups: it only loads */
	if (rc == SHEMB_EINVAL)
		return shemb__fail(t->ctx, rc, "table '%s': %d steps are "
				   "announced and not yet looked up, the most "
				   "a device tier keeps", t->name,
				   SHEMB__AHEAD_MAX);
	if (rc)
		return shemb__fail(t->ctx, rc, "no memory");
	return 0;
}

int shemb__tier_announce(shemb_table *t, int64_t n, const int64_t *rows,
			 bool distinct)
{
	int64_t *copy;
	int rc;

	if (!t->tier || t->tier->policy != SHEMB_CACHE_LOOKAHEAD)
		return 0;
	rows = distinct_rows(t, &n, rows, distinct, &copy);
	rc = rows ? announce(t, n, rows, false) : SHEMB_ENOMEM;
	free(copy);
	return rc;
}

/* The announcement now, in call order; the loads by the loader thread
 * (or now, when it cannot take them). */
int shemb__tier_prefetch(shemb_table *t, int64_t n, const int64_t *rows,
			 bool distinct)
{
	struct shemb__rows_view v;
	int64_t *copy;
	int rc;

	if (!t->tier)
		return 0;
	rows = distinct_rows(t, &n, rows, distinct, &copy);
	if (!rows)
		return SHEMB_ENOMEM;
	rc = announce(t, n, rows, true);
	if (!rc && n > 0 && shemb__loader_queue(t, n, rows)) {
		rc = shemb__rows_acquire(t, n, rows, true,
					 SHEMB__ROWS_PREFETCH, &v);
		shemb__rows_release(t, &v);
	}
	free(copy);
	return rc;
}

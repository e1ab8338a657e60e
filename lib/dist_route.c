/*
 * dist_route.c - which distinct ids of a step go to which rank, what an
 * owner received, and how an owner groups the gradient rows it receives.
 */
#include "lib/dist.h"
#include "lib/radix.h"

#include <stdlib.h>
#include <string.h>

void shemb__route_free(struct shemb__route *r)
{
	if (!r)
		return;
	free(r->to_first);
	free(r->unique_at);
	free(r->owner_of);
	free(r->pair_first);
	free(r->pair_bag);
	free(r->pair_len);
	free(r->occ_first);
	free(r->occ_id);
	free(r->occ_coef);
	shemb__route_release_intake(r);
	free(r);
}

static int64_t *alloc_i64(int64_t n)
{
	return malloc((size_t)(n + 1) * sizeof(int64_t));
}

/* Requester side of plan p: slots in owner order, ascending ids within an
 * owner (a stable counting sort of the distinct ids by owner). */
int shemb__route_build(const shemb_table *t, struct shemb__plan *p)
{
	const struct shemb__shard *sh = &t->shard;
	int w = sh->world;
	struct shemb__route *r = p->route;
	int32_t *owner;

	if (!r) {
		r = p->route = calloc(1, sizeof(*r));
		if (!r)
			return SHEMB_ENOMEM;
	}
	free(r->to_first);
	free(r->unique_at);
	free(r->owner_of);
	r->world = w;
	r->nunique = p->nunique;
	r->pooled = false;
	r->to_all = sh->kind == SHEMB_SHARD_COLUMN ||
		    sh->kind == SHEMB_SHARD_REPLICATED;
	r->to_first = calloc((size_t)w + 1, sizeof(int64_t));
	r->unique_at = alloc_i64(p->nunique);
	owner = malloc((size_t)(p->nunique + 1) * sizeof(int32_t));
	r->owner_of = owner;
	if (!r->to_first || !r->unique_at || !owner)
		return SHEMB_ENOMEM;
	for (int64_t u = 0; u < p->nunique; u++) {
		owner[u] = shemb__shard_owner(sh, p->unique[u]);
		r->to_first[(owner[u] < 0 ? 0 : owner[u]) + 1]++;
	}
	for (int o = 0; o < w; o++)
		r->to_first[o + 1] += r->to_first[o];
	{
		int64_t *next = alloc_i64(w);

		if (!next)
			return SHEMB_ENOMEM;
		memcpy(next, r->to_first, (size_t)w * sizeof(int64_t));
		for (int64_t u = 0; u < p->nunique; u++)
			r->unique_at[next[owner[u] < 0 ? 0 : owner[u]]++] = u;
		free(next);
	}
	return 0;
}

void shemb__route_release_intake(struct shemb__route *r)
{
	free(r->from_first);
	free(r->local);
	free(r->occ);
	free(r->coef);
	free(r->pair);
	free(r->npairs);
	r->from_first = r->local = r->occ = r->pair = r->npairs = NULL;
	r->coef = NULL;
}

int shemb__route_reserve_intake(struct shemb__route *r, int64_t nrecv)
{
	shemb__route_release_intake(r);
	r->from_first = calloc((size_t)r->world + 1, sizeof(int64_t));
	r->local = alloc_i64(nrecv);
	r->occ = alloc_i64(nrecv);
	r->coef = malloc((size_t)(nrecv + 1) * sizeof(float));
	r->pair = alloc_i64(nrecv);
	r->npairs = malloc((size_t)(r->world + 1) * sizeof(int64_t));
	r->nrecv = nrecv;
	for (int p = 0; r->npairs && p < r->world; p++)
		r->npairs[p] = -1;
	return r->from_first && r->local && r->occ && r->coef && r->pair &&
			       r->npairs
		       ? 0
		       : SHEMB_ENOMEM;
}

/*
 * Owner side: n ids (and their occurrence counts) from peer, stored from
 * index `at`.  Peers are taken in rank order.  An id this rank does not
 * hold means the ranks' tables differ: SHEMB_EINTERNAL.
 */
int shemb__route_intake(const shemb_table *t, struct shemb__route *r,
			int peer, int64_t n, const int64_t *ids,
			const int64_t *occ, int64_t at)
{
	const struct shemb__shard *sh = &t->shard;

	for (int64_t i = 0; i < n; i++) {
		if (shemb__route_local(sh, ids[i], &r->local[at + i]))
			return SHEMB_EINTERNAL;
		r->occ[at + i] = occ[i];
		r->coef[at + i] = 1.0f;
		r->pair[at + i] = -1;
	}
	r->from_first[peer + 1] = at + n;
	for (int p = peer + 2; p <= r->world; p++)
		r->from_first[p] = at + n;
	return 0;
}

/* ---- the owner's grouping of gradient rows ---- */

int64_t shemb__route_rows_from(const struct shemb__route *r, int peer,
			       bool per_occurrence)
{
	int64_t rows = 0;

	if (r->npairs && r->npairs[peer] >= 0)
		return r->npairs[peer];
	if (!per_occurrence)
		return r->from_first[peer + 1] - r->from_first[peer];
	for (int64_t i = r->from_first[peer]; i < r->from_first[peer + 1]; i++)
		rows += r->occ[i];
	return rows;
}

/* One received row's part in the update of a local row. */
struct contrib {
	int64_t local;
	int64_t k;     /* in received order: rank, then the sender's */
	int64_t row;
	float coef;
};

static int by_local(const void *a, const void *b)
{
	const struct contrib *x = a, *y = b;

	if (x->local != y->local)
		return x->local < y->local ? -1 : 1;
	return (x->k > y->k) - (x->k < y->k);
}

void shemb__merge_free(struct shemb__merge *m)
{
	free(m->unique);
	free(m->seg);
	free(m->pos);
	free(m->row_of);
	free(m->coef);
	memset(m, 0, sizeof(*m));
}

static int merge_alloc(struct shemb__merge *m, int64_t n, int64_t rows)
{
	memset(m, 0, sizeof(*m));
	if (n > INT32_MAX || rows > INT32_MAX)
		return SHEMB_EINVAL;
	m->unique = alloc_i64(n);
	m->seg = malloc((size_t)(n + 2) * sizeof(int32_t));
	m->pos = malloc((size_t)(n + 1) * sizeof(int32_t));
	m->row_of = malloc((size_t)(n + 1) * sizeof(int32_t));
	m->coef = malloc((size_t)(n + 1) * sizeof(float));
	m->nrows = rows;
	m->ncontrib = n;
	return m->unique && m->seg && m->pos && m->row_of && m->coef
		       ? 0
		       : SHEMB_ENOMEM;
}

/*
 * The contributions' order by local row, and by arrival within a row: a
 * radix sort of keys local << kb | index (index < 2^kb), ten to twenty
 * times faster than qsort() on the structs, which took milliseconds a
 * step.  *order gets the sorted keys (index in the low kb bits), or NULL
 * where the two do not fit 64 bits: c is then sorted in place.
 */
static int order_by_local(struct contrib *c, int64_t n, uint64_t **order,
			  int *kb)
{
	uint64_t max = 0, *keys;
	int lb, rc;

	*order = NULL;
	*kb = shemb__bits_for((uint64_t)(n > 1 ? n - 1 : 1));
	for (int64_t k = 0; k < n; k++)
		max = (uint64_t)c[k].local > max ? (uint64_t)c[k].local : max;
	lb = shemb__bits_for(max);
	if (*kb + lb > 64) {
		qsort(c, (size_t)n, sizeof(*c), by_local);
		return 0;
	}
	keys = malloc((size_t)(n + 1) * sizeof(*keys));
	rc = keys ? 0 : SHEMB_ENOMEM;
	for (int64_t k = 0; !rc && k < n; k++)
		keys[k] = (uint64_t)c[k].local << *kb | (uint64_t)k;
	if (!rc)
		rc = shemb__radix_sort(&keys, n, *kb, *kb + lb);
	if (rc)
		free(keys);
	else
		*order = keys;
	return rc;
}

/* The contributions of peer's entries, its rows numbered from base. */
static int64_t contribs_of(const struct shemb__route *r, int peer,
			   bool per_occurrence, int64_t base,
			   struct contrib *c, int64_t n)
{
	bool pooled = r->npairs && r->npairs[peer] >= 0;
	int64_t row = base;

	for (int64_t i = r->from_first[peer]; i < r->from_first[peer + 1];
	     i++) {
		int64_t cnt = !pooled && per_occurrence ? r->occ[i] : 1;

		for (int64_t k = 0; k < cnt; k++, n++) {
			c[n] = (struct contrib){
				.local = r->local[i],
				.k = n,
				.row = pooled ? base + r->pair[i] : row++,
				.coef = r->coef[i],
			};
		}
	}
	return n;
}

/*
 * Received gradient rows lie rank by rank: one per id, one per occurrence
 * (per_occurrence), or one per bag the sender's owner-pooled ids were in.
 * Group their contributions by local row, in rank order, so every owner
 * sums in the same order whatever the timing.
 */
int shemb__merge_build(const struct shemb__route *r, bool per_occurrence,
		       struct shemb__merge *m)
{
	int64_t n = 0, rows = 0;
	struct contrib *c;
	uint64_t *order;
	int rc, kb;

	for (int p = 0; p < r->world; p++) {
		bool pooled = r->npairs && r->npairs[p] >= 0;

		for (int64_t i = r->from_first[p]; i < r->from_first[p + 1];
		     i++)
			n += !pooled && per_occurrence ? r->occ[i] : 1;
		rows += shemb__route_rows_from(r, p, per_occurrence);
	}
	rc = merge_alloc(m, n, rows);
	c = malloc((size_t)(n + 1) * sizeof(*c));
	if (rc || !c) {
		free(c);
		shemb__merge_free(m);
		return rc ? rc : SHEMB_ENOMEM;
	}
	n = rows = 0;
	for (int p = 0; p < r->world; p++) {
		n = contribs_of(r, p, per_occurrence, rows, c, n);
		rows += shemb__route_rows_from(r, p, per_occurrence);
	}
	rc = order_by_local(c, n, &order, &kb);
	for (int64_t k = 0; !rc && k < n; k++) {
		uint64_t i = order ? order[k] & ((UINT64_C(1) << kb) - 1)
				   : (uint64_t)k;
		const struct contrib *x = &c[i];

		if (k == 0 || x->local != m->unique[m->nunique - 1]) {
			m->unique[m->nunique] = x->local;
			m->seg[m->nunique++] = (int32_t)k;
		}
		m->pos[k] = (int32_t)k;
		m->row_of[k] = (int32_t)x->row;
		m->coef[k] = x->coef;
	}
	m->seg[m->nunique] = (int32_t)n;
	free(order);
	free(c);
	if (rc)
		shemb__merge_free(m);
	return rc;
}

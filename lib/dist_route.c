/*
 * dist_route.c - which distinct ids of a step go to which rank, what an
 * owner received, and how an owner groups the gradient rows it receives.
 */
#include "lib/dist.h"

#include <stdlib.h>
#include <string.h>

void shemb__route_free(struct shemb__route *r)
{
	if (!r)
		return;
	free(r->to_first);
	free(r->unique_at);
	free(r->from_first);
	free(r->local);
	free(r->occ);
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
	r->world = w;
	r->nunique = p->nunique;
	r->to_first = calloc((size_t)w + 1, sizeof(int64_t));
	r->unique_at = alloc_i64(p->nunique);
	owner = malloc((size_t)(p->nunique + 1) * sizeof(int32_t));
	if (!r->to_first || !r->unique_at || !owner) {
		free(owner);
		return SHEMB_ENOMEM;
	}
	for (int64_t u = 0; u < p->nunique; u++) {
		owner[u] = shemb__shard_owner(sh, p->unique[u]);
		r->to_first[(owner[u] < 0 ? 0 : owner[u]) + 1]++;
	}
	for (int o = 0; o < w; o++)
		r->to_first[o + 1] += r->to_first[o];
	{
		int64_t *next = alloc_i64(w);

		if (!next) {
			free(owner);
			return SHEMB_ENOMEM;
		}
		memcpy(next, r->to_first, (size_t)w * sizeof(int64_t));
		for (int64_t u = 0; u < p->nunique; u++)
			r->unique_at[next[owner[u] < 0 ? 0 : owner[u]]++] = u;
		free(next);
	}
	free(owner);
	return 0;
}

int shemb__route_reserve_intake(struct shemb__route *r, int64_t nrecv)
{
	free(r->from_first);
	free(r->local);
	free(r->occ);
	r->from_first = calloc((size_t)r->world + 1, sizeof(int64_t));
	r->local = alloc_i64(nrecv);
	r->occ = alloc_i64(nrecv);
	r->nrecv = nrecv;
	return r->from_first && r->local && r->occ ? 0 : SHEMB_ENOMEM;
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
		int64_t id = ids[i];
		int o;

		if (id < 0 || id >= sh->rows)
			return SHEMB_EINTERNAL;
		o = shemb__shard_owner(sh, id);
		if (o >= 0 && o != sh->rank)
			return SHEMB_EINTERNAL;
		r->local[at + i] = shemb__shard_local(sh, id);
		r->occ[at + i] = occ[i];
	}
	r->from_first[peer + 1] = at + n;
	for (int p = peer + 2; p <= r->world; p++)
		r->from_first[p] = at + n;
	return 0;
}

/* ---- the owner's grouping of gradient rows ---- */

struct entry {
	int64_t local;
	int64_t e; /* received order: rank, then the sender's order */
};

static int by_local(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->local != y->local)
		return x->local < y->local ? -1 : 1;
	return (x->e > y->e) - (x->e < y->e);
}

void shemb__merge_free(struct shemb__merge *m)
{
	free(m->unique);
	free(m->seg);
	free(m->pos);
	free(m->ident);
	memset(m, 0, sizeof(*m));
}

static int merge_alloc(struct shemb__merge *m, int64_t n, int64_t rows)
{
	memset(m, 0, sizeof(*m));
	if (rows > INT32_MAX)
		return SHEMB_EINVAL;
	m->unique = alloc_i64(n);
	m->seg = malloc((size_t)(n + 2) * sizeof(int32_t));
	m->pos = malloc((size_t)(rows + 1) * sizeof(int32_t));
	m->ident = malloc((size_t)(rows + 1) * sizeof(int32_t));
	m->nrows = rows;
	return m->unique && m->seg && m->pos && m->ident ? 0 : SHEMB_ENOMEM;
}

/*
 * Received gradient rows lie rank by rank, each id's rows together (one,
 * or its occurrences when per_occurrence).  Group them by local row:
 * rows of one row id in rank order, so every owner sums in the same
 * order whatever the timing.
 */
int shemb__merge_build(const struct shemb__route *r, bool per_occurrence,
		       struct shemb__merge *m)
{
	int64_t n = r->nrecv, rows = 0, *first;
	struct entry *ent;
	int rc;

	for (int64_t i = 0; i < n; i++)
		rows += per_occurrence ? r->occ[i] : 1;
	rc = merge_alloc(m, n, rows);
	ent = malloc((size_t)(n + 1) * sizeof(*ent));
	first = alloc_i64(n);
	if (rc || !ent || !first) {
		free(ent);
		free(first);
		shemb__merge_free(m);
		return rc ? rc : SHEMB_ENOMEM;
	}
	for (int64_t i = 0, at = 0; i < n; i++) {
		ent[i] = (struct entry){ r->local[i], i };
		first[i] = at;
		at += per_occurrence ? r->occ[i] : 1;
	}
	qsort(ent, (size_t)n, sizeof(*ent), by_local);
	for (int64_t k = 0; k < rows; k++)
		m->ident[k] = (int32_t)k;
	for (int64_t i = 0, np = 0; i < n; i++) {
		int64_t e = ent[i].e, cnt = per_occurrence ? r->occ[e] : 1;

		if (i == 0 || ent[i].local != ent[i - 1].local) {
			m->unique[m->nunique] = ent[i].local;
			m->seg[m->nunique++] = (int32_t)np;
		}
		for (int64_t k = 0; k < cnt; k++)
			m->pos[np++] = (int32_t)(first[e] + k);
	}
	m->seg[m->nunique] = (int32_t)rows;
	free(ent);
	free(first);
	return 0;
}

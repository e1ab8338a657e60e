/*
 * dist_backward.c - a backward step across ranks: gradient rows to the
 * owners, summed there in rank order, one optimizer update per row (see
 * dist.h).
 *
 * Message to each peer: one int64 per table of the call (the number of
 * ids of a replicated table, else 0), then per table: for a replicated
 * table its ids and their occurrence counts (int64) first; then the fp32
 * gradient rows, of the receiver's columns, for the ids the receiver got
 * in the lookup (or the ids just listed), in that order: one row per id,
 * or in deterministic mode one per occurrence.
 */
#include "lib/dist.h"

#include <stdlib.h>
#include <string.h>

#include "lib/comm.h"

/* This rank's gradient rows of one table: [nunique][dim], or in
 * deterministic mode [nids][dim] in plan position order, in the table's
 * wire dtype. */
struct grads {
	void *rows;
};

static size_t grad_bytes(const shemb_table *t)
{
	return shemb__dtype_bytes(shemb__wire_grads(t));
}

/* fp32 rows into the wire dtype (a new buffer in place of the old). */
static int to_wire(shemb_ctx *ctx, const shemb_table *t, void **rows,
		   int64_t n)
{
	int dim = t->attr.dim, rc;
	void *wire;

	if (shemb__wire_grads(t) == SHEMB_F32 || n == 0)
		return 0;
	wire = malloc((size_t)n * (size_t)dim * 2 + 8);
	if (!wire)
		return SHEMB_ENOMEM;
	rc = ctx->mem->convert(ctx->be, wire, shemb__wire_grads(t),
			       (size_t)dim * 2, *rows, SHEMB_F32,
			       (size_t)dim * 4, n, dim);
	free(*rows);
	*rows = wire;
	return rc;
}

static bool per_occurrence(const shemb_ctx *ctx)
{
	return ctx->attr.deterministic != 0;
}

static bool replicated(const shemb_table *t)
{
	return t->shard.kind == SHEMB_SHARD_REPLICATED;
}

static int ncols_at(const shemb_table *t, int r, int *c0)
{
	int n;

	shemb__shard_columns(&t->shard, r, c0, &n);
	return n;
}

/* The ids of plan p sent to peer: distinct-id indices lo .. hi - 1 of the
 * route's slots (column-wise and replicated: all, in plan order). */
static void slots_to(const shemb_table *t, const struct shemb__plan *p,
		     int peer, int64_t *lo, int64_t *hi)
{
	if (t->shard.kind == SHEMB_SHARD_COLUMN || replicated(t)) {
		*lo = 0;
		*hi = p->nunique;
	} else {
		*lo = p->route->to_first[peer];
		*hi = p->route->to_first[peer + 1];
	}
}

static int64_t unique_at(const shemb_table *t, const struct shemb__plan *p,
			 int64_t slot)
{
	if (t->shard.kind == SHEMB_SHARD_COLUMN || replicated(t))
		return slot;
	return p->route->unique_at[slot];
}

/* Each table's part of a message starts 8-byte aligned. */
static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Gradient rows sent for distinct id u. */
static int64_t rows_of(const struct shemb__plan *p, int64_t u, bool occ)
{
	return occ ? p->seg[u + 1] - p->seg[u] : 1;
}

/* ---- requester ---- */

static int make_grads(struct shemb__step *st, int g, const float *const *grad,
		      struct grads *out)
{
	const struct shemb__group *grp = &st->groups[g];
	shemb_table *t = grp->table;
	const struct shemb__plan *p = t->plan;
	bool occ = per_occurrence(st->ctx);
	int64_t n = occ ? p->nids : p->nunique;
	struct shemb__store v = { .dim = t->attr.dim };
	struct shemb__bwd_set *sets;
	struct shemb__update_job job = {
		.store = &v,
		.nunique = p->nunique,
		.unique = p->unique,
		.seg = p->seg,
		.pos = p->pos,
		.bag_of = p->bag_of,
		.nsets = grp->nsets,
	};
	int rc;

	if (p->route->pooled)
		return 0; /* the bags' own gradient rows go to the owners */
	sets = calloc((size_t)grp->nsets + 1, sizeof(*sets));
	job.sets = sets;
	out->rows = malloc((size_t)n * (size_t)t->attr.dim * sizeof(float) + 8);
	if (!sets || !out->rows) {
		free(sets);
		return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	}
	shemb__bwd_sets(grp, p, grad, sets);
	rc = st->ctx->mem->coalesce(st->ctx->be, &job, out->rows, occ);
	if (!rc && !shemb__dense_replicated(st, t))
		rc = to_wire(st->ctx, t, &out->rows, n);
	free(sets);
	return rc ? shemb__fail(st->ctx, rc, "table '%s': gradients failed "
				"in the backend", t->name)
		  : 0;
}

static size_t bytes_to(const struct shemb__step *st, int g, int peer)
{
	const shemb_table *t = st->groups[g].table;
	const struct shemb__plan *p = t->plan;
	bool occ = per_occurrence(st->ctx);
	int64_t lo, hi, rows = 0;
	int c0, nc = ncols_at(t, peer, &c0);

	if (shemb__dense_replicated(st, t))
		return 0; /* one dense allreduce instead (dist_dense.c) */
	if (!replicated(t) && p->route->pooled)
		return pad8((size_t)(p->route->pair_first[peer + 1] -
				     p->route->pair_first[peer]) *
			    (size_t)t->attr.dim * sizeof(float));
	slots_to(t, p, peer, &lo, &hi);
	for (int64_t s = lo; s < hi; s++)
		rows += rows_of(p, unique_at(t, p, s), occ);
	return (replicated(t) ? 16 * (size_t)(hi - lo) : 0) +
	       pad8((size_t)rows * (size_t)nc * grad_bytes(t));
}

static void pack_one(const struct shemb__step *st, int g, int peer,
		     const struct grads *gr, const float *const *grad,
		     int64_t *count, char **at)
{
	const shemb_table *t = st->groups[g].table;
	const struct shemb__plan *p = t->plan;
	bool occ = per_occurrence(st->ctx);
	int dim = t->attr.dim, c0, nc = ncols_at(t, peer, &c0);
	size_t es = grad_bytes(t);
	int64_t lo, hi;
	char *f;

	if (shemb__dense_replicated(st, t)) {
		*count = 0;
		return;
	}
	if (!replicated(t) && p->route->pooled) {
		*count = 0;
		shemb__pool_pack_grads(st, g, p, grad, peer, *at);
		*at += bytes_to(st, g, peer);
		return;
	}
	slots_to(t, p, peer, &lo, &hi);
	*count = replicated(t) ? hi - lo : 0;
	if (replicated(t)) {
		int64_t *ids = (int64_t *)*at;

		for (int64_t u = 0; u < p->nunique; u++) {
			ids[u] = p->unique[u];
			ids[p->nunique + u] = p->seg[u + 1] - p->seg[u];
		}
		*at += 16 * (size_t)p->nunique;
	}
	f = *at;
	for (int64_t s = lo; s < hi; s++) {
		int64_t u = unique_at(t, p, s);
		int64_t first = occ ? p->seg[u] : u;

		for (int64_t k = 0; k < rows_of(p, u, occ); k++) {
			memcpy(f, (const char *)gr->rows +
					  ((size_t)(first + k) * (size_t)dim +
					   (size_t)c0) * es,
			       (size_t)nc * es);
			f += (size_t)nc * es;
		}
	}
	*at += pad8((size_t)(f - *at));
}

static void pack_all(const struct shemb__step *st, const struct grads *gr,
		     const float *const *grad, struct shemb__xchg *x)
{
	for (int p = 0; p < x->world; p++) {
		int64_t *m = (int64_t *)(x->sbuf + x->sdispl[p]);
		char *at = (char *)(m + st->ngroups);

		for (int g = 0; g < st->ngroups; g++) {
			char *from = at;

			pack_one(st, g, p, &gr[g], grad, &m[g], &at);
			shemb__stats_peer(st->groups[g].table,
					  SHEMB_PHASE_GRADS, p,
					  8 + (uint64_t)(at - from), 0);
		}
	}
}

/* ---- owner ---- */

/* Gradient rows in peer's part of table g, at seg (its start). */
static int64_t rows_from(const struct shemb__step *st, int g, int peer,
			 const char *seg, int64_t count)
{
	const shemb_table *t = st->groups[g].table;
	const struct shemb__route *r = t->plan->route;
	bool occ = per_occurrence(st->ctx);
	int64_t rows = 0;

	if (replicated(t)) {
		const int64_t *o = (const int64_t *)seg + count;

		for (int64_t i = 0; i < count; i++)
			rows += occ ? o[i] : 1;
		return rows;
	}
	return shemb__route_rows_from(r, peer, occ);
}

static size_t part_bytes(const struct shemb__step *st, int g, int peer,
			 const char *seg, int64_t count)
{
	const shemb_table *t = st->groups[g].table;
	int c0, nc = ncols_at(t, t->shard.rank, &c0);

	return (replicated(t) ? 16 * (size_t)count : 0) +
	       pad8((size_t)rows_from(st, g, peer, seg, count) * (size_t)nc *
		    grad_bytes(t));
}

/* Where each table's part of each peer's message starts: start[p * G + g].
 * A message that does not add up means the ranks disagree. */
static int locate(const struct shemb__step *st, const struct shemb__xchg *x,
		  size_t *start)
{
	int ng = st->ngroups;

	for (int p = 0; p < x->world; p++) {
		const int64_t *m = (const int64_t *)(x->rbuf + x->rdispl[p]);
		size_t at = x->rdispl[p] + 8 * (size_t)ng;

		for (int g = 0; g < ng; g++) {
			size_t n = part_bytes(st, g, p, x->rbuf + at, m[g]);

			start[(size_t)p * ng + g] = at;
			at += n;
			shemb__stats_peer(st->groups[g].table,
					  SHEMB_PHASE_GRADS, p, 0, 8 + n);
		}
		if (at != x->rdispl[p] + x->rcount[p])
			return shemb__fail(st->ctx, SHEMB_EINTERNAL, "rank %d "
					   "sent gradients that do not match "
					   "its lookup", p);
	}
	return 0;
}

/* The ids each peer sent with a replicated table's gradients. */
static int replicated_route(const struct shemb__step *st, int g,
			    const struct shemb__xchg *x, const size_t *start,
			    struct shemb__route *r)
{
	const shemb_table *t = st->groups[g].table;
	int64_t total = 0;

	r->world = x->world;
	for (int p = 0; p < x->world; p++)
		total += ((const int64_t *)(x->rbuf + x->rdispl[p]))[g];
	if (shemb__route_reserve_intake(r, total))
		return SHEMB_ENOMEM;
	for (int p = 0; p < x->world; p++) {
		int64_t n = ((const int64_t *)(x->rbuf + x->rdispl[p]))[g];
		const int64_t *ids = (const int64_t *)(x->rbuf +
						       start[(size_t)p *
							     st->ngroups + g]);
		int rc = shemb__route_intake(t, r, p, n, ids, ids + n,
					     r->from_first[p]);

		if (rc)
			return rc;
	}
	return 0;
}

/* Table g's gradient rows from every peer, in rank order, into one fp32
 * buffer. */
static float *gather_rows(const struct shemb__step *st, int g,
			  const struct shemb__xchg *x, const size_t *start,
			  int64_t nrows)
{
	const shemb_table *t = st->groups[g].table;
	int c0, nc = ncols_at(t, t->shard.rank, &c0);
	size_t es = grad_bytes(t), row = (size_t)nc * es;
	float *rows = malloc((size_t)nrows * (size_t)nc * sizeof(float) + 8);
	char *wire = es == 4 ? (char *)rows : malloc((size_t)nrows * row + 8);
	char *at = wire;

	if (!rows || !wire) {
		free(rows);
		if (es != 4)
			free(wire);
		return NULL;
	}
	for (int p = 0; p < x->world; p++) {
		const char *seg = x->rbuf + start[(size_t)p * st->ngroups + g];
		int64_t n = ((const int64_t *)(x->rbuf + x->rdispl[p]))[g];
		int64_t k = rows_from(st, g, p, seg, n);

		if (replicated(t))
			seg += 16 * (size_t)n;
		memcpy(at, seg, (size_t)k * row);
		at += (size_t)k * row;
	}
	if (es != 4) {
		int rc = st->ctx->mem->convert(st->ctx->be, rows, SHEMB_F32,
					       (size_t)nc * sizeof(float),
					       wire, shemb__wire_grads(t), row,
					       nrows, nc);

		free(wire);
		if (rc) {
			free(rows);
			return NULL;
		}
	}
	return rows;
}

/* Row-wise Adagrad needs each row's sum of squared gradients over all
 * its columns, which column-wise owners hold a slice of: every owner has
 * the same distinct rows (every rank sends every id to every owner), so
 * they add their slices' sums with an allreduce, or, in deterministic
 * mode, gather the squares themselves and sum them in column order as a
 * single process does. */
static bool needs_rowsum(const shemb_table *t)
{
	return t->shard.kind == SHEMB_SHARD_COLUMN && t->shard.world > 1 &&
	       t->attr.optimizer == SHEMB_OPT_ROWWISE_ADAGRAD;
}

static int sum_columns(struct shemb__step *st, const shemb_table *t,
		       const float *squares, int64_t n, float *sum)
{
	int w = t->shard.world, c0, nc = ncols_at(t, t->shard.rank, &c0);
	size_t *cnt = calloc((size_t)w, sizeof(size_t));
	size_t *dsp = calloc((size_t)w, sizeof(size_t));
	float *all = malloc((size_t)n * (size_t)t->attr.dim * sizeof(float) + 8);
	struct shemb__coll c = { .kind = SHEMB__ALLGATHERV, .sendbuf = squares,
				 .sendcount = (size_t)n * (size_t)nc * 4,
				 .recvbuf = all, .recvcounts = cnt,
				 .rdispls = dsp };
	int rc = cnt && dsp && all ? 0 : SHEMB_ENOMEM;

	for (int r = 0, at = 0; !rc && r < w; r++) {
		int rn = ncols_at(t, r, &c0);

		cnt[r] = (size_t)n * (size_t)rn * 4;
		dsp[r] = (size_t)at * (size_t)n * 4;
		at += rn;
	}
	if (!rc)
		rc = shemb__coll_run(st->ctx, &c);
	for (int64_t u = 0; !rc && u < n; u++) {
		float total = 0.0f;

		for (int r = 0; r < w; r++) {
			int rn = ncols_at(t, r, &c0);
			const float *q = all + dsp[r] / 4 + (size_t)u * rn;

			for (int k = 0; k < rn; k++)
				total += q[k];
		}
		sum[u] = total;
	}
	free(cnt);
	free(dsp);
	free(all);
	return rc;
}

/* job's rowsum, for row-wise Adagrad over column slices. */
static int row_sums(struct shemb__step *st, const shemb_table *t,
		    struct shemb__update_job *job, float **sum)
{
	bool det = per_occurrence(st->ctx);
	int c0, nc = ncols_at(t, t->shard.rank, &c0);
	int64_t n = job->nunique;
	float *sq = malloc((size_t)n * (size_t)(det ? nc : 1) * 4 + 8);
	int rc;

	*sum = malloc((size_t)n * 4 + 8);
	if (!sq || !*sum) {
		free(sq);
		return SHEMB_ENOMEM;
	}
	rc = st->ctx->mem->grad_squares(st->ctx->be, job, det ? sq : *sum,
					det);
	if (!rc && det) {
		rc = sum_columns(st, t, sq, n, *sum);
	} else if (!rc) {
		struct shemb__coll c = { .kind = SHEMB__ALLREDUCE,
					 .sendbuf = *sum, .recvbuf = *sum,
					 .count = (size_t)n, .dtype = SHEMB_F32,
					 .op = SHEMB_REDUCE_SUM };

		rc = shemb__coll_run(st->ctx, &c);
	}
	free(sq);
	job->rowsum = *sum;
	job->opt.full_dim = t->attr.dim;
	return rc;
}

static int apply_one(struct shemb__step *st, int g,
		     const struct shemb__xchg *x, const size_t *start)
{
	shemb_table *t = st->groups[g].table;
	struct shemb__route own = { 0 }, *r = t->plan->route;
	struct shemb__merge m;
	struct shemb__bwd_set set = { .pooling = SHEMB_POOL_NONE };
	float *rows = NULL;
	uint64_t t0 = shemb__now_ns();
	int rc = 0;

	if (replicated(t)) {
		rc = replicated_route(st, g, x, start, &own);
		r = &own;
	}
	if (!rc)
		rc = shemb__merge_build(r, per_occurrence(st->ctx), &m);
	if (!rc) {
		rows = gather_rows(st, g, x, start, m.nrows);
		rc = rows ? 0 : SHEMB_ENOMEM;
	}
	if (!rc) {
		struct shemb__update_job job = {
			.store = &t->store,
			.nunique = m.nunique,
			.unique = m.unique,
			.seg = m.seg,
			.pos = m.pos,
			.bag_of = m.row_of,
			.nsets = 1,
			.sets = &set,
			.opt = shemb__opt_of(t),
		};

		float *sum = NULL;

		set.nbags = m.nrows;
		set.weights = m.coef;
		set.grad = rows;
		if (needs_rowsum(t))
			rc = row_sums(st, t, &job, &sum);
		if (!rc)
			rc = st->ctx->mem->apply_updates(st->ctx->be, &job);
		free(sum);
		SHEMB__STAT_ADD(t, rows_updated, m.nunique);
		shemb__merge_free(&m);
	}
	free(rows);
	shemb__route_release_intake(&own);
	SHEMB__STAT_ADD(t, update_ns, shemb__now_ns() - t0);
	return rc ? shemb__fail(st->ctx, rc, "table '%s': applying the "
				"gradients failed", t->name)
		  : 0;
}

/* ---- the step ---- */

static int send_and_apply(struct shemb__step *st, const struct grads *gr,
			  const float *const *grad, struct shemb__xchg *x)
{
	size_t *start;
	uint64_t t0;
	int rc;

	if (shemb__xchg_alloc(x))
		return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	pack_all(st, gr, grad, x);
	t0 = shemb__now_ns();
	rc = shemb__xchg_run(st->ctx, x);
	shemb__phase_time(st, SHEMB_PHASE_GRADS, shemb__now_ns() - t0);
	if (rc)
		return rc;
	start = calloc((size_t)x->world * (size_t)st->ngroups + 1,
		       sizeof(size_t));
	if (!start)
		return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	rc = locate(st, x, start);
	for (int g = 0; !rc && g < st->ngroups; g++)
		rc = shemb__dense_replicated(st, st->groups[g].table)
			     ? shemb__dense_apply(st, g, gr[g].rows)
			     : apply_one(st, g, x, start);
	free(start);
	return rc;
}

int shemb__dist_backward(struct shemb__step *st, const float *const *grad,
			 int status)
{
	int world = st->ctx->attr.world_size, rc;
	struct grads *gr = calloc((size_t)st->ngroups + 1, sizeof(*gr));
	struct shemb__xchg x = { 0 };
	uint64_t t0 = shemb__now_ns();

	if (!gr || shemb__xchg_init(&x, world)) {
		free(gr);
		return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	}
	for (int g = 0; !status && g < st->ngroups; g++)
		status = make_grads(st, g, grad, &gr[g]);
	for (int p = 0; !status && p < world; p++) {
		x.scount[p] = 8 * (size_t)st->ngroups;
		for (int g = 0; g < st->ngroups; g++)
			x.scount[p] += bytes_to(st, g, p);
	}
	rc = shemb__dist_agree(st->ctx, SHEMB__DIST_BACKWARD,
			       status ? 0
				      : shemb__dist_signature(
						SHEMB__DIST_BACKWARD, st),
			       status, &x);
	if (!rc)
		rc = send_and_apply(st, gr, grad, &x);
	for (int g = 0; g < st->ngroups; g++) {
		free(gr[g].rows);
		SHEMB__STAT_ADD(st->groups[g].table, exchange_ns,
				shemb__now_ns() - t0);
	}
	free(gr);
	shemb__xchg_free(&x);
	return rc;
}

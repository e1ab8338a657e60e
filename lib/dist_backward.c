/*
 * dist_backward.c - a backward step across ranks: gradient rows to the
 * owners, summed there in rank order, one optimizer update per row (see
 * dist.h).
 *
 * Message to each peer: one int64 per table of the call (the number of
 * ids of a replicated table; for a table whose bags the owners pooled, 1
 * if weights follow its rows; else 0), then per table: for a replicated
 * table its ids and their occurrence counts (int64) first; then the fp32
 * gradient rows, of the receiver's columns, for the ids the receiver got
 * in the lookup (or the ids just listed), in that order: one row per id,
 * or in deterministic mode one per occurrence; pooled, one per pair, then
 * maybe the weight of each id the receiver got (fp32, padded to 8 bytes).
 */
#include "lib/dist.h"
#include "lib/ckpt_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/comm.h"
#include "lib/held.h"

/* This rank's gradient rows of one table: [nunique][dim], or in
 * deterministic mode [nids][dim] in plan position order, in the table's
 * wire dtype. */
struct grads {
	void *rows;
	float *coefs;   /* pooled at the owners: the backward's weights of
			 * their ids, or NULL (dist_pool.c) */
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
	struct shemb__update_job job;
	int rc;

	if (p->route->pooled) { /* the bags' own gradient rows go */
		rc = shemb__pool_backward_coefs(st, g, p, &out->coefs);
		return rc ? shemb__fail(st->ctx, rc, "no memory") : 0;
	}
	sets = calloc((size_t)grp->nsets + 1, sizeof(*sets));
	job = shemb__plan_job(p, &v, grp->nsets, sets);
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

/* The weights of pooled ids sent to peer. */
static size_t coef_bytes(const struct shemb__route *r, int peer)
{
	return shemb__pad8(4 * (size_t)(r->occ_first[peer + 1] -
					r->occ_first[peer]));
}

static size_t bytes_to(const struct shemb__step *st, const struct grads *gr,
		       int g, int peer)
{
	const shemb_table *t = st->groups[g].table;
	const struct shemb__plan *p = t->plan;
	bool occ = per_occurrence(st->ctx);
	int64_t lo, hi, rows = 0;
	int c0, nc = ncols_at(t, peer, &c0);

	if (shemb__dense_replicated(st, t))
		return 0; /* one dense allreduce instead (dist_dense.c) */
	if (!replicated(t) && p->route->pooled)
		return shemb__pad8((size_t)(p->route->pair_first[peer + 1] -
				     p->route->pair_first[peer]) *
			    (size_t)t->attr.dim * sizeof(float)) +
		       (gr->coefs ? coef_bytes(p->route, peer) : 0);
	shemb__route_slots(p->route, peer, &lo, &hi);
	for (int64_t s = lo; s < hi; s++)
		rows += rows_of(p, p->route->unique_at[s], occ);
	return (replicated(t) ? 16 * (size_t)(hi - lo) : 0) +
	       shemb__pad8((size_t)rows * (size_t)nc * grad_bytes(t));
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
		const struct shemb__route *r = p->route;
		int64_t np = r->pair_first[peer + 1] - r->pair_first[peer];
		int64_t no = r->occ_first[peer + 1] - r->occ_first[peer];

		*count = gr->coefs != NULL;
		shemb__pool_pack_grads(st, g, p, grad, peer, *at);
		*at = shemb__zero_pad(*at, (size_t)np * (size_t)t->attr.dim *
						   sizeof(float));
		if (gr->coefs) {
			memcpy(*at, gr->coefs + r->occ_first[peer],
			       4 * (size_t)no);
			*at = shemb__zero_pad(*at, 4 * (size_t)no);
		}
		return;
	}
	shemb__route_slots(p->route, peer, &lo, &hi);
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
		int64_t u = p->route->unique_at[s];
		int64_t first = occ ? p->seg[u] : u;

		for (int64_t k = 0; k < rows_of(p, u, occ); k++) {
			memcpy(f, (const char *)gr->rows +
					  ((size_t)(first + k) * (size_t)dim +
					   (size_t)c0) * es,
			       (size_t)nc * es);
			f += (size_t)nc * es;
		}
	}
	*at = shemb__zero_pad(*at, (size_t)(f - *at));
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

/* The bytes of peer's gradient rows of table g at seg. */
static size_t rows_bytes(const struct shemb__step *st, int g, int peer,
			 const char *seg, int64_t count)
{
	const shemb_table *t = st->groups[g].table;
	int c0, nc = ncols_at(t, t->shard.rank, &c0);

	return shemb__pad8((size_t)rows_from(st, g, peer, seg, count) *
			   (size_t)nc * grad_bytes(t));
}

/* Pooled at the owners: weights follow peer's rows of table g (count). */
static bool coefs_follow(const struct shemb__step *st, int g, int64_t count)
{
	const shemb_table *t = st->groups[g].table;

	return !replicated(t) && t->plan->route->pooled && count;
}

static size_t part_bytes(const struct shemb__step *st, int g, int peer,
			 const char *seg, int64_t count)
{
	const shemb_table *t = st->groups[g].table;
	const struct shemb__route *r = t->plan->route;
	size_t n = rows_bytes(st, g, peer, seg, count);

	if (coefs_follow(st, g, count))
		n += shemb__pad8(4 * (size_t)(r->from_first[peer + 1] -
					      r->from_first[peer]));
	return (replicated(t) ? 16 * (size_t)count : 0) + n;
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

/* An owner's part of one table's backward.  Everything that may fail on
 * this rank alone is made first, for every table; the ranks then agree
 * that all succeeded before any table changes. */
struct owner_part {
	struct shemb__route own;     /* replicated: the ids received */
	struct shemb__merge m;
	float *rows;                 /* received gradient rows, fp32 */
	struct shemb__bwd_set set;
	struct shemb__update_job job;
	float *sq, *sum, *all;       /* row-wise Adagrad over columns */
	size_t *cnt, *dsp;
	struct shemb__dense *dense;  /* small replicated tables */
	shemb_table *table;          /* with its rows acquired in view */
	struct shemb__rows_view view;
};

/* sq, sum and all travel in collectives (finish_rowsum) */
static void free_part(shemb_ctx *ctx, struct owner_part *o)
{
	if (o->table)
		shemb__rows_release(o->table, &o->view);
	shemb__route_release_intake(&o->own);
	shemb__merge_free(&o->m);
	free(o->rows);
	shemb__coll_buf_free(ctx, o->sq);
	shemb__coll_buf_free(ctx, o->sum);
	shemb__coll_buf_free(ctx, o->all);
	free(o->cnt);
	free(o->dsp);
	shemb__dense_free(ctx, o->dense);
}

/* Squares of this rank's slice, and room for what the collective
 * brings. */
static int prepare_rowsum(struct shemb__step *st, const shemb_table *t,
			  struct owner_part *o)
{
	bool det = per_occurrence(st->ctx);
	int w = t->shard.world, c0, nc = ncols_at(t, t->shard.rank, &c0);
	int64_t n = o->job.nunique;

	o->sq = malloc((size_t)n * (size_t)(det ? nc : 1) * 4 + 8);
	o->sum = malloc((size_t)n * 4 + 8);
	o->all = det ? malloc((size_t)n * (size_t)t->attr.dim * 4 + 8) : NULL;
	o->cnt = calloc((size_t)w, sizeof(size_t));
	o->dsp = calloc((size_t)w, sizeof(size_t));
	if (!o->sq || !o->sum || (det && !o->all) || !o->cnt || !o->dsp)
		return SHEMB_ENOMEM;
	for (int r = 0, at = 0; r < w; r++) {
		int rn = ncols_at(t, r, &c0);

		o->cnt[r] = (size_t)n * (size_t)rn * 4;
		o->dsp[r] = (size_t)at * (size_t)n * 4;
		at += rn;
	}
	o->job.rowsum = o->sum;
	o->job.opt.full_dim = t->attr.dim;
	return st->ctx->mem->grad_squares(st->ctx->be, &o->job,
					  det ? o->sq : o->sum, det);
}

/* Every row's total over all columns: sums added by allreduce, or (det)
 * squares gathered and summed in column order. */
static int finish_rowsum(struct shemb__step *st, const shemb_table *t,
			 struct owner_part *o)
{
	int w = t->shard.world, c0, nc = ncols_at(t, t->shard.rank, &c0);
	int64_t n = o->job.nunique;
	struct shemb__coll c = { .kind = SHEMB__ALLREDUCE, .sendbuf = o->sum,
				 .recvbuf = o->sum, .count = (size_t)n,
				 .dtype = SHEMB_F32, .op = SHEMB_REDUCE_SUM };
	int rc;

	if (!per_occurrence(st->ctx))
		return shemb__coll_run(st->ctx, &c);
	c = (struct shemb__coll){ .kind = SHEMB__ALLGATHERV, .sendbuf = o->sq,
				  .sendcount = (size_t)n * (size_t)nc * 4,
				  .recvbuf = o->all, .recvcounts = o->cnt,
				  .rdispls = o->dsp };
	rc = shemb__coll_run(st->ctx, &c);
	for (int64_t u = 0; !rc && u < n; u++) {
		float total = 0.0f;

		for (int r = 0; r < w; r++) {
			int rn = ncols_at(t, r, &c0);
			const float *q = o->all + o->dsp[r] / 4 +
					 (size_t)u * (size_t)rn;

			for (int k = 0; k < rn; k++)
				total += q[k];
		}
		o->sum[u] = total;
	}
	return rc;
}

static int prepare_part(struct shemb__step *st, int g,
			const struct shemb__xchg *x, const size_t *start,
			const struct grads *gr, struct owner_part *o)
{
	shemb_table *t = st->groups[g].table;
	struct shemb__route *r = t->plan->route;
	int rc = 0;

	if (shemb__dense_replicated(st, t)) {
		rc = shemb__dense_prepare(st, g, gr->rows, &o->dense);
		goto out;
	}
	if (replicated(t)) {
		rc = replicated_route(st, g, x, start, &o->own);
		r = &o->own;
	}
	for (int p = 0; !rc && p < x->world; p++) {
		const char *seg = x->rbuf + start[(size_t)p * st->ngroups + g];
		int64_t n = ((const int64_t *)(x->rbuf + x->rdispl[p]))[g];

		if (coefs_follow(st, g, n))
			shemb__pool_take_coefs(r, p, seg + rows_bytes(st, g, p,
								       seg, n));
	}
	if (!rc)
		rc = shemb__merge_build(r, per_occurrence(st->ctx), &o->m);
	if (!rc) {
		o->rows = gather_rows(st, g, x, start, o->m.nrows);
		rc = o->rows ? 0 : SHEMB_ENOMEM;
	}
	if (rc)
		goto out;
	o->set = (struct shemb__bwd_set){ .pooling = SHEMB_POOL_NONE,
					  .nbags = o->m.nrows,
					  .weights = o->m.coef,
					  .grad = o->rows };
	o->job = (struct shemb__update_job){
		.store = &t->store,
		.nunique = o->m.nunique,
		.unique = o->m.unique,
		.seg = o->m.seg,
		.pos = o->m.pos,
		.bag_of = o->m.row_of,
		.nsets = 1,
		.sets = &o->set,
		.opt = shemb__opt_of(t),
	};
	rc = shemb__rows_acquire(t, o->m.nunique, o->m.unique, true,
				 SHEMB__ROWS_WRITE, &o->view);
	o->table = t;
	if (rc)
		return rc; /* the tier recorded why */
	o->job.store = o->view.store;
	o->job.unique = o->view.at;
	rc = needs_rowsum(t) ? prepare_rowsum(st, t, o) : 0;
out:
	if (rc)
		shemb__fail(st->ctx, rc, "table '%s': preparing its gradients "
			    "failed (%s)", t->name, shemb_strerror(rc));
	return rc;
}

/* After the ranks agreed that every one prepared its part: the
 * collective some tables still need (a dense allreduce, the row sums). */
static int reduce_part(struct shemb__step *st, int g, struct owner_part *o)
{
	shemb_table *t = st->groups[g].table;

	if (o->dense)
		return shemb__dense_reduce(st, g, o->dense);
	return needs_rowsum(t) ? finish_rowsum(st, t, o) : 0;
}

static bool any_reduction(const struct shemb__step *st,
			  const struct owner_part *parts)
{
	for (int g = 0; g < st->ngroups; g++)
		if (parts[g].dense || needs_rowsum(st->groups[g].table))
			return true;
	return false;
}

/*
 * Every table's collective, run on every rank even after one failed (the
 * ranks stay in step however it failed), then the ranks agree that all
 * succeeded everywhere: a table applied before a later table's
 * collective failed would leave the backward half done.  The same on
 * every rank: which tables reduce follows from their attributes.
 */
static int reduce_all(struct shemb__step *st, struct owner_part *parts)
{
	char why[256] = "";
	int rc = 0;

	if (!any_reduction(st, parts))
		return 0;
	for (int g = 0; g < st->ngroups; g++) {
		int one = reduce_part(st, g, &parts[g]);

		if (one && !rc) { /* the first failure's detail is told */
			rc = one;
			snprintf(why, sizeof(why), "table '%s': %s",
				 st->groups[g].table->name,
				 shemb_ctx_last_error(st->ctx));
		}
	}
	if (rc)
		shemb__fail(st->ctx, rc, "%s", why);
	return shemb__dist_all_ok(st->ctx, rc,
				  "the reductions of this backward");
}

/* The update of one table, once every reduction succeeded everywhere. */
static int apply_part(struct shemb__step *st, int g, struct owner_part *o)
{
	shemb_table *t = st->groups[g].table;
	uint64_t t0 = shemb__now_ns();
	int rc;

	if (o->dense)
		return shemb__dense_apply(st, g, o->dense);
	rc = st->ctx->mem->apply_updates(st->ctx->be, &o->job);
	shemb__ckpt_touch(t, o->m.nunique, o->m.unique);
	SHEMB__STAT_ADD(t, rows_updated, o->m.nunique);
	SHEMB__STAT_ADD(t, update_ns, shemb__now_ns() - t0);
	return rc ? shemb__fail(st->ctx, rc, "table '%s': applying the "
				"gradients failed", t->name)
		  : 0;
}

/* ---- the step ---- */

static int prepare_all(struct shemb__step *st, const struct grads *gr,
		       const struct shemb__xchg *x, struct owner_part *parts)
{
	size_t *start = calloc((size_t)x->world * (size_t)st->ngroups + 1,
			       sizeof(size_t));
	int rc = start ? locate(st, x, start)
		       : shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");

	/* each part records the detail of its own failure */
	for (int g = 0; !rc && g < st->ngroups; g++)
		rc = prepare_part(st, g, x, start, &gr[g], &parts[g]);
	free(start);
	return rc;
}

/* The grads landed in b->x: every table's update, once every rank has
 * prepared its part. */
int shemb__dist_backward_apply(struct shemb__step *st,
			       struct shemb__dist_bwd *b)
{
	struct owner_part *parts;
	int rc, tried = 0; /* the parts whose update ran, or began */

	parts = calloc((size_t)st->ngroups + 1, sizeof(*parts));
	rc = parts ? prepare_all(st, b->grads, &b->x, parts)
		   : shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	rc = shemb__dist_all_ok(st->ctx, rc, "its part of this backward");
	if (!rc)
		rc = reduce_all(st, parts);
	for (int g = 0; !rc && g < st->ngroups; g++, tried++)
		rc = apply_part(st, g, &parts[g]);
	for (int g = 0; !rc && g < st->ngroups; g++)
		shemb__tier_plan_end(st->groups[g].table);
	for (int g = 0; parts && g < st->ngroups; g++) {
		if (g >= tried)
			shemb__rows_unwritten(&parts[g].view);
		free_part(st->ctx, &parts[g]);
	}
	free(parts);
	return rc;
}

int shemb__dist_backward_open(struct shemb__step *st, const float *const *grad,
			      int status, struct shemb__offer *offer,
			      struct shemb__dist_bwd *b)
{
	int world = st->ctx->attr.world_size, rc;
	struct grads *gr = calloc((size_t)st->ngroups + 1, sizeof(*gr));
	struct shemb__xchg *x = &b->x;

	memset(b, 0, sizeof(*b));
	b->t0 = shemb__now_ns();
	b->grads = gr;
	if (offer)
		offer->agreed = 0;
	/* without them, this rank still meets the others, failed */
	if ((!gr || shemb__xchg_init(x, world)) && !status)
		status = shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	for (int g = 0; !status && g < st->ngroups; g++)
		status = make_grads(st, g, grad, &gr[g]);
	for (int p = 0; !status && p < world; p++) {
		x->scount[p] = 8 * (size_t)st->ngroups;
		for (int g = 0; g < st->ngroups; g++)
			x->scount[p] += bytes_to(st, &gr[g], g, p);
	}
	if (offer)
		offer->agreed = offer->make(offer->arg, status);
	rc = shemb__dist_agree_offers(
		st->ctx, SHEMB__DIST_BACKWARD,
		status ? 0 : shemb__dist_signature(SHEMB__DIST_BACKWARD, st),
		status, x, offer ? &offer->agreed : NULL);
	/* the others, committed to the exchange, learn it there */
	if (!rc && shemb__xchg_alloc(x))
		rc = b->refused = shemb__xchg_refuse(st->ctx, SHEMB_ENOMEM,
						     "no memory for the "
						     "gradients to send");
	if (!rc)
		pack_all(st, gr, grad, x);
	return rc;
}

void shemb__dist_backward_close(struct shemb__step *st,
				struct shemb__dist_bwd *b)
{
	struct grads *gr = b->grads;

	for (int g = 0; gr && g < st->ngroups; g++) {
		free(gr[g].rows);
		free(gr[g].coefs);
		SHEMB__STAT_ADD(st->groups[g].table, exchange_ns,
				shemb__now_ns() - b->t0);
	}
	free(gr);
	shemb__xchg_free(st->ctx, &b->x);
}

int shemb__dist_backward(struct shemb__step *st, const float *const *grad,
			 int status)
{
	struct shemb__dist_bwd b;
	int rc = shemb__dist_backward_open(st, grad, status, NULL, &b);
	uint64_t t0 = shemb__now_ns();

	if (!rc) {
		rc = shemb__xchg_run(st->ctx, &b.x);
		shemb__phase_time(st, SHEMB_PHASE_GRADS, shemb__now_ns() - t0);
	}
	if (!rc)
		rc = shemb__dist_backward_apply(st, &b);
	shemb__dist_backward_close(st, &b);
	return rc;
}

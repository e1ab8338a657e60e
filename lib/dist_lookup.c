/*
 * dist_lookup.c - a lookup across ranks: distinct ids to their owners,
 * rows back, pooling here (see dist.h).
 *
 * Message of the ids, to each peer: one int64 count per table of the call,
 * then per table that many ids and as many occurrence counts (int64).
 * Message of the rows, back: per table, one row per id received, in the
 * table's storage dtype, of the owner's columns (pooled parts: one fp32
 * row per pair).  Each table's part of every peer's piece moves as an
 * alltoallv of its own (rows_by_table).
 */
#include "lib/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of one row as rank r holds it. */
/* Rows travel in the wire dtype, except for read_rows, which is exact. */
static int row_dtype(const struct shemb__step *st, const shemb_table *t)
{
	return shemb__step_reads(st) ? t->attr.dtype : shemb__wire_rows(t);
}

size_t shemb__lookup_row_bytes(const struct shemb__step *st,
			       const shemb_table *t, int r)
{
	int c0, n;

	shemb__shard_columns(&t->shard, r, &c0, &n);
	return (size_t)n * shemb__dtype_bytes(row_dtype(st, t));
}

static size_t full_row_bytes(const struct shemb__step *st,
			     const shemb_table *t)
{
	return (size_t)t->attr.dim * shemb__dtype_bytes(row_dtype(st, t));
}

/* The slots of plan p this rank sends to peer (distinct ids): none for a
 * replicated table, whose lookups need no exchange. */
static void slots_to(const shemb_table *t, const struct shemb__plan *p,
		     int peer, int64_t *lo, int64_t *hi)
{
	if (t->shard.kind == SHEMB_SHARD_REPLICATED)
		*lo = *hi = 0;
	else
		shemb__route_slots(p->route, peer, lo, hi);
}

static int route_all(struct shemb__step *st, struct shemb__plan **plans)
{
	for (int g = 0; g < st->ngroups; g++) {
		int rc = shemb__route_build(st->groups[g].table, plans[g]);

		if (!rc)
			rc = shemb__pool_route(st, g, plans[g]);
		if (rc)
			return shemb__fail(st->ctx, rc, "no memory to route "
					   "the ids of table '%s'",
					   st->groups[g].table->name);
	}
	return 0;
}

static void count_ids(struct shemb__step *st, struct shemb__plan **plans,
		      struct shemb__xchg *x)
{
	for (int p = 0; p < x->world; p++) {
		x->scount[p] = 8 * (size_t)st->ngroups;
		for (int g = 0; g < st->ngroups; g++) {
			int64_t lo, hi;

			if (plans[g]->route->pooled) {
				x->scount[p] += shemb__pool_ids_bytes(
					plans[g]->route, p);
				continue;
			}
			slots_to(st->groups[g].table, plans[g], p, &lo, &hi);
			x->scount[p] += 16 * (size_t)(hi - lo);
		}
	}
}

static void pack_ids(struct shemb__step *st, struct shemb__plan **plans,
		     struct shemb__xchg *x)
{
	for (int p = 0; p < x->world; p++) {
		int64_t *m = (int64_t *)(x->sbuf + x->sdispl[p]);
		int64_t *at = m + st->ngroups;

		for (int g = 0; g < st->ngroups; g++) {
			const struct shemb__plan *pl = plans[g];
			int64_t lo, hi, n;

			if (pl->route->pooled) {
				size_t b = shemb__pool_ids_bytes(pl->route, p);

				m[g] = shemb__pool_pack_ids(pl->route, p,
							    (char *)at);
				shemb__stats_peer(st->groups[g].table,
						  SHEMB_PHASE_IDS, p, 8 + b, 0);
				at += b / 8;
				continue;
			}
			slots_to(st->groups[g].table, pl, p, &lo, &hi);
			n = hi - lo;
			m[g] = n;
			shemb__stats_peer(st->groups[g].table,
					  SHEMB_PHASE_IDS, p, 8 + 16 * n, 0);
			for (int64_t k = 0; k < n; k++) {
				int64_t u = pl->route->unique_at[lo + k];

				at[k] = pl->unique[u];
				at[n + k] = pl->seg[u + 1] - pl->seg[u];
			}
			at += 2 * n;
		}
	}
}

/* Entries (ids) and bytes of a table's part at seg with header count m:
 * distinct ids with their occurrences, or owner-pooled pairs. */
static size_t part_of(const char *seg, int64_t m, int64_t *entries)
{
	if (m >= 0) {
		*entries = m;
		return 16 * (size_t)m;
	}
	*entries = shemb__pool_part_ids(seg);
	return shemb__pool_part_bytes(seg, m);
}

/* Where each table's part of each peer's ids starts (at[p * G + g]), and
 * the entries of each table. */
static void locate_parts(const struct shemb__step *st,
			 const struct shemb__xchg *x, size_t *at,
			 int64_t *entries)
{
	int ng = st->ngroups;

	for (int g = 0; g < ng; g++)
		entries[g] = 0;
	for (int p = 0; p < x->world; p++) {
		const int64_t *m = (const int64_t *)(x->rbuf + x->rdispl[p]);
		size_t off = x->rdispl[p] + 8 * (size_t)ng;

		for (int g = 0; g < ng; g++) {
			int64_t n;

			at[(size_t)p * ng + g] = off;
			off += part_of(x->rbuf + off, m[g], &n);
			entries[g] += n;
		}
	}
}

static int take_part(struct shemb__step *st, struct shemb__plan **plans,
		     int g, int p, const char *seg, int64_t m)
{
	const shemb_table *t = st->groups[g].table;
	struct shemb__route *r = plans[g]->route;
	const int64_t *ids = (const int64_t *)seg;
	int64_t n;
	size_t bytes = part_of(seg, m, &n);
	int rc = m >= 0 ? shemb__route_intake(t, r, p, m, ids, ids + m,
					      r->from_first[p])
			: shemb__pool_intake(t, r, p, seg, m,
					     r->from_first[p]);

	shemb__stats_peer(st->groups[g].table, SHEMB_PHASE_IDS, p, 0,
			  8 + bytes);
	if (rc)
		return shemb__fail(st->ctx, rc, "table '%s': rank %d asked "
				   "for a row this rank does not hold",
				   t->name, p);
	return 0;
}

/* What each peer asked this rank for, into each table's route; at[]
 * gets where each part starts. */
int shemb__lookup_take_in(struct shemb__step *st, struct shemb__plan **plans,
			  const struct shemb__xchg *x, size_t *at)
{
	int64_t *entries = calloc((size_t)st->ngroups + 1, sizeof(int64_t));
	int rc = entries ? 0 : SHEMB_ENOMEM;

	if (!rc)
		locate_parts(st, x, at, entries);
	for (int g = 0; !rc && g < st->ngroups; g++)
		rc = shemb__route_reserve_intake(plans[g]->route, entries[g]);
	free(entries);
	if (rc)
		return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	for (int p = 0; !rc && p < x->world; p++) {
		const int64_t *m = (const int64_t *)(x->rbuf + x->rdispl[p]);

		for (int g = 0; !rc && g < st->ngroups; g++)
			rc = take_part(st, plans, g, p,
				       x->rbuf +
					       at[(size_t)p * st->ngroups + g],
				       m[g]);
	}
	return rc;
}

size_t shemb__pooled_row_bytes(const shemb_table *t)
{
	return (size_t)t->attr.dim * sizeof(float);
}

size_t shemb__lookup_rows_in(const struct shemb__step *st,
			     struct shemb__plan *const *plans, int g, int p)
{
	const shemb_table *t = st->groups[g].table;
	const struct shemb__route *r = plans[g]->route;
	int64_t lo, hi;

	if (r->pooled)
		return (size_t)(r->pair_first[p + 1] - r->pair_first[p]) *
		       shemb__pooled_row_bytes(t);
	slots_to(t, plans[g], p, &lo, &hi);
	return (size_t)(hi - lo) * shemb__lookup_row_bytes(st, t, p);
}

/* Bytes of table g's rows this rank, as owner, sends peer p. */
static size_t rows_out(const struct shemb__step *st,
		       struct shemb__plan *const *plans, int g, int p)
{
	const shemb_table *t = st->groups[g].table;
	const struct shemb__route *r = plans[g]->route;

	if (r->npairs[p] >= 0)
		return (size_t)r->npairs[p] * shemb__pooled_row_bytes(t);
	return (size_t)(r->from_first[p + 1] - r->from_first[p]) *
	       shemb__lookup_row_bytes(st, t, t->shard.rank);
}

void shemb__lookup_count_rows(struct shemb__step *st,
			      struct shemb__plan **plans,
			      struct shemb__xchg *x)
{
	for (int p = 0; p < x->world; p++) {
		x->scount[p] = x->rcount[p] = 0;
		for (int g = 0; g < st->ngroups; g++) {
			size_t in = shemb__lookup_rows_in(st, plans, g, p);
			size_t out = rows_out(st, plans, g, p);

			x->rcount[p] += in;
			x->scount[p] += out;
			shemb__stats_peer(st->groups[g].table,
					  SHEMB_PHASE_ROWS, p, out, in);
		}
	}
}

/* The owner's rows for every peer, in the order it asked (pooled
 * parts: a pooled row per pair); parts[] locates the ids message's
 * parts. */
int shemb__lookup_read_owned(struct shemb__step *st, shemb_table *t,
			     int64_t n, const int64_t *rows, char *at)
{
	struct shemb__rows_view v;
	int rc;

	if (shemb__step_reads(st)) /* a read: any number of rows, in passes */
		return shemb__tier_read(t, n, rows, at, row_dtype(st, t));
	rc = shemb__rows_acquire(t, n, rows, false, shemb__lookup_use(st), &v);
	if (!rc)
		rc = st->ctx->mem->read_rows(st->ctx->be, v.store, n, v.at, at,
					     row_dtype(st, t));
	shemb__rows_release(t, &v);
	return rc;
}

/* Where each table's part of each peer's piece of the rows message
 * starts: off[g * world + p], of what this rank sends (out) or
 * receives. */
static size_t *table_offsets(const struct shemb__step *st,
			     struct shemb__plan *const *plans, int world,
			     bool out)
{
	size_t *off = malloc((size_t)st->ngroups * (size_t)world *
			     sizeof(size_t) + 1);

	for (int p = 0; off && p < world; p++) {
		size_t at = 0;

		for (int g = 0; g < st->ngroups; g++) {
			off[(size_t)g * world + p] = at;
			at += out ? rows_out(st, plans, g, p)
				  : shemb__lookup_rows_in(st, plans, g, p);
		}
	}
	return off;
}

/* The cause (recorded by the read or the pooling) kept in the detail. */
static int serve_failed(struct shemb__step *st, const shemb_table *t, int p,
			int rc)
{
	char why[256];

	snprintf(why, sizeof(why), "%s", shemb_ctx_last_error(st->ctx));
	if (!why[0])
		return shemb__fail(st->ctx, rc, "table '%s': reading the rows "
				   "rank %d asked for failed", t->name, p);
	return shemb__fail(st->ctx, rc, "serving rank %d: %s", p, why);
}

/* Table g's rows for every peer, as owner, in the order it asked
 * (pooled parts: a pooled row per pair), at off[p] into each peer's
 * piece; parts[] locates the ids message's parts. */
static int serve_table(struct shemb__step *st, struct shemb__plan **plans,
		       const struct shemb__xchg *ids, const size_t *parts,
		       struct shemb__xchg *x, int g, const size_t *off)
{
	shemb_table *t = st->groups[g].table;
	const struct shemb__route *r = plans[g]->route;

	for (int p = 0; p < x->world; p++) {
		const int64_t *m =
			(const int64_t *)(ids->rbuf + ids->rdispl[p]);
		const char *part =
			ids->rbuf + parts[(size_t)p * st->ngroups + g];
		const int64_t *local = r->local + r->from_first[p];
		char *at = x->sbuf + x->sdispl[p] + off[p];
		int64_t n = r->from_first[p + 1] - r->from_first[p];
		int rc = 0;

		if (m[g] < 0)
			rc = shemb__pool_serve(st, t, r, p, part, m[g], at);
		else if (n)
			rc = shemb__lookup_read_owned(st, t, n, local, at);
		if (rc)
			return serve_failed(st, t, p, rc);
	}
	return 0;
}

/* The rows of table g's distinct ids, whole, in plan order, from the
 * owners' answers, at[p] into each peer's piece. */
static void assemble(struct shemb__step *st, int g,
		     const struct shemb__plan *pl,
		     const struct shemb__xchg *x, const size_t *at,
		     char *rows)
{
	const shemb_table *t = st->groups[g].table;
	size_t full = full_row_bytes(st, t);
	size_t es = shemb__dtype_bytes(row_dtype(st, t));

	for (int p = 0; p < x->world; p++) {
		const char *from = x->rbuf + x->rdispl[p] + at[p];
		size_t rb = shemb__lookup_row_bytes(st, t, p);
		int64_t lo, hi;
		int c0, nc;

		slots_to(t, pl, p, &lo, &hi);
		shemb__shard_columns(&t->shard, p, &c0, &nc);
		for (int64_t k = lo; k < hi; k++, from += rb) {
			int64_t u = pl->route->unique_at[k];

			memcpy(rows + (size_t)u * full + (size_t)c0 * es, from,
			       rb);
		}
	}
}

/* A table whose bags the owners pooled: add their rows, bag by bag. */
static void pool_at_owners(struct shemb__step *st, int g,
			   const struct shemb__plan *pl,
			   const struct shemb__xchg *x, const size_t *at,
			   float *const *out, const char **rows_at)
{
	uint64_t t0 = shemb__now_ns();

	for (int p = 0; p < x->world; p++)
		rows_at[p] = x->rbuf + x->rdispl[p] + at[p];
	shemb__pool_combine(st, g, pl, out, rows_at);
	for (int s = 0; s < st->groups[g].nsets; s++) {
		st->groups[g].counted.lookups++;
		st->groups[g].counted.bags +=
			(uint64_t)st->groups[g].sets[s]->nbags;
		st->groups[g].counted.ids +=
			(uint64_t)st->groups[g].sets[s]->nids;
	}
	st->groups[g].counted.pool_ns += shemb__now_ns() - t0;
}

static bool replicated_table(const struct shemb__step *st, int g)
{
	return st->groups[g].table->shard.kind == SHEMB_SHARD_REPLICATED;
}

/*
 * Before the rows move: the replicated tables pooled (from the rows
 * here), and the memory the pooling of the others takes, so that no rank
 * fails once the rows came (its failure would be its own, the others
 * going on with their plans).  A failure here is refused in the
 * exchanges, which fails the call on every rank.
 */
int shemb__lookup_pool_prepare(struct shemb__step *st,
			       struct shemb__plan **plans, int world,
			       float *const *out, struct shemb__pool_bufs *b)
{
	size_t ng = (size_t)st->ngroups;
	int rc = 0;

	memset(b, 0, sizeof(*b));
	b->base = calloc(ng + 1, sizeof(*b->base));
	b->rows_of = calloc(ng + 1, sizeof(*b->rows_of));
	b->rows_at = calloc((size_t)world, sizeof(*b->rows_at));
	b->at = table_offsets(st, plans, world, false);
	if (!b->base || !b->rows_of || !b->rows_at || !b->at)
		return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	for (int g = 0; !rc && g < st->ngroups; g++) {
		const struct shemb__plan *pl = plans[g];
		size_t full = full_row_bytes(st, st->groups[g].table);

		if (replicated_table(st, g)) {
			rc = shemb__pool_local(st, &st->groups[g], pl, out);
			if (!rc)
				shemb__step_group_done(st, g);
			continue;
		}
		if (pl->route->pooled)
			continue;
		b->base[g] = malloc((size_t)pl->nunique * full + 8);
		b->rows_of[g] = malloc((size_t)(pl->nids + 1) *
				       sizeof(int64_t));
		if (!b->base[g] || !b->rows_of[g])
			rc = shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	}
	return rc;
}

void shemb__lookup_pool_bufs_free(const struct shemb__step *st,
				  struct shemb__pool_bufs *b)
{
	for (int g = 0; g < st->ngroups; g++) {
		if (b->base)
			free(b->base[g]);
		if (b->rows_of)
			free(b->rows_of[g]);
	}
	free(b->base);
	free(b->rows_of);
	free(b->rows_at);
	free(b->at);
	memset(b, 0, sizeof(*b));
}

/* Table g's bags from the rows exchange x, its part at at[p] into each
 * peer's piece, in the memory taken before (b); a replicated table's
 * were pooled then. */
static int pool_one(struct shemb__step *st, int g,
		    const struct shemb__plan *pl, const struct shemb__xchg *x,
		    const size_t *at, float *const *out,
		    const struct shemb__pool_bufs *b)
{
	shemb_table *t = st->groups[g].table;
	size_t full = full_row_bytes(st, t);
	struct shemb__store v = { .stride = full, .rows = pl->nunique,
				  .dim = t->attr.dim,
				  .dtype = row_dtype(st, t),
				  .base = b->base[g],
				  .bytes = (size_t)pl->nunique * full };

	if (replicated_table(st, g))
		return 0;
	if (pl->route->pooled) {
		pool_at_owners(st, g, pl, x, at, out, b->rows_at);
		return 0;
	}
	assemble(st, g, pl, x, at, v.base);
	shemb__plan_unique_of(pl, b->rows_of[g]); /* the rows pooled from */
	return shemb__pool_group(st, &st->groups[g], pl, out, &v,
				 b->rows_of[g]);
}

/* The rows exchange, table by table (rows_by_table). */
struct tables_xchg {
	struct shemb__xchg *x;
	size_t *soff, *roff;      /* table_offsets(), out and in */
	size_t *sc, *rc;          /* [world] each: one table's counts */
	size_t *displ;            /* [2 x world]: and displacements */
	shemb_request **req;      /* [ngroups] */
	int started;
};

static int init_tables_xchg(struct tables_xchg *tx, struct shemb__step *st,
			    struct shemb__plan **plans, struct shemb__xchg *x)
{
	size_t w = (size_t)x->world;

	memset(tx, 0, sizeof(*tx));
	tx->x = x;
	tx->soff = table_offsets(st, plans, x->world, true);
	tx->roff = table_offsets(st, plans, x->world, false);
	tx->sc = malloc(4 * w * sizeof(size_t));
	tx->rc = tx->sc ? tx->sc + w : NULL;
	tx->displ = tx->sc ? tx->sc + 2 * w : NULL;
	tx->req = calloc((size_t)st->ngroups, sizeof(shemb_request *));
	if (tx->soff && tx->roff && tx->sc && tx->req)
		return 0;
	return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
}

static void free_tables_xchg(struct tables_xchg *tx)
{
	free(tx->soff);
	free(tx->roff);
	free(tx->sc);
	free(tx->req);
}

/* Table g's part of the exchange, started. */
static int start_table(struct shemb__step *st, struct shemb__plan **plans,
		       struct tables_xchg *tx, int g)
{
	int w = tx->x->world;
	size_t at = (size_t)g * (size_t)w;

	for (int p = 0; p < w; p++) {
		tx->sc[p] = rows_out(st, plans, g, p);
		tx->rc[p] = shemb__lookup_rows_in(st, plans, g, p);
	}
	return shemb__xchg_start_part(st->ctx, tx->x, tx->sc, tx->soff + at,
				      tx->rc, tx->roff + at, tx->displ,
				      &tx->req[g]);
}

/*
 * This rank failed (status, its detail recorded) after the ids went out:
 * it still takes its part in the exchanges of tables g0 on, refusing
 * them, so that the other ranks fail them at once with its status and
 * detail instead of waiting for their timeout.  Returns status with its
 * detail.
 */
static int refuse_tables(struct shemb__step *st, int g0, int status)
{
	char why[256];

	snprintf(why, sizeof(why), "%s", shemb_ctx_last_error(st->ctx));
	for (int g = g0; g < st->ngroups; g++)
		shemb__xchg_refuse(st->ctx, status, why);
	return shemb__fail(st->ctx, status, "%s", why);
}

/*
 * Serve each table and start its exchange at once, the first table's
 * first.  A table this rank fails to serve (status recorded) and those
 * after it are refused (refuse_tables).  A start the transport refused took
 * its collective's number all the same (and told the others), unless
 * the context had failed, when every later start fails too: the tables
 * after it are refused, not it again, or this rank would start one
 * collective more than the others.
 */
static int serve_and_start(struct shemb__step *st, struct shemb__plan **plans,
			   const struct shemb__xchg *ids, const size_t *parts,
			   struct tables_xchg *tx)
{
	int rc = 0, g;

	for (g = 0; g < st->ngroups; g++) {
		rc = serve_table(st, plans, ids, parts, tx->x, g,
				 tx->soff + (size_t)g * tx->x->world);
		if (rc)
			break;
		rc = start_table(st, plans, tx, g);
		if (rc) {
			g++;
			break;
		}
		tx->started = g + 1;
	}
	return rc ? refuse_tables(st, g, rc) : 0;
}

/*
 * The rows back, each table's as an exchange of its own, started as soon
 * as the owner has served that table, so the first table's rows travel,
 * and are pooled here (its outputs final), while the owners still read
 * or pool the later tables.  In one exchange they would all leave once
 * the owners had served every table; pooled at the owners (pool_at),
 * where the replies are small, the first table then had no head start at
 * all.  Every rank waits for every exchange it started; the rows phase's
 * time is until the last one ended.
 */
static int rows_by_table(struct shemb__step *st, struct shemb__plan **plans,
			 const struct shemb__xchg *ids, const size_t *parts,
			 struct shemb__xchg *rows, float *const *out,
			 const struct shemb__pool_bufs *b)
{
	struct tables_xchg tx;
	uint64_t t0 = shemb__now_ns(), landed = 0;
	int rc = init_tables_xchg(&tx, st, plans, rows), end = 0;

	if (rc) { /* the others wait for these exchanges */
		free_tables_xchg(&tx);
		return refuse_tables(st, 0, rc);
	}
	rc = serve_and_start(st, plans, ids, parts, &tx);
	for (int g = 0; g < tx.started; g++) {
		int done = shemb_wait(tx.req[g]);

		shemb_request_free(tx.req[g]);
		landed = shemb__now_ns();
		end = end ? end : done;
		if (!rc && !end)
			rc = pool_one(st, g, plans[g], rows,
				      tx.roff + (size_t)g * rows->world, out, b);
		if (!rc && !end && !replicated_table(st, g))
			shemb__step_group_done(st, g);
	}
	shemb__phase_time(st, SHEMB_PHASE_ROWS, (landed ? landed : t0) - t0);
	free_tables_xchg(&tx);
	/* the exchanges' failure, which the other ranks share, first */
	return end ? end : rc;
}

/* Owner: load the rows the ranks asked for into the device tiers. */
static int prefetch_owned(struct shemb__step *st, struct shemb__plan **plans)
{
	int rc = 0;

	for (int g = 0; !rc && g < st->ngroups; g++) {
		shemb_table *t = st->groups[g].table;
		const struct shemb__route *r = plans[g]->route;

		if (t->shard.kind == SHEMB_SHARD_REPLICATED)
			rc = shemb__prefetch_rows(st, t, plans[g]->nunique,
						  plans[g]->unique, true);
		else
			rc = shemb__prefetch_rows(st, t,
						  r->from_first[r->world],
						  r->local, false);
	}
	return rc;
}

static int exchange(struct shemb__step *st, struct shemb__plan **plans,
		    float *const *out, struct shemb__xchg *ids,
		    struct shemb__xchg *rows)
{
	struct shemb__pool_bufs bufs = { 0 };
	size_t *parts;
	uint64_t t0 = shemb__now_ns();
	int rc = shemb__xchg_run(st->ctx, ids);

	shemb__phase_time(st, SHEMB_PHASE_IDS, shemb__now_ns() - t0);
	if (rc)
		return rc;
	parts = calloc((size_t)ids->world * (size_t)st->ngroups + 1,
		       sizeof(size_t));
	/* failed, it still takes its part below: the others expect it */
	rc = parts ? shemb__lookup_take_in(st, plans, ids, parts)
		   : shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	if (shemb__dist_ahead(st->kind)) {
		free(parts);
		if (!rc)
			rc = prefetch_owned(st, plans);
		return shemb__dist_all_ok(st->ctx, rc,
					  st->kind == SHEMB__DIST_ANNOUNCE
						  ? "its part of this "
						    "announcement"
						  : "its part of this "
						    "prefetch");
	}
	if (!rc) {
		shemb__lookup_count_rows(st, plans, rows);
		if (shemb__xchg_alloc(rows))
			rc = shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	}
	if (!rc)
		rc = shemb__lookup_pool_prepare(st, plans, ids->world, out,
						&bufs);
	if (!rc)
		rc = rows_by_table(st, plans, ids, parts, rows, out, &bufs);
	else
		rc = refuse_tables(st, 0, rc);
	shemb__lookup_pool_bufs_free(st, &bufs);
	free(parts);
	return rc;
}

int shemb__dist_lookup_open(struct shemb__step *st, struct shemb__plan **plans,
			    int status, int kind, struct shemb__xchg *ids,
			    int *refused)
{
	int rc;

	if (refused)
		*refused = 0;
	/* without its counts, this rank still meets the others, failed */
	if (shemb__xchg_init(ids, st->ctx->attr.world_size) && !status)
		status = shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	if (!status)
		status = route_all(st, plans);
	if (!status)
		count_ids(st, plans, ids);
	rc = shemb__dist_agree(st->ctx, kind,
			       status ? 0 : shemb__dist_signature(kind, st),
			       status, ids);
	/* the others, committed to the ids' exchange, learn it there */
	if (!rc && shemb__xchg_alloc(ids)) {
		rc = shemb__xchg_refuse(st->ctx, SHEMB_ENOMEM,
					"no memory for the ids to send");
		if (refused)
			*refused = rc;
	}
	if (!rc)
		pack_ids(st, plans, ids);
	return rc;
}

int shemb__lookup_pool_rows(struct shemb__step *st, struct shemb__plan **plans,
			    const struct shemb__xchg *rows, float *const *out,
			    const struct shemb__pool_bufs *b)
{
	int rc = 0;

	for (int g = 0; !rc && g < st->ngroups; g++) {
		rc = pool_one(st, g, plans[g], rows,
			      b->at + (size_t)g * rows->world, out, b);
		if (!rc && !replicated_table(st, g))
			shemb__step_group_done(st, g);
	}
	return rc;
}

int shemb__dist_lookup(struct shemb__step *st, struct shemb__plan **plans,
		       float *const *out, int status, int kind)
{
	int world = st->ctx->attr.world_size, rc;
	struct shemb__xchg ids = { 0 }, rows = { 0 };
	uint64_t t0 = shemb__now_ns();

	/* a failure here still meets the ranks, which are committed */
	if (shemb__xchg_init(&rows, world) && !status)
		status = shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	rc = shemb__dist_lookup_open(st, plans, status, kind, &ids, NULL);
	if (!rc)
		rc = exchange(st, plans, out, &ids, &rows);
	for (int g = 0; g < st->ngroups; g++)
		SHEMB__STAT_ADD(st->groups[g].table, exchange_ns,
				shemb__now_ns() - t0);
	shemb__xchg_free(st->ctx, &ids);
	shemb__xchg_free(st->ctx, &rows);
	return rc;
}

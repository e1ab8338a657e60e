/*
 * dist_dense.c - the backward of a small replicated table as one dense
 * AllReduce (the hybrid of EmbRace: AlltoAll for sparse traffic,
 * AllReduce for dense).
 *
 * Each rank scatters its coalesced gradient rows into a buffer of the
 * whole table with one more value per row, 1 where the rank touched the
 * row; after a SUM allreduce every rank holds the same sums and the same
 * touch counts, and applies the optimizer to the touched rows only (lazy
 * optimizers must not see untouched rows), so the copies stay equal.
 * Outside deterministic mode only: the allreduce adds the ranks' sums,
 * not a single process's occurrences in order.
 */
#include "lib/dist.h"
#include "lib/ckpt_io.h"

#include <stdlib.h>
#include <string.h>

#include "lib/comm.h"
#include "lib/held.h"

/* The largest dense buffer (rows x (dim + 1) fp32) sent instead of the
 * sparse rows: the touched rows of a small table are most of it. */
#define DENSE_BYTES (256u << 10)

static size_t dense_bytes(const shemb_table *t)
{
	return (size_t)t->attr.rows * ((size_t)t->attr.dim + 1) *
	       sizeof(float);
}

bool shemb__dense_replicated(const struct shemb__step *st,
			     const shemb_table *t)
{
	/* not with a device tier: its rows would be acquired only after
	 * the ranks agreed to go on (the touched rows are known after the
	 * allreduce), and a tier that failed then would fail one rank */
	return t->shard.kind == SHEMB_SHARD_REPLICATED && t->shard.world > 1 &&
	       !st->ctx->attr.deterministic && dense_bytes(t) <= DENSE_BYTES &&
	       t->attr.cache_rows == 0;
}

/* Bytes to and from each peer, as the transport's algorithm moves them. */
static void count_bytes(shemb_table *t, size_t bytes)
{
	int w = t->shard.world, me = t->shard.rank;

	for (int p = 0; p < w; p++) {
		uint64_t out = 0, in = 0;

		if (p == me)
			continue;
		if (bytes <= SHEMB__ALLREDUCE_ONE_ROUND_BYTES) {
			out = in = bytes;
		} else {
			uint64_t ring = 2 * (uint64_t)(w - 1) * bytes /
					(uint64_t)w;

			out = p == (me + 1) % w ? ring : 0;
			in = p == (me + w - 1) % w ? ring : 0;
		}
		shemb__stats_peer(t, SHEMB_PHASE_GRADS, p, out, in);
	}
}

/* The buffers of one table's dense backward, made before the ranks
 * agree that every rank could make its own. */
struct shemb__dense {
	float *buf;      /* rows x (dim + 1) */
	int64_t *ids;    /* touched rows */
	int32_t *idx;    /* 0, 1, 2 ... */
	float *g;        /* their gradients, compacted */
};

void shemb__dense_free(shemb_ctx *ctx, struct shemb__dense *d)
{
	if (!d)
		return;
	shemb__coll_buf_free(ctx, d->buf); /* allreduced */
	free(d->ids);
	free(d->idx);
	free(d->g);
	free(d);
}

/* rows: this rank's gradient row per distinct id of table g's plan
 * ([nunique][dim], fp32), scattered into the dense buffer. */
int shemb__dense_prepare(struct shemb__step *st, int g, const float *rows,
			 struct shemb__dense **out)
{
	shemb_table *t = st->groups[g].table;
	const struct shemb__plan *p = t->plan;
	int64_t nrows = t->attr.rows;
	int dim = t->attr.dim;
	struct shemb__dense *d = calloc(1, sizeof(*d));

	*out = d;
	if (!d)
		return SHEMB_ENOMEM;
	d->buf = calloc(dense_bytes(t) / sizeof(float) + 1, sizeof(float));
	d->ids = malloc((size_t)(nrows + 1) * sizeof(int64_t));
	d->idx = malloc((size_t)(nrows + 2) * sizeof(int32_t));
	d->g = malloc((size_t)nrows * (size_t)dim * sizeof(float) + 8);
	if (!d->buf || !d->ids || !d->idx || !d->g)
		return SHEMB_ENOMEM;
	for (int64_t u = 0; u < p->nunique; u++) {
		float *r = d->buf + (size_t)p->unique[u] * ((size_t)dim + 1);

		memcpy(r, rows + (size_t)u * (size_t)dim,
		       (size_t)dim * sizeof(float));
		r[dim] = 1.0f;
	}
	return 0;
}

/* The touched rows of the reduced buffer, ascending, compacted. */
static int64_t touched(struct shemb__dense *d, int64_t rows, int dim)
{
	int64_t n = 0;

	for (int64_t id = 0; id < rows; id++) {
		const float *r = d->buf + (size_t)id * ((size_t)dim + 1);

		if (r[dim] == 0.0f)
			continue;
		d->ids[n] = id;
		memcpy(d->g + (size_t)n * (size_t)dim, r,
		       (size_t)dim * sizeof(float));
		n++;
	}
	return n;
}

static int apply_touched(struct shemb__step *st, shemb_table *t,
			 struct shemb__dense *d)
{
	int64_t n = touched(d, t->attr.rows, t->attr.dim);
	struct shemb__bwd_set set = { .pooling = SHEMB_POOL_NONE, .nbags = n,
				      .grad = d->g };
	struct shemb__update_job job = {
		.store = &t->store,
		.nunique = n,
		.unique = d->ids,
		.seg = d->idx,
		.pos = d->idx,
		.bag_of = d->idx,
		.nsets = 1,
		.sets = &set,
		.opt = shemb__opt_of(t),
	};

	struct shemb__rows_view v;
	int rc;

	for (int64_t k = 0; k <= n; k++)
		d->idx[k] = (int32_t)k;
	SHEMB__STAT_ADD(t, rows_updated, n);
	rc = shemb__rows_acquire(t, n, d->ids, true, SHEMB__ROWS_WRITE, &v);
	shemb__ckpt_touch(t, n, d->ids);
	if (!rc) {
		job.store = v.store;
		job.unique = v.at;
		rc = st->ctx->mem->apply_updates(st->ctx->be, &job);
	}
	shemb__rows_release(t, &v);
	return rc;
}

/* After the ranks agreed that every one prepared its buffer: the
 * allreduce.  Nothing changes yet: the ranks agree again that every
 * table's allreduce succeeded before any is applied. */
int shemb__dense_reduce(struct shemb__step *st, int g, struct shemb__dense *d)
{
	shemb_table *t = st->groups[g].table;
	size_t bytes = dense_bytes(t);
	struct shemb__coll c = { .kind = SHEMB__ALLREDUCE, .sendbuf = d->buf,
				 .recvbuf = d->buf,
				 .count = bytes / sizeof(float),
				 .dtype = SHEMB_F32, .op = SHEMB_REDUCE_SUM };
	uint64_t t0 = shemb__now_ns();
	int rc = shemb__coll_run(st->ctx, &c);

	SHEMB__STAT_ADD(t, phase_ns[SHEMB_PHASE_GRADS], shemb__now_ns() - t0);
	if (!rc)
		count_bytes(t, bytes);
	return rc;
}

/* The updates of the touched rows, once every rank's allreduce
 * succeeded. */
int shemb__dense_apply(struct shemb__step *st, int g, struct shemb__dense *d)
{
	shemb_table *t = st->groups[g].table;
	uint64_t t0 = shemb__now_ns();
	int rc = apply_touched(st, t, d);

	if (rc)
		shemb__fail(st->ctx, rc, "table '%s': applying the "
			    "gradients failed", t->name);
	SHEMB__STAT_ADD(t, update_ns, shemb__now_ns() - t0);
	return rc;
}

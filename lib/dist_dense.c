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

#include <stdlib.h>
#include <string.h>

#include "lib/comm.h"

/* The largest dense buffer (rows x (dim + 1) fp32) sent instead of the
 * sparse rows: the touched rows of a small table are most of it. */
#define DENSE_BYTES (256u << 10)
/* The transport reduces buffers up to this in one exchange with every
 * rank, larger ones around a ring (fabric/coll.c): for the statistics. */
#define ONE_ROUND_BYTES (64u << 10)

static size_t dense_bytes(const shemb_table *t)
{
	return (size_t)t->attr.rows * ((size_t)t->attr.dim + 1) *
	       sizeof(float);
}

bool shemb__dense_replicated(const struct shemb__step *st,
			     const shemb_table *t)
{
	return t->shard.kind == SHEMB_SHARD_REPLICATED && t->shard.world > 1 &&
	       !st->ctx->attr.deterministic && dense_bytes(t) <= DENSE_BYTES;
}

/* Bytes to and from each peer, as the transport's algorithm moves them. */
static void count_bytes(shemb_table *t, size_t bytes)
{
	int w = t->shard.world, me = t->shard.rank;

	for (int p = 0; p < w; p++) {
		uint64_t out = 0, in = 0;

		if (p == me)
			continue;
		if (bytes <= ONE_ROUND_BYTES) {
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

/* The touched rows of the reduced buffer, ascending, compacted. */
static int64_t touched(const float *buf, int64_t rows, int dim, int64_t *ids,
		       float *g)
{
	int64_t n = 0;

	for (int64_t id = 0; id < rows; id++) {
		const float *r = buf + (size_t)id * ((size_t)dim + 1);

		if (r[dim] == 0.0f)
			continue;
		ids[n] = id;
		memcpy(g + (size_t)n * (size_t)dim, r,
		       (size_t)dim * sizeof(float));
		n++;
	}
	return n;
}

static int apply_touched(struct shemb__step *st, shemb_table *t,
			 const float *buf)
{
	int64_t rows = t->attr.rows, n;
	int dim = t->attr.dim, rc;
	int64_t *ids = malloc((size_t)(rows + 1) * sizeof(int64_t));
	int32_t *idx = malloc((size_t)(rows + 2) * sizeof(int32_t));
	float *g = malloc((size_t)rows * (size_t)dim * sizeof(float) + 8);
	struct shemb__bwd_set set = { .pooling = SHEMB_POOL_NONE };
	struct shemb__update_job job = {
		.store = &t->store,
		.nsets = 1,
		.sets = &set,
		.opt = shemb__opt_of(t),
	};

	if (!ids || !idx || !g) {
		rc = SHEMB_ENOMEM;
		goto out;
	}
	n = touched(buf, rows, dim, ids, g);
	for (int64_t k = 0; k <= n; k++)
		idx[k] = (int32_t)k;
	job.nunique = n;
	job.unique = ids;
	job.seg = idx;
	job.pos = idx;
	job.bag_of = idx;
	set.nbags = n;
	set.grad = g;
	rc = st->ctx->mem->apply_updates(st->ctx->be, &job);
	SHEMB__STAT_ADD(t, rows_updated, n);
out:
	free(ids);
	free(idx);
	free(g);
	return rc;
}

/* Table g's backward: rows holds this rank's gradient row per distinct
 * id of its plan ([nunique][dim], fp32). */
int shemb__dense_apply(struct shemb__step *st, int g, const float *rows)
{
	shemb_table *t = st->groups[g].table;
	const struct shemb__plan *p = t->plan;
	int dim = t->attr.dim, rc;
	size_t bytes = dense_bytes(t);
	float *buf = calloc(bytes / sizeof(float) + 1, sizeof(float));
	struct shemb__coll c = { .kind = SHEMB__ALLREDUCE, .sendbuf = buf,
				 .recvbuf = buf,
				 .count = bytes / sizeof(float),
				 .dtype = SHEMB_F32, .op = SHEMB_REDUCE_SUM };
	uint64_t t0 = shemb__now_ns();

	if (!buf)
		return shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
	for (int64_t u = 0; u < p->nunique; u++) {
		float *r = buf + (size_t)p->unique[u] * ((size_t)dim + 1);

		memcpy(r, rows + (size_t)u * (size_t)dim,
		       (size_t)dim * sizeof(float));
		r[dim] = 1.0f;
	}
	rc = shemb__coll_run(st->ctx, &c);
	SHEMB__STAT_ADD(t, phase_ns[SHEMB_PHASE_GRADS], shemb__now_ns() - t0);
	if (!rc) {
		count_bytes(t, bytes);
		rc = apply_touched(st, t, buf);
		if (rc)
			shemb__fail(st->ctx, rc, "table '%s': applying the "
				    "gradients failed", t->name);
	}
	free(buf);
	SHEMB__STAT_ADD(t, update_ns, shemb__now_ns() - t0);
	return rc;
}

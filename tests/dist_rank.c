/*
 * dist_rank.c - one rank of the distributed-table tests, started by
 * shemb-run from tests/test_dist.sh.
 *
 * Usage: dist_rank [--deterministic] [--steps N] [--wire bf16|f16]
 *                  [--pool-at-owner] [--deterministic-on-last]
 *                  [--cache PCT [--cold]] [--async] [--caller]
 *                  [--relaxed] [--gpu | --device-bags]
 *
 * Every rank trains the same tables (each shard plan with each optimizer)
 * for N steps on random bags, and alongside it a single-process reference:
 * a one-rank context that looks up and trains on every rank's bag sets,
 * rank 0's first (each rank can make every rank's bags, since they are a
 * function of (step, rank, table)).  Lookups and, at the end, every row of
 * every table must equal the reference within 1e-5 relative (bf16 tables:
 * within their rounding), and bit for bit with --deterministic.
 *
 * Along the way: a table created differently on one rank, a table other
 * than the rest's (of the same table_id), a bad id and a non-finite
 * gradient on one rank must fail the call on every rank and change
 * nothing.  Every few steps every rank writes rows (colliding ids,
 * with and without resetting the optimizer state), after a write that one
 * rank's non-finite value fails everywhere.  At the end: bad shard attrs
 * are refused, the plans are described, SHARD_AUTO heeds the ranks' host
 * budgets, pooling at the owners and the dense allreduce of small
 * replicated tables are taken (by their bytes), POOL_AT_AUTO pools at
 * half the bytes and not above, and every rank's per-peer byte counts
 * match its peers'.
 *
 * With --deterministic-on-last, only the last rank is in deterministic
 * mode: the first lookup must fail on every rank.
 *
 * With --pool-at-owner, the owners pool the SUM and MEAN bags of
 * row-wise and table-wise tables: the same 1e-5 bound holds.
 *
 * With --wire, rows and gradients travel in 16 bits: the first lookups
 * must be within the rows' rounding of the reference, and the trained
 * tables close to it in norm (see close_in_norm).
 *
 * With --async, each step's lookup and backward are started without
 * waiting, with a dense allreduce between them, and waited for after the
 * reference ran: the same results as the blocking calls; each output of
 * the lookup is taken as shemb_wait_part() reports it final.  With
 * --caller, only the context's calls move its transfers.
 *
 * With --relaxed, each step's backward is started with the next step's
 * lookup queued right behind it (run_relaxed): the same results as the
 * strict order of the reference, bit for bit with --deterministic.
 *
 * With --gpu, the distributed context is a GPU one (SHEMB_DEVICE_CUDA,
 * from the module SHEMB_CUDA_PLUGIN names: the emulated device of
 * tests/emu/ in test_dist.sh); the reference stays on the CPU.  With
 * --device-bags, a GPU context whose calls take every other bag set of
 * this rank, with its output and gradient, in device memory
 * (SHEMB_MEM_DEVICE): the same results.  Both run on a real GPU too,
 * with the CUDA module (tests/gpu/test_gpu_ranks.sh).
 *
 * With --cache PCT, every table keeps PCT% of the rows each rank holds in
 * a device tier (policy by rank and table; with --cold, over a file), the
 * bags are smaller so that a call fits, each step announces the bags of
 * the step three ahead and prefetches the next one's between its lookup
 * and its backward: the same bounds hold, and bit for bit with
 * --deterministic.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shemb.h>

#define MAX_SETS 4
#define NBAGS 9

static int rank, world, deterministic, wire = SHEMB_F32;
static int pool_at = SHEMB_POOL_AT_AUTO;
static int cache_pct;
static int async_steps;
static int relaxed_steps;           /* see run_relaxed */
static int caller_progress;         /* SHEMB_PROGRESS_CALLER */
static int gpu;                     /* SHEMB_DEVICE_CUDA */
static int device_bags;             /* sets in device memory */
#define ANNOUNCED 3 /* --cache: steps announced ahead */
static char cold_dir[64];
static shemb_ctx *ctx, *ref;

#include "tests/rank_check.h"
#include "tests/devmem.h"

struct rng {
	uint64_t s;
};

static uint64_t next(struct rng *r)
{
	return mix(r->s++);
}

static int below(struct rng *r, int n)
{
	return (int)(next(r) % (uint64_t)n);
}

/* ---- the tables ---- */

struct tcase {
	int shard, optimizer, dtype, dim;
	int64_t rows;
	shemb_table *t, *rt; /* distributed, reference */
};

#define NCASES 16
static struct tcase cases[NCASES];
static int ncases;

/* The rows of a table on one rank: a device tier of cache_pct% of them,
 * the policy by rank and table. */
static void set_cache(struct shemb_table_attr *a, int shard, int64_t rows)
{
	static char path[NCASES][96];
	int64_t local = shard == SHEMB_SHARD_ROW ? (rows + world - 1) / world
						 : rows;

	if (!cache_pct)
		return;
	a->cache_rows = local * cache_pct / 100 > 0 ? local * cache_pct / 100
						    : 1;
	a->cache_policy = (ncases + rank) % 3;
	if (!cold_dir[0])
		return;
	/* add_case has counted this table */
	snprintf(path[ncases - 1], sizeof(path[0]), "%s/t%d", cold_dir,
		 ncases - 1);
	a->cold_path = path[ncases - 1];
}

static void add_case(int shard, int opt, int dtype, int dim, int64_t rows)
{
	struct tcase *c = &cases[ncases++];
	struct shemb_table_attr a;

	c->shard = shard;
	c->optimizer = opt;
	c->dtype = dtype;
	c->dim = dim;
	c->rows = rows;
	shemb_table_attr_init(&a);
	a.rows = rows;
	a.dim = dim;
	a.dtype = dtype;
	a.table_id = 100 + ncases;
	a.seed = 7;
	a.optimizer = opt;
	a.lr = 0.05f;
	a.shard = shard;
	a.wire_dtype = wire;
	a.pool_at = pool_at;
	set_cache(&a, shard, rows);
	if (opt == SHEMB_OPT_ADAM) {
		a.weight_decay = 0.01f;
		a.weight_decay_mode = SHEMB_WD_DECOUPLED;
	}
	if (opt == SHEMB_OPT_ADAGRAD)
		a.initial_accumulator = 0.1f;
	CHECK_RC(ctx, shemb_table_create(ctx, &a, &c->t));
	a.cache_rows = 0; /* the reference keeps every row in memory */
	a.cold_path = NULL;
	CHECK_RC(ref, shemb_table_create(ref, &a, &c->rt));
}

static void make_tables(void)
{
	static const int shards[] = { SHEMB_SHARD_ROW, SHEMB_SHARD_COLUMN,
				      SHEMB_SHARD_TABLE,
				      SHEMB_SHARD_REPLICATED };
	static const int opts[] = { SHEMB_OPT_SGD, SHEMB_OPT_ADAGRAD,
				    SHEMB_OPT_ROWWISE_ADAGRAD,
				    SHEMB_OPT_ADAM };

	for (int s = 0; s < 4; s++)
		for (int o = 0; o < 4; o++) {
			/* uneven rows and columns over the ranks; one
			 * table of each plan in bf16 */
			add_case(shards[s], opts[o],
				 o == 1 ? SHEMB_BF16 : SHEMB_F32,
				 s == 1 ? 10 : 8, 97 + 31 * s);
		}
}

/* A table with an automatic id, created alike on every rank: it must
 * succeed, and every rank give it the same id. */
static void check_next_id_alike(void)
{
	struct shemb_table_attr a;
	shemb_table *t = NULL;
	int64_t id, hi, neg_lo;

	shemb_table_attr_init(&a);
	a.rows = 50;
	a.dim = 4;
	CHECK_RC(ctx, shemb_table_create(ctx, &a, &t));
	shemb_table_attr_init(&a);
	CHECK_RC(ctx, shemb_table_get_attr(t, &a));
	id = a.table_id;
	CHECK_RC(ctx, shemb_allreduce(ctx, &id, &hi, 1, SHEMB_I64,
				      SHEMB_REDUCE_MAX, NULL));
	id = -a.table_id;
	CHECK_RC(ctx, shemb_allreduce(ctx, &id, &neg_lo, 1, SHEMB_I64,
				      SHEMB_REDUCE_MAX, NULL));
	if (hi != -neg_lo)
		FAIL("an automatic id after a failed create: %lld here, %lld "
		     "to %lld over the ranks", (long long)a.table_id,
		     (long long)-neg_lo, (long long)hi);
	shemb_table_destroy(t);
}

/* A table created unlike on the other ranks, refused by one rank, or
 * too large for one rank, fails everywhere. */
static void check_create_mismatch(void)
{
	struct shemb_table_attr a;
	shemb_table *t = NULL;
	char who[64];
	int rc;

	if (world == 1)
		return;
	shemb_table_attr_init(&a);
	a.rows = 50;
	a.dim = rank == world - 1 ? 5 : 4;
	a.table_id = 99;
	rc = shemb_table_create(ctx, &a, &t);
	if (rc != SHEMB_EINVAL || t)
		FAIL("a table created unlike on rank %d: %d", world - 1, rc);
	if (!strstr(shemb_ctx_last_error(ctx), "unlike"))
		FAIL("detail: %s", shemb_ctx_last_error(ctx));

	/* attrs one rank refuses: every rank fails, the others naming it
	 * and giving its detail */
	a.dim = rank == world - 1 ? 0 : 4;
	a.table_id = 500;
	rc = shemb_table_create(ctx, &a, &t);
	if (rc != SHEMB_EINVAL || t)
		FAIL("a table one rank refused: %d", rc);
	snprintf(who, sizeof(who), "rank %d failed to create table", world - 1);
	if (rank != world - 1 &&
	    (!strstr(shemb_ctx_last_error(ctx), who) ||
	     !strstr(shemb_ctx_last_error(ctx), "dim")))
		FAIL("detail: %s", shemb_ctx_last_error(ctx));
	/* the failed creates left the next automatic id alike: before, the
	 * ranks that got to the id took 501, the last rank did not, and
	 * every create with an automatic id failed from then on */
	check_next_id_alike();

	/* a serving table on one rank only: refused, as any other
	 * difference (before, created, and every step then failed) */
	a.dim = 4;
	a.read_only = rank == world - 1;
	rc = shemb_table_create(ctx, &a, &t);
	if (rc != SHEMB_EINVAL || t)
		FAIL("a table read_only on rank %d only: %d", world - 1, rc);
	if (!strstr(shemb_ctx_last_error(ctx), "unlike"))
		FAIL("detail: %s", shemb_ctx_last_error(ctx));
	a.read_only = 0;

	/* a table only its owner has no memory for: it exists nowhere */
	a.dim = 64;
	a.rows = INT64_C(1) << 36;
	a.shard = SHEMB_SHARD_TABLE;
	a.shard_owner = world - 1;
	rc = shemb_table_create(ctx, &a, &t);
	if (rc != SHEMB_ENOMEM || t)
		FAIL("a table too large for rank %d: %d: %s", world - 1, rc,
		     shemb_ctx_last_error(ctx));
}

/* b: one bag of t holding ids[0 .. nids), offsets[2] its offsets. */
static void one_bag(struct shemb_bags *b, shemb_table *t, int64_t *offsets,
		    int64_t nids, const int64_t *ids)
{
	offsets[0] = 0;
	offsets[1] = nids;
	shemb_bags_init(b);
	b->table = t;
	b->nbags = 1;
	b->offsets = offsets;
	b->nids = nids;
	b->ids = ids;
}

/* Every row of t (16 x 4) must be want. */
static void rows_all(shemb_table *t, float want, const char *what)
{
	int64_t ids[16];
	float v[16 * 4];

	for (int i = 0; i < 16; i++)
		ids[i] = i;
	CHECK_RC(ctx, shemb_table_read_rows(t, 16, ids, v, SHEMB_F32));
	for (int i = 0; i < 16 * 4; i++)
		if (v[i] != want)
			FAIL("%s: row %d holds %g, not %g", what, i / 4, v[i],
			     want);
}

/* The last rank's detail of a failed lookup reaches the others whole,
 * up to its end (the id), the table's name taking 98 characters of it.
 * Before, the others got 99 characters of it. */
static void check_detail_relayed(shemb_table *t)
{
	int64_t offsets[2], id = rank == world - 1 ? 1000 : 1;
	float out[4], *o = out;
	struct shemb_bags b;
	const char *why;
	int rc;

	one_bag(&b, t, offsets, 1, &id);
	rc = shemb_lookup(ctx, 1, &b, &o, 0);
	why = shemb_ctx_last_error(ctx);
	if (rc != SHEMB_EINVAL || !strstr(why, "id 1000 outside [0, 16)"))
		FAIL("a bad id on rank %d: %d: %s", world - 1, rc, why);
}

/* Two tables may share a table_id: a lookup or a row write where the
 * last rank passes the other one than the rest must fail on every rank
 * and change nothing.  Before, the ranks compared table_ids only: the
 * lookup mixed the two tables' rows, its backward updated each rank's own
 * table, and the write wrote both. */
static void check_tables_alike_in_id(void)
{
	int64_t offsets[2], ids[16];
	float out[4], grad[4] = { 1, 1, 1, 1 }, *o = out;
	const float *g = grad;
	struct shemb_table_attr a;
	struct shemb_bags b;
	shemb_table *t[2];
	int rc;

	if (world == 1)
		return;
	for (int i = 0; i < 2; i++) {
		shemb_table_attr_init(&a);
		a.rows = 16;
		a.dim = 4;
		a.shard = SHEMB_SHARD_ROW;
		a.table_id = 777;
		a.init = SHEMB_INIT_CONSTANT;
		a.init_value = i ? 100 : 1;
		a.lr = 1;
		a.name = i ? NULL : "a_table_whose_name_takes_nearly_"
				    "characters_of_the_detail_of_an_error_"
				    "a_hundred_xxxxxxxxxxxxxxxxxxx";
		CHECK_RC(ctx, shemb_table_create(ctx, &a, &t[i]));
	}
	for (int i = 0; i < 16; i++)
		ids[i] = i;
	one_bag(&b, t[rank == world - 1], offsets, 16, ids);
	rc = shemb_lookup(ctx, 1, &b, &o, 0);
	if (rc != SHEMB_EINVAL || !strstr(shemb_ctx_last_error(ctx),
					  "other tables"))
		FAIL("a lookup of two tables of one table_id: %d: %s", rc,
		     shemb_ctx_last_error(ctx));
	rows_all(t[0], 1, "first table after the refused lookup");
	rows_all(t[1], 100, "second table after the refused lookup");
	for (int i = 0; i < 4; i++)
		out[i] = 7;
	rc = shemb_table_write_rows(t[rank == world - 1], 1, ids, out,
				    SHEMB_F32, 0);
	if (rc != SHEMB_EINVAL || !strstr(shemb_ctx_last_error(ctx),
					  "other tables"))
		FAIL("a write of two tables of one table_id: %d: %s", rc,
		     shemb_ctx_last_error(ctx));
	rows_all(t[0], 1, "first table after the refused write");
	rows_all(t[1], 100, "second table after the refused write");
	/* in step: each row gets a gradient of 1 from every rank */
	b.table = t[0];
	CHECK_RC(ctx, shemb_lookup(ctx, 1, &b, &o, 0));
	for (int c = 0; c < 4; c++)
		if (out[c] != 16)
			FAIL("lookup of the first table: %g, not 16", out[c]);
	CHECK_RC(ctx, shemb_backward(ctx, 1, &b, &g));
	rows_all(t[0], 1 - (float)world, "first table after a backward");
	rows_all(t[1], 100, "second table after the first's backward");
	check_detail_relayed(t[0]);
	CHECK_RC(ctx, shemb_table_destroy(t[0]));
	CHECK_RC(ctx, shemb_table_destroy(t[1]));
}

/*
 * A backward weighs the gradients with its own weights, whoever pools the
 * bags: two sets of all 16 rows (SUM, MEAN) looked up with weight 1, the
 * backward weighing them 2 and 3 with a gradient of 1, SGD at lr 1 from
 * 0: every row ends at -world * (2 + 3 / 16), pooled at the owners as at
 * the requesters.  Before, the owners weighed with the lookup's weights.
 */
static void check_backward_weights(void)
{
	int64_t offsets[2], ids[16];
	float w1[16], w2[16], w3[16], out[2][4], grad[4] = { 1, 1, 1, 1 };
	float *o[2] = { out[0], out[1] };
	const float *g[2] = { grad, grad };
	static const int at[] = { SHEMB_POOL_AT_OWNER, SHEMB_POOL_AT_REQUESTER };
	struct shemb_table_attr a;
	struct shemb_bags b[2];
	shemb_table *t;

	for (int i = 0; i < 16; i++) {
		ids[i] = i;
		w1[i] = 1;
		w2[i] = 2;
		w3[i] = 3;
	}
	for (size_t k = 0; world > 1 && k < sizeof(at) / sizeof(at[0]); k++) {
		shemb_table_attr_init(&a);
		a.rows = 16;
		a.dim = 4;
		a.shard = SHEMB_SHARD_ROW;
		a.pool_at = at[k];
		a.init = SHEMB_INIT_ZEROS;
		a.lr = 1;
		CHECK_RC(ctx, shemb_table_create(ctx, &a, &t));
		for (int s = 0; s < 2; s++) {
			one_bag(&b[s], t, offsets, 16, ids);
			b[s].pooling = s ? SHEMB_POOL_MEAN : SHEMB_POOL_SUM;
			b[s].weights = w1;
		}
		CHECK_RC(ctx, shemb_lookup(ctx, 2, b, o, 0));
		b[0].weights = w2;
		b[1].weights = w3;
		CHECK_RC(ctx, shemb_backward(ctx, 2, b, g));
		rows_all(t, -(float)world * (2 + 3.0f / 16),
			 at[k] == SHEMB_POOL_AT_OWNER
				 ? "pooled at the owners, after a backward"
				 : "pooled here, after a backward");
		CHECK_RC(ctx, shemb_table_destroy(t));
	}
}

/* Bad shard attrs fail on every rank alike, before any exchange. */
static void check_rejections(void)
{
	static const struct {
		int shard, owner, dim, opt;
		float skew;
		int want; /* with one rank; more ranks: want_dist */
		int want_dist;
	} bad[] = {
		{ 9, -1, 8, SHEMB_OPT_SGD, 0, SHEMB_EINVAL, SHEMB_EINVAL },
		{ SHEMB_SHARD_TABLE, 64, 8, SHEMB_OPT_SGD, 0, SHEMB_EINVAL,
		  SHEMB_EINVAL },
		{ SHEMB_SHARD_ROW, -1, 8, SHEMB_OPT_SGD, -1, SHEMB_EINVAL,
		  SHEMB_EINVAL },
		{ SHEMB_SHARD_COLUMN, -1, 1, SHEMB_OPT_SGD, 0, 0,
		  SHEMB_EINVAL },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct shemb_table_attr a;
		shemb_table *t = NULL;
		int want = world > 1 ? bad[i].want_dist : bad[i].want, rc;

		shemb_table_attr_init(&a);
		a.rows = 40;
		a.dim = bad[i].dim;
		a.shard = bad[i].shard;
		a.shard_owner = bad[i].owner;
		a.optimizer = bad[i].opt;
		a.expected_skew = bad[i].skew;
		rc = shemb_table_create(ctx, &a, &t);
		if (rc != want)
			FAIL("bad shard attrs %zu: %d, not %d: %s", i, rc, want,
			     shemb_ctx_last_error(ctx));
		shemb_table_destroy(t);
	}
}

static void expect_all_fail(int rc, const char *call, const char *mine);

/* Rank r's rows to write into table ci at a step: ids that collide
 * between ranks and within a rank. */
static void rows_to_write(int step, int r, int ci, int64_t *ids, float *v)
{
	struct rng g = { mix((uint64_t)step << 40 ^ (uint64_t)r << 32 ^
			     (uint64_t)ci ^ 0x5157) };

	for (int i = 0; i < 5; i++) {
		ids[i] = below(&g, 8);
		for (int c = 0; c < cases[ci].dim; c++)
			v[i * cases[ci].dim + c] =
				(float)(below(&g, 200) - 100) * 0.004f;
	}
}

/* Every rank writes rows of every table; the reference writes every
 * rank's rows in rank order, so the last row of the highest rank wins.
 * A non-finite value on one rank first fails the call everywhere. */
static void write_step(int step)
{
	unsigned flags = step % 2 ? SHEMB_WRITE_RESET_STATE : 0;
	int64_t ids[5];
	float v[5 * 10];
	int rc;

	for (int ci = 0; ci < ncases; ci++) {
		rows_to_write(step, rank, ci, ids, v);
		if (world > 1 && ci == 0) {
			float keep = v[0];

			if (rank == world - 1)
				v[0] = INFINITY;
			rc = shemb_table_write_rows(cases[ci].t, 5, ids, v,
						    SHEMB_F32, flags);
			v[0] = keep;
			expect_all_fail(rc, "write_rows", "not finite");
		}
		CHECK_RC(ctx, shemb_table_write_rows(cases[ci].t, 5, ids, v,
						     SHEMB_F32, flags));
		for (int r = 0; r < world; r++) {
			rows_to_write(step, r, ci, ids, v);
			CHECK_RC(ref, shemb_table_write_rows(cases[ci].rt, 5,
							     ids, v, SHEMB_F32,
							     flags));
		}
	}
}

/* The plan of each table, as described, and the described length. */
static void check_describe(void)
{
	static const char *const words[] = { "?", "row-wise", "column-wise",
					     "table-wise", "replicated" };
	char buf[4096];
	int n = shemb_ctx_plan_describe(ctx, buf, sizeof(buf));

	if (n < 0 || (size_t)n != strlen(buf))
		FAIL("plan_describe returned %d for %zu bytes", n,
		     strlen(buf));
	for (int ci = 0; ci < ncases; ci++) {
		char name[32], *line;

		snprintf(name, sizeof(name), "'table%d'", 101 + ci);
		line = strstr(buf, name);
		if (!line || !strstr(line, world > 1 ? words[cases[ci].shard]
						     : "local"))
			FAIL("plan_describe: %s is not %s in:\n%s", name,
			     world > 1 ? words[cases[ci].shard] : "local", buf);
	}
}

/* What each rank says it sent a peer is what the peer says it received,
 * phase by phase; the totals are the sums over the other ranks. */
static void check_peer_stats(void)
{
	size_t w = (size_t)world;
	uint64_t *mine = calloc(2 * w, 8), *all = calloc(2 * w * w, 8);
	size_t *cnt = calloc(w, sizeof(size_t));
	size_t *dsp = calloc(w, sizeof(size_t));

	for (size_t r = 0; r < w; r++) {
		cnt[r] = 2 * w * 8;
		dsp[r] = r * 2 * w * 8;
	}
	for (int ci = 0; ci < ncases; ci++) {
		struct shemb_table_stats st = { .size = sizeof(st) };
		uint64_t sent = 0, recv = 0;

		CHECK_RC(ctx, shemb_table_stats(cases[ci].t, &st));
		for (int ph = SHEMB_PHASE_IDS; ph <= SHEMB_PHASE_GRADS; ph++) {
			CHECK_RC(ctx, shemb_table_stats_peers(cases[ci].t, ph,
							      mine, mine + w));
			CHECK_RC(ctx, shemb_allgatherv(ctx, mine, 2 * w * 8,
						       all, cnt, dsp, NULL));
			for (size_t a = 0; a < w; a++)
				for (size_t b = 0; b < w; b++)
					if (all[a * 2 * w + b] !=
					    all[b * 2 * w + w + a])
						FAIL("table %d phase %d: rank "
						     "%zu sent %llu to %zu, "
						     "which received %llu", ci,
						     ph, a, (unsigned long long)
						     all[a * 2 * w + b], b,
						     (unsigned long long)
						     all[b * 2 * w + w + a]);
			for (size_t p = 0; p < w; p++)
				if (p != (size_t)rank) {
					sent += mine[p];
					recv += mine[w + p];
				}
		}
		if (world > 1 &&
		    (st.phase_ns[0] == 0 || st.phase_ns[1] == 0 ||
		     st.phase_ns[2] == 0 ||
		     st.phase_ns[0] + st.phase_ns[1] + st.phase_ns[2] >
			     st.exchange_ns))
			FAIL("table %d: phase times %llu %llu %llu within an "
			     "exchange time of %llu", ci,
			     (unsigned long long)st.phase_ns[0],
			     (unsigned long long)st.phase_ns[1],
			     (unsigned long long)st.phase_ns[2],
			     (unsigned long long)st.exchange_ns);
		if (sent != st.sent_bytes || recv != st.received_bytes ||
		    (world > 1 && sent == 0))
			FAIL("table %d: %llu/%llu bytes sent/received by "
			     "peer, %llu/%llu in total", ci,
			     (unsigned long long)sent, (unsigned long long)recv,
			     (unsigned long long)st.sent_bytes,
			     (unsigned long long)st.received_bytes);
	}
	free(mine);
	free(all);
	free(cnt);
	free(dsp);
}

/* SHARD_AUTO weighs every rank's room: the last rank has a budget of
 * 3 MiB (see main), so a 500 KB table is not copied to every rank but
 * spread by rows, a 6 KB one is copied, and a 400 KB one of 100 rows goes
 * whole to a rank with room, not the last. */
static void check_planner(void)
{
	static const struct {
		int64_t rows;
		int dim;
		const char *want;
	} t[] = {
		{ 2000, 64, "row-wise" },
		{ 100, 16, "replicated" },
		{ 100, 1024, "table-wise on rank" },
	};
	shemb_table *tab[3];
	char buf[4096], name[16], *line;

	if (world == 1)
		return;
	for (int i = 0; i < 3; i++) {
		struct shemb_table_attr a;

		shemb_table_attr_init(&a);
		snprintf(name, sizeof(name), "auto%d", i);
		a.name = name;
		a.rows = t[i].rows;
		a.dim = t[i].dim;
		CHECK_RC(ctx, shemb_table_create(ctx, &a, &tab[i]));
	}
	shemb_ctx_plan_describe(ctx, buf, sizeof(buf));
	for (int i = 0; i < 3; i++) {
		char other[48];

		snprintf(name, sizeof(name), "'auto%d'", i);
		line = strstr(buf, name);
		if (!line || !strstr(line, t[i].want))
			FAIL("AUTO chose otherwise for %s:\n%s", name, buf);
		snprintf(other, sizeof(other), "table-wise on rank %d\n",
			 world - 1);
		if (i == 2 && !strncmp(strstr(line, "table-wise"), other,
				       strlen(other)))
			FAIL("AUTO put %s on the rank without room", name);
	}
	for (int i = 0; i < 3; i++)
		shemb_table_destroy(tab[i]);
}

/* The rank that the plan description puts table-wise table `name` on. */
static int described_owner(const char *name)
{
	char buf[4096], quoted[32];
	const char *line, *on;

	shemb_ctx_plan_describe(ctx, buf, sizeof(buf));
	snprintf(quoted, sizeof(quoted), "'%s'", name);
	line = strstr(buf, quoted);
	on = line ? strstr(line, "table-wise on rank ") : NULL;
	if (!on)
		FAIL("%s is not table-wise in:\n%s", name, buf);
	return atoi(on + strlen("table-wise on rank "));
}

/* SHARD_TABLE with shard_owner left at its default (-1): each table goes
 * to the rank with the most room left.  Two of 800 KB, more than the
 * ranks' room differs by before them, go to two ranks; never to the last
 * (a budget of 3 MiB, see main) while the others have room. */
static void check_default_owner(void)
{
	shemb_table *tab[2];
	int owner[2];

	if (world < 3)
		return;
	for (int i = 0; i < 2; i++) {
		struct shemb_table_attr a;
		char name[16];

		shemb_table_attr_init(&a);
		snprintf(name, sizeof(name), "whole%d", i);
		a.name = name;
		a.rows = 200;
		a.dim = 1024;
		a.shard = SHEMB_SHARD_TABLE;
		CHECK_RC(ctx, shemb_table_create(ctx, &a, &tab[i]));
		owner[i] = described_owner(name);
	}
	if (owner[0] == owner[1] || owner[0] == world - 1 ||
	    owner[1] == world - 1)
		FAIL("table-wise tables with the default owner went to ranks "
		     "%d and %d of %d", owner[0], owner[1], world);
	for (int i = 0; i < 2; i++)
		shemb_table_destroy(tab[i]);
}

/* Bytes of t's part of a phase sent to rank `to` (-1: to all), or with
 * received, received from all. */
static uint64_t phase_bytes(shemb_table *t, int phase, int to, bool received)
{
	uint64_t sent[64] = { 0 }, got[64] = { 0 }, sum = 0;

	CHECK_RC(ctx, shemb_table_stats_peers(t, phase, sent, got));
	for (int p = 0; p < world; p++)
		sum += received ? got[p] : to < 0 || p == to ? sent[p] : 0;
	return sum;
}

static uint64_t phase_sent(shemb_table *t, int phase, int to)
{
	return phase_bytes(t, phase, to, false);
}

/*
 * The paths are taken, by their bytes in the documented formats: one bag
 * of one id ten times.  Pooled at its owner, the owner gets the count
 * (8), the number of ids (8), one length padded (8), ten ids (80) and
 * ten weights (40); every other rank the count and an empty part (16).
 * Rows sent whole: the count and one id with its occurrences (8 + 16),
 * the count alone (8) elsewhere.  A small replicated table's backward
 * (outside deterministic mode) is one dense allreduce of 20 x (4 + 1)
 * fp32 to every other rank, plus its 8-byte count in the message.  With
 * wire_dtype BF16 the one distinct row comes back in 8 bytes (16 in fp32)
 * and its gradient row goes out in 8 (16).
 */
static void check_paths(void)
{
	static const int where[2] = { SHEMB_POOL_AT_OWNER,
				      SHEMB_POOL_AT_REQUESTER };
	int64_t offsets[2] = { 0, 10 }, ids[10];
	float out[4][4], grad[4] = { 1, 2, 3, 4 };
	struct shemb_bags b[4];
	shemb_table *t[4];

	if (world == 1 || deterministic || wire != SHEMB_F32)
		return;
	for (int i = 0; i < 10; i++)
		ids[i] = 7;
	for (int i = 0; i < 4; i++) {
		struct shemb_table_attr a;

		shemb_table_attr_init(&a);
		a.rows = 20;
		a.dim = 4;
		a.shard = i == 2 ? SHEMB_SHARD_REPLICATED : SHEMB_SHARD_ROW;
		a.pool_at = i < 2 ? where[i] : SHEMB_POOL_AT_REQUESTER;
		a.wire_dtype = i == 3 ? SHEMB_BF16 : SHEMB_F32;
		CHECK_RC(ctx, shemb_table_create(ctx, &a, &t[i]));
		shemb_bags_init(&b[i]);
		b[i].table = t[i];
		b[i].nbags = 1;
		b[i].offsets = offsets;
		b[i].nids = 10;
		b[i].ids = ids;
	}
	CHECK_RC(ctx, shemb_lookup(ctx, 4, b,
				   (float *const[]){ out[0], out[1], out[2],
						     out[3] },
				   0));
	CHECK_RC(ctx, shemb_backward(ctx, 4, b,
				     (const float *const[]){ grad, grad, grad,
							     grad }));
	if (phase_sent(t[0], SHEMB_PHASE_IDS, -1) !=
		    144 + 16 * (uint64_t)(world - 1) ||
	    phase_sent(t[1], SHEMB_PHASE_IDS, -1) !=
		    24 + 8 * (uint64_t)(world - 1))
		FAIL("ids sent pooled at the owner %llu, rows whole %llu",
		     (unsigned long long)phase_sent(t[0], SHEMB_PHASE_IDS, -1),
		     (unsigned long long)phase_sent(t[1], SHEMB_PHASE_IDS, -1));
	for (int p = 0; p < world; p++)
		if (phase_sent(t[2], SHEMB_PHASE_GRADS, p) !=
		    (p == rank ? 8u : 8u + 20 * 5 * 4))
			FAIL("replicated table: %llu gradient bytes to rank %d",
			     (unsigned long long)phase_sent(t[2],
							    SHEMB_PHASE_GRADS,
							    p), p);
	if (phase_bytes(t[3], SHEMB_PHASE_ROWS, -1, true) != 8 ||
	    phase_bytes(t[1], SHEMB_PHASE_ROWS, -1, true) != 16 ||
	    phase_sent(t[3], SHEMB_PHASE_GRADS, -1) !=
		    16 + 8 * (uint64_t)(world - 1) ||
	    phase_sent(t[1], SHEMB_PHASE_GRADS, -1) !=
		    24 + 8 * (uint64_t)(world - 1))
		FAIL("bf16 on the wire: rows %llu bytes (fp32 %llu), "
		     "gradients %llu (fp32 %llu)",
		     (unsigned long long)phase_bytes(t[3], SHEMB_PHASE_ROWS,
						     -1, true),
		     (unsigned long long)phase_bytes(t[1], SHEMB_PHASE_ROWS,
						     -1, true),
		     (unsigned long long)phase_sent(t[3], SHEMB_PHASE_GRADS,
						    -1),
		     (unsigned long long)phase_sent(t[1], SHEMB_PHASE_GRADS,
						    -1));
	for (int i = 0; i < 4; i++)
		shemb_table_destroy(t[i]);
}

/*
 * SHEMB_POOL_AT_AUTO pools at the owners when that sends at most half the
 * bytes of sending distinct ids and whole rows (shemb_table_create(3)):
 * for one bag of n distinct ids on one owner, dim 4 in fp32, pooled is
 * 1 pair x (4 + 8 x 4) + n x 12 and whole n x (16 + 16 + 16).  At n = 3
 * pooled is exactly half (72 of 144): pooled; at n = 2 it is more (60 of
 * 96): whole.  The ids part to the owner is then, pooled, 24 + 8n +
 * pad8(4n) bytes (64 at n = 3) and 16 to every other rank; whole, 8 + 16n
 * (40 at n = 2) and 8 to every other rank.
 */
static void check_auto(void)
{
	static const int64_t ids[3] = { 3, 11, 17 };
	static const uint64_t part[2] = { 40, 64 }, other[2] = { 8, 16 };
	int64_t offsets[2][2] = { { 0, 2 }, { 0, 3 } };
	float out[2][4 * 3], grad[4] = { 1, 2, 3, 4 };
	struct shemb_bags b[2];
	shemb_table *t[2];

	if (world == 1 || deterministic || wire != SHEMB_F32)
		return;
	for (int i = 0; i < 2; i++) {
		struct shemb_table_attr a;

		shemb_table_attr_init(&a);
		a.rows = 20;
		a.dim = 4;
		a.shard = SHEMB_SHARD_TABLE;
		a.shard_owner = 0;
		a.pool_at = SHEMB_POOL_AT_AUTO;
		CHECK_RC(ctx, shemb_table_create(ctx, &a, &t[i]));
		shemb_bags_init(&b[i]);
		b[i].table = t[i];
		b[i].nbags = 1;
		b[i].offsets = offsets[i];
		b[i].nids = offsets[i][1];
		b[i].ids = ids;
	}
	CHECK_RC(ctx, shemb_lookup(ctx, 2, b,
				   (float *const[]){ out[0], out[1] }, 0));
	CHECK_RC(ctx, shemb_backward(ctx, 2, b,
				     (const float *const[]){ grad, grad }));
	for (int i = 0; i < 2; i++) {
		uint64_t want = part[i] + other[i] * (uint64_t)(world - 1);
		uint64_t got = phase_sent(t[i], SHEMB_PHASE_IDS, -1);

		if (got != want)
			FAIL("AUTO, %d distinct ids on one owner: %llu bytes "
			     "of ids sent, not %llu (%s)", i + 2,
			     (unsigned long long)got,
			     (unsigned long long)want,
			     i ? "pooled" : "whole");
	}
	for (int i = 0; i < 2; i++)
		shemb_table_destroy(t[i]);
}

/* ---- bags ---- */

struct set {
	struct shemb_bags b;
	int64_t offsets[NBAGS + 1];
	int64_t *ids;
	float *weights;
	float *out, *ref_out, *grad;
	int64_t out_rows;
};

static void free_set(struct set *s)
{
	free(s->ids);
	free(s->weights);
	free(s->out);
	free(s->ref_out);
	free(s->grad);
}

/* Rank r's bag set k of table c at this step: mostly hot ids, so that
 * ranks share rows; some empty bags; pooling and weights by set. */
static void make_set(struct set *s, int step, int r, int ci, int k)
{
	const struct tcase *c = &cases[ci];
	struct rng g = { mix((uint64_t)step << 40 ^ (uint64_t)r << 32 ^
			     (uint64_t)ci << 8 ^ (uint64_t)k) };
	int64_t n = 0;

	memset(s, 0, sizeof(*s));
	shemb_bags_init(&s->b);
	s->b.table = c->t;
	s->b.pooling = (ci + k + step) % 4;
	s->b.nbags = NBAGS;
	s->offsets[0] = 0;
	for (int b = 0; b < NBAGS; b++)
		s->offsets[b + 1] = s->offsets[b] +
				    (below(&g, 5) == 0
					     ? 0
					     : 1 + below(&g, cache_pct ? 2
								       : 6));
	n = s->offsets[NBAGS];
	s->ids = malloc((size_t)(n + 1) * sizeof(int64_t));
	s->weights = (k + step) % 3 == 0
			     ? malloc((size_t)(n + 1) * sizeof(float))
			     : NULL;
	for (int64_t i = 0; i < n; i++) {
		s->ids[i] = below(&g, 2) ? below(&g, 12)
					 : below(&g, (int)c->rows);
		if (s->weights)
			s->weights[i] = 0.25f + (float)below(&g, 8) * 0.25f;
	}
	s->b.offsets = s->offsets;
	s->b.nids = n;
	s->b.ids = s->ids;
	s->b.weights = s->weights;
	s->out_rows = s->b.pooling == SHEMB_POOL_NONE ? n : NBAGS;
	s->out = calloc((size_t)(s->out_rows * c->dim + 1), sizeof(float));
	s->ref_out = calloc((size_t)(s->out_rows * c->dim + 1),
			    sizeof(float));
	s->grad = malloc((size_t)(s->out_rows * c->dim + 1) * sizeof(float));
	for (int64_t v = 0; v < s->out_rows * c->dim; v++)
		s->grad[v] = (float)(below(&g, 2001) - 1000) * 1e-3f;
}

/* Sets per table: 1 or 2, the same on every rank at a step. */
static int nsets_of(int step, int ci)
{
	return 1 + (step + ci) % 2;
}

/* ---- comparing ---- */

static void same(const float *a, const float *b, int64_t n, const char *what,
		 int step, int ci)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t x, y;
		double big = fmax(fabs(a[i]), fabs(b[i]));
		/* fp32 tables within 1e-5 of the value, or of the rows'
		 * scale (about 0.1) where a pooled sum cancels; a bf16
		 * table's rows round to 8 bits, and a last-bit difference of
		 * a sum may round a row one bf16 step apart (pooled lookups
		 * sum such rows) */
		double tol = cases[ci].dtype == SHEMB_BF16
				     ? 8e-3 * big + 4e-3
				     : 1e-5 * big + 1e-6;

		memcpy(&x, &a[i], 4);
		memcpy(&y, &b[i], 4);
		if (deterministic ? x != y : fabs(a[i] - b[i]) > tol)
			FAIL("%s of table %d (shard %d, optimizer %d) at step "
			     "%d, value %lld: %.9g, the reference %.9g", what,
			     ci, cases[ci].shard, cases[ci].optimizer, step,
			     (long long)i, a[i], b[i]);
	}
}

/* The initial rows of each table (from the reference), for --wire. */
static float *initial[NCASES];

static void read_initial(void)
{
	for (int ci = 0; ci < ncases; ci++) {
		int64_t n = cases[ci].rows;
		int64_t *ids = malloc((size_t)n * sizeof(int64_t));

		initial[ci] = malloc((size_t)(n * cases[ci].dim) *
				     sizeof(float));
		for (int64_t i = 0; i < n; i++)
			ids[i] = i;
		CHECK_RC(ref, shemb_table_read_rows(cases[ci].rt, n, ids,
						    initial[ci], SHEMB_F32));
		free(ids);
	}
}

/* Before training every rank reads every row as the reference holds it,
 * bit for bit, whatever the wire dtype: reads are exact. */
static void check_exact_read(void)
{
	for (int ci = 0; ci < ncases; ci++) {
		int64_t n = cases[ci].rows;
		int64_t *ids = malloc((size_t)n * sizeof(int64_t));
		float *a = malloc((size_t)(n * cases[ci].dim) * sizeof(float));

		for (int64_t i = 0; i < n; i++)
			ids[i] = i;
		CHECK_RC(ctx, shemb_table_read_rows(cases[ci].t, n, ids, a,
						    SHEMB_F32));
		if (memcmp(a, initial[ci], (size_t)(n * cases[ci].dim) * 4))
			FAIL("initial rows of table %d differ", ci);
		free(ids);
		free(a);
	}
}

/* With 16-bit rows and gradients between ranks the tables cannot match a
 * single process value by value: a sum of rounded partial gradients that
 * nearly cancel may even flip the sign of an Adam step.  Training must
 * still go where the reference goes: the distance to the reference is
 * under a tenth of the distance the reference moved from the start. */
static void close_in_norm(const float *a, const float *b, int ci, int step)
{
	double e = 0, d = 0;
	int64_t n = cases[ci].rows * cases[ci].dim;

	for (int64_t i = 0; i < n; i++) {
		e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		d += ((double)b[i] - initial[ci][i]) *
		     ((double)b[i] - initial[ci][i]);
	}
	if (e > 0.01 * d)
		FAIL("rows of table %d (shard %d, optimizer %d) at step %d: "
		     "%.3g from the reference, which moved %.3g", ci,
		     cases[ci].shard, cases[ci].optimizer, step, sqrt(e),
		     sqrt(d));
}

static void compare_tables(int step)
{
	for (int ci = 0; ci < ncases; ci++) {
		const struct tcase *c = &cases[ci];
		int64_t n = c->rows;
		int64_t *ids = malloc((size_t)n * sizeof(int64_t));
		float *a = malloc((size_t)(n * c->dim) * sizeof(float));
		float *b = malloc((size_t)(n * c->dim) * sizeof(float));

		for (int64_t i = 0; i < n; i++) /* every id, in any order, */
			ids[i] = wire == SHEMB_F32 ? (i * 7 + rank) % n
						   : i; /* or as initial[] */
		CHECK_RC(ctx, shemb_table_read_rows(c->t, n, ids, a,
						    SHEMB_F32));
		CHECK_RC(ref, shemb_table_read_rows(c->rt, n, ids, b,
						    SHEMB_F32));
		if (wire != SHEMB_F32 && world > 1) {
			close_in_norm(a, b, ci, step);
		} else {
			same(a, b, n * c->dim, "rows", step, ci);
		}
		free(ids);
		free(a);
		free(b);
	}
}

/* ---- one step ---- */

struct step {
	int nmine;
	struct shemb_bags mine[NCASES * MAX_SETS];
	float *out[NCASES * MAX_SETS];
	size_t out_len[NCASES * MAX_SETS];  /* floats */
	const float *grad[NCASES * MAX_SETS];
	int nref;
	struct shemb_bags refb[NCASES * MAX_SETS * 4];
	float *ref_out[NCASES * MAX_SETS * 4];
	const float *ref_grad[NCASES * MAX_SETS * 4];
	struct set *sets; /* [world][ncases][MAX_SETS] */
	int set_of_mine[NCASES * MAX_SETS]; /* index in sets */
	/* --device-bags: mine, out and grad of the sets on_dev are device
	 * copies; the sets' own outputs take the device's after each
	 * lookup */
	bool on_dev[NCASES * MAX_SETS];
	float *host_out[NCASES * MAX_SETS];
};

static struct set *set_at(struct step *s, int r, int ci, int k)
{
	return &s->sets[((size_t)r * NCASES + ci) * MAX_SETS + k];
}

static void *to_dev(const void *p, size_t n)
{
	void *d;

	if (!p)
		return NULL;
	d = devmem_alloc(n);
	devmem.copy(d, p, n);
	return d;
}

/* --device-bags: this rank's sets, outputs and gradients moved to
 * device memory, but every other set's (a call may mix them); device
 * outputs start as NaN, so that one left unwritten shows. */
static void move_to_device(struct step *s)
{
	for (int i = 0; i < s->nmine; i += 2) {
		struct shemb_bags *b = &s->mine[i];
		size_t out = s->out_len[i] * sizeof(float);

		s->on_dev[i] = true;
		b->mem = SHEMB_MEM_DEVICE;
		b->offsets = to_dev(b->offsets, ((size_t)b->nbags + 1) * 8);
		b->ids = to_dev(b->ids, (size_t)b->nids * 8);
		b->weights = to_dev(b->weights, (size_t)b->nids * 4);
		s->host_out[i] = s->out[i];
		s->out[i] = devmem_alloc(out);
		devmem.fill(s->out[i], 0xff, out);
		s->grad[i] = to_dev(s->grad[i], out);
	}
}

/* Output i of this rank's lookup, wherever it is, into dst. */
static void copy_out(const struct step *s, int i, float *dst)
{
	size_t n = s->out_len[i] * sizeof(float);

	if (s->on_dev[i])
		devmem.copy(dst, s->out[i], n);
	else
		memcpy(dst, s->out[i], n);
}

/* The sets' outputs (what check_outputs reads) after a lookup. */
static void take_outputs(struct step *s)
{
	for (int i = 0; i < s->nmine; i++)
		if (s->on_dev[i])
			copy_out(s, i, s->host_out[i]);
}

/* *p = *v, n bytes, in the buffers of this rank's set i, wherever they
 * are */
static void poke(const struct step *s, int i, void *p, const void *v,
		 size_t n)
{
	if (s->on_dev[i])
		devmem.copy(p, v, n);
	else
		memcpy(p, v, n);
}

/* This rank's call: its sets, tables in order; the reference's: every
 * rank's sets, rank by rank (its tables' position order). */
static void build_step(struct step *s, int step)
{
	s->sets = calloc((size_t)world * NCASES * MAX_SETS, sizeof(*s->sets));
	s->nmine = s->nref = 0;
	for (int r = 0; r < world; r++) {
		for (int ci = 0; ci < ncases; ci++) {
			for (int k = 0; k < nsets_of(step, ci); k++) {
				struct set *x = set_at(s, r, ci, k);

				make_set(x, step, r, ci, k);
				s->refb[s->nref] = x->b;
				s->refb[s->nref].table = cases[ci].rt;
				s->ref_out[s->nref] = x->ref_out;
				s->ref_grad[s->nref++] = x->grad;
				if (r != rank)
					continue;
				s->mine[s->nmine] = x->b;
				s->out[s->nmine] = x->out;
				s->out_len[s->nmine] = (size_t)x->out_rows *
						       (size_t)cases[ci].dim;
				s->grad[s->nmine++] = x->grad;
			}
		}
	}
	if (device_bags)
		move_to_device(s);
}

static void free_step(struct step *s)
{
	for (int i = 0; i < s->nmine; i++) {
		if (!s->on_dev[i])
			continue;
		devmem.free((void *)s->mine[i].offsets);
		devmem.free((void *)s->mine[i].ids);
		devmem.free((void *)s->mine[i].weights);
		devmem.free(s->out[i]);
		devmem.free((void *)s->grad[i]);
	}
	for (size_t i = 0; i < (size_t)world * NCASES * MAX_SETS; i++)
		free_set(&s->sets[i]);
	free(s->sets);
}

/* The bound on output value c of output row o of set x when each row
 * value was rounded to 16 bits (relative error 2^-8 at most, bf16): the
 * sum (MAX: the largest) of |weight * value| over the row's ids, times
 * 2^-8, over the bag length for MEAN. */
static double rounding_bound(const struct set *x, int ci, int64_t o, int c)
{
	int dim = cases[ci].dim;
	int64_t lo = o, hi = o + 1;
	double sum = 0, max = 0;

	if (x->b.pooling != SHEMB_POOL_NONE) {
		lo = x->offsets[o];
		hi = x->offsets[o + 1];
	}
	for (int64_t i = lo; i < hi; i++) {
		double w = x->weights ? x->weights[i] : 1.0;
		double v = fabs(w * initial[ci][x->ids[i] * dim + c]);

		sum += v;
		max = v > max ? v : max;
	}
	if (x->b.pooling == SHEMB_POOL_MAX)
		sum = max;
	if (x->b.pooling == SHEMB_POOL_MEAN && hi > lo)
		sum /= (double)(hi - lo);
	return sum * 0x1p-8 + 1e-6;
}

static void within_rounding(const struct set *x, int ci)
{
	int dim = cases[ci].dim;

	for (int64_t o = 0; o < x->out_rows; o++)
		for (int c = 0; c < dim; c++) {
			double a = x->out[o * dim + c];
			double b = x->ref_out[o * dim + c];

			if (fabs(a - b) > rounding_bound(x, ci, o, c))
				FAIL("lookup of table %d, row %lld column %d "
				     "with 16-bit rows: %.9g, the reference "
				     "%.9g", ci, (long long)o, c, a, b);
		}
}

/* Lookups equal the reference's; with 16-bit rows between ranks, the
 * first one (before any training) within their rounding. */
static void check_outputs(struct step *s, int step)
{
	bool rounded = wire != SHEMB_F32 && world > 1;

	take_outputs(s);
	if (rounded && step > 0)
		return; /* the tables are compared in norm at the end */
	for (int ci = 0; ci < ncases; ci++)
		for (int k = 0; k < nsets_of(step, ci); k++) {
			struct set *x = set_at(s, rank, ci, k);

			if (rounded)
				within_rounding(x, ci);
			else
				same(x->out, x->ref_out,
				     x->out_rows * cases[ci].dim, "lookup",
				     step, ci);
		}
}

/* One rank's bad input fails the call on every rank; the guilty rank's
 * detail names its fault, the others' the guilty rank. */
static void expect_all_fail(int rc, const char *call, const char *mine)
{
	const char *why = shemb_ctx_last_error(ctx);
	char other[32];

	snprintf(other, sizeof(other), "rank %d", world - 1);
	if (rc != SHEMB_EINVAL)
		FAIL("%s with a bad rank gave %d, not SHEMB_EINVAL: %s", call,
		     rc, why);
	if (!strstr(why, rank == world - 1 ? mine : other))
		FAIL("%s: detail '%s' lacks '%s'", call, why,
		     rank == world - 1 ? mine : other);
}

static void bad_lookup(struct step *s)
{
	int64_t *id = (int64_t *)s->mine[0].ids, bad = 1 << 30, saved = 0;
	int rc;

	if (rank == world - 1 && s->mine[0].nids > 0) {
		poke(s, 0, &saved, id, sizeof(saved));
		poke(s, 0, id, &bad, sizeof(bad));
	} else if (rank == world - 1) {
		s->mine[0].nbags = -1;
	}
	rc = shemb_lookup(ctx, s->nmine, s->mine, s->out, 0);
	if (rank == world - 1 && s->mine[0].nids > 0)
		poke(s, 0, id, &saved, sizeof(saved));
	s->mine[0].nbags = NBAGS;
	expect_all_fail(rc, "lookup", "bags[0]");
}

static void bad_backward(struct step *s)
{
	float *g = (float *)s->grad[0], saved, nan = NAN;
	int rc;

	poke(s, 0, &saved, g, sizeof(saved));
	if (rank == world - 1)
		poke(s, 0, g, &nan, sizeof(nan));
	rc = shemb_backward(ctx, s->nmine, s->mine, s->grad);
	poke(s, 0, g, &saved, sizeof(saved));
	expect_all_fail(rc, "backward", "grad");
}

/* A started step (or, with flags, a lookup) that the last rank cannot
 * take part in, for bags[0].size 0, a NULL req or unknown flags: every
 * rank fails it, naming that rank, and the ranks stay in step.  Before,
 * the last rank failed it alone, and the others' step met its next one. */
static int started(struct step *s, bool backward, unsigned flags,
		   bool no_req)
{
	shemb_request *req = NULL, **rp = no_req ? NULL : &req;
	int rc = backward ? shemb_backward_start(ctx, s->nmine, s->mine,
						 s->grad, rp)
			  : shemb_lookup_start(ctx, s->nmine, s->mine, s->out,
					       flags, rp);

	if (!rc) {
		rc = shemb_wait(req);
		shemb_request_free(req);
	}
	return rc;
}

static void bad_started(struct step *s, bool backward)
{
	size_t size = s->mine[0].size;
	bool last = rank == world - 1;
	int rc;

	if (last)
		s->mine[0].size = 0;
	rc = started(s, backward, 0, false);
	s->mine[0].size = size;
	expect_all_fail(rc, backward ? "started backward" : "started lookup",
			"bags[0].size");
	rc = started(s, backward, 0, last);
	expect_all_fail(rc, backward ? "started backward" : "started lookup",
			"req is NULL");
	if (backward)
		return;
	rc = started(s, false, last ? 0x80u : 0, false);
	expect_all_fail(rc, "started lookup", "flags 0x80");
	rc = shemb_lookup(ctx, s->nmine, s->mine, s->out, last ? 0x80u : 0);
	expect_all_fail(rc, "lookup", "flags 0x80");
}

/* A lookup that keeps its plan on some ranks and not on another is a
 * mismatch; a rank with nothing to read takes part with NULL buffers. */
static void check_flags_and_empty_read(struct step *s)
{
	int rc = shemb_lookup(ctx, s->nmine, s->mine, s->out,
			      rank == world - 1 ? SHEMB_LOOKUP_NO_GRAD : 0);
	int64_t id = 1;
	float row[10];

	if (rc != SHEMB_EINVAL)
		FAIL("a lookup NO_GRAD on one rank only gave %d: %s", rc,
		     shemb_ctx_last_error(ctx));
	rc = rank == 0 ? shemb_table_read_rows(cases[0].t, 0, NULL, NULL,
					       SHEMB_F16)
		       : shemb_table_read_rows(cases[0].t, 1, &id, row,
					       SHEMB_F32);
	if (rc)
		FAIL("a read of no rows on rank 0: %d: %s", rc,
		     shemb_ctx_last_error(ctx));
}

/* Prefetch (or only announce) this rank's bags of a coming step. */
static void ahead_step(int step, bool announce)
{
	struct step *s = calloc(1, sizeof(*s));

	build_step(s, step);
	if (announce)
		CHECK_RC(ctx, shemb_announce(ctx, s->nmine, s->mine));
	else
		CHECK_RC(ctx, shemb_prefetch(ctx, s->nmine, s->mine));
	free_step(s);
	free(s);
}

/* The tiers were used: rows came in, and changed rows went back. */
static void check_tiers_moved_rows(void)
{
	uint64_t loads = 0, writebacks = 0;

	for (int ci = 0; ci < ncases; ci++) {
		struct shemb_table_stats s = { .size = sizeof(s) };

		CHECK_RC(ctx, shemb_table_stats(cases[ci].t, &s));
		loads += s.cache_misses;
		writebacks += s.cache_writebacks;
	}
	if (!loads || !writebacks)
		FAIL("the device tiers loaded %llu rows and wrote back %llu",
		     (unsigned long long)loads,
		     (unsigned long long)writebacks);
}

/* Rank 0 announces what the others prefetch: every rank fails. */
static void mixed_ahead(int step)
{
	struct step *s = calloc(1, sizeof(*s));
	int rc;

	build_step(s, step);
	rc = rank == 0 ? shemb_announce(ctx, s->nmine, s->mine)
		       : shemb_prefetch(ctx, s->nmine, s->mine);
	if (rc != SHEMB_EINVAL)
		FAIL("an announcement against prefetches gave %d: %s", rc,
		     shemb_ctx_last_error(ctx));
	free_step(s);
	free(s);
}

/* Each output of the started lookup lk as shemb_wait_part() reports it
 * final, last set first; compared once the whole lookup is done. */
static float **outputs_when_final(struct step *s, shemb_request *lk)
{
	float **snap = calloc((size_t)s->nmine + 1, sizeof(*snap));

	for (int i = s->nmine - 1; i >= 0; i--) {
		CHECK_RC(ctx, shemb_wait_part(lk, i));
		snap[i] = malloc(s->out_len[i] * sizeof(float) + 1);
		if (!snap[i])
			FAIL("no memory");
		copy_out(s, i, snap[i]);
	}
	return snap;
}

static void same_outputs(struct step *s, float **snap, int step)
{
	for (int i = 0; i < s->nmine; i++) {
		float *now = malloc(s->out_len[i] * sizeof(float) + 1);

		if (!now)
			FAIL("no memory");
		copy_out(s, i, now);
		if (memcmp(snap[i], now, s->out_len[i] * sizeof(float)))
			FAIL("step %d: output %d changed after "
			     "shemb_wait_part() reported it final", step, i);
		free(now);
		free(snap[i]);
	}
	free(snap);
}

/* --async: the step's lookup and backward started together with a dense
 * allreduce started between them (it takes its turn among the steps'
 * collectives on every rank), the reference run meanwhile, then each
 * output of the lookup as it is final and all requests in reverse
 * order. */
static void run_async(struct step *s, int step, int steps)
{
	enum { DENSE = 64 };
	shemb_request *lk, *ar, *bw;
	double dense[DENSE], sum[DENSE];
	float **snap;

	for (int i = 0; i < DENSE; i++)
		dense[i] = rank + i + step;
	CHECK_RC(ctx, shemb_lookup_start(ctx, s->nmine, s->mine, s->out, 0,
					 &lk));
	CHECK_RC(ctx, shemb_allreduce(ctx, dense, sum, DENSE, SHEMB_F64,
				      SHEMB_REDUCE_SUM, &ar));
	CHECK_RC(ctx, shemb_backward_start(ctx, s->nmine, s->mine, s->grad,
					   &bw));
	if (cache_pct && step + 1 < steps)
		ahead_step(step + 1, false); /* queues behind them */
	CHECK_RC(ref, shemb_lookup(ref, s->nref, s->refb, s->ref_out, 0));
	CHECK_RC(ref, shemb_backward(ref, s->nref, s->refb, s->ref_grad));
	snap = outputs_when_final(s, lk);
	CHECK_RC(ctx, shemb_wait(bw));
	CHECK_RC(ctx, shemb_wait(ar));
	CHECK_RC(ctx, shemb_wait(lk));
	same_outputs(s, snap, step);
	for (int i = 0; i < DENSE; i++)
		if (sum[i] != world * (double)(i + step) +
				      world * (world - 1) / 2.0)
			FAIL("step %d: dense allreduce value %d is %g", step, i,
			     sum[i]);
	check_outputs(s, step);
	shemb_request_free(lk);
	shemb_request_free(ar);
	shemb_request_free(bw);
}

static struct step *new_step(int step)
{
	struct step *s = calloc(1, sizeof(*s));

	if (!s)
		FAIL("no memory");
	build_step(s, step);
	return s;
}

/* Over every table: bag sets looked up relaxed (or, early: the rows
 * this rank sent them before the update). */
static uint64_t relaxed_lookups(bool early)
{
	uint64_t n = 0;

	for (int ci = 0; ci < ncases; ci++) {
		struct shemb_table_stats st = { .size = sizeof(st) };

		CHECK_RC(ctx, shemb_table_stats(cases[ci].t, &st));
		n += early ? st.early_rows : st.relaxed_lookups;
	}
	return n;
}

/* The lookup started behind a backward, with other tables on the last
 * rank: it fails on every rank, the backward does not. */
static void relaxed_mismatch(struct step *s, struct step *n)
{
	shemb_request *lk, *bw;
	int rc;

	CHECK_RC(ctx, shemb_backward_start(ctx, s->nmine, s->mine, s->grad,
					   &bw));
	CHECK_RC(ctx, shemb_lookup_start(ctx, rank == world - 1 ? 1
								: n->nmine,
					 n->mine, n->out, 0, &lk));
	CHECK_RC(ref, shemb_backward(ref, s->nref, s->refb, s->ref_grad));
	CHECK_RC(ctx, shemb_wait(bw));
	rc = shemb_wait(lk);
	if (rc != SHEMB_EINVAL ||
	    !strstr(shemb_ctx_last_error(ctx), "other tables"))
		FAIL("a lookup with other tables on rank %d gave %d: %s",
		     world - 1, rc, shemb_ctx_last_error(ctx));
	shemb_request_free(lk);
	shemb_request_free(bw);
	CHECK_RC(ctx, shemb_lookup(ctx, n->nmine, n->mine, n->out, 0));
}

/*
 * --relaxed: each step's backward is started with the next step's lookup
 * right behind it, which the library runs with the backward when every
 * rank has it queued; the reference runs them in the strict order.  The
 * outputs must be the same (taken as shemb_wait_part() reports them
 * final), and some steps must have run relaxed.
 */
static void run_relaxed(int steps)
{
	struct step *s = new_step(0), *n;
	shemb_request *lk = NULL, *bw;

	CHECK_RC(ctx, shemb_lookup(ctx, s->nmine, s->mine, s->out, 0));
	CHECK_RC(ref, shemb_lookup(ref, s->nref, s->refb, s->ref_out, 0));
	check_outputs(s, 0);
	for (int step = 0; step < steps; step++) {
		n = step + 1 < steps ? new_step(step + 1) : NULL;
		if (n && step == steps / 2 && world > 1 && ncases > 1) {
			relaxed_mismatch(s, n);
		} else {
			CHECK_RC(ctx, shemb_backward_start(ctx, s->nmine,
							   s->mine, s->grad,
							   &bw));
			if (n)
				CHECK_RC(ctx, shemb_lookup_start(
						      ctx, n->nmine, n->mine,
						      n->out, 0, &lk));
			CHECK_RC(ref, shemb_backward(ref, s->nref, s->refb,
						     s->ref_grad));
			if (n) {
				float **snap = outputs_when_final(n, lk);

				CHECK_RC(ctx, shemb_wait(lk));
				same_outputs(n, snap, step + 1);
				shemb_request_free(lk);
			}
			CHECK_RC(ctx, shemb_wait(bw));
			shemb_request_free(bw);
		}
		if (n)
			CHECK_RC(ref, shemb_lookup(ref, n->nref, n->refb,
						   n->ref_out, 0));
		if (n)
			check_outputs(n, step + 1);
		free_step(s);
		free(s);
		s = n;
	}
	/* the odds that a rank's lookup came later than the backward
	 * looked for it (stepq.c) at every step are nil */
	if (world > 1 && steps > 2 && relaxed_lookups(false) == 0)
		FAIL("no lookup of %d ran relaxed", steps - 1);
	/* the rows of one step's bags are few of a table's: most of the
	 * next step's are untouched */
	if (relaxed_lookups(false) > 0 && relaxed_lookups(true) == 0)
		FAIL("relaxed lookups sent no row early");
	if (rank == 0)
		printf("relaxed lookups: %llu bag sets, %llu rows early\n",
		       (unsigned long long)relaxed_lookups(false),
		       (unsigned long long)relaxed_lookups(true));
}

static void run_step(int step, int steps)
{
	struct step *s = calloc(1, sizeof(*s));

	if (cache_pct && step + ANNOUNCED < steps)
		ahead_step(step + ANNOUNCED, true);
	build_step(s, step);
	if (world > 1 && step == steps / 2) {
		bad_lookup(s);
		check_flags_and_empty_read(s);
		bad_started(s, false);
	}
	if (async_steps) {
		run_async(s, step, steps);
		goto done;
	}
	CHECK_RC(ctx, shemb_lookup(ctx, s->nmine, s->mine, s->out, 0));
	CHECK_RC(ref, shemb_lookup(ref, s->nref, s->refb, s->ref_out, 0));
	check_outputs(s, step);
	if (cache_pct && step + 1 < steps)
		ahead_step(step + 1, false);
	if (world > 1 && step == steps / 2) {
		bad_backward(s);
		bad_started(s, true);
	}
	CHECK_RC(ctx, shemb_backward(ctx, s->nmine, s->mine, s->grad));
	CHECK_RC(ref, shemb_backward(ref, s->nref, s->refb, s->ref_grad));
done:
	if (step == steps / 2)
		compare_tables(step); /* the failed calls changed nothing */
	if (step % 7 == 3)
		write_step(step);
	free_step(s);
	free(s);
}

/* Ranks that disagree on deterministic mode would send gradients in two
 * forms: the first step fails on every rank instead. */
static int disagree_on_determinism(void)
{
	struct shemb_table_attr ta;
	struct shemb_bags b;
	int64_t offsets[2], id = 3;
	float out[8];
	shemb_table *t;
	int rc;

	shemb_table_attr_init(&ta);
	ta.rows = 40;
	ta.dim = 8;
	CHECK_RC(ctx, shemb_table_create(ctx, &ta, &t));
	one_bag(&b, t, offsets, 1, &id);
	rc = shemb_lookup(ctx, 1, &b, (float *const[]){ out }, 0);
	if (world > 1 && rc != SHEMB_EINVAL)
		FAIL("a lookup with deterministic mode on one rank only gave "
		     "%d: %s", rc, shemb_ctx_last_error(ctx));
	shemb_ctx_destroy(ctx);
	if (rank == 0)
		printf("ok: %d ranks disagreeing on deterministic mode\n",
		       world);
	return 0;
}

/* The options (see the top of this file); the number of steps. */
static int parse_args(int argc, char **argv)
{
	int steps = 20;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--deterministic"))
			deterministic = 1;
		else if (!strcmp(argv[i], "--deterministic-on-last"))
			deterministic = -1;
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--pool-at-owner"))
			pool_at = SHEMB_POOL_AT_OWNER;
		else if (!strcmp(argv[i], "--async"))
			async_steps = 1;
		else if (!strcmp(argv[i], "--relaxed"))
			relaxed_steps = 1;
		else if (!strcmp(argv[i], "--caller"))
			caller_progress = 1;
		else if (!strcmp(argv[i], "--gpu"))
			gpu = 1;
		else if (!strcmp(argv[i], "--device-bags"))
			gpu = device_bags = 1;
		else if (!strcmp(argv[i], "--cache") && i + 1 < argc)
			cache_pct = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--cold"))
			snprintf(cold_dir, sizeof(cold_dir),
				 "%.40s/dist_rank.XXXXXX",
				 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		else if (!strcmp(argv[i], "--wire") && i + 1 < argc)
			wire = !strcmp(argv[++i], "bf16") ? SHEMB_BF16
							  : SHEMB_F16;
		else
			FAIL("unknown argument %s", argv[i]);
	}
	return steps;
}

/* Whether the launcher made this process the last of several ranks,
 * before the context says so (its attrs depend on it): shemb-run's
 * variables, or mpirun's, PMI's or Slurm's, in the library's order. */
static bool launched_last(void)
{
	static const char *const vars[][2] = {
		{ "SHEMB_RANK", "SHEMB_WORLD_SIZE" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *r = getenv(vars[i][0]), *n = getenv(vars[i][1]);

		if (n)
			return r && atoi(n) > 1 && atoi(r) == atoi(n) - 1;
	}
	return false;
}

int main(int argc, char **argv)
{
	struct shemb_ctx_attr a;
	int steps = parse_args(argc, argv);

	shemb_ctx_attr_init(&a);
	a.nthreads = 1;
	a.deterministic = deterministic > 0;
	if (deterministic < 0) /* see disagree_on_determinism */
		a.deterministic = launched_last();
	a.timeout_ms = 60000;
	if (caller_progress)
		a.progress = SHEMB_PROGRESS_CALLER;
	if (gpu)
		a.device = SHEMB_DEVICE_CUDA;
	/* the last rank's budget is small: see check_planner */
	if (launched_last())
		a.host_mem_bytes = 3u << 20;
	CHECK_RC(NULL, shemb_ctx_create(&a, &ctx));
	shemb_ctx_get_attr(ctx, &a);
	rank = a.rank;
	world = a.world_size;
	if (device_bags) {
		char why[512];

		if (devmem_open(a.device_id, why, sizeof(why)))
			FAIL("--device-bags: %s", why);
	}
	if (deterministic < 0)
		return disagree_on_determinism();
	shemb_ctx_attr_init(&a);
	a.nthreads = 1;
	a.rank = 0;
	a.world_size = 1;
	CHECK_RC(NULL, shemb_ctx_create(&a, &ref));
	if (cold_dir[0] && !mkdtemp(cold_dir))
		FAIL("mkdtemp %s failed", cold_dir);
	check_create_mismatch();
	check_tables_alike_in_id();
	check_backward_weights();
	make_tables();
	read_initial();
	check_exact_read();
	for (int s = 0; cache_pct && s < ANNOUNCED && s < steps; s++)
		ahead_step(s, true);
	if (relaxed_steps)
		run_relaxed(steps);
	for (int step = 0; !relaxed_steps && step < steps; step++)
		run_step(step, steps);
	if (cache_pct)
		check_tiers_moved_rows();
	if (cache_pct && world > 1)
		mixed_ahead(steps);
	compare_tables(steps);
	for (int ci = 0; ci < ncases; ci++)
		free(initial[ci]);
	check_rejections();
	check_describe();
	check_planner();
	check_default_owner();
	check_paths();
	check_auto();
	check_peer_stats();
	shemb_ctx_destroy(ref);
	CHECK_RC(ctx, shemb_ctx_destroy(ctx));
	if (cold_dir[0] && rmdir(cold_dir))
		FAIL("the cold files were not all removed from %s", cold_dir);
	if (rank == 0)
		printf("ok: %d ranks, %d tables, %d steps%s\n", world, ncases,
		       steps, deterministic ? ", deterministic" : "");
	return 0;
}

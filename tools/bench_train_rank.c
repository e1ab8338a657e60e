/*
 * bench_train_rank.c - one rank of shemb-bench train (see bench_train.h).
 *
 * The model: four tables of different sizes, skews and pooling factors,
 * SUM pooling, SGD.  Each rank draws its own batches.  The same batches
 * and bag gradients drive the three modes; the baselines keep plain fp32
 * replicas and do their lookups and updates with plain loops, so that
 * what differs is how gradients travel and where they are applied.
 */
#define _GNU_SOURCE
#include "config.h"
#include "tools/bench_train.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tools/bench_util.h"

#define NTABLES 4
#define LR 0.01f

struct tspec {
	const char *name;
	int64_t rows;
	int dim, pooling;
	double zipf_s; /* 0: uniform */
};

/* rows are divided by --scale */
static const struct tspec specs[NTABLES] = {
	{ "clicks", 2000000, 64, 16, 1.05 },
	{ "hot", 200000, 64, 8, 1.2 },
	{ "items", 1000000, 32, 8, 0.0 },
	{ "small", 1000, 16, 4, 0.0 },
};

struct opts {
	int steps, passes, batches;
	int64_t batch, scale;
	int deterministic;
	int wire; /* wire_dtype of libshemb's tables */
	int pool_at; /* their pool_at */
};

struct table {
	struct tspec s;
	shemb_table *t;
	float *replica; /* baselines */
	float *dense;   /* dense baseline's gradient */
	struct bench_batch *batch; /* [batches] */
};

struct rank {
	struct opts o;
	shemb_ctx *ctx;
	int rank, world;
	struct table tab[NTABLES];
	float *out[NTABLES], *grad[NTABLES];
	struct bench_pool *pool;
};

const char *const train_mode_names[TRAIN_NMODES] = { "libshemb", "dense",
						      "allgather" };

static int fail(struct rank *r, const char *what, int rc)
{
	fprintf(stderr, "rank %d: %s: %s: %s\n", r->rank, what,
		shemb_strerror(rc), shemb_ctx_last_error(r->ctx));
	return 1;
}

/* ---- setup ---- */

static int make_batches(struct rank *r, struct table *t, int ti)
{
	struct bench_idgen g = { .rows = t->s.rows };
	int64_t *perm = NULL;
	int rc;

	g.dist = t->s.zipf_s > 0 ? BENCH_ZIPF : BENCH_UNIFORM;
	if (g.dist == BENCH_ZIPF) {
		/* the same hot rows on every rank: one permutation */
		perm = bench_make_perm(t->s.rows, 1000 + (uint64_t)ti);
		if (!perm)
			return -1;
		g.perm = perm;
		bench_zipf_init(&g.zipf, t->s.rows, t->s.zipf_s);
	}
	rc = bench_make_batches(r->pool, &g,
				(uint64_t)r->rank << 16 | (uint64_t)ti,
				r->o.batch, t->s.pooling, r->o.batches,
				&t->batch);
	free(perm);
	return rc;
}

static int create_table(struct rank *r, struct table *t, int ti)
{
	struct shemb_table_attr a;
	size_t n = (size_t)t->s.rows * (size_t)t->s.dim;
	int rc;

	shemb_table_attr_init(&a);
	a.name = t->s.name;
	a.rows = t->s.rows;
	a.dim = t->s.dim;
	a.lr = LR;
	a.expected_skew = (float)t->s.zipf_s;
	a.wire_dtype = r->o.wire;
	a.pool_at = r->o.pool_at;
	rc = shemb_table_create(r->ctx, &a, &t->t);
	if (rc)
		return fail(r, "shemb_table_create", rc);
	t->replica = calloc(n, sizeof(float));
	t->dense = calloc(n, sizeof(float));
	r->out[ti] = calloc((size_t)r->o.batch * (size_t)t->s.dim,
			    sizeof(float));
	r->grad[ti] = malloc((size_t)r->o.batch * (size_t)t->s.dim *
			     sizeof(float));
	if (!t->replica || !t->dense || !r->out[ti] || !r->grad[ti])
		return fail(r, "memory", SHEMB_ENOMEM);
	for (int64_t v = 0; v < r->o.batch * t->s.dim; v++)
		r->grad[ti][v] = (float)((v * 2654435761u) % 2001) * 1e-6f -
				 1e-3f;
	return make_batches(r, t, ti) ? fail(r, "batches", SHEMB_ENOMEM) : 0;
}

/* ---- the three modes ---- */

static void fill_bags(struct rank *r, int k, struct shemb_bags *b)
{
	for (int i = 0; i < NTABLES; i++) {
		const struct bench_batch *bt = &r->tab[i].batch[k];

		shemb_bags_init(&b[i]);
		b[i].table = r->tab[i].t;
		b[i].nbags = bt->nbags;
		b[i].offsets = bt->offsets;
		b[i].nids = bt->nids;
		b[i].ids = bt->ids;
	}
}

static int step_ours(struct rank *r, int k)
{
	struct shemb_bags b[NTABLES];
	int rc;

	fill_bags(r, k, b);
	rc = shemb_lookup(r->ctx, NTABLES, b, r->out, 0);
	if (!rc)
		rc = shemb_backward(r->ctx, NTABLES, b,
				    (const float *const *)r->grad);
	return rc ? fail(r, "libshemb step", rc) : 0;
}

/* Plain SUM pooling from a replica. */
static void lookup_replica(const struct table *t, const struct bench_batch *b,
			   float *out)
{
	int dim = t->s.dim;

	for (int64_t g = 0; g < b->nbags; g++) {
		float *o = out + (size_t)g * (size_t)dim;

		memset(o, 0, (size_t)dim * sizeof(float));
		for (int64_t i = b->offsets[g]; i < b->offsets[g + 1]; i++) {
			const float *w = t->replica +
					 (size_t)b->ids[i] * (size_t)dim;

			for (int c = 0; c < dim; c++)
				o[c] += w[c];
		}
	}
}

/* Bytes one rank sent and received in a step. */
struct traffic {
	uint64_t sent, recv;
};

static int step_dense(struct rank *r, int k, struct traffic *tr)
{
	for (int i = 0; i < NTABLES; i++) {
		struct table *t = &r->tab[i];
		const struct bench_batch *b = &t->batch[k];
		size_t n = (size_t)t->s.rows * (size_t)t->s.dim;
		int dim = t->s.dim, rc;

		lookup_replica(t, b, r->out[i]);
		memset(t->dense, 0, n * sizeof(float));
		for (int64_t g = 0; g < b->nbags; g++)
			for (int64_t j = b->offsets[g]; j < b->offsets[g + 1];
			     j++) {
				float *d = t->dense +
					   (size_t)b->ids[j] * (size_t)dim;
				const float *s = r->grad[i] +
						 (size_t)g * (size_t)dim;

				for (int c = 0; c < dim; c++)
					d[c] += s[c];
			}
		rc = shemb_allreduce(r->ctx, t->dense, t->dense, n, SHEMB_F32,
				     SHEMB_REDUCE_SUM, NULL);
		if (rc)
			return fail(r, "shemb_allreduce", rc);
		for (size_t v = 0; v < n; v++)
			t->replica[v] -= LR * t->dense[v];
		/* what a rank sends, and receives as much: the ring's
		 * 2 (N - 1) / N of the buffer, every other rank's whole
		 * buffer at 64 KiB and below */
		tr->sent += n * 4 <= 65536
				    ? (uint64_t)(r->world - 1) * n * 4
				    : 2 * (uint64_t)(r->world - 1) * n * 4 /
					      (uint64_t)r->world;
		tr->recv = tr->sent;
	}
	return 0;
}

/* Every rank's (id, gradient row) pairs, one per id occurrence. */
static int step_allgather(struct rank *r, int k, struct traffic *tr)
{
	for (int i = 0; i < NTABLES; i++) {
		struct table *t = &r->tab[i];
		const struct bench_batch *b = &t->batch[k];
		int dim = t->s.dim, w = r->world, rc;
		size_t pair = 8 + (size_t)dim * 4;
		size_t mine = (size_t)b->nids * pair;
		size_t *cnt = calloc((size_t)w, sizeof(size_t));
		size_t *dsp = calloc((size_t)w, sizeof(size_t));
		uint64_t *lens = calloc((size_t)w, 8), my = mine, total = 0;
		char *send = malloc(mine + 8), *all;

		lookup_replica(t, b, r->out[i]);
		for (int p = 0; p < w; p++) {
			cnt[p] = 8;
			dsp[p] = (size_t)p * 8;
		}
		rc = shemb_allgatherv(r->ctx, &my, 8, lens, cnt, dsp, NULL);
		if (rc)
			return fail(r, "shemb_allgatherv", rc);
		for (int p = 0; p < w; p++) {
			cnt[p] = lens[p];
			dsp[p] = total;
			total += lens[p];
		}
		all = malloc(total + 8);
		for (int64_t g = 0, at = 0; g < b->nbags; g++)
			for (int64_t j = b->offsets[g]; j < b->offsets[g + 1];
			     j++, at++) {
				memcpy(send + (size_t)at * pair, &b->ids[j], 8);
				memcpy(send + (size_t)at * pair + 8,
				       r->grad[i] + (size_t)g * (size_t)dim,
				       (size_t)dim * 4);
			}
		rc = shemb_allgatherv(r->ctx, send, mine, all, cnt, dsp, NULL);
		if (rc)
			return fail(r, "shemb_allgatherv", rc);
		for (size_t at = 0; at < total; at += pair) {
			int64_t id;
			const float *g = (const float *)(all + at + 8);
			float *row;

			memcpy(&id, all + at, 8);
			row = t->replica + (size_t)id * (size_t)dim;
			for (int c = 0; c < dim; c++)
				row[c] -= LR * g[c];
		}
		tr->sent += (uint64_t)(w - 1) * (8 + mine);
		for (int p = 0; p < w; p++)
			if (p != r->rank)
				tr->recv += 8 + lens[p];
		free(cnt);
		free(dsp);
		free(lens);
		free(send);
		free(all);
	}
	return 0;
}

/* What libshemb's tables sent and received so far. */
static struct traffic by_tables(struct rank *r)
{
	struct traffic sum = { 0, 0 };

	for (int i = 0; i < NTABLES; i++) {
		struct shemb_table_stats s = { .size = sizeof(s) };

		shemb_table_stats(r->tab[i].t, &s);
		sum.sent += s.sent_bytes;
		sum.recv += s.received_bytes;
	}
	return sum;
}

/* One timed step of a mode: the slowest rank's time, the mean bytes a
 * rank sent and received (agreed by allreduce, outside the timing). */
static int timed_step(struct rank *r, int mode, int k)
{
	struct traffic tr = { 0, 0 }, before = by_tables(r), after;
	double t0, v[3];
	int rc;

	rc = shemb_barrier(r->ctx, NULL);
	if (rc)
		return fail(r, "shemb_barrier", rc);
	t0 = bench_now();
	if (mode == TRAIN_OURS)
		rc = step_ours(r, k);
	else if (mode == TRAIN_DENSE)
		rc = step_dense(r, k, &tr);
	else
		rc = step_allgather(r, k, &tr);
	v[0] = bench_now() - t0;
	if (rc)
		return rc;
	if (mode == TRAIN_OURS) {
		after = by_tables(r);
		tr.sent = after.sent - before.sent;
		tr.recv = after.recv - before.recv;
	}
	rc = shemb_allreduce(r->ctx, v, v, 1, SHEMB_F64, SHEMB_REDUCE_MAX,
			     NULL);
	v[1] = (double)tr.sent;
	v[2] = (double)tr.recv;
	if (!rc)
		rc = shemb_allreduce(r->ctx, &v[1], &v[1], 2, SHEMB_F64,
				     SHEMB_REDUCE_SUM, NULL);
	if (rc)
		return fail(r, "shemb_allreduce", rc);
	if (r->rank == 0)
		printf("%s step %s %.6f %.0f %.0f\n", TRAIN_TAG,
		       train_mode_names[mode], v[0], v[1] / r->world,
		       v[2] / r->world);
	return 0;
}

/* ---- load balance of a skewed table, row-wise against column-wise ---- */

static uint64_t traffic(const shemb_table *t)
{
	struct shemb_table_stats s = { .size = sizeof(s) };

	shemb_table_stats(t, &s);
	return s.sent_bytes + s.received_bytes;
}

/* Bytes each rank moves for a Zipf 1.2 table laid out by `plan`, over the
 * batches of the "hot" table: the largest over the mean. */
static int balance(struct rank *r, int plan, const char *name)
{
	const struct table *hot = &r->tab[1];
	struct shemb_table_attr a;
	shemb_table *t;
	uint64_t mine, *all = calloc((size_t)r->world, 8), max = 0, sum = 0;
	size_t *cnt = calloc((size_t)r->world, sizeof(size_t));
	size_t *dsp = calloc((size_t)r->world, sizeof(size_t));
	int rc;

	shemb_table_attr_init(&a);
	a.rows = hot->s.rows;
	a.dim = hot->s.dim;
	a.shard = plan;
	rc = shemb_table_create(r->ctx, &a, &t);
	for (int k = 0; !rc && k < r->o.batches; k++) {
		struct shemb_bags b;
		const struct bench_batch *bt = &hot->batch[k];

		shemb_bags_init(&b);
		b.table = t;
		b.nbags = bt->nbags;
		b.offsets = bt->offsets;
		b.nids = bt->nids;
		b.ids = bt->ids;
		rc = shemb_lookup(r->ctx, 1, &b, &r->out[1], 0);
		if (!rc)
			rc = shemb_backward(r->ctx, 1, &b,
					    (const float *const *)&r->grad[1]);
	}
	mine = rc ? 0 : traffic(t);
	for (int p = 0; !rc && p < r->world; p++) {
		cnt[p] = 8;
		dsp[p] = (size_t)p * 8;
	}
	if (!rc)
		rc = shemb_allgatherv(r->ctx, &mine, 8, all, cnt, dsp, NULL);
	for (int p = 0; !rc && p < r->world; p++) {
		max = all[p] > max ? all[p] : max;
		sum += all[p];
	}
	if (!rc && r->rank == 0)
		printf("%s balance %s %llu %.1f\n", TRAIN_TAG, name,
		       (unsigned long long)max, (double)sum / r->world);
	shemb_table_destroy(t);
	free(all);
	free(cnt);
	free(dsp);
	return rc ? fail(r, "balance", rc) : 0;
}

/* ---- the run ---- */

static int print_plan(struct rank *r)
{
	char buf[2048];
	char *save = NULL;

	if (r->rank != 0)
		return 0;
	shemb_ctx_plan_describe(r->ctx, buf, sizeof(buf));
	for (char *l = strtok_r(buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save))
		printf("%s plan %s\n", TRAIN_TAG, l);
	return 0;
}

static int run_passes(struct rank *r)
{
	int k = 0;

	for (int m = 0; m < TRAIN_NMODES; m++) /* warm every path once */
		if (timed_step(r, m, 0))
			return 1;
	for (int p = 0; p < r->o.passes; p++)
		for (int i = 0; i < TRAIN_NMODES; i++) {
			int m = (i + p) % TRAIN_NMODES; /* rotate the order */

			for (int s = 0; s < r->o.steps; s++)
				if (timed_step(r, m, (k + s) % r->o.batches))
					return 1;
			k += r->o.steps;
		}
	return 0;
}

static const struct option rank_long[] = {
	{ "steps", required_argument, NULL, 's' },
	{ "passes", required_argument, NULL, 'p' },
	{ "batch", required_argument, NULL, 'b' },
	{ "scale", required_argument, NULL, 'c' },
	{ "deterministic", no_argument, NULL, 'd' },
	{ "wire", required_argument, NULL, 'w' },
	{ "pool-at", required_argument, NULL, 'a' },
	{ NULL, 0, NULL, 0 }
};

static int parse(int argc, char **argv, struct opts *o)
{
	int c, idx;

	*o = (struct opts){ .steps = 5, .passes = 2, .batches = 8,
			    .batch = 2048, .scale = 1 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "", rank_long, &idx)) != -1) {
		switch (c) {
		case 's':
			o->steps = atoi(optarg);
			break;
		case 'p':
			o->passes = atoi(optarg);
			break;
		case 'b':
			o->batch = atoll(optarg);
			break;
		case 'c':
			o->scale = atoll(optarg);
			break;
		case 'd':
			o->deterministic = 1;
			break;
		case 'a':
			o->pool_at = SHEMB_POOL_AT_AUTO;
			if (!strcmp(optarg, "owner"))
				o->pool_at = SHEMB_POOL_AT_OWNER;
			else if (!strcmp(optarg, "requester"))
				o->pool_at = SHEMB_POOL_AT_REQUESTER;
			break;
		case 'w':
			o->wire = !strcmp(optarg, "bf16")  ? SHEMB_BF16
				  : !strcmp(optarg, "f16") ? SHEMB_F16
							   : SHEMB_F32;
			break;
		default:
			return -1;
		}
	}
	return o->steps > 0 && o->passes > 0 && o->batch > 0 && o->scale > 0
		       ? 0
		       : -1;
}

static int setup(struct rank *r)
{
	struct shemb_ctx_attr a;
	int rc;

	shemb_ctx_attr_init(&a);
	a.nthreads = 1; /* ranks share this host's CPUs */
	a.deterministic = r->o.deterministic;
	rc = shemb_ctx_create(&a, &r->ctx);
	if (rc)
		return fail(r, "shemb_ctx_create", rc);
	shemb_ctx_get_attr(r->ctx, &a);
	r->rank = a.rank;
	r->world = a.world_size;
	if (bench_pool_create(1, &r->pool))
		return fail(r, "threads", SHEMB_ENOMEM);
	for (int i = 0; i < NTABLES; i++) {
		r->tab[i].s = specs[i];
		r->tab[i].s.rows = specs[i].rows / r->o.scale > 64
					   ? specs[i].rows / r->o.scale
					   : 64;
		if (create_table(r, &r->tab[i], i))
			return 1;
	}
	return print_plan(r);
}

static void teardown(struct rank *r)
{
	for (int i = 0; i < NTABLES; i++) {
		free(r->tab[i].replica);
		free(r->tab[i].dense);
		if (r->tab[i].batch)
			bench_free_batches(r->tab[i].batch, r->o.batches);
		free(r->out[i]);
		free(r->grad[i]);
	}
	if (r->pool)
		bench_pool_destroy(r->pool);
	shemb_ctx_destroy(r->ctx);
}

int bench_train_rank(int argc, char **argv)
{
	struct rank r = { 0 };
	int rc;

	if (parse(argc, argv, &r.o)) {
		fprintf(stderr, "shemb-bench train-rank: bad options\n");
		return 2;
	}
	rc = setup(&r);
	if (!rc)
		rc = run_passes(&r);
	if (!rc && r.world > 1)
		rc = balance(&r, SHEMB_SHARD_ROW, "row-wise");
	if (!rc && r.world > 1)
		rc = balance(&r, SHEMB_SHARD_COLUMN, "column-wise");
	fflush(stdout);
	teardown(&r);
	return rc ? 1 : 0;
}

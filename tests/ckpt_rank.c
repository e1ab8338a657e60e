/*
 * ckpt_rank.c - one rank of the resharding checkpoint test, started by
 * shemb-run from tests/test_ckpt_dist.sh.
 *
 * Usage: ckpt_rank save|load DIR SHARD   (row, column, table, replicated;
 *                                        load also saved: attr NULL)
 *
 * Two tables (Adam over fp32 rows, row-wise Adagrad over bf16 rows)
 * train in deterministic mode on a global batch of bags made from the
 * step alone and split over the ranks in rank order, so that the same
 * steps give the same bits with any number of ranks and any shard plan.
 * `save` trains two steps, saves each table into DIR/<table>, trains a
 * third and saves it incrementally (the rows it changed), writes
 * every row (rank 0: DIR/<table>.before), takes one more step and writes
 * the rows again (DIR/<table>.after).  `load`, with another world size
 * or SHARD, loads both tables and must find .before bit for bit, then,
 * after the same last step, .after: rows, optimizer state and step
 * count all came through.  A read_only copy loaded beside it looks up
 * the same values and refuses the backward on every rank.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shemb.h>

static int rank, world;

#include "tests/rank_check.h"

#define ROWS 997
#define GLOBAL_BAGS 96
#define LEN 6
#define NTABLES 2

static shemb_ctx *ctx;

static const struct {
	const char *name;
	int dim, dtype, optimizer;
} tables[NTABLES] = {
	{ "adam", 8, SHEMB_F32, SHEMB_OPT_ADAM },
	{ "rowwise", 6, SHEMB_BF16, SHEMB_OPT_ROWWISE_ADAGRAD },
};

/* "saved": load with attr NULL, the checkpoint's own attributes */
static int shard_of(const char *s)
{
	if (!strcmp(s, "saved"))
		return -1;
	if (!strcmp(s, "row"))
		return SHEMB_SHARD_ROW;
	if (!strcmp(s, "table"))
		return SHEMB_SHARD_TABLE;
	if (!strcmp(s, "column"))
		return SHEMB_SHARD_COLUMN;
	if (!strcmp(s, "replicated"))
		return SHEMB_SHARD_REPLICATED;
	FAIL("unknown shard plan %s", s);
}

static void attr_of(int k, int shard, struct shemb_table_attr *a)
{
	shemb_table_attr_init(a);
	a->name = tables[k].name;
	a->rows = ROWS;
	a->dim = tables[k].dim;
	a->dtype = tables[k].dtype;
	a->optimizer = tables[k].optimizer;
	a->lr = 0.05f;
	a->shard = shard;
	a->shard_owner = shard == SHEMB_SHARD_TABLE ? world - 1 : -1;
	a->seed = 5;
}

/* serve: a read_only copy of t, or NULL: looked up alike, and refusing
 * the backward on every rank. */
static void check_serving(shemb_table *serve, struct shemb_bags b,
			  const float *want, size_t n, const float *grad)
{
	float *got = calloc(n + 1, 4);
	int rc;

	b.table = serve;
	CHECK_RC(ctx, shemb_lookup(ctx, 1, &b, &got, 0));
	if (memcmp(got, want, n * 4))
		FAIL("a read_only copy looks up other values");
	rc = shemb_backward(ctx, 1, &b, &grad);
	if (rc != SHEMB_EPERM)
		FAIL("a backward of a read_only table gave %d", rc);
	free(got);
}

/* This rank's share of the step's global batch, and its gradients
 * (serve: see check_serving). */
static void step(shemb_table *t, int k, int s, shemb_table *serve)
{
	int lo = GLOBAL_BAGS * rank / world, hi = GLOBAL_BAGS * (rank + 1) /
						  world;
	int nb = hi - lo, dim = tables[k].dim;
	int64_t *offsets = calloc((size_t)nb + 1, 8);
	int64_t *ids = calloc((size_t)nb * LEN + 1, 8);
	float *out = calloc((size_t)nb * (size_t)dim + 1, 4);
	float *grad = calloc((size_t)nb * (size_t)dim + 1, 4);
	struct shemb_bags b;

	for (int i = 0; i < nb; i++) {
		offsets[i + 1] = (int64_t)(i + 1) * LEN;
		for (int j = 0; j < LEN; j++)
			ids[i * LEN + j] =
				(int64_t)(mix((uint64_t)s << 40 |
					      (uint64_t)(lo + i) << 8 |
					      (uint64_t)j) %
					  ROWS);
		for (int c = 0; c < dim; c++)
			grad[i * dim + c] =
				(float)(mix((uint64_t)s * 7919 +
					    (uint64_t)(lo + i) * 31 +
					    (uint64_t)c) %
					2001) /
					1000.0f -
				1.0f;
	}
	shemb_bags_init(&b);
	b.table = t;
	b.nbags = nb;
	b.offsets = offsets;
	b.nids = (int64_t)nb * LEN;
	b.ids = ids;
	CHECK_RC(ctx, shemb_lookup(ctx, 1, &b, &out, 0));
	if (serve)
		check_serving(serve, b, out, (size_t)nb * (size_t)dim, grad);
	CHECK_RC(ctx, shemb_backward(ctx, 1, &b, (const float *const *)&grad));
	free(offsets);
	free(ids);
	free(out);
	free(grad);
}

/* Every row, read by every rank; rank 0 writes it to path, or (check)
 * every rank compares it with path's. */
static void rows_file(shemb_table *t, int k, const char *path, bool check)
{
	size_t n = (size_t)ROWS * (size_t)tables[k].dim;
	int64_t *ids = calloc(ROWS, 8);
	float *v = calloc(n, 4), *want = calloc(n, 4);
	FILE *f;

	for (int64_t i = 0; i < ROWS; i++)
		ids[i] = i;
	CHECK_RC(ctx, shemb_table_read_rows(t, ROWS, ids, v, SHEMB_F32));
	if (check) {
		f = fopen(path, "rb");
		if (!f || fread(want, 4, n, f) != n)
			FAIL("cannot read %s", path);
		fclose(f);
		for (size_t i = 0; i < n; i++)
			if (memcmp(&v[i], &want[i], 4))
				FAIL("table %s: value %zu is %.9g, saved %.9g",
				     tables[k].name, i, v[i], want[i]);
	} else if (rank == 0) {
		f = fopen(path, "wb");
		if (!f || fwrite(v, 4, n, f) != n || fclose(f))
			FAIL("cannot write %s", path);
	}
	free(ids);
	free(v);
	free(want);
}

static void run(bool save, const char *dir, int shard)
{
	char path[512];

	for (int k = 0; k < NTABLES; k++) {
		struct shemb_table_attr a;
		shemb_table *t, *serve;

		attr_of(k, shard, &a);
		snprintf(path, sizeof(path), "%s/%s", dir, tables[k].name);
		if (save) {
			CHECK_RC(ctx, shemb_table_create(ctx, &a, &t));
			/* a whole save, then the last step's rows alone */
			for (int s = 0; s < 2; s++)
				step(t, k, s, NULL);
			CHECK_RC(ctx, shemb_table_save(t, path, 0));
			step(t, k, 2, NULL);
			CHECK_RC(ctx, shemb_table_save(t, path,
						       SHEMB_SAVE_INCREMENTAL));
		} else {
			CHECK_RC(ctx, shemb_table_load(ctx, path,
						       shard < 0 ? NULL : &a,
						       &t));
		}
		snprintf(path, sizeof(path), "%s/%s.before", dir,
			 tables[k].name);
		rows_file(t, k, path, !save);
		serve = NULL;
		if (!save) { /* and a read_only copy, served across ranks */
			snprintf(path, sizeof(path), "%s/%s", dir,
				 tables[k].name);
			a.read_only = 1;
			a.shard = shard < 0 ? SHEMB_SHARD_AUTO : shard;
			CHECK_RC(ctx, shemb_table_load(ctx, path, &a, &serve));
		}
		step(t, k, 3, serve);
		CHECK_RC(ctx, shemb_table_destroy(serve));
		snprintf(path, sizeof(path), "%s/%s.after", dir,
			 tables[k].name);
		rows_file(t, k, path, !save);
		CHECK_RC(ctx, shemb_table_destroy(t));
	}
}

int main(int argc, char **argv)
{
	struct shemb_ctx_attr a;

	if (argc != 4 || (strcmp(argv[1], "save") && strcmp(argv[1], "load")))
		FAIL("usage: ckpt_rank save|load DIR SHARD");
	shemb_ctx_attr_init(&a);
	a.nthreads = 1;
	a.deterministic = 1;
	a.timeout_ms = 60000;
	CHECK_RC(NULL, shemb_ctx_create(&a, &ctx));
	shemb_ctx_get_attr(ctx, &a);
	rank = a.rank;
	world = a.world_size;
	run(!strcmp(argv[1], "save"), argv[2], shard_of(argv[3]));
	CHECK_RC(ctx, shemb_ctx_destroy(ctx));
	if (rank == 0)
		printf("ok: %s with %d ranks, %s\n", argv[1], world, argv[3]);
	return 0;
}

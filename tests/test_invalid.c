/*
 * test_invalid.c - every rejection of SEMANTICS' ERRORS list, one test
 * each: the status code, a detail message that names what SEMANTICS says
 * it names, and tables left bit for bit as they were.  Refused backward
 * calls and writes must not touch optimizer state either: a valid step
 * afterwards gives the same table as on a twin that never saw them.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#include "shemb.h"
#include "tests/testutil.h"

#define WORDS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define ROWS 100
#define DIM 8

/* ---- the fixture: two tables, valid bags, snapshots ---- */

static struct {
	shemb_ctx *ctx;
	shemb_table *emb;          /* "emb": 100 x 8, fp32, Adam */
	shemb_table *side;         /* "side": 50 x 4, bf16, Adagrad */
	struct tu_snapshot emb0, side0;
	int64_t offsets[6];
	int64_t ids[9];
	float weights[9];
	struct shemb_bags sets[2]; /* [0] valid on side, [1] on emb */
	float *out[2];
	float *grad[2];
} env;

static shemb_table *named_table(const char *name, int64_t rows, int dim,
				int dtype, int optimizer)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.name = name;
	a.rows = rows;
	a.dim = dim;
	a.dtype = dtype;
	a.optimizer = optimizer;
	return tu_table_attr(env.ctx, &a);
}

/* emb's set: five bags of lengths 2, 1, 2, 2, 2, weighted, in arrays the
 * tests spoil; side's set: two bags of its own. */
static void valid_sets(void)
{
	static const int64_t off[6] = { 0, 2, 3, 5, 7, 9 };
	static const int64_t side_off[3] = { 0, 1, 3 };
	static const int64_t side_ids[3] = { 49, 0, 7 };

	memcpy(env.offsets, off, sizeof(off));
	for (int k = 0; k < 9; k++) {
		env.ids[k] = 3 * k + 1;
		env.weights[k] = 0.5f + (float)k;
	}
	for (int i = 0; i < 2; i++) {
		shemb_bags_init(&env.sets[i]);
		/* room for any shape a test gives the set */
		env.out[i] = tu_calloc(64 * DIM, sizeof(float));
		env.grad[i] = tu_calloc(64 * DIM, sizeof(float));
	}
	env.sets[0].table = env.side;
	env.sets[0].pooling = SHEMB_POOL_MEAN;
	env.sets[0].nbags = 2;
	env.sets[0].offsets = side_off;
	env.sets[0].nids = 3;
	env.sets[0].ids = side_ids;
	env.sets[1].table = env.emb;
	env.sets[1].pooling = SHEMB_POOL_SUM;
	env.sets[1].nbags = 5;
	env.sets[1].offsets = env.offsets;
	env.sets[1].nids = 9;
	env.sets[1].ids = env.ids;
	env.sets[1].weights = env.weights;
}

static void setup(void)
{
	ck_assert_int_eq(tu_ctx_create(NULL, 2, &env.ctx), 0);
	env.emb = named_table("emb", ROWS, DIM, SHEMB_F32, SHEMB_OPT_ADAM);
	env.side = named_table("side", 50, 4, SHEMB_BF16, SHEMB_OPT_ADAGRAD);
	valid_sets();
	tu_snapshot_take(&env.emb0, env.emb);
	tu_snapshot_take(&env.side0, env.side);
}

static void teardown(void)
{
	tu_snapshot_free(&env.emb0);
	tu_snapshot_free(&env.side0);
	for (int i = 0; i < 2; i++) {
		free(env.out[i]);
		free(env.grad[i]);
	}
	shemb_ctx_destroy(env.ctx);
	memset(&env, 0, sizeof(env));
}

/* Both tables still hold the rows they had at setup. */
static void tables_unchanged(void)
{
	struct tu_snapshot now;

	tu_snapshot_take(&now, env.emb);
	ck_assert_msg(tu_snapshot_equal(&env.emb0, &now), "emb changed");
	tu_snapshot_free(&now);
	tu_snapshot_take(&now, env.side);
	ck_assert_msg(tu_snapshot_equal(&env.side0, &now), "side changed");
	tu_snapshot_free(&now);
}

/* The detail of the last failure on ctx names every one of words. */
static void detail_names(const shemb_ctx *ctx, const char *const *words)
{
	const char *msg = shemb_ctx_last_error(ctx);

	ck_assert_str_ne(msg, "");
	for (int i = 0; words && words[i]; i++)
		ck_assert_msg(strstr(msg, words[i]), "'%s' does not name '%s'",
			      msg, words[i]);
}

/* The set env.sets[1] (as a test spoiled it), in a call with the valid
 * set 0: refused by lookup (both kinds) and backward alike. */
static void refused(int code, const char *const *words)
{
	/* a plan that the refused calls must leave alone */
	ck_assert_int_eq(shemb_lookup(env.ctx, 1, &env.sets[0], &env.out[0],
				      0), 0);
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, env.out, 0),
			 code);
	detail_names(env.ctx, words);
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, env.out,
				      SHEMB_LOOKUP_NO_GRAD), code);
	detail_names(env.ctx, words);
	ck_assert_int_eq(shemb_backward(env.ctx, 2, env.sets,
					(const float *const *)env.grad),
			 code);
	detail_names(env.ctx, words);
	tables_unchanged();
	/* side's plan is still that of its own lookup */
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &env.sets[0],
					(const float *const *)env.grad), 0);
}

/* ---- context attributes ---- */

static void ctx_refused(const struct shemb_ctx_attr *a, int code)
{
	shemb_ctx *ctx = NULL;

	ck_assert_int_eq(shemb_ctx_create(a, &ctx), code);
	ck_assert_ptr_null(ctx);
	detail_names(NULL, NULL);
}

START_TEST(ctx_nthreads_out_of_range)
{
	struct shemb_ctx_attr a;

	shemb_ctx_attr_init(&a);
	a.nthreads = -1;
	ctx_refused(&a, SHEMB_EINVAL);
	detail_names(NULL, WORDS("-1"));
	a.nthreads = 1025;
	ctx_refused(&a, SHEMB_EINVAL);
	detail_names(NULL, WORDS("1025"));
}
END_TEST

START_TEST(ctx_log_level_out_of_range)
{
	struct shemb_ctx_attr a;

	shemb_ctx_attr_init(&a);
	a.log_level = -1;
	ctx_refused(&a, SHEMB_EINVAL);
	a.log_level = SHEMB_LOG_DEBUG + 1;
	ctx_refused(&a, SHEMB_EINVAL);
}
END_TEST

START_TEST(ctx_rank_world_impossible)
{
	/* -1 and 0 mean "from the environment": not impossible */
	static const int rank_world[][2] = { { 1, 1 }, { 2, 2 }, { 0, -4 },
					     { -2, 1 }, { 5, 3 } };
	struct shemb_ctx_attr a;

	for (size_t i = 0; i < TU_ARRAY_SIZE(rank_world); i++) {
		shemb_ctx_attr_init(&a);
		a.rank = rank_world[i][0];
		a.world_size = rank_world[i][1];
		ctx_refused(&a, SHEMB_EINVAL);
	}
}
END_TEST

/* Four ranks with no rendezvous address: refused before any network
 * (SHEMB_ENOTSUP in a build without libfabric). */
START_TEST(ctx_world_size_above_one)
{
	bool fabric = strstr(shemb_version_string(), "libfabric") != NULL;
	struct shemb_ctx_attr a;

	unsetenv("SHEMB_ROOT");
	shemb_ctx_attr_init(&a);
	a.world_size = 4;
	a.rank = 3;
	ctx_refused(&a, fabric ? SHEMB_EINVAL : SHEMB_ENOTSUP);
}
END_TEST

/* Launcher variables that hold no number. */
START_TEST(ctx_environment_not_numbers)
{
	static const char *const pairs[][2] = {
		{ "SHEMB_RANK", "SHEMB_WORLD_SIZE" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "PMI_RANK", "PMI_SIZE" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
	};

	for (size_t i = 0; i < TU_ARRAY_SIZE(pairs); i++) {
		setenv(pairs[i][1], "two", 1);
		setenv(pairs[i][0], "0", 1);
		ctx_refused(NULL, SHEMB_EINVAL);
		setenv(pairs[i][1], "1", 1);
		setenv(pairs[i][0], "", 1); /* size without a rank */
		ctx_refused(NULL, SHEMB_EINVAL);
		unsetenv(pairs[i][0]);
		unsetenv(pairs[i][1]);
	}
}
END_TEST

/* Collective transport attributes out of range. */
START_TEST(ctx_transport_attrs)
{
	struct shemb_ctx_attr a;

	shemb_ctx_attr_init(&a);
	a.progress = 7;
	ctx_refused(&a, SHEMB_EINVAL);
	shemb_ctx_attr_init(&a);
	a.timeout_ms = -1;
	ctx_refused(&a, SHEMB_EINVAL);
	shemb_ctx_attr_init(&a);
	a.chunks_in_flight = -1;
	ctx_refused(&a, SHEMB_EINVAL);
	a.chunks_in_flight = 257;
	ctx_refused(&a, SHEMB_EINVAL);
	shemb_ctx_attr_init(&a);
	a.single_copy = 2;
	ctx_refused(&a, SHEMB_EINVAL);
	a.single_copy = -2;
	ctx_refused(&a, SHEMB_EINVAL);
	/* slices the kernel takes: 100 us to 100 ms */
	shemb_ctx_attr_init(&a);
	a.comm_slice_us = -2;
	ctx_refused(&a, SHEMB_EINVAL);
	a.comm_slice_us = 99;
	ctx_refused(&a, SHEMB_EINVAL);
	a.comm_slice_us = 100001;
	ctx_refused(&a, SHEMB_EINVAL);
}
END_TEST

START_TEST(ctx_attr_size_unknown)
{
	struct {
		struct shemb_ctx_attr a;
		char more[8];
	} big;

	shemb_ctx_attr_init(&big.a);
	big.a.size = offsetof(struct shemb_ctx_attr, rank);
	ctx_refused(&big.a, SHEMB_EINVAL);
	memset(big.more, 0, sizeof(big.more));
	big.more[5] = 1;
	big.a.size = sizeof(big);
	ctx_refused(&big.a, SHEMB_EINVAL);
}
END_TEST

/* ---- table attributes: one spoiled field per loop index ---- */

static const char *spoil_table_attr(int i, struct shemb_table_attr *a)
{
	static const char *const what[] = {
		"rows 0", "rows -1", "rows 2^40 + 1", "dim 0", "dim 4097",
		"dtype 3", "dtype -1", "table_id -2", "init 4", "init -1",
		"optimizer 4", "optimizer -1", "weight_decay_mode 2",
		"init_low NaN", "init_high inf", "init_mean NaN",
		"init_std inf", "init_value -inf", "init_low > init_high",
		"init_std < 0", "lr < 0", "lr NaN", "lr inf", "eps 0",
		"eps < 0", "eps NaN", "beta1 1", "beta1 < 0", "beta2 1",
		"beta2 NaN", "weight_decay < 0", "weight_decay NaN",
		"initial_accumulator < 0", "attr size below v1",
	};

	switch (i) {
	case 0: a->rows = 0; break;
	case 1: a->rows = -1; break;
	case 2: a->rows = SHEMB_MAX_ROWS + 1; break;
	case 3: a->dim = 0; break;
	case 4: a->dim = SHEMB_MAX_DIM + 1; break;
	case 5: a->dtype = 3; break;
	case 6: a->dtype = -1; break;
	case 7: a->table_id = -2; break;
	case 8: a->init = 4; break;
	case 9: a->init = -1; break;
	case 10: a->optimizer = 4; break;
	case 11: a->optimizer = -1; break;
	case 12: a->weight_decay_mode = 2; break;
	case 13: a->init_low = NAN; break;
	case 14: a->init_high = INFINITY; break;
	case 15: a->init = SHEMB_INIT_NORMAL; a->init_mean = NAN; break;
	case 16: a->init = SHEMB_INIT_NORMAL; a->init_std = INFINITY; break;
	case 17: a->init = SHEMB_INIT_CONSTANT; a->init_value = -INFINITY;
		break;
	case 18: a->init_low = 1.0f; a->init_high = 0.5f; break;
	case 19: a->init = SHEMB_INIT_NORMAL; a->init_std = -0.1f; break;
	case 20: a->lr = -0.01f; break;
	case 21: a->lr = NAN; break;
	case 22: a->lr = INFINITY; break;
	case 23: a->eps = 0.0f; break;
	case 24: a->eps = -1e-8f; break;
	case 25: a->eps = NAN; break;
	case 26: a->beta1 = 1.0f; break;
	case 27: a->beta1 = -0.1f; break;
	case 28: a->beta2 = 1.0f; break;
	case 29: a->beta2 = NAN; break;
	case 30: a->weight_decay = -0.01f; break;
	case 31: a->weight_decay = NAN; break;
	case 32: a->initial_accumulator = -1.0f; break;
	case 33: a->size = offsetof(struct shemb_table_attr, lr); break;
	}
	return what[i];
}

#define NUM_TABLE_SPOILS 34

START_TEST(table_attr_refused)
{
	struct shemb_table_attr a;
	shemb_table *t = NULL;
	const char *what;

	shemb_table_attr_init(&a);
	a.rows = 10;
	a.dim = 4;
	a.optimizer = SHEMB_OPT_ADAM;
	what = spoil_table_attr(_i, &a);
	ck_assert_msg(shemb_table_create(env.ctx, &a, &t) == SHEMB_EINVAL,
		      "%s accepted", what);
	detail_names(env.ctx, NULL);
	tables_unchanged();
}
END_TEST

START_TEST(table_over_host_budget)
{
	struct shemb_ctx_attr ca;
	struct shemb_table_attr a;
	shemb_table *t = NULL;
	shemb_ctx *ctx = NULL;

	shemb_ctx_attr_init(&ca);
	ca.host_mem_bytes = 1 << 20;
	ck_assert_int_eq(shemb_ctx_create(&ca, &ctx), 0);
	shemb_table_attr_init(&a);
	a.rows = 1 << 16;
	a.dim = 8;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_ENOMEM);
	detail_names(ctx, NULL);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- bag sets ---- */

START_TEST(bags_table_null)
{
	env.sets[1].table = NULL;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

START_TEST(bags_table_of_other_context)
{
	shemb_ctx *other = NULL;
	shemb_table *t;
	struct tu_snapshot before;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &other), 0);
	t = tu_table(other, ROWS, DIM, SHEMB_F32, SHEMB_OPT_SGD);
	tu_snapshot_take(&before, t);
	env.sets[1].table = t;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
	ck_assert(tu_unchanged_since(&before, t));
	tu_snapshot_free(&before);
	shemb_ctx_destroy(other);
}
END_TEST

START_TEST(bags_pooling_unknown)
{
	env.sets[1].pooling = SHEMB_POOL_NONE + 1;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
	env.sets[1].pooling = -1;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

START_TEST(bags_dim_not_table_dim)
{
	env.sets[1].dim = DIM - 1;
	refused(SHEMB_EINVAL, WORDS("bags[1]", "emb"));
	env.sets[1].dim = -DIM;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

START_TEST(bags_nbags_negative)
{
	env.sets[1].nbags = -1;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

START_TEST(bags_nids_negative)
{
	env.sets[1].nids = -9;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

/* Counts beyond what a call takes are refused before the arrays they
 * describe are read: here those arrays are short, and reading them by
 * the counts would run past their ends. */
START_TEST(bags_nbags_beyond_a_call)
{
	env.sets[1].nbags = (int64_t)1 << 61;
	refused(SHEMB_EINVAL, WORDS("bags[1]", "2^31"));
}
END_TEST

START_TEST(bags_nids_beyond_a_call)
{
	static const int64_t one_bag[2] = { 0, (int64_t)1 << 31 };

	env.sets[1].nbags = 1;
	env.sets[1].offsets = one_bag;
	env.sets[1].nids = (int64_t)1 << 31;
	env.sets[1].weights = NULL;
	refused(SHEMB_EINVAL, WORDS("bags[1]", "2^31"));
}
END_TEST

START_TEST(bags_offsets_null)
{
	env.sets[1].offsets = NULL;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

START_TEST(bags_ids_null)
{
	env.sets[1].ids = NULL;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

START_TEST(bags_first_offset_not_zero)
{
	static const int64_t off[6] = { 1, 2, 3, 5, 7, 9 };

	env.sets[1].offsets = off;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

START_TEST(bags_offsets_decrease)
{
	static const int64_t off[6] = { 0, 2, 3, 5, 4, 9 };

	env.sets[1].offsets = off;
	refused(SHEMB_EINVAL, WORDS("bags[1]", "bag 3"));
}
END_TEST

START_TEST(bags_last_offset_not_nids)
{
	env.sets[1].nids = 8;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
	env.sets[1].nids = 10;
	refused(SHEMB_EINVAL, WORDS("bags[1]"));
}
END_TEST

/* SEMANTICS' own example: "bags[0] (table 'emb') bag 3 position 1: id 100
 * outside [0, 100)"; here the set is bags[1]. */
START_TEST(bags_id_too_large)
{
	env.ids[env.offsets[3] + 1] = ROWS;
	refused(SHEMB_EINVAL, WORDS("bags[1]", "'emb'", "bag 3", "position 1",
				    "id 100"));
}
END_TEST

START_TEST(bags_id_negative)
{
	env.ids[env.offsets[4]] = -5;
	refused(SHEMB_EINVAL, WORDS("bags[1]", "'emb'", "bag 4", "position 0",
				    "-5"));
}
END_TEST

START_TEST(bags_weight_not_finite)
{
	static const float bad[] = { NAN, INFINITY, -INFINITY };

	for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++) {
		float keep = env.weights[env.offsets[2] + 1];

		env.weights[env.offsets[2] + 1] = bad[i];
		refused(SHEMB_EINVAL, WORDS("bags[1]", "'emb'", "bag 2",
					    "position 1"));
		env.weights[env.offsets[2] + 1] = keep;
	}
}
END_TEST

START_TEST(bags_too_many_sets_negative)
{
	ck_assert_int_eq(shemb_lookup(env.ctx, -1, env.sets, env.out, 0),
			 SHEMB_EINVAL);
	detail_names(env.ctx, NULL);
	ck_assert_int_eq(shemb_lookup(env.ctx, 1, NULL, env.out, 0),
			 SHEMB_EINVAL);
	ck_assert_int_eq(shemb_backward(env.ctx, -1, env.sets,
					(const float *const *)env.grad),
			 SHEMB_EINVAL);
	tables_unchanged();
}
END_TEST

START_TEST(lookup_out_null)
{
	float *out[2] = { env.out[0], NULL };

	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, NULL, 0),
			 SHEMB_EINVAL);
	detail_names(env.ctx, NULL);
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, out, 0),
			 SHEMB_EINVAL);
	detail_names(env.ctx, WORDS("out[1]"));
	tables_unchanged();
	/* with no row to write a NULL output is fine */
	env.sets[1].nbags = 0;
	env.sets[1].nids = 0;
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, out,
				      SHEMB_LOOKUP_NO_GRAD), 0);
}
END_TEST

START_TEST(lookup_unknown_flags)
{
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, env.out, 1u << 1),
			 SHEMB_EINVAL);
	detail_names(env.ctx, NULL);
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, env.out,
				      SHEMB_LOOKUP_NO_GRAD | (1u << 31)),
			 SHEMB_EINVAL);
	tables_unchanged();
}
END_TEST

/* ---- more than 2^31 - 1 ids or bags of one table in one call ---- */

/*
 * 2^30 + 1 zero int64 values that cost no memory: a read-only private
 * anonymous mapping reads as the kernel's zero page (the huge one where
 * transparent huge pages are on, which keeps the scan quick).
 */
static const int64_t *zeros_2_30(size_t *bytes)
{
	void *p;

	*bytes = (((size_t)1 << 30) + 1) * sizeof(int64_t);
	p = mmap(NULL, *bytes, PROT_READ,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
#ifdef MADV_HUGEPAGE
	madvise(p, *bytes, MADV_HUGEPAGE);
#endif
	return p;
}

/* Two sets of emb with 2^30 each of what_ids (ids) or bags: 2^31 in all. */
static void too_many(bool ids)
{
	size_t bytes;
	const int64_t *zeros;
	struct shemb_bags two[2];
	float *out[2] = { env.out[0], env.out[1] };

	if (RUNNING_ON_VALGRIND) {
		printf("skipped under valgrind: scans 16 GiB\n");
		return;
	}
	zeros = zeros_2_30(&bytes);
	for (int i = 0; i < 2; i++) {
		static int64_t one_bag[2] = { 0, (int64_t)1 << 30 };

		shemb_bags_init(&two[i]);
		two[i].table = env.emb;
		two[i].nbags = ids ? 1 : (int64_t)1 << 30;
		two[i].offsets = ids ? one_bag : zeros;
		two[i].nids = ids ? (int64_t)1 << 30 : 0;
		two[i].ids = ids ? zeros : NULL;
	}
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, two, out,
				      SHEMB_LOOKUP_NO_GRAD), SHEMB_EINVAL);
	detail_names(env.ctx, WORDS("emb"));
	munmap((void *)zeros, bytes);
	tables_unchanged();
}

START_TEST(bags_too_many_ids_of_one_table)
{
	too_many(true);
}
END_TEST

START_TEST(bags_too_many_bags_of_one_table)
{
	too_many(false);
}
END_TEST

/* ---- gradients ---- */

static void backward_refused(const float *const *grad, const char *const *w)
{
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, env.out, 0), 0);
	ck_assert_int_eq(shemb_backward(env.ctx, 2, env.sets, grad),
			 SHEMB_EINVAL);
	detail_names(env.ctx, w);
	tables_unchanged();
}

START_TEST(backward_grad_null)
{
	float *keep = env.grad[1];

	backward_refused(NULL, NULL);
	env.grad[1] = NULL;
	backward_refused((const float *const *)env.grad, WORDS("grad[1]"));
	env.grad[1] = keep;
}
END_TEST

START_TEST(backward_grad_not_finite)
{
	static const float bad[] = { NAN, INFINITY, -INFINITY };

	for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++) {
		env.grad[1][3 * DIM + 5] = bad[i];
		backward_refused((const float *const *)env.grad,
				 WORDS("grad[1]"));
		env.grad[1][3 * DIM + 5] = 0.0f;
	}
}
END_TEST

/* ---- refused calls leave plans and optimizer state alone ---- */

START_TEST(refused_lookup_keeps_plan)
{
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, env.out, 0), 0);
	env.ids[4] = ROWS + 7;
	ck_assert_int_eq(shemb_lookup(env.ctx, 2, env.sets, env.out, 0),
			 SHEMB_EINVAL);
	env.ids[4] = 13;
	ck_assert_int_eq(shemb_backward(env.ctx, 2, env.sets,
					(const float *const *)env.grad), 0);
}
END_TEST

/* A twin of emb: same attributes, so the same rows. */
static shemb_table *twin_of_emb(void)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(env.emb, &a), 0);
	a.name = "twin";
	return tu_table_attr(env.ctx, &a);
}

/* A valid lookup and backward of one set of t. */
static void valid_step(shemb_table *t, struct tu_rng *r)
{
	struct shemb_bags set = env.sets[1];

	set.table = t;
	tu_rng_fill(r, env.grad[1], 5 * DIM, -1.0f, 1.0f);
	ck_assert_int_eq(shemb_lookup(env.ctx, 1, &set, &env.out[1], 0), 0);
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &set,
					(const float *const *)&env.grad[1]),
			 0);
}

static void same_as_twin(shemb_table *twin)
{
	struct tu_snapshot a, b;

	tu_snapshot_take(&a, env.emb);
	tu_snapshot_take(&b, twin);
	ck_assert(tu_snapshot_equal(&a, &b));
	tu_snapshot_free(&a);
	tu_snapshot_free(&b);
}

/* Every kind of refused backward while emb holds a plan. */
static void refused_backwards(void)
{
	struct shemb_bags set = env.sets[1];
	const float *g[2] = { env.grad[1], env.grad[1] };
	int64_t keep = env.ids[2];

	env.grad[1][7] = NAN;
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &set, g), SHEMB_EINVAL);
	env.grad[1][7] = 0.25f;
	env.ids[2] = ROWS;
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &set, g), SHEMB_EINVAL);
	env.ids[2] = (keep + 1) % ROWS; /* valid, but not the lookup's */
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &set, g), SHEMB_EINVAL);
	env.ids[2] = keep;
	set.pooling = SHEMB_POOL_MAX;
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &set, g), SHEMB_EINVAL);
	set.pooling = SHEMB_POOL_SUM;
	set.weights = NULL;
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &set, g), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_backward(env.ctx, 2,
					(struct shemb_bags[]){ env.sets[1],
							       env.sets[1] },
					g),
			 SHEMB_EINVAL);
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &env.sets[1], NULL),
			 SHEMB_EINVAL);
	detail_names(env.ctx, NULL);
}

START_TEST(refused_backward_keeps_optimizer_state)
{
	shemb_table *twin = twin_of_emb();
	struct tu_rng r1, r2;
	struct shemb_bags set = env.sets[1];

	tu_rng_seed(&r1, 1);
	tu_rng_seed(&r2, 1);
	valid_step(env.emb, &r1); /* Adam state and t = 1 on both */
	valid_step(twin, &r2);
	same_as_twin(twin);

	/* no plan: ESTATE */
	ck_assert_int_eq(shemb_backward(env.ctx, 1, &set,
					(const float *const *)&env.grad[1]),
			 SHEMB_ESTATE);
	ck_assert_int_eq(shemb_lookup(env.ctx, 1, &set, &env.out[1], 0), 0);
	refused_backwards();
	valid_step(env.emb, &r1);
	valid_step(twin, &r2);
	same_as_twin(twin);
	valid_step(env.emb, &r1);
	valid_step(twin, &r2);
	same_as_twin(twin);
}
END_TEST

/* A refused write with SHEMB_WRITE_RESET_STATE resets nothing. */
START_TEST(refused_write_keeps_optimizer_state)
{
	shemb_table *twin = twin_of_emb();
	struct tu_rng r1, r2;
	float rows[2 * DIM] = { 0 };
	const int64_t ids[2] = { 4, 7 };

	tu_rng_seed(&r1, 2);
	tu_rng_seed(&r2, 2);
	valid_step(env.emb, &r1);
	valid_step(twin, &r2);
	rows[DIM + 3] = INFINITY;
	ck_assert_int_eq(shemb_table_write_rows(env.emb, 2, ids, rows,
						SHEMB_F32,
						SHEMB_WRITE_RESET_STATE),
			 SHEMB_EINVAL);
	valid_step(env.emb, &r1);
	valid_step(twin, &r2);
	same_as_twin(twin);
}
END_TEST

/* ---- rows ---- */

static void rows_refused(int rc, const char *const *words)
{
	ck_assert_int_eq(rc, SHEMB_EINVAL);
	detail_names(env.ctx, words);
	tables_unchanged();
}

START_TEST(rows_id_out_of_range)
{
	float buf[3 * DIM] = { 0 };
	int64_t ids[3] = { 1, ROWS, 2 };

	rows_refused(shemb_table_read_rows(env.emb, 3, ids, buf, SHEMB_F32),
		     WORDS("emb", "100"));
	rows_refused(shemb_table_write_rows(env.emb, 3, ids, buf, SHEMB_F32,
					    0),
		     WORDS("emb", "100"));
	ids[1] = -1;
	rows_refused(shemb_table_read_rows(env.emb, 3, ids, buf, SHEMB_F32),
		     WORDS("emb", "-1"));
	rows_refused(shemb_table_write_rows(env.emb, 3, ids, buf, SHEMB_F32,
					    0),
		     WORDS("emb", "-1"));
}
END_TEST

START_TEST(rows_dtype_unknown)
{
	float buf[DIM] = { 0 };
	const int64_t id = 1;

	rows_refused(shemb_table_read_rows(env.emb, 1, &id, buf, 3), NULL);
	rows_refused(shemb_table_write_rows(env.emb, 1, &id, buf, -1, 0),
		     NULL);
}
END_TEST

/* Non-finite values in each dtype, at row 1 column 2. */
START_TEST(rows_write_not_finite)
{
	static const uint32_t f32[] = { 0x7fc00000, 0x7f800000, 0xff800000 };
	static const uint16_t f16[] = { 0x7e00, 0x7c00, 0xfc00 };
	static const uint16_t bf16[] = { 0x7fc0, 0x7f80, 0xff80 };
	const int64_t ids[2] = { 0, 1 };

	for (int i = 0; i < 3; i++) {
		uint32_t w32[2 * DIM] = { 0 };
		uint16_t w16[2 * 4] = { 0 }, wb[2 * 4] = { 0 };

		w32[DIM + 2] = f32[i];
		rows_refused(shemb_table_write_rows(env.emb, 2, ids, w32,
						    SHEMB_F32, 0),
			     WORDS("emb"));
		w16[4 + 2] = f16[i];
		wb[4 + 2] = bf16[i];
		rows_refused(shemb_table_write_rows(env.side, 2, ids, w16,
						    SHEMB_F16, 0),
			     WORDS("side"));
		rows_refused(shemb_table_write_rows(env.side, 2, ids, wb,
						    SHEMB_BF16, 0),
			     WORDS("side"));
	}
}
END_TEST

/* Finite values that the storage dtype cannot hold: fp32 65520 rounds to
 * an fp16 infinity, FLT_MAX to a bf16 one.  side stores bf16. */
START_TEST(rows_write_overflows_storage)
{
	shemb_table *h = named_table("half", 10, 4, SHEMB_F16, SHEMB_OPT_SGD);
	const int64_t ids[2] = { 0, 1 };
	float big[2 * 4] = { 0 };
	struct tu_snapshot before, after;

	tu_snapshot_take(&before, h);
	big[4 + 3] = 65520.0f;
	rows_refused(shemb_table_write_rows(h, 2, ids, big, SHEMB_F32, 0),
		     WORDS("half", "row 1", "column 3"));
	big[4 + 3] = 65504.0f; /* the largest fp16: accepted */
	ck_assert_int_eq(shemb_table_write_rows(h, 2, ids, big, SHEMB_F32, 0),
			 0);
	big[4 + 3] = 3.4028235e38f;
	rows_refused(shemb_table_write_rows(env.side, 2, ids, big, SHEMB_F32,
					    0),
		     WORDS("side", "row 1", "column 3"));
	tu_snapshot_take(&after, h);
	ck_assert(!tu_snapshot_equal(&before, &after)); /* 65504 landed */
	tu_snapshot_free(&before);
	tu_snapshot_free(&after);
}
END_TEST

START_TEST(rows_null_buffers)
{
	float buf[DIM] = { 0 };
	const int64_t id = 1;

	rows_refused(shemb_table_read_rows(env.emb, 1, NULL, buf, SHEMB_F32),
		     NULL);
	rows_refused(shemb_table_read_rows(env.emb, 1, &id, NULL, SHEMB_F32),
		     NULL);
	rows_refused(shemb_table_write_rows(env.emb, 1, NULL, buf, SHEMB_F32,
					    0),
		     NULL);
	rows_refused(shemb_table_write_rows(env.emb, 1, &id, NULL, SHEMB_F32,
					    0),
		     NULL);
	/* nothing to copy: NULL buffers are fine */
	ck_assert_int_eq(shemb_table_read_rows(env.emb, 0, NULL, NULL,
					       SHEMB_F32), 0);
	ck_assert_int_eq(shemb_table_write_rows(env.emb, 0, NULL, NULL,
						SHEMB_F32, 0), 0);
}
END_TEST

START_TEST(rows_n_negative)
{
	float buf[DIM] = { 0 };
	const int64_t id = 1;

	rows_refused(shemb_table_read_rows(env.emb, -1, &id, buf, SHEMB_F32),
		     NULL);
	rows_refused(shemb_table_write_rows(env.emb, -1, &id, buf, SHEMB_F32,
					    0),
		     NULL);
}
END_TEST

START_TEST(rows_write_unknown_flags)
{
	float buf[DIM] = { 0 };
	const int64_t id = 1;

	rows_refused(shemb_table_write_rows(env.emb, 1, &id, buf, SHEMB_F32,
					    1u << 1),
		     NULL);
}
END_TEST

START_TEST(set_lr_invalid)
{
	static const float bad[] = { -0.5f, NAN, INFINITY, -INFINITY };
	struct shemb_table_attr a;

	for (size_t i = 0; i < TU_ARRAY_SIZE(bad); i++) {
		ck_assert_int_eq(shemb_table_set_lr(env.emb, bad[i]),
				 SHEMB_EINVAL);
		detail_names(env.ctx, WORDS("emb"));
	}
	shemb_table_attr_init(&a);
	ck_assert_int_eq(shemb_table_get_attr(env.emb, &a), 0);
	ck_assert(a.lr == 0.01f);
}
END_TEST

static Suite *invalid_suite(void)
{
	Suite *s = suite_create("invalid");
	TCase *tc = tcase_create("context");
	TCase *tt = tcase_create("table");
	TCase *tb = tcase_create("bags");
	TCase *ts = tcase_create("state");
	TCase *tr = tcase_create("rows");

	tcase_add_test(tc, ctx_nthreads_out_of_range);
	tcase_add_test(tc, ctx_log_level_out_of_range);
	tcase_add_test(tc, ctx_rank_world_impossible);
	tcase_add_test(tc, ctx_world_size_above_one);
	tcase_add_test(tc, ctx_environment_not_numbers);
	tcase_add_test(tc, ctx_transport_attrs);
	tcase_add_test(tc, ctx_attr_size_unknown);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tt, setup, teardown);
	tcase_add_loop_test(tt, table_attr_refused, 0, NUM_TABLE_SPOILS);
	tcase_add_test(tt, table_over_host_budget);
	suite_add_tcase(s, tt);

	tcase_add_checked_fixture(tb, setup, teardown);
	tcase_set_timeout(tb, 60);
	tcase_add_test(tb, bags_table_null);
	tcase_add_test(tb, bags_table_of_other_context);
	tcase_add_test(tb, bags_pooling_unknown);
	tcase_add_test(tb, bags_dim_not_table_dim);
	tcase_add_test(tb, bags_nbags_negative);
	tcase_add_test(tb, bags_nids_negative);
	tcase_add_test(tb, bags_offsets_null);
	tcase_add_test(tb, bags_ids_null);
	tcase_add_test(tb, bags_nbags_beyond_a_call);
	tcase_add_test(tb, bags_nids_beyond_a_call);
	tcase_add_test(tb, bags_first_offset_not_zero);
	tcase_add_test(tb, bags_offsets_decrease);
	tcase_add_test(tb, bags_last_offset_not_nids);
	tcase_add_test(tb, bags_id_too_large);
	tcase_add_test(tb, bags_id_negative);
	tcase_add_test(tb, bags_weight_not_finite);
	tcase_add_test(tb, bags_too_many_sets_negative);
	tcase_add_test(tb, lookup_out_null);
	tcase_add_test(tb, lookup_unknown_flags);
	tcase_add_test(tb, bags_too_many_ids_of_one_table);
	tcase_add_test(tb, bags_too_many_bags_of_one_table);
	tcase_add_test(tb, backward_grad_null);
	tcase_add_test(tb, backward_grad_not_finite);
	suite_add_tcase(s, tb);

	tcase_add_checked_fixture(ts, setup, teardown);
	tcase_add_test(ts, refused_lookup_keeps_plan);
	tcase_add_test(ts, refused_backward_keeps_optimizer_state);
	tcase_add_test(ts, refused_write_keeps_optimizer_state);
	suite_add_tcase(s, ts);

	tcase_add_checked_fixture(tr, setup, teardown);
	tcase_add_test(tr, rows_id_out_of_range);
	tcase_add_test(tr, rows_dtype_unknown);
	tcase_add_test(tr, rows_write_not_finite);
	tcase_add_test(tr, rows_write_overflows_storage);
	tcase_add_test(tr, rows_null_buffers);
	tcase_add_test(tr, rows_n_negative);
	tcase_add_test(tr, rows_write_unknown_flags);
	tcase_add_test(tr, set_lr_invalid);
	suite_add_tcase(s, tr);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(invalid_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

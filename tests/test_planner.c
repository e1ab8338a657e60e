/*
 * test_planner.c - SHEMB_SHARD_AUTO's choice and the room it counts
 * (shemb_table_create(3), Choosing a plan), for a context of two ranks
 * whose budgets the test sets: the sizes it compares with the room are
 * those of the records in memory, padding included, worked out here
 * from the page's MEMORY formula.  Before, the planner counted the rows
 * unpadded: it put a table whole on a rank whose budget could not hold
 * it (the create then failed for want of memory, where row-wise it
 * fits), copied to every rank tables that took more than it allowed, and
 * counted the ranks' room short.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "shemb.h"
#include "lib/internal.h"
#include "lib/shard.h"
#include "tests/check_run.h"

/* MEMORY: the row rounded up to 4 bytes, then the fp32 state; records of
 * up to 32 bytes take a power of two, larger ones a multiple of 64. */
static uint64_t record(int dim, int elem, int state_floats)
{
	uint64_t raw = ((uint64_t)dim * elem + 3) / 4 * 4 +
		       4 * (uint64_t)state_floats;
	uint64_t p = 4;

	if (raw > 32)
		return (raw + 63) / 64 * 64;
	while (p < raw)
		p *= 2;
	return p;
}

/* A context that plans as rank 0 of two whose host budgets are b0, b1. */
static shemb_ctx *two_ranks(uint64_t b0, uint64_t b1)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;

	shemb_ctx_attr_init(&a);
	a.world_size = 1;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), 0);
	ctx->attr.world_size = 2;
	ctx->rank_budget = calloc(2, sizeof(*ctx->rank_budget));
	ctx->rank_bytes = calloc(2, sizeof(*ctx->rank_bytes));
	ck_assert(ctx->rank_budget && ctx->rank_bytes);
	ctx->rank_budget[0] = b0;
	ctx->rank_budget[1] = b1;
	return ctx;
}

static void drop(shemb_ctx *ctx)
{
	ctx->attr.world_size = 1;
	shemb_ctx_destroy(ctx);
}

static struct shemb_table_attr fp32_sgd(int64_t rows, int dim)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.rows = rows;
	a.dim = dim;
	a.table_id = 0;
	return a;
}

/* 127 rows of 17 fp32 values: B = 8636 bytes fits a budget of 10000, the
 * table's 127 records of 128 bytes do not: row-wise, each rank counting
 * the records of its rows. */
START_TEST(a_table_whole_only_where_its_records_fit)
{
	shemb_ctx *ctx = two_ranks(10000, 10000);
	struct shemb_table_attr a = fp32_sgd(127, 17);
	struct shemb__shard s;

	ck_assert_uint_eq(record(17, 4, 0), 128);
	ck_assert_int_eq(shemb__shard_plan(ctx, &a, &s), 0);
	ck_assert_int_eq(s.kind, SHEMB_SHARD_ROW);
	shemb__shard_account(ctx, &a, &s, true);
	ck_assert_uint_eq(ctx->rank_bytes[0], 64 * record(17, 4, 0));
	ck_assert_uint_eq(ctx->rank_bytes[1], 63 * record(17, 4, 0));
	shemb__shard_account(ctx, &a, &s, false);
	ck_assert_uint_eq(ctx->rank_bytes[0] + ctx->rank_bytes[1], 0);

	/* with room for its records, whole, on the rank with the most */
	ctx->rank_budget[1] = 127 * record(17, 4, 0);
	ck_assert_int_eq(shemb__shard_plan(ctx, &a, &s), 0);
	ck_assert_int_eq(s.kind, SHEMB_SHARD_TABLE);
	ck_assert_int_eq(s.owner, 1);
	shemb__shard_account(ctx, &a, &s, true);
	ck_assert_uint_eq(ctx->rank_bytes[0], 0);
	ck_assert_uint_eq(ctx->rank_bytes[1], 127 * record(17, 4, 0));
	drop(ctx);
}
END_TEST

/* 100 rows of 9 fp32 values: B = 3600 bytes is an eighth of 40000 at
 * most, the 100 records of 64 bytes are more: not copied to every rank
 * but put whole on one; replicated once the room allows. */
START_TEST(copies_only_where_the_records_fit)
{
	shemb_ctx *ctx = two_ranks(40000, 40000);
	struct shemb_table_attr a = fp32_sgd(100, 9);
	struct shemb__shard s;

	ck_assert_uint_eq(record(9, 4, 0), 64);
	ck_assert_int_eq(shemb__shard_plan(ctx, &a, &s), 0);
	ck_assert_int_eq(s.kind, SHEMB_SHARD_TABLE);
	ctx->rank_budget[0] = ctx->rank_budget[1] = 8 * 100 * record(9, 4, 0);
	ck_assert_int_eq(shemb__shard_plan(ctx, &a, &s), 0);
	ck_assert_int_eq(s.kind, SHEMB_SHARD_REPLICATED);
	shemb__shard_account(ctx, &a, &s, true);
	ck_assert_uint_eq(ctx->rank_bytes[0], 100 * record(9, 4, 0));
	ck_assert_uint_eq(ctx->rank_bytes[1], 100 * record(9, 4, 0));
	drop(ctx);
}
END_TEST

/* A column-wise table: each rank counts every row of its columns, in
 * records of that many values (9 and 8 of 17 columns: 64 and 32 bytes). */
START_TEST(columns_count_their_own_records)
{
	shemb_ctx *ctx = two_ranks(UINT64_MAX, UINT64_MAX);
	struct shemb_table_attr a = fp32_sgd(1000, 17);
	struct shemb__shard s;

	a.shard = SHEMB_SHARD_COLUMN;
	ck_assert_int_eq(shemb__shard_plan(ctx, &a, &s), 0);
	shemb__shard_account(ctx, &a, &s, true);
	ck_assert_uint_eq(ctx->rank_bytes[0], 1000 * record(9, 4, 0));
	ck_assert_uint_eq(ctx->rank_bytes[1], 1000 * record(8, 4, 0));
	ck_assert_uint_ne(record(9, 4, 0), record(8, 4, 0));
	drop(ctx);
}
END_TEST

static Suite *planner_suite(void)
{
	Suite *s = suite_create("planner");
	TCase *tc = tcase_create("auto");

	tcase_add_test(tc, a_table_whole_only_where_its_records_fit);
	tcase_add_test(tc, copies_only_where_the_records_fit);
	tcase_add_test(tc, columns_count_their_own_records);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(planner_suite());
}

/*
 * test_tier_plan.c - the rows of a planned lookup are kept for its
 * backward: they are filed last for eviction while the plan is open,
 * including rows a relaxed lookup read before its plan began and marked
 * into it afterwards (shemb__tier_plan_mark), and go back to the plain
 * lists when the plan ends.  The tier is internal, so it comes from the
 * static core; the table from the public API.
 */
#include "config.h"

#include <check.h>

#include "shemb.h"
#include "lib/tier.h"
#include "lib/tier_int.h"
#include "tests/check_run.h"

/* The eviction list of row's slot: -1 pinned, -2 not resident. */
static int list_of(shemb_table *t, int64_t row)
{
	struct shemb__tier *tr = t->tier;
	int32_t s;
	int li;

	pthread_mutex_lock(&tr->lock);
	s = shemb__index_find(&tr->index, row);
	li = s < 0 ? -2 : tr->slot[s].list;
	pthread_mutex_unlock(&tr->lock);
	return li;
}

static void read_rows(shemb_table *t, int64_t first, int64_t n, int use)
{
	struct shemb__rows_view v;
	int64_t rows[8];

	for (int64_t k = 0; k < n; k++)
		rows[k] = first + k;
	ck_assert_int_eq(shemb__rows_acquire(t, n, rows, true, use, &v), 0);
	shemb__rows_release(t, &v);
}

START_TEST(marked_rows_join_the_open_plan)
{
	struct shemb_ctx_attr ca;
	struct shemb_table_attr a;
	struct shemb__rows_view pinned;
	struct shemb__plan_begun begun;
	int64_t marked[4] = { 0, 1, 4, 50 }, four = 4;
	shemb_ctx *ctx;
	shemb_table *t;

	shemb_ctx_attr_init(&ca);
	ca.nthreads = 1;
	ck_assert_int_eq(shemb_ctx_create(&ca, &ctx), 0);
	shemb_table_attr_init(&a);
	a.rows = 64;
	a.dim = 4;
	a.cache_rows = 16;
	a.cache_policy = SHEMB_CACHE_LRU;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), 0);

	/* rows 0..3 read before the plan, as a relaxed lookup's early rows */
	read_rows(t, 0, 4, SHEMB__ROWS_READ);
	ck_assert_int_eq(list_of(t, 0), 0);
	shemb__tier_plan_begin(t, &begun);
	read_rows(t, 8, 2, SHEMB__ROWS_PLANNED); /* the plan's own rows */
	ck_assert_int_eq(list_of(t, 8), SHEMB__LIST_PLAN);
	/* row 4 is held by a call while it is marked */
	ck_assert_int_eq(shemb__rows_acquire(t, 1, &four, true,
					     SHEMB__ROWS_READ, &pinned), 0);
	ck_assert_int_eq(list_of(t, 4), -1);

	shemb__tier_plan_mark(t, 4, marked);
	ck_assert_int_eq(list_of(t, 0), SHEMB__LIST_PLAN);
	ck_assert_int_eq(list_of(t, 1), SHEMB__LIST_PLAN);
	ck_assert_int_eq(list_of(t, 2), 0);	/* not marked */
	ck_assert_int_eq(list_of(t, 4), -1);	/* filed when let go */
	ck_assert_int_eq(list_of(t, 50), -2);	/* never loaded by it */
	shemb__rows_release(t, &pinned);
	ck_assert_int_eq(list_of(t, 4), SHEMB__LIST_PLAN);

	/* the backward ends the plan: its rows are plain again */
	shemb__tier_plan_end(t);
	for (int64_t row = 0; row < 10; row++)
		ck_assert_int_lt(list_of(t, row), SHEMB__LIST_PLAN);
	/* and marks outside an open plan change nothing */
	shemb__tier_plan_mark(t, 4, marked);
	ck_assert_int_lt(list_of(t, 0), SHEMB__LIST_PLAN);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tier plan");
	TCase *tc = tcase_create("plan");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, marked_rows_join_the_open_plan);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
